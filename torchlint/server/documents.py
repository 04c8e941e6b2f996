"""What the server lints, and how the engine's offsets map back to the editor's documents.

The engine lints one module: a text and the path it stands for.  The editor shows
documents: a Python file, or (LSP 3.17 ``notebookDocument/*``) a notebook whose cells
are documents of their own.  A ``DocumentView`` is the seam between the two: it holds
the module text the engine sees and maps an offset into it to (document URI, position)
and back.  A text document maps one to one (``TextView``); a notebook view would join
its cells into one module with a cell map and send each finding to its cell.
"""
from __future__ import annotations

import difflib
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from lsprotocol import types

from torchlint.rule import Edit
from torchlint.server.positions import UTF16, LineIndex
from torchlint.source import split_lines

DocumentEdits = Dict[str, List[types.TextEdit]]


class DocumentView:
    """One unit of linting: ``text`` as the file ``path``, opened by the client as ``uri`` at ``version``."""

    uri: str
    path: str
    text: str
    version: Optional[int]
    lines: LineIndex  # of ``text``, in code points: where the engine's lines and columns are

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

    def edits_to(self, new_text: str) -> Optional[DocumentEdits]:
        """Edits per document that turn ``text`` into ``new_text`` (None when the documents cannot express it)."""
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

    def edits_to(self, new_text: str) -> Optional[DocumentEdits]:
        return {self.uri: line_diff_edits(self.lines, new_text)}


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
