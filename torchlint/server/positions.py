"""Offsets into a text and LSP positions (0-based line, character in the negotiated encoding).

LSP breaks lines at ``\\n``, ``\\r\\n`` and ``\\r`` only, as Python's tokenizer and
``source.line_starts`` do (not at the form feeds and Unicode separators that
``str.splitlines`` also splits on), and counts characters in UTF-16 code units
unless client and server agreed on UTF-8 or UTF-32.  The engine counts code points.
"""
from __future__ import annotations

import bisect
from typing import List, Tuple

from torchlint.source import line_starts

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _units(text: str, encoding: str) -> int:
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class LineIndex:
    """Converts between offsets into ``text`` and (line, character) in ``encoding`` units."""

    def __init__(self, text: str, encoding: str = UTF16) -> None:
        self.text = text
        self.encoding = encoding
        self.starts: List[int] = line_starts(text)

    def line_end(self, line: int) -> int:
        """The offset where ``line`` (0-based) ends, before its line break."""
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        while end > self.starts[line] and self.text[end - 1] in "\r\n":
            end -= 1
        return end

    def line_of(self, offset: int) -> int:
        """The 0-based line that holds ``offset``."""
        return bisect.bisect_right(self.starts, max(0, min(offset, len(self.text)))) - 1

    def position(self, offset: int) -> Tuple[int, int]:
        offset = max(0, min(offset, len(self.text)))
        line = self.line_of(offset)
        return line, _units(self.text[self.starts[line] : offset], self.encoding)

    def offset(self, line: int, character: int) -> int:
        """The offset of an LSP position; past the end of a line means its end, past the last line the text's end."""
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        start, end = self.starts[line], self.line_end(line)
        segment = self.text[start:end]
        if self.encoding == UTF32 or segment.isascii():
            return start + max(0, min(character, len(segment)))
        units = 0
        for index, char in enumerate(segment):
            if units >= character:
                return start + index
            units += _units(char, self.encoding)
        return end

    def offset_of_location(self, line: int, column: int) -> int:
        """The offset of a 1-based line and 1-based column in code points (the engine's ``Location``)."""
        line = max(1, min(line, len(self.starts)))
        return min(self.starts[line - 1] + column - 1, len(self.text))
