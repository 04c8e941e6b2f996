"""``# noqa`` with flake8's exact semantics, so the CLI and flake8 agree.

flake8 matches ``# noqa(:codes)?`` case-insensitively on the line a finding is
reported on, where a line that belongs to a multi-line token (a triple-quoted
string, a backslash continuation) stands for every line of that token run; a
listed code suppresses every code it is a prefix of.  ``noqa_edit`` (the editor's
"disable for this line") and ``add_noqa`` (``check --add-noqa``) write the comment
on the last line of that run, the one place where it is a comment and is read.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from torchlint.rule import Edit, Finding
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
    scan = _scan(lines)
    # Unsaved editor text may not tokenize: the reported line itself is the best guess there.
    last = scan.last_line(line) if scan is not None else line
    text = lines[last - 1]
    body = text.rstrip("\r\n")
    start = sum(len(previous) for previous in lines[: last - 1])
    match = _noqa_comment(body, scan.comments.get(last) if scan is not None else 0)
    if match is not None:
        codes = match.group("codes")
        if codes is None:
            return None
        at = start + match.start("codes") + len(codes.rstrip(", \t"))
        return Edit(at, at, f", {code}")
    at = start + len(body.rstrip())
    return Edit(at, at, f"  # noqa: {code}")


@dataclass
class NoqaAdded:
    """What ``add_noqa`` did to one text."""

    text: str
    directives: int = 0  # lines whose noqa comment was written or extended
    unplaced: List[Finding] = field(default_factory=list)  # findings no comment could silence


def add_noqa(source: str, findings: Sequence[Finding]) -> NoqaAdded:
    """``source`` with a ``# noqa: CODES`` comment that silences each finding (reported on its line of ``source``).

    Each comment goes where ``noqa_edit`` puts it; codes a ``# noqa: ...`` comment there already lists
    are kept (merged, sorted, once each) and a bare ``# noqa`` is left as it is. A finding that the
    written comment would not silence (the text does not tokenize, or an earlier ``# noqa`` inside a
    string of the same statement is the one flake8 reads) is returned in ``unplaced`` and its line is
    left unchanged.
    """
    lines = split_lines(source)
    scan = _scan(lines)
    if scan is None:
        return NoqaAdded(source, unplaced=list(findings))
    by_line: Dict[int, List[Finding]] = {}
    unplaced: List[Finding] = []
    for finding in findings:
        if 1 <= finding.location.line <= len(lines):
            by_line.setdefault(scan.last_line(finding.location.line), []).append(finding)
        else:
            unplaced.append(finding)
    written = list(lines)
    for number, silenced in by_line.items():
        written[number - 1] = _with_codes(lines[number - 1], scan.comments.get(number), {f.code for f in silenced})
    index = NoqaIndex("".join(written))
    for number, silenced in by_line.items():
        if not all(index.suppresses(f.code, f.location.line) for f in silenced):
            written[number - 1] = lines[number - 1]
            unplaced.extend(silenced)
    directives = sum(1 for before, after in zip(lines, written) if before != after)
    return NoqaAdded("".join(written), directives, unplaced)


def _with_codes(line: str, comment: Optional[int], codes: Set[str]) -> str:
    """``line`` (with its line break) whose ``# noqa`` comment lists ``codes`` too; unchanged under a bare ``# noqa``."""
    body = line.rstrip("\r\n")
    ending = line[len(body) :]
    match = _noqa_comment(body, comment)
    if match is None:
        content = body.rstrip()
        return content + f"  # noqa: {', '.join(sorted(codes))}" + body[len(content) :] + ending
    if match.group("codes") is None:
        return line
    start = match.start("codes")
    end = start + len(match.group("codes").rstrip(", \t"))
    merged = sorted(dict.fromkeys(_CODE.findall(body[start:end]) + sorted(codes)), key=str.upper)
    return body[:start] + ", ".join(merged) + body[end:] + ending


def _noqa_comment(body: str, comment: Optional[int]) -> Optional[re.Match[str]]:
    """The ``# noqa`` directive in the comment that starts at column ``comment`` of ``body`` (None: the line has no comment)."""
    return NOQA_INLINE.search(body, comment) if comment is not None else None


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


@dataclass
class _Scan:
    """A text's token runs (flake8's, up to a NEWLINE/NL, as (first line, last line)) and where each line's comment starts."""

    runs: List[Tuple[int, int]]
    comments: Dict[int, int]  # line -> column of its comment

    def last_line(self, line: int) -> int:
        """The last line of the run that ``line`` belongs to: where its ``# noqa`` comment is code and is read."""
        return next((end for start, end in self.runs if start <= line <= end), line)


def _scan(lines: List[str]) -> Optional[_Scan]:
    """None when the text does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    runs = []
    comments = {}
    min_line, max_line = len(lines) + 2, -1
    for tok in tokens:
        if tok.type in (tokenize.ENDMARKER, tokenize.DEDENT):
            continue
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.start[1]
        min_line = min(min_line, tok.start[0])
        max_line = max(max_line, tok.end[0])
        if tok.type in (tokenize.NL, tokenize.NEWLINE):
            runs.append((min_line, max_line))
            min_line, max_line = len(lines) + 2, -1
    return _Scan(runs, comments)


def _token_runs(lines: List[str]) -> List[Tuple[int, int]]:
    """flake8's runs of tokens up to a NEWLINE/NL, as (first line, last line); none when the text does not tokenize."""
    scan = _scan(lines)
    return scan.runs if scan is not None else []


def _logical_line_mapping(lines: List[str]) -> Dict[int, str]:
    """flake8's mapping: each token run up to a NEWLINE/NL maps all its lines to their joined text."""
    mapping: Dict[int, str] = {}
    for first, last in _token_runs(lines):
        joined = "".join(lines[first - 1 : last])
        for number in range(first, last + 1):
            mapping[number] = joined
    return mapping
