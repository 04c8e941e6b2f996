"""Jupyter notebooks, checked and fixed as the one Python module their code cells make.

A notebook (nbformat 4 JSON) becomes one module text: its Python code cells in order, each ending
with a line break, and IPython's escapes masked by text of the same length (a line magic
``%time f(x)`` becomes the statement ``0#ime f(x)``, a ``%%time`` first line the comment
``#%time``), so every unmasked line keeps its text and every column its place.  The engine, the
rules, ``# noqa``, the configuration and the project index then work on it unchanged: an import
in cell 1 resolves an alias in cell 5, a dataset class in cell 2 is seen by a DataLoader in cell 7.
A map from module lines back to cells turns each finding into ``cell N:line:column``.

Fixes run through ``engine.fix_text`` with the boundaries between cells and the masked lines
frozen (no fix may straddle a boundary or touch a magic); the fixed module is split back at the
moved boundaries, the magics are put back, and only the cells whose source changed are written:
their ``source`` values are spliced into the file's own text in the layout it had (a list of lines
or a string, the same indentation and separators, escapes of non-ASCII text as the file had them,
unchanged lines' JSON reused byte for byte).  Everything else (outputs, execution counts, ids,
metadata, markdown, the file's indentation, key order and final newline) is never re-serialised.

What is not Python is left alone: markdown and raw cells, code cells whose first line is a cell
magic that runs another language (``%%bash``, ``%%writefile``; ``%%time``, ``%%timeit``,
``%%capture``, ``%%prun`` and ``%%python`` run Python and are checked), cells whose VS Code
metadata names another language, and notebooks whose kernel language is not Python.  A code cell
that does not parse on its own (Jupyter runs cells one by one) is reported and left out; the
others are checked.

The JSON is read with the standard library only (no nbformat, no torch): users lint on machines
without them.  Language-server use: ``read`` (or ``Notebook(cells=[Cell("code", source), ...])``),
then ``check`` (findings carry ``finding.cell.index``) and ``fix`` (``NotebookFixResult.cells``:
the new source of each changed cell).
"""
from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass, field, replace
from json.decoder import scanstring
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from torchlint.noqa import is_skipped_file
from torchlint.rule import Diagnostic, Edit, Finding, Location, NotebookCell
from torchlint.source import line_starts, split_lines

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.config import Settings
    from torchlint.engine import FixResult, LintResult

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python that the kernel runs (the first line is masked, the body checked).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "python", "python3", "pypy"})

# A line that may be an IPython escape: it starts with %, !, ?, or an auto-call's / , ; (none can start a
# Python statement), or it ends with ? (help: ``x?``).  Only lines at the start of a logical line are masked.
_MAYBE_ESCAPE = re.compile(r"^[ \t]*[%!?/,;]|\?[ \t]*$", re.MULTILINE)
_HELP_SUFFIX = re.compile(r"^[ \t]*%{0,2}[\w.*]+\?{1,2}[ \t]*$")
# ``files = !ls``, ``t = %timeit -o f()``: the escape after an assignment.
_ASSIGNED_ESCAPE = re.compile(r"^[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*(?=[%!])")
_CELL_MAGIC = re.compile(r"^%%([\w.]+)")


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


class NotebookError(Exception):
    """A file that is not a readable nbformat 4 notebook; ``line`` and ``column`` point into its JSON."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


# -- the notebook as stored -----------------------------------------------------------


@dataclass
class Cell:
    """One cell: its type (``code``, ``markdown``, ``raw``) and source text.

    ``language``: the cell's own language where its metadata names one (VS Code's ``languageId``);
    ``span`` and ``pieces``: where its ``source`` value stands in the file's text, and, for a list,
    each string of it with its decoded value (None for cells that were not read from a file).
    """

    kind: str
    source: str
    language: Optional[str] = None
    span: Optional[Tuple[int, int]] = None
    pieces: Optional[Tuple[Tuple[int, int, str], ...]] = None


@dataclass
class Notebook:
    """The cells of a notebook, and the JSON text they were read from (None when built from cells)."""

    cells: List[Cell]
    text: Optional[str] = None
    language: Optional[str] = None  # the kernel's language, when the metadata says it
    _file_lines: Optional[List[int]] = field(default=None, init=False, repr=False)

    @property
    def is_python(self) -> bool:
        return self.language is None or self.language.lower() == "python"

    def file_line(self, cell: int, line: int) -> int:
        """The line of the file that holds line ``line`` (1-based) of cell ``cell`` (0-based); 1 when unknown."""
        stored = self.cells[cell]
        if self.text is None or stored.span is None:
            return 1
        offset = stored.span[0]
        if stored.pieces:
            first = 1  # the cell line the current piece starts on
            offset = stored.pieces[-1][0]
            for start, _, value in stored.pieces:
                breaks = value.count("\n")
                if line <= first + breaks - value.endswith("\n"):
                    offset = start
                    break
                first += breaks
        if self._file_lines is None:
            self._file_lines = line_starts(self.text)
        return bisect.bisect_right(self._file_lines, offset)

    def with_sources(self, sources: Dict[int, str]) -> str:
        """The file's text with the ``source`` of each cell in ``sources`` (0-based index -> text) replaced."""
        assert self.text is not None
        text = self.text
        ascii_only = _escapes_non_ascii(text)
        pieces = []
        position = 0
        for index in sorted(sources, key=lambda i: self.cells[i].span[0]):
            cell = self.cells[index]
            start, end = cell.span
            pieces.append(text[position:start])
            pieces.append(_source_json(text, cell, sources[index], ascii_only))
            position = end
        pieces.append(text[position:])
        return "".join(pieces)


def _escapes_non_ascii(text: str) -> bool:
    """Whether the file writes non-ASCII text as \\u escapes (json.dumps' default) rather than as itself (Jupyter's)."""
    if not text.isascii():
        return False
    return any(int(code, 16) >= 0x80 for code in re.findall(r"(?<!\\)\\u([0-9a-fA-F]{4})", text))


def _source_json(text: str, cell: Cell, source: str, ascii_only: bool) -> str:
    """``source`` as JSON in the layout ``cell``'s source had in ``text``."""
    if cell.pieces is None:
        return json.dumps(source, ensure_ascii=ascii_only)
    known = {}
    for start, end, value in cell.pieces:
        known.setdefault(value, text[start:end])  # an unchanged line keeps its bytes
    lines = split_lines(source)
    if not cell.pieces or not lines:  # an empty cell is never checked, so never fixed: no layout to follow
        return json.dumps(lines, ensure_ascii=ascii_only)
    items = [known.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    span_start, span_end = cell.span
    first, last = cell.pieces[0], cell.pieces[-1]
    opening, closing = text[span_start + 1 : first[0]], text[last[1] : span_end - 1]
    separator = text[first[1] : cell.pieces[1][0]] if len(cell.pieces) > 1 else "," + opening
    return "[" + opening + separator.join(items) + closing + "]"


# -- reading the JSON ------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class _Malformed(Exception):
    pass


class _Reader:
    """Walks the JSON text, decoding each value with the standard library's C decoder and noting where
    the cells' ``source`` values stand; anything unexpected is left for ``json.loads`` to name."""

    def __init__(self, text: str) -> None:
        self.text = text

    def space(self, position: int) -> int:
        return _SPACE.match(self.text, position).end()

    def char(self, position: int) -> str:
        return self.text[position : position + 1]

    def value(self, position: int) -> Tuple[object, int]:
        try:
            return _DECODER.raw_decode(self.text, position)
        except (ValueError, RecursionError):
            raise _Malformed from None

    def members(self, position: int):
        """(key, position of its value) of the object at ``position``; the caller moves ``self.end`` past each value."""
        position = self.space(position)
        if self.char(position) != "{":
            raise _Malformed
        position = self.space(position + 1)
        if self.char(position) == "}":
            self.end = position + 1
            return
        while True:
            if self.char(position) != '"':
                raise _Malformed
            try:
                key, position = scanstring(self.text, position + 1)
            except ValueError:
                raise _Malformed from None
            position = self.space(position)
            if self.char(position) != ":":
                raise _Malformed
            self.end = None
            yield key, self.space(position + 1)
            if self.end is None:
                raise _Malformed
            position = self.space(self.end)
            if self.char(position) == "}":
                self.end = position + 1
                return
            if self.char(position) != ",":
                raise _Malformed
            position = self.space(position + 1)

    def array(self, position: int, item) -> List[object]:
        """The items of the array at ``position``, each read by ``item(position, index) -> (value, end)``."""
        if self.char(position) != "[":
            raise _Malformed
        items = []
        position = self.space(position + 1)
        if self.char(position) == "]":
            self.end = position + 1
            return items
        while True:
            value, position = item(position, len(items))
            items.append(value)
            position = self.space(position)
            if self.char(position) == "]":
                self.end = position + 1
                return items
            if self.char(position) != ",":
                raise _Malformed
            position = self.space(position + 1)


def read(text: str) -> Notebook:
    """The notebook that ``text`` (a .ipynb file's content) holds; NotebookError when it is not one."""
    reader = _Reader(text)
    document: Dict[str, object] = {}
    cells: List[Cell] = []
    try:
        for key, position in reader.members(0):
            if key == "cells" and reader.char(position) == "[":
                cells = reader.array(position, lambda at, index: _read_cell(reader, at, index))
                document[key] = cells
                continue
            document[key], reader.end = reader.value(position)
        if reader.space(reader.end) != len(text):
            raise _Malformed
    except (_Malformed, NotebookError) as problem:
        # What is wrong with the JSON comes first (a cell that is not an object may be a typo in it).
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        except RecursionError:
            raise NotebookError("not valid JSON: nested too deeply") from None
        if isinstance(problem, NotebookError):
            raise
        if not isinstance(parsed, dict):
            raise NotebookError(f"not a Jupyter notebook: the file holds a JSON {type(parsed).__name__}, not an object") from None
        raise NotebookError("not a Jupyter notebook: its layout could not be read") from None
    _check_format(document)
    metadata = document.get("metadata")
    language = None
    if isinstance(metadata, dict):
        info, kernel = metadata.get("language_info"), metadata.get("kernelspec")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            language = info["name"]
        elif isinstance(kernel, dict) and isinstance(kernel.get("language"), str):
            language = kernel["language"]
    return Notebook(cells, text, language)


def _check_format(document: Dict[str, object]) -> None:
    version = document.get("nbformat")
    if "cells" not in document and version is None:
        raise NotebookError("not a Jupyter notebook: no 'nbformat' or 'cells' key")
    if version != 4 or isinstance(version, bool):
        hint = " (convert it with `jupyter nbconvert --to notebook --nbformat 4`)" if isinstance(version, int) and version < 4 else ""
        raise NotebookError(f"nbformat {version!r} is not supported, only nbformat 4{hint}")
    if not isinstance(document.get("cells"), list):
        raise NotebookError("not an nbformat 4 notebook: 'cells' is not a list")


def _read_cell(reader: _Reader, position: int, index: int) -> Tuple[Cell, int]:
    if reader.char(position) != "{":
        raise NotebookError(f"not an nbformat 4 notebook: cell {index + 1} is not an object")
    kind = source = language = span = pieces = None
    for key, at in reader.members(position):
        if key == "source" and reader.char(at) == "[":
            strings = reader.array(at, lambda p, _: _read_string(reader, p))
            span, pieces = (at, reader.end), tuple(strings)
            source = "".join(value for _, _, value in strings)
            continue
        value, reader.end = reader.value(at)
        if key == "source":
            if not isinstance(value, str):
                raise NotebookError(f"not an nbformat 4 notebook: the source of cell {index + 1} is not text")
            source, span, pieces = value, (at, reader.end), None
        elif key == "cell_type":
            kind = value
        elif key == "metadata" and isinstance(value, dict):
            vscode = value.get("vscode")
            if isinstance(vscode, dict) and isinstance(vscode.get("languageId"), str):
                language = vscode["languageId"]
    if not isinstance(kind, str) or source is None:
        raise NotebookError(f"not an nbformat 4 notebook: cell {index + 1} has no {'cell_type' if not isinstance(kind, str) else 'source'}")
    return Cell(kind, source, language, span, pieces), reader.end


def _read_string(reader: _Reader, position: int) -> Tuple[Tuple[int, int, str], int]:
    value, end = reader.value(position)
    if not isinstance(value, str):
        raise NotebookError("not an nbformat 4 notebook: a cell's source list holds something other than text")
    return (position, end, value), end


# -- IPython's escapes -------------------------------------------------------------------


def _mask_escapes(text: str) -> Tuple[str, List[int]]:
    """``text`` with each line that is an IPython escape at the start of a logical line masked by Python of
    the same length, and the 0-based numbers of the masked lines (their continuation lines included)."""
    if _MAYBE_ESCAPE.search(text) is None:
        return text, []
    lines = split_lines(text)
    masked: List[int] = []
    depth, quote, continued, escape_continues = 0, None, False, False
    for number, line in enumerate(lines):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        if escape_continues:  # a line of a magic continued with a backslash
            lines[number] = ("#" + body[1:] if body else body) + ending
            masked.append(number)
            escape_continues = body.endswith("\\")
            continue
        if depth == 0 and quote is None and not continued:
            replacement = _masked_escape(body)
            if replacement is not None:
                lines[number] = replacement + ending
                masked.append(number)
                escape_continues = body.endswith("\\")
                continue
        depth, quote, continued = _scan_line(body, depth, quote)
    return "".join(lines), masked


def _masked_escape(body: str) -> Optional[str]:
    """The masked form of ``body`` when it is an escape, else None."""
    stripped = body.lstrip(" \t")
    indent = body[: len(body) - len(stripped)]
    if (stripped and stripped[0] in "%!?/,;") or _HELP_SUFFIX.match(body):
        return indent + _same_length_statement(stripped)
    assigned = _ASSIGNED_ESCAPE.match(body)
    if assigned is not None:
        escape = body[assigned.end() :]
        return body[: assigned.end()] + _same_length_statement(escape)
    return None


def _same_length_statement(text: str) -> str:
    """The expression ``0`` and a comment, as long as ``text`` (``%time f(x)`` -> ``0#ime f(x)``)."""
    return "0" + ("#" + text[2:] if len(text) > 1 else "")


def _scan_line(body: str, depth: int, quote: Optional[str]) -> Tuple[int, Optional[str], bool]:
    """Bracket depth, open string delimiter and backslash continuation after the line ``body``."""
    position, length = 0, len(body)
    comment = False
    while position < length:
        char = body[position]
        if quote is not None:
            if char == "\\":
                position += 2
                continue
            if body.startswith(quote, position):
                position += len(quote)
                quote = None
                continue
            position += 1
            continue
        if char == "#":
            comment = True
            break
        if char in "\"'":
            quote = char * 3 if body.startswith(char * 3, position) else char
            position += len(quote)
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        position += 1
    continued = quote is None and not comment and body.endswith("\\")
    if quote is not None and len(quote) == 1 and not body.endswith("\\"):
        quote = None  # an unterminated string: the parser says so
    return depth, quote, continued


# -- the module the cells make ------------------------------------------------------------


@dataclass
class _Part:
    """One checked code cell inside the module text."""

    cell: int  # 0-based index in the notebook
    text: str  # the cell's source, escapes masked, ending with a line break
    added_newline: bool  # the break at its end is the module's, not the cell's
    masked: List[Tuple[int, int, str]]  # (start, end) in ``text`` of each masked line (with its break), and its original text
    magic_first: bool = False  # the first line is a Python cell magic (%%time), which must stay first
    start: int = 0  # offset in the module text
    line: int = 1  # module line of its first line

    @property
    def lines(self) -> int:
        return len(line_starts(self.text)) - 1


@dataclass
class _Module:
    parts: List[_Part]
    problems: List[Diagnostic] = field(default_factory=list)
    text: str = ""
    tree: Optional[ast.Module] = None

    def __post_init__(self) -> None:
        self._place()

    def _place(self) -> None:
        offset, line = 0, 1
        for part in self.parts:
            part.start, part.line = offset, line
            offset += len(part.text)
            line += part.lines
        self.text = "".join(part.text for part in self.parts)
        self._lines = [part.line for part in self.parts]
        self._starts = [part.start for part in self.parts]

    @classmethod
    def build(cls, notebook: Notebook) -> "_Module":
        parts: List[_Part] = []
        if not notebook.is_python:
            return cls(parts)
        for index, cell in enumerate(notebook.cells):
            if cell.kind != "code" or not cell.source.strip() or (cell.language and cell.language.lower() != "python"):
                continue
            part = _part(index, cell.source)
            if part is not None:
                parts.append(part)
        return cls(parts)

    def drop(self, part: _Part, problem: Diagnostic) -> None:
        self.parts.remove(part)
        self.problems.append(problem)
        self._place()

    def parse_cells(self, notebook: Notebook, path: str) -> None:
        """Leave out (and report) the cells that do not parse on their own; keep the module's ``ast``."""
        bodies: List[ast.stmt] = []
        index = 0
        while index < len(self.parts):
            part = self.parts[index]
            try:
                # Parsed alone, as Jupyter runs it, at its lines in the module: the trees join into the module's.
                tree = ast.parse("\n" * (part.line - 1) + part.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                line = max(1, (getattr(exc, "lineno", None) or part.line) - part.line + 1)
                column = getattr(exc, "offset", None) or 1
                message = exc.msg if isinstance(exc, SyntaxError) else ("expression nested too deeply to parse" if isinstance(exc, (RecursionError, MemoryError)) else str(exc))
                self.drop(part, self.problem(notebook, path, part, line, column, f"syntax error: {message}"))
                bodies = []
                index = 0  # the lines of the cells after it moved: parse them again at their new lines
                continue
            bodies.extend(tree.body)
            index += 1
        self.tree = ast.Module(body=bodies, type_ignores=[])

    def problem(self, notebook: Notebook, path: str, part: _Part, line: int, column: int, message: str) -> Diagnostic:
        return Diagnostic(path, message, line, column, "parse", NotebookCell(part.cell + 1, notebook.file_line(part.cell, line)))

    def frozen(self) -> List[Tuple[int, int]]:
        """The boundaries between cells, then the masked lines, as module spans (see engine.touches_frozen)."""
        spans = [(part.start, part.start) for part in self.parts[1:]]
        spans += [(part.start + start, part.start + end) for part in self.parts for start, end, _ in part.masked]
        return spans

    def moved(self, text: str, frozen: Sequence[Tuple[int, int]]) -> "_Module":
        """This module after fixes turned it into ``text``, ``frozen`` being where ``frozen()`` now stands."""
        boundaries = [0] + [start for start, _ in frozen[: len(self.parts) - 1]] + [len(text)]
        masks = iter(frozen[len(self.parts) - 1 :])
        parts = []
        for part, start, end in zip(self.parts, boundaries, boundaries[1:]):
            # part.masked first: zip then takes no more of ``masks`` than this part has.
            masked = [(m_start - start, m_end - start, original) for (_, _, original), (m_start, m_end) in zip(part.masked, masks)]
            parts.append(_Part(part.cell, text[start:end], part.added_newline, masked, part.magic_first))
        return _Module(parts, list(self.problems))

    def sources(self) -> Dict[int, str]:
        """The source of each cell (0-based index), its magics put back."""
        sources = {}
        for part in self.parts:
            text = part.text
            for start, end, original in reversed(part.masked):
                text = text[:start] + original + text[end:]
            if part.added_newline and text.endswith("\n"):
                text = text[:-1]
            sources[part.cell] = text
        return sources

    def part_at_line(self, line: int) -> _Part:
        return self.parts[max(0, bisect.bisect_right(self._lines, line) - 1)]

    def part_at_offset(self, offset: int, insertion: bool = False) -> _Part:
        """The part that holds ``offset``; text inserted at a boundary belongs to the cell before it."""
        found = bisect.bisect_left(self._starts, offset) - 1 if insertion else bisect.bisect_right(self._starts, offset) - 1
        return self.parts[max(0, found)]

    # -- module results as cell results

    def to_cells(self, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], notebook: Notebook) -> Tuple[List[Finding], List[Diagnostic]]:
        from torchlint.engine import touches_frozen

        frozen = self.frozen()
        mapped = []
        for finding in findings:
            part = self.part_at_line(finding.location.line)
            location = finding.location
            shift = part.line - 1
            cell_line = location.line - shift
            fix, edits, cells = finding.fix, (), ()
            if fix is not None and touches_frozen(fix, frozen):
                fix = None  # --fix will not apply it: it would straddle cells or rewrite a magic
            if fix is not None:
                fix, edits, cells = self._cell_fix(fix)
            mapped.append(
                replace(
                    finding,
                    location=Location(cell_line, location.column, location.end_line - shift, location.end_column),
                    fix=fix,
                    fix_edit_locations=edits,
                    fix_edit_cells=cells,
                    cell=NotebookCell(part.cell + 1, notebook.file_line(part.cell, cell_line)),
                )
            )
        problems = []
        for diagnostic in diagnostics:
            if self.parts and diagnostic.cell is None:
                part = self.part_at_line(diagnostic.line)
                line = max(1, diagnostic.line - part.line + 1)
                diagnostic = replace(diagnostic, line=line, cell=NotebookCell(part.cell + 1, notebook.file_line(part.cell, line)))
            problems.append(diagnostic)
        return mapped, problems

    def _cell_fix(self, fix):
        """``fix`` with edits that count within their cells (offsets, lines and columns), and their cells."""
        edits, locations, cells = [], [], []
        for edit in fix.edits:
            insertion = edit.start == edit.end
            part = self.part_at_offset(edit.start, insertion)
            own = len(part.text) - part.added_newline  # the cell's own text
            start, end, content = edit.start - part.start, edit.end - part.start, edit.content
            if start > own:  # inserted after the break the module added: before it, in the cell's terms
                start = end = own
                content = "\n" + content[:-1] if content.endswith("\n") else "\n" + content
            end = min(end, own)
            starts = line_starts(part.text[:own])
            line = bisect.bisect_right(starts, start)
            end_line = bisect.bisect_right(starts, end)
            edits.append(Edit(start, end, content))
            locations.append((line, start - starts[line - 1] + 1, end_line, end - starts[end_line - 1] + 1))
            cells.append(part.cell + 1)
        return replace(fix, edits=tuple(edits)), tuple(locations), tuple(cells)


def _part(index: int, source: str) -> Optional[_Part]:
    """The module part of a code cell, or None when the cell runs another language (``%%bash``)."""
    text = source
    masked_lines: List[int] = []
    magic_first = False
    first = text.lstrip("\r\n")
    magic = _CELL_MAGIC.match(first)
    if magic is not None:
        if magic.group(1) not in PYTHON_CELL_MAGICS:
            return None
        lead = len(text) - len(first)
        text = text[:lead] + "#" + text[lead + 1 :]  # a comment of the same length: the body is Python
        masked_lines.append(len(line_starts(text[:lead])) - 1)
        magic_first = True
    text, escapes = _mask_escapes(text)
    masked_lines += escapes
    added = not text.endswith(("\n", "\r"))
    if added:
        text += "\n"
    starts = line_starts(text)
    original = source + ("\n" if added else "")
    masked = [(starts[n], starts[n + 1], original[starts[n] : starts[n + 1]]) for n in sorted(set(masked_lines))]
    return _Part(index, text, added, masked, magic_first)


# -- checking and fixing ----------------------------------------------------------------


@dataclass(frozen=True)
class CellFix:
    """A code cell that the fixes changed: its 1-based index and its source before and after."""

    index: int
    before: str
    after: str


@dataclass
class NotebookFixResult:
    """What ``fix`` did: the file's new text (None for a notebook built from cells), how many fixes it
    applied, what remains, and the cells it changed."""

    text: Optional[str]
    applied: int
    result: "LintResult"
    cells: List[CellFix] = field(default_factory=list)


def check(notebook: Notebook, path: str, settings: "Settings") -> "LintResult":
    """The findings and errors of the notebook's Python cells, located in their cells."""
    from torchlint.engine import LintResult, lint_text, select_rules

    module = _Module.build(notebook)
    if not module.parts or is_skipped_file(module.text) or not select_rules(module.text, settings.codes_for(path)):
        return LintResult()  # as for a .py file without a trigger: nothing is parsed
    module.parse_cells(notebook, path)
    while True:
        result = lint_text(module.text, path, settings, tree=module.tree)
        broken = _unparsable_part(module, result, notebook, path)
        if broken is None:
            break
        # A cell CPython takes but LibCST does not: report it and check the others.
        module.drop(*broken)
        module.parse_cells(notebook, path)
    findings, diagnostics = module.to_cells(result.findings, result.diagnostics, notebook)
    return _sorted(LintResult(findings, module.problems + diagnostics))


def _unparsable_part(module: _Module, result: "LintResult", notebook: Notebook, path: str) -> Optional[Tuple[_Part, Diagnostic]]:
    for diagnostic in result.diagnostics:
        if diagnostic.kind == "parse" and module.parts:
            part = module.part_at_line(diagnostic.line)
            return part, module.problem(notebook, path, part, max(1, diagnostic.line - part.line + 1), diagnostic.column, diagnostic.message)
    return None


def _sorted(result: "LintResult") -> "LintResult":
    result.findings.sort(key=lambda f: f.sort_key)
    result.diagnostics.sort(key=lambda d: d.sort_key)
    return result


def fix(notebook: Notebook, path: str, settings: "Settings", unsafe: Optional[bool] = None) -> NotebookFixResult:
    """Apply the fixes to the notebook's Python cells; the cells they change, and the file's new text."""
    from torchlint.engine import LintResult, fix_text

    module = _Module.build(notebook)
    if not module.parts or is_skipped_file(module.text):
        return NotebookFixResult(notebook.text, 0, LintResult())
    module.parse_cells(notebook, path)
    if not module.parts:
        return NotebookFixResult(notebook.text, 0, _sorted(LintResult(diagnostics=module.problems)))
    fixed = fix_text(module.text, path, settings, unsafe, frozen=module.frozen())
    if not fixed.applied:
        findings, diagnostics = module.to_cells(fixed.result.findings, fixed.result.diagnostics, notebook)
        return NotebookFixResult(notebook.text, 0, _sorted(LintResult(findings, module.problems + diagnostics)))
    after = module.moved(fixed.text, fixed.frozen)
    sources = after.sources()
    changed = {index: text for index, text in sources.items() if text != notebook.cells[index].source}
    broken = _broken_cell(after, changed)
    if broken is not None:
        result = check(notebook, path, settings)
        result.diagnostics.append(
            Diagnostic(path, f"the fixes for cell {broken + 1} left it unable to run on its own; the notebook was not changed", kind="internal")
        )
        return NotebookFixResult(notebook.text, 0, _sorted(result))
    text = notebook.with_sources(changed) if notebook.text is not None else None
    written = read(text) if text is not None else Notebook([replace(c, source=sources.get(i, c.source)) for i, c in enumerate(notebook.cells)])
    findings, diagnostics = after.to_cells(fixed.result.findings, fixed.result.diagnostics, written)
    cells = [CellFix(index + 1, notebook.cells[index].source, source) for index, source in sorted(changed.items())]
    return NotebookFixResult(text, fixed.applied, _sorted(LintResult(findings, module.problems + diagnostics)), cells)


def _broken_cell(module: _Module, changed: Dict[int, str]) -> Optional[int]:
    """A changed cell that no longer runs on its own (a Python cell magic no longer first, code that does
    not parse alone), or None."""
    for part in module.parts:
        if part.cell not in changed:
            continue
        if part.magic_first and (not part.masked or part.masked[0][0] != 0):
            return part.cell
        try:
            ast.parse(part.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return part.cell
    return None


# -- the file-level doors: the same calls as engine.lint_text / engine.fix_text ----------------


def _unreadable(path: str, exc: NotebookError) -> Diagnostic:
    return Diagnostic(path, exc.message, exc.line, exc.column, "parse")


def lint_text(text: str, path: str, settings: "Settings") -> "LintResult":
    """``engine.lint_text`` for a notebook file's text: findings located in cells."""
    from torchlint.engine import LintResult

    try:
        notebook = read(text)
    except NotebookError as exc:
        return LintResult(diagnostics=[_unreadable(path, exc)])
    return check(notebook, path, settings)


def fix_text(text: str, path: str, settings: "Settings", unsafe: Optional[bool] = None) -> NotebookFixResult:
    """``engine.fix_text`` for a notebook file's text: ``.text`` is the file's new text."""
    from torchlint.engine import LintResult

    try:
        notebook = read(text)
    except NotebookError as exc:
        return NotebookFixResult(text, 0, LintResult(diagnostics=[_unreadable(path, exc)]))
    return fix(notebook, path, settings, unsafe)
