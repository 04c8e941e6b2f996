"""What the server lints, and how the engine's offsets map back to the editor's documents.

The engine lints one module: a text and the path it stands for.  The editor shows
documents: a Python file, or (LSP 3.17 ``notebookDocument/*``) a notebook whose cells
are documents of their own.  A ``DocumentView`` is the seam between the two: it runs
the engine on what it holds, places what the engine reports (a line and column, in a
cell for a notebook) at an offset into its ``text``, and maps an offset to (document
URI, position) and back.  A text document maps one to one (``TextView``); a notebook
(``NotebookView``) is linted by ``torchlint.notebook`` as the one module its cells make,
and sends each finding, fix and edit to its cell.
"""
from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from lsprotocol import types

from torchlint import engine, notebook
from torchlint.config import Settings
from torchlint.noqa import noqa_edit
from torchlint.rule import Edit, Finding, NotebookCell
from torchlint.server.positions import UTF16, LineIndex
from torchlint.source import split_lines

DocumentEdits = Dict[str, List[types.TextEdit]]


class DocumentView:
    """One unit of linting: the file ``path``, opened by the client as ``uri`` at ``version``.

    Offsets count in ``text``: the document's text, or a notebook's cells one after the other.
    """

    uri: str
    path: str
    text: str
    version: Optional[int]

    def uris(self) -> Sequence[str]:
        """The documents that receive this unit's diagnostics (cleared too, when it has none)."""
        raise NotImplementedError

    def locate(self, offset: int) -> Tuple[str, types.Position]:
        """The document and position of an offset into ``text``."""
        raise NotImplementedError

    def version_of(self, uri: str) -> Optional[int]:
        """The version of document ``uri`` that ``text`` was read from."""
        return self.version

    def offset(self, uri: str, position: types.Position) -> Optional[int]:
        """The offset into ``text`` of a position in document ``uri`` (None: not one of this view's)."""
        raise NotImplementedError

    def location_offset(self, line: int, column: int, cell: Optional[NotebookCell] = None) -> int:
        """The offset of the engine's 1-based line and column (in code points), which count within ``cell`` in a notebook."""
        raise NotImplementedError

    def line_span(self, offset: int) -> Tuple[int, int]:
        """Where the line that holds ``offset`` starts and ends (before its line break)."""
        raise NotImplementedError

    def lint(self, settings: Settings) -> engine.LintResult:
        raise NotImplementedError

    def fix_edits(self, finding: Finding) -> Optional[Sequence[Edit]]:
        """The edits of ``finding``'s fix as offsets into ``text``; None when the fixed code would not parse."""
        raise NotImplementedError

    def noqa_edit(self, finding: Finding) -> Optional[Edit]:
        """The edit that adds ``# noqa: CODE`` for ``finding``; None when a bare ``# noqa`` already covers it."""
        raise NotImplementedError

    def fix_all(self, settings: Settings) -> Optional[DocumentEdits]:
        """The edits of the safe and numerics fixes, as ``--fix`` applies them; None when nothing changes."""
        raise NotImplementedError

    def range(self, start: int, end: int) -> Optional[Tuple[str, types.Range]]:
        """The document and range of ``text[start:end]``; None when it spans two documents."""
        uri, first = self.locate(start)
        end_uri, last = self.locate(end)
        return (uri, types.Range(first, last)) if uri == end_uri else None

    def text_edits(self, edits: Iterable[Edit]) -> Optional[DocumentEdits]:
        """The engine's edits as LSP edits per document; None when one of them spans two documents."""
        grouped: DocumentEdits = {}
        for edit in sorted(edits, key=lambda e: (e.start, e.end)):
            placed = self.range(edit.start, edit.end)
            if placed is None:
                return None
            grouped.setdefault(placed[0], []).append(types.TextEdit(placed[1], edit.content))
        return grouped


class TextView(DocumentView):
    """A text document: the module is the document."""

    def __init__(self, uri: str, path: str, text: str, version: Optional[int] = None, encoding: str = UTF16) -> None:
        self.uri = uri
        self.path = path
        self.text = text
        self.version = version
        self.lines = LineIndex(text, encoding)

    def uris(self) -> Sequence[str]:
        return (self.uri,)

    def locate(self, offset: int) -> Tuple[str, types.Position]:
        line, character = self.lines.position(offset)
        return self.uri, types.Position(line, character)

    def offset(self, uri: str, position: types.Position) -> Optional[int]:
        if uri != self.uri:
            return None
        return self.lines.offset(position.line, position.character)

    def location_offset(self, line: int, column: int, cell: Optional[NotebookCell] = None) -> int:
        return self.lines.offset_of_location(line, column)

    def line_span(self, offset: int) -> Tuple[int, int]:
        line = self.lines.line_of(offset)
        return self.lines.starts[line], self.lines.line_end(line)

    def lint(self, settings: Settings) -> engine.LintResult:
        return engine.lint_text(self.text, self.path, settings)

    def fix_edits(self, finding: Finding) -> Optional[Sequence[Edit]]:
        if finding.fix is None or engine.apply_fix(self.text, self.path, finding.fix) is None:
            return None
        return finding.fix.edits

    def noqa_edit(self, finding: Finding) -> Optional[Edit]:
        return noqa_edit(self.text, finding.location.line, finding.code)

    def fix_all(self, settings: Settings) -> Optional[DocumentEdits]:
        fixed = engine.fix_text(self.text, self.path, settings, unsafe=False).text
        return self.edits_to(fixed) if fixed != self.text else None

    def edits_to(self, new_text: str) -> DocumentEdits:
        """Edits that turn ``text`` into ``new_text``."""
        return {self.uri: line_diff_edits(self.lines, new_text)}


@dataclass(frozen=True)
class CellDocument:
    """A cell of an open notebook: its text document, and its kind as ``torchlint.notebook.Cell`` names it."""

    uri: str
    kind: str  # "code" or "markdown"
    language: Optional[str]
    text: str
    version: Optional[int] = None


class NotebookView(DocumentView):
    """A notebook: the cells are the documents, and one module for the engine (an import in cell 1 serves cell 3).

    ``text`` holds the cells' texts with a line break between each two, so that no range
    of one cell touches the next.  Lines and columns of findings, fixes and problems
    count within their cells, as ``torchlint.notebook`` reports them.
    """

    def __init__(
        self, uri: str, path: str, cells: Sequence[CellDocument], version: Optional[int] = None, encoding: str = UTF16
    ) -> None:
        self.uri = uri
        self.path = path
        self.version = version
        self.cells = tuple(cells)
        self.notebook = notebook.Notebook([notebook.Cell(cell.kind, cell.text, cell.language) for cell in self.cells])
        self.text = "\n".join(cell.text for cell in self.cells)
        self._lines = [LineIndex(cell.text, encoding) for cell in self.cells]
        self._starts: List[int] = []
        start = 0
        for cell in self.cells:
            self._starts.append(start)
            start += len(cell.text) + 1
        self._numbers = {cell.uri: number for number, cell in enumerate(self.cells)}

    def _cell_at(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._starts, offset) - 1)

    def uris(self) -> Sequence[str]:
        return tuple(cell.uri for cell in self.cells)

    def version_of(self, uri: str) -> Optional[int]:
        number = self._numbers.get(uri)
        return self.cells[number].version if number is not None else None

    def locate(self, offset: int) -> Tuple[str, types.Position]:
        number = self._cell_at(offset)
        line, character = self._lines[number].position(offset - self._starts[number])
        return self.cells[number].uri, types.Position(line, character)

    def offset(self, uri: str, position: types.Position) -> Optional[int]:
        number = self._numbers.get(uri)
        if number is None:
            return None
        return self._starts[number] + self._lines[number].offset(position.line, position.character)

    def location_offset(self, line: int, column: int, cell: Optional[NotebookCell] = None) -> int:
        number = cell.index - 1 if cell is not None else 0
        return self._starts[number] + self._lines[number].offset_of_location(line, column)

    def line_span(self, offset: int) -> Tuple[int, int]:
        number = self._cell_at(offset)
        lines, start = self._lines[number], self._starts[number]
        line = lines.line_of(offset - start)
        return start + lines.starts[line], start + lines.line_end(line)

    def lint(self, settings: Settings) -> engine.LintResult:
        return notebook.check(self.notebook, self.path, settings)

    def fix_edits(self, finding: Finding) -> Optional[Sequence[Edit]]:
        if notebook.apply_fix(self.notebook, finding, self.path) is None:
            return None
        return [self._shifted(edit, cell) for edit, cell in zip(finding.fix.edits, finding.fix_edit_cells)]

    def noqa_edit(self, finding: Finding) -> Optional[Edit]:
        cell = finding.cell.index
        # Placed on the masked source: the tokenizer that finds the statement's last line cannot read magics.
        edit = noqa_edit(notebook.masked_source(self.cells[cell - 1].text), finding.location.line, finding.code)
        return self._shifted(edit, cell) if edit is not None else None

    def fix_all(self, settings: Settings) -> Optional[DocumentEdits]:
        fixed = notebook.fix(self.notebook, self.path, settings, unsafe=False)
        edits = {self.cells[cell.index - 1].uri: line_diff_edits(self._lines[cell.index - 1], cell.after) for cell in fixed.cells}
        return edits or None

    def _shifted(self, edit: Edit, cell: int) -> Edit:
        """``edit``, whose offsets count within cell ``cell`` (1-based), as offsets into ``text``."""
        start = self._starts[cell - 1]
        return Edit(start + edit.start, start + edit.end, edit.content)


def line_diff_edits(lines: LineIndex, new_text: str) -> List[types.TextEdit]:
    """Edits, one per block of changed lines, that turn the indexed text into ``new_text``.

    Whole lines are replaced, so an editor keeps its cursor, marks and folds on the lines
    that a fix leaves alone (one edit of the whole document would move them all).
    """
    old = split_lines(lines.text)
    new = split_lines(new_text)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    edits = []
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = lines.starts[old_start] if old_start < len(lines.starts) else len(lines.text)
        end = lines.starts[old_end] if old_end < len(lines.starts) else len(lines.text)
        if old_end == len(old):
            end = len(lines.text)
        first, last = lines.position(start), lines.position(end)
        edits.append(
            types.TextEdit(types.Range(types.Position(*first), types.Position(*last)), "".join(new[new_start:new_end]))
        )
    return edits


def changed_text(text: str, changes: Iterable[types.TextDocumentContentChangeEvent], encoding: str) -> str:
    """``text`` after a client's content changes, applied in order (a range counts by LSP's line rules, in ``encoding`` units)."""
    for change in changes:
        if isinstance(change, types.TextDocumentContentChangePartial):
            lines = LineIndex(text, encoding)
            start = lines.offset(change.range.start.line, change.range.start.character)
            end = lines.offset(change.range.end.line, change.range.end.character)
            text = text[:start] + change.text + text[end:]
        else:
            text = change.text
    return text


def cell_document(cell: types.NotebookCell, item: Optional[types.TextDocumentItem]) -> CellDocument:
    """A notebook's cell and its text document (None: the client sent none, an empty cell)."""
    if item is None:
        return CellDocument(cell.document, _kind(cell.kind), None, "")
    return CellDocument(cell.document, _kind(cell.kind), item.language_id, item.text, item.version)


def _kind(kind: types.NotebookCellKind) -> str:
    return "code" if kind == types.NotebookCellKind.Code else "markdown"


def changed_cells(cells: Sequence[CellDocument], change: types.NotebookDocumentCellChanges, encoding: str) -> List[CellDocument]:
    """A notebook's cells after a ``notebookDocument/didChange``, which changes the structure (cells added,
    removed, moved; their text documents opened and closed), then the cells' kinds, then their texts."""
    found = list(cells)
    structure = change.structure
    if structure is not None:
        known = {cell.uri: cell for cell in found}
        opened = {item.uri: item for item in structure.did_open or ()}
        closed = {item.uri for item in structure.did_close or ()} - opened.keys()
        array = structure.array
        found[array.start : array.start + array.delete_count] = [
            replace(known[cell.document], kind=_kind(cell.kind)) if cell.document in known else cell_document(cell, None)
            for cell in array.cells or ()
        ]

        def reopened(cell: CellDocument) -> CellDocument:
            item = opened[cell.uri]
            return replace(cell, language=item.language_id, text=item.text, version=item.version)

        found = [reopened(cell) if cell.uri in opened else cell for cell in found if cell.uri not in closed]
    kinds = {cell.document: _kind(cell.kind) for cell in change.data or ()}
    found = [replace(cell, kind=kinds[cell.uri]) if cell.uri in kinds else cell for cell in found]
    for content in change.text_content or ():
        for number, cell in enumerate(found):
            if cell.uri == content.document.uri:
                found[number] = replace(cell, text=changed_text(cell.text, content.changes, encoding), version=content.document.version)
    return found
