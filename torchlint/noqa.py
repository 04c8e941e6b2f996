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
from typing import Dict, List, Optional, Tuple

from torchlint.rule import Edit
from torchlint.source import split_lines

NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
SKIP_FILE = re.compile(r"^[ \t\f]*#[ \t]*torchlint:[ \t]*skip-file\b", re.MULTILINE)
_SPLIT = re.compile(r"[,\s]")
_CODE = re.compile(r"[A-Z]+[0-9]+", re.IGNORECASE)


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


def noqa_edit(source: str, line: int, code: str) -> Optional[Edit]:
    """The edit that suppresses ``code`` on ``line``: a ``# noqa: CODE`` comment, or the code added to
    the line's own ``# noqa: ...`` list.

    The comment goes on the last line of the line's token run (after the closing quotes of a
    multi-line string, after the last line of a backslash continuation), where it is code and
    not text inside a string, and where flake8 and the CLI read it for every line of the run.
    None when the line already has a bare ``# noqa`` (it suppresses everything).
    """
    lines = split_lines(source)
    if not 1 <= line <= len(lines):
        return None
    last = next((end for start, end in _token_runs(lines) if start <= line <= end), line)
    text = lines[last - 1]
    body = text.rstrip("\r\n")
    start = sum(len(previous) for previous in lines[: last - 1])
    match = NOQA_INLINE.search(body)
    if match is not None:
        codes = match.group("codes")
        if codes is None:
            return None
        at = start + match.start("codes") + len(codes.rstrip(", \t"))
        return Edit(at, at, f", {code}")
    at = start + len(body.rstrip())
    return Edit(at, at, f"  # noqa: {code}")


def code_at(line_text: str, column: int) -> Optional[str]:
    """The rule code of a ``# noqa: ...`` comment that covers ``column`` (0-based) of ``line_text``, if any."""
    match = NOQA_INLINE.search(line_text)
    if match is None or match.group("codes") is None:
        return None
    offset = match.start("codes")
    for code in _CODE.finditer(match.group("codes")):
        if offset + code.start() <= column < offset + code.end():
            return code.group().upper()
    return None


def _token_runs(lines: List[str]) -> List[Tuple[int, int]]:
    """flake8's runs of tokens up to a NEWLINE/NL, as (first line, last line); none when the text does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    runs = []
    min_line, max_line = len(lines) + 2, -1
    for tok in tokens:
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
            continue
        min_line = min(min_line, tok.start[0])
        max_line = max(max_line, tok.end[0])
        if tok.type in (tokenize.NL, tokenize.NEWLINE):
            runs.append((min_line, max_line))
            min_line, max_line = len(lines) + 2, -1
    return runs


def _logical_line_mapping(lines: List[str]) -> Dict[int, str]:
    """flake8's mapping: each token run up to a NEWLINE/NL maps all its lines to their joined text."""
    mapping: Dict[int, str] = {}
    for first, last in _token_runs(lines):
        joined = "".join(lines[first - 1 : last])
        for number in range(first, last + 1):
            mapping[number] = joined
    return mapping
