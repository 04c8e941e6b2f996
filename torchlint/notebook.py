"""Jupyter notebooks, checked and fixed as the one Python module their code cells make.

A notebook (nbformat 4 JSON) becomes one module text: its Python code cells in order, each ending
with a line break, and IPython's escapes masked by text of the same length (a line magic
``%time f(x)`` becomes the statement ``0#ime f(x)``, a ``%%time`` first line the comment
``#%time``; shell ``!cmd``, help ``x?`` and, in a cell that does not parse otherwise, automagics
such as ``pip install torch`` likewise), so every unmasked line keeps its text and every column
its place.  The engine, the
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
then ``check`` (findings carry ``finding.cell.index``), ``apply_fix`` (the cells one finding's fix
changes) and ``fix`` (``NotebookFixResult.cells``: the new source of each changed cell).
"""
from __future__ import annotations

import ast
import bisect
import json
import re
from dataclasses import dataclass, field, replace
from json.decoder import scanstring
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from torchlint.noqa import NoqaAdded, add_noqa as add_noqa_to_text, is_skipped_file
from torchlint.rule import Diagnostic, Edit, Finding, Location, NotebookCell
from torchlint.source import NOTEBOOK_SUFFIX, line_starts, split_lines

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.config import Settings
    from torchlint.engine import LintResult

# Cell magics whose body is Python that the kernel runs (the first line is masked, the body checked).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "python", "python3", "pypy"})

# Line magics IPython runs without their % (automagic), as ``pip install torch``: a name then a word is
# never Python, so such a line of a cell that does not parse is masked when its name is one of these.
AUTOMAGICS = (
    "pip", "conda", "mamba", "cd", "ls", "pwd", "env", "set_env", "load_ext", "reload_ext", "matplotlib",
    "time", "timeit", "run", "who", "whos", "reset", "history", "pdb", "debug", "alias", "autoreload", "aimport",
)
_AUTOMAGIC = r"(?:%s)[ \t]+(?!(?:if|else|in|is|and|or|not|for|as|async|await|lambda)\b)[A-Za-z_]" % "|".join(AUTOMAGICS)
# Lines that may be IPython escapes: they start with %, !, ?, or an auto-call's / , ; (none can start a
# Python statement), or end with ? (help: ``x?``).  Only those that start a logical line (outside
# brackets, strings and continuations) are masked.  (Searched with a literal first: a fast scan.)
_ESCAPE_FIRST = re.compile(r"[ \t]*[%!?/,;]")
_ESCAPE_START = re.compile(r"\n[ \t]*[%!?/,;]")
_HELP_END = re.compile(r"\?[ \t]*(?:\r?\n|\r|$)")
_AUTOMAGIC_START = re.compile(r"^[ \t]*" + _AUTOMAGIC, re.MULTILINE)
_HELP_SUFFIX = re.compile(r"[ \t]*%{0,2}[\w.*]+\?{1,2}[ \t]*$")  # used with match(): a whole line
_AUTOMAGIC_LINE = re.compile(r"^[ \t]*" + _AUTOMAGIC)
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
    ``listed``: the file stores the source as a list of strings (Jupyter's way), not one string.
    """

    kind: str
    source: str
    language: Optional[str] = None
    listed: bool = False


@dataclass
class Notebook:
    """The cells of a notebook, and the JSON text they were read from (None when built from cells)."""

    cells: List[Cell]
    text: Optional[str] = None
    language: Optional[str] = None  # the kernel's language, when the metadata says it
    # Where things stand in ``text``: found when first asked (a check needs them only where it reports).
    _spans: Optional[List[Optional[Tuple[int, int]]]] = field(default=None, init=False, repr=False)
    _pieces: Dict[int, Tuple[Tuple[int, int, str], ...]] = field(default_factory=dict, init=False, repr=False)
    _file_lines: Optional[List[int]] = field(default=None, init=False, repr=False)

    @property
    def is_python(self) -> bool:
        return self.language is None or self.language.lower() == "python"

    def span(self, cell: int) -> Optional[Tuple[int, int]]:
        """Where cell ``cell``'s ``source`` value stands in the file's text (None without a text)."""
        if self.text is None:
            return None
        if self._spans is None:
            self._spans = _source_spans(self.text)
        return self._spans[cell]

    def pieces(self, cell: int) -> Tuple[Tuple[int, int, str], ...]:
        """(start, end, value) of each string of a listed source in the file's text; () otherwise."""
        span = self.span(cell)
        if not self.cells[cell].listed or span is None:
            return ()
        if cell not in self._pieces:
            reader = _Reader(self.text)
            self._pieces[cell] = tuple(reader.array(span[0], lambda at, _: _read_string(reader, at)))
        return self._pieces[cell]

    def file_line(self, cell: int, line: int) -> int:
        """The line of the file that holds line ``line`` (1-based) of cell ``cell`` (0-based); 1 when unknown."""
        span = self.span(cell)
        if span is None:
            return 1
        offset = span[0]
        pieces = self.pieces(cell)
        if pieces:
            first = 1  # the cell line the current piece starts on
            offset = pieces[-1][0]
            for start, _, value in pieces:
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
        parts = []
        position = 0
        for index in sorted(sources, key=lambda i: self.span(i)[0]):
            start, end = self.span(index)
            parts.append(text[position:start])
            parts.append(_source_json(text, (start, end), self.cells[index].listed, self.pieces(index), sources[index], ascii_only))
            position = end
        parts.append(text[position:])
        return "".join(parts)


def _escapes_non_ascii(text: str) -> bool:
    """Whether the file writes non-ASCII text as \\u escapes (json.dumps' default) rather than as itself (Jupyter's)."""
    if not text.isascii():
        return False
    return any(int(code, 16) >= 0x80 for code in re.findall(r"(?<!\\)\\u([0-9a-fA-F]{4})", text))


def _source_json(text: str, span: Tuple[int, int], listed: bool, pieces: Sequence[Tuple[int, int, str]], source: str, ascii_only: bool) -> str:
    """``source`` as JSON in the layout the source value at ``span`` of ``text`` had (``pieces``: its strings)."""
    if not listed:
        return json.dumps(source, ensure_ascii=ascii_only)
    known = {}
    for start, end, value in pieces:
        known.setdefault(value, text[start:end])  # an unchanged line keeps its bytes
    lines = split_lines(source)
    if not pieces or not lines:  # an empty cell is never checked, so never fixed: no layout to follow
        return json.dumps(lines, ensure_ascii=ascii_only)
    items = [known.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    first, last = pieces[0], pieces[-1]
    opening, closing = text[span[0] + 1 : first[0]], text[last[1] : span[1] - 1]
    separator = text[first[1] : pieces[1][0]] if len(pieces) > 1 else "," + opening
    return "[" + opening + separator.join(items) + closing + "]"


# -- reading the JSON ------------------------------------------------------------------


def read(text: str) -> Notebook:
    """The notebook that ``text`` (a .ipynb file's content) holds; NotebookError when it is not one."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not valid JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except RecursionError:
        raise NotebookError("not valid JSON: nested too deeply") from None
    if not isinstance(document, dict):
        raise NotebookError(f"not a Jupyter notebook: the file holds a JSON {type(document).__name__}, not an object")
    version = document.get("nbformat")
    if "cells" not in document and version is None:
        raise NotebookError("not a Jupyter notebook: no 'nbformat' or 'cells' key")
    if version != 4 or isinstance(version, bool):
        hint = " (convert it with `jupyter nbconvert --to notebook --nbformat 4`)" if isinstance(version, int) and version < 4 else ""
        raise NotebookError(f"nbformat {version!r} is not supported, only nbformat 4{hint}")
    if not isinstance(document.get("cells"), list):
        raise NotebookError("not an nbformat 4 notebook: 'cells' is not a list")
    cells = [_cell(cell, index) for index, cell in enumerate(document["cells"])]
    metadata = document.get("metadata")
    language = None
    if isinstance(metadata, dict):
        info, kernel = metadata.get("language_info"), metadata.get("kernelspec")
        if isinstance(info, dict) and isinstance(info.get("name"), str):
            language = info["name"]
        elif isinstance(kernel, dict) and isinstance(kernel.get("language"), str):
            language = kernel["language"]
    return Notebook(cells, text, language)


def _cell(cell: object, index: int) -> Cell:
    if not isinstance(cell, dict):
        raise NotebookError(f"not an nbformat 4 notebook: cell {index + 1} is not an object")
    kind, source = cell.get("cell_type"), cell.get("source")
    if not isinstance(kind, str) or source is None:
        raise NotebookError(f"not an nbformat 4 notebook: cell {index + 1} has no {'cell_type' if not isinstance(kind, str) else 'source'}")
    listed = isinstance(source, list)
    if listed and all(isinstance(line, str) for line in source):
        source = "".join(source)
    if not isinstance(source, str):
        raise NotebookError(f"not an nbformat 4 notebook: the source of cell {index + 1} is not text")
    metadata = cell.get("metadata")
    vscode = metadata.get("vscode") if isinstance(metadata, dict) else None
    language = vscode.get("languageId") if isinstance(vscode, dict) and isinstance(vscode.get("languageId"), str) else None
    return Cell(kind, source, language, listed)


# Locating values in a text that json.loads took: one pass of the standard library's C decoder per value.
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.end = 0

    def space(self, position: int) -> int:
        return _SPACE.match(self.text, position).end()

    def value(self, position: int) -> Tuple[object, int]:
        return _DECODER.raw_decode(self.text, self.space(position))

    def members(self, position: int):
        """(key, position of its value) of each member of the object at ``position``; the caller sets
        ``self.end`` past each value before asking for the next."""
        position = self.space(position) + 1  # past "{"
        while True:
            position = self.space(position)
            if self.text[position] == "}":
                self.end = position + 1
                return
            key, position = scanstring(self.text, position + 1)
            value_at = self.space(self.space(position) + 1)  # past ":"
            yield key, value_at
            position = self.space(self.end)
            if self.text[position] == ",":
                position += 1

    def array(self, position: int, item) -> List[object]:
        """The items of the array at ``position``, each read by ``item(position, index) -> (value, end)``."""
        items = []
        position = self.space(position) + 1  # past "["
        while True:
            position = self.space(position)
            if self.text[position] == "]":
                self.end = position + 1
                return items
            value, position = item(position, len(items))
            items.append(value)
            position = self.space(position)
            if self.text[position] == ",":
                position += 1


def _source_spans(text: str) -> List[Optional[Tuple[int, int]]]:
    """Where each cell's ``source`` value stands in ``text`` (a notebook ``read`` took); the last one wins, as in json.loads."""
    reader = _Reader(text)

    def cell(position: int, _) -> Tuple[Optional[Tuple[int, int]], int]:
        span = None
        for key, at in reader.members(position):
            reader.end = reader.value(at)[1]
            if key == "source":
                span = (at, reader.end)
        return span, reader.end

    spans: List[Optional[Tuple[int, int]]] = []
    for key, at in reader.members(0):
        if key == "cells":
            spans = reader.array(at, cell)
        else:
            reader.end = reader.value(at)[1]
    return spans


def _read_string(reader: _Reader, position: int) -> Tuple[Tuple[int, int, str], int]:
    value, end = reader.value(position)
    return (position, end, value), end


# -- IPython's escapes -------------------------------------------------------------------


def _mask_escapes(text: str, automagics: bool = False) -> Tuple[str, List[int]]:
    """``text`` with each line that is an IPython escape at the start of a logical line masked by Python of
    the same length, and the 0-based numbers of the masked lines (their continuation lines included).
    ``automagics``: also lines such as ``pip install torch`` (asked for a cell that does not parse)."""
    patterns = (_ESCAPE_START, _AUTOMAGIC_START) if automagics else (_ESCAPE_START,)
    candidates = [match.end() - 1 for pattern in patterns for match in pattern.finditer(text)]
    if _ESCAPE_FIRST.match(text):
        candidates.append(0)
    for match in _HELP_END.finditer(text):
        start = max(text.rfind("\n", 0, match.start()), text.rfind("\r", 0, match.start())) + 1
        if _HELP_SUFFIX.match(text, start, match.end()):  # ``x?``, not ``# why?``
            candidates.append(start)
    if not candidates:
        return text, []
    starts = line_starts(text)
    last = bisect.bisect_right(starts, max(candidates)) - 1  # no line after the last candidate needs reading
    lines = split_lines(text)
    masked: List[int] = []
    depth, quote, continued, escape_continues = 0, None, False, False
    for number, line in enumerate(lines):
        if number > last and not escape_continues:
            break
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        if escape_continues:  # a line of a magic continued with a backslash
            lines[number] = ("#" + body[1:] if body else body) + ending
            masked.append(number)
            escape_continues = body.endswith("\\")
            continue
        if depth == 0 and quote is None and not continued:
            replacement = _masked_escape(body, automagics)
            if replacement is not None:
                lines[number] = replacement + ending
                masked.append(number)
                escape_continues = body.endswith("\\")
                continue
        depth, quote, continued = _scan_line(body, depth, quote)
    return "".join(lines), masked


def _masked_escape(body: str, automagics: bool) -> Optional[str]:
    """The masked form of ``body`` when it is an escape, else None."""
    stripped = body.lstrip(" \t")
    indent = body[: len(body) - len(stripped)]
    if (stripped and stripped[0] in "%!?/,;") or _HELP_SUFFIX.match(body) or (automagics and _AUTOMAGIC_LINE.match(body)):
        return indent + _same_length_statement(stripped)
    assigned = _ASSIGNED_ESCAPE.match(body)
    if assigned is not None:
        escape = body[assigned.end() :]
        return body[: assigned.end()] + _same_length_statement(escape)
    return None


def _same_length_statement(text: str) -> str:
    """The expression ``0`` and a comment, as long as ``text`` (``%time f(x)`` -> ``0#ime f(x)``)."""
    return "0" + ("#" + text[2:] if len(text) > 1 else "")


_CODE_MARK = re.compile(r"[#\"'()\[\]{}]")
_STRING_END = {quote: re.compile(r"\\.|" + quote) for quote in ('"', "'", '"""', "'''")}


def _scan_line(body: str, depth: int, quote: Optional[str]) -> Tuple[int, Optional[str], bool]:
    """Bracket depth, open string delimiter and backslash continuation after the line ``body``."""
    position, length = 0, len(body)
    comment = False
    while position < length:
        if quote is not None:
            for mark in _STRING_END[quote].finditer(body, position):
                if mark.group() == quote:  # not an escaped character
                    position, quote = mark.end(), None
                    break
            else:
                break  # the string goes on past this line
            continue
        mark = _CODE_MARK.search(body, position)
        if mark is None:
            break
        char, position = mark.group(), mark.start()
        if char == "#":
            comment = True
            break
        if char in "\"'":
            quote = char * 3 if body.startswith(char * 3, position) else char
            position += len(quote)
            continue
        depth = depth + 1 if char in "([{" else max(0, depth - 1)
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
        return self.text.count("\n") if "\r" not in self.text else len(line_starts(self.text)) - 1


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
        parts = [_part(index, notebook.cells[index].source) for index in _code_cells(notebook)]
        return cls([part for part in parts if part is not None])

    def drop(self, part: _Part, problem: Diagnostic) -> None:
        self.parts.remove(part)
        self.problems.append(problem)
        self._place()

    def parse_cells(self, notebook: Notebook, path: str) -> None:
        """Leave out (and report) the cells that do not parse on their own; keep the module's ``ast``."""
        try:
            tree = ast.parse(self.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        if tree is not None and self._cells_hold_whole_statements(tree):
            # Each cell holds whole top-level statements: each parses alone (the common case, one parse).
            self.tree = tree
            return
        bodies: List[ast.stmt] = []
        index = 0
        while index < len(self.parts):
            part = self.parts[index]
            try:
                # Parsed alone, as Jupyter runs it, at its lines in the module: the trees join into the module's.
                tree = ast.parse("\n" * (part.line - 1) + part.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                with_automagics = _part(part.cell, notebook.cells[part.cell].source, automagics=True)
                if with_automagics is not None and with_automagics.masked != part.masked:
                    # ``pip install torch`` without its %: masked (same length), the cell is parsed again.
                    self.parts[index] = with_automagics
                    self._place()
                    continue
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

    def _cells_hold_whole_statements(self, tree: ast.Module) -> bool:
        for statement in tree.body:
            first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", ())])
            if self.part_at_line(first) is not self.part_at_line(statement.end_lineno):
                return False  # it runs across a boundary: ``else:`` in the next cell, an indented continuation
        return True

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


def _code_cells(notebook: Notebook) -> List[int]:
    """The indexes of the notebook's Python code cells that hold something."""
    if not notebook.is_python:
        return []
    return [
        index
        for index, cell in enumerate(notebook.cells)
        if cell.kind == "code" and cell.source.strip() and (not cell.language or cell.language.lower() == "python")
    ]


def _part(index: int, source: str, automagics: bool = False) -> Optional[_Part]:
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
    text, escapes = _mask_escapes(text, automagics)
    masked_lines += escapes
    added = not text.endswith(("\n", "\r"))
    if added:
        text += "\n"
    masked = []
    if masked_lines:
        starts = line_starts(text)
        original = source + ("\n" if added else "")
        masked = [(starts[n], starts[n + 1], original[starts[n] : starts[n + 1]]) for n in sorted(set(masked_lines))]
    return _Part(index, text, added, masked, magic_first)


def masked_source(source: str) -> str:
    """A code cell's source as the module holds it: IPython's escapes masked by Python of the same length,
    so that its lines and columns stay the cell's (the source itself for a cell that runs another language)."""
    part = _part(0, source)
    return source if part is None else part.text[: len(source)]


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
    applied_codes: Tuple[str, ...]  # the code of each applied fix
    result: "LintResult"
    cells: List[CellFix] = field(default_factory=list)

    @property
    def applied(self) -> int:
        return len(self.applied_codes)


def check(notebook: Notebook, path: str, settings: "Settings") -> "LintResult":
    """The findings and errors of the notebook's Python cells, located in their cells."""
    from torchlint.engine import LintResult, lint_text, select_rules

    # As for a .py file, code without a rule's trigger is not parsed (nor are its magics masked).
    code = "".join(notebook.cells[index].source for index in _code_cells(notebook))
    triggered = [] if is_skipped_file(code) else select_rules(code, settings.codes_for(path))
    if not triggered:
        return LintResult()
    codes = [rule.code for rule in triggered]
    module = _Module.build(notebook)
    module.parse_cells(notebook, path)
    while True:
        result = lint_text(module.text, path, settings, codes=codes, tree=module.tree)
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
        return NotebookFixResult(notebook.text, (), LintResult())
    module.parse_cells(notebook, path)
    if not module.parts:
        return NotebookFixResult(notebook.text, (), _sorted(LintResult(diagnostics=module.problems)))
    fixed = fix_text(module.text, path, settings, unsafe, frozen=module.frozen())
    if not fixed.applied:
        findings, diagnostics = module.to_cells(fixed.result.findings, fixed.result.diagnostics, notebook)
        return NotebookFixResult(notebook.text, (), _sorted(LintResult(findings, module.problems + diagnostics)))
    after = module.moved(fixed.text, fixed.frozen)
    sources = after.sources()
    changed = {index: text for index, text in sources.items() if text != notebook.cells[index].source}
    broken = _broken_cell(after, changed)
    if broken is not None:
        result = check(notebook, path, settings)
        result.diagnostics.append(
            Diagnostic(path, f"the fixes for cell {broken + 1} left it unable to run on its own; the notebook was not changed", kind="internal")
        )
        return NotebookFixResult(notebook.text, (), _sorted(result))
    text = notebook.with_sources(changed) if notebook.text is not None else None
    written = read(text) if text is not None else Notebook([replace(c, source=sources.get(i, c.source)) for i, c in enumerate(notebook.cells)])
    findings, diagnostics = after.to_cells(fixed.result.findings, fixed.result.diagnostics, written)
    cells = [CellFix(index + 1, notebook.cells[index].source, source) for index, source in sorted(changed.items())]
    return NotebookFixResult(text, fixed.applied_codes, _sorted(LintResult(findings, module.problems + diagnostics)), cells)


def _broken_cell(module: _Module, changed: Dict[int, str]) -> Optional[int]:
    """A changed cell that no longer runs on its own (a Python cell magic no longer first, code that does
    not parse alone), or None."""
    for part in module.parts:
        if part.cell not in changed:
            continue
        if part.magic_first and (not part.masked or part.text[: part.masked[0][0]].strip("\r\n")):
            return part.cell  # text went in before the cell magic, which must stay the cell's first line
        try:
            ast.parse(part.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return part.cell
    return None


def apply_fix(notebook: Notebook, finding: Finding, path: str = "") -> Optional[Dict[int, str]]:
    """The new source of each cell (1-based index) that the fix of ``finding`` (from ``check``) changes; None
    when one of them would no longer run on its own (such a fix is not offered, as ``engine.apply_fix`` says)."""
    from torchlint.engine import apply_edits

    if finding.fix is None:
        return None
    edits: Dict[int, List[Edit]] = {}
    for edit, cell in zip(finding.fix.edits, finding.fix_edit_cells):
        edits.setdefault(cell - 1, []).append(edit)
    sources = {index: apply_edits(notebook.cells[index].source, cell_edits) for index, cell_edits in edits.items()}
    fixed = Notebook([replace(cell, source=sources.get(index, cell.source)) for index, cell in enumerate(notebook.cells)], language=notebook.language)
    parts = [_part(index, source) for index, source in sorted(sources.items())]
    if None in parts:
        return None  # a cell magic of another language came first
    module = _Module(parts)
    module.parse_cells(fixed, path)
    if module.problems:
        return None
    for part in module.parts:
        # Read from the cell as it was: a Python cell magic that the fix moved down must still come first.
        part.magic_first = _part(part.cell, notebook.cells[part.cell].source).magic_first
    if _broken_cell(module, sources) is not None:
        return None
    return {index + 1: source for index, source in sources.items()}


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


def add_noqa(text: str, findings: Sequence[Finding]) -> NoqaAdded:
    """``noqa.add_noqa`` for a notebook file's text and the findings ``lint_text`` located in its cells.

    Each comment is placed on the cell's masked source (the tokenizer cannot read magics) and written
    into the cell's own source; only the cells that change are written back, in the file's layout.
    """
    notebook = read(text)
    by_cell: Dict[int, List[Finding]] = {}
    for finding in findings:
        by_cell.setdefault(finding.cell.index - 1, []).append(finding)
    sources: Dict[int, str] = {}
    added = NoqaAdded(text)
    for index, cell_findings in sorted(by_cell.items()):
        original = notebook.cells[index].source
        masked = masked_source(original)
        in_cell = add_noqa_to_text(masked, cell_findings)
        added.directives += in_cell.directives
        added.unplaced.extend(in_cell.unplaced)
        if in_cell.directives:
            # A line the comments left alone keeps its own text (a magic stays a magic).
            pairs = zip(split_lines(original), split_lines(masked), split_lines(in_cell.text))
            sources[index] = "".join(mine if before == after else after for mine, before, after in pairs)
    if sources:
        added.text = notebook.with_sources(sources)
    return added


def fix_text(text: str, path: str, settings: "Settings", unsafe: Optional[bool] = None) -> NotebookFixResult:
    """``engine.fix_text`` for a notebook file's text: ``.text`` is the file's new text."""
    from torchlint.engine import LintResult

    try:
        notebook = read(text)
    except NotebookError as exc:
        return NotebookFixResult(text, (), LintResult(diagnostics=[_unreadable(path, exc)]))
    return fix(notebook, path, settings, unsafe)
