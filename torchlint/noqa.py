"""``# noqa`` with flake8's exact semantics, so the CLI and flake8 agree.

flake8 matches ``# noqa(:codes)?`` case-insensitively on the line a finding is
reported on, where a line that belongs to a multi-line token (a triple-quoted
string, a backslash continuation) stands for every line of that token run; a
listed code suppresses every code it is a prefix of.
"""
from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, List, Optional

from torchlint.source import split_lines

NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
SKIP_FILE = re.compile(r"^[ \t\f]*#[ \t]*torchlint:[ \t]*skip-file\b", re.MULTILINE)
_SPLIT = re.compile(r"[,\s]")


def is_skipped_file(source: str) -> bool:
    return "torchlint" in source and SKIP_FILE.search(source) is not None


class NoqaIndex:
    """Answers "is this code suppressed on this line?" for one file."""

    def __init__(self, source: str) -> None:
        self._lines = split_lines(source)
        self._mapping: Optional[Dict[int, str]] = None
        self._enabled = "noqa" in source.lower()

    def _line_text(self, line: int) -> str:
        if self._mapping is None:
            self._mapping = _logical_line_mapping(self._lines)
        text = self._mapping.get(line)
        if text is None and 1 <= line <= len(self._lines):
            text = self._lines[line - 1]
        return text or ""

    def suppresses(self, code: str, line: int) -> bool:
        if not self._enabled:
            return False
        match = NOQA_INLINE.search(self._line_text(line))
        if match is None:
            return False
        codes_str = match.group("codes")
        if codes_str is None:
            return True
        codes = tuple(c.strip() for c in _SPLIT.split(codes_str) if c.strip())
        return code in codes or code.startswith(codes)


def _logical_line_mapping(lines: List[str]) -> Dict[int, str]:
    """flake8's mapping: each token run up to a NEWLINE/NL maps all its lines to their joined text."""
    mapping: Dict[int, str] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return mapping
    min_line, max_line = len(lines) + 2, -1
    for tok in tokens:
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
            continue
        min_line = min(min_line, tok.start[0])
        max_line = max(max_line, tok.end[0])
        if tok.type in (tokenize.NL, tokenize.NEWLINE):
            joined = "".join(lines[min_line - 1 : max_line])
            for number in range(min_line, max_line + 1):
                mapping[number] = joined
            min_line, max_line = len(lines) + 2, -1
    return mapping
