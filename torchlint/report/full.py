"""The full text format (``--output-format full``): each finding with the source lines it spans, carets
under the reported span and the fix it offers, then the summary of the concise format.

    train.py:4:5: TL201 [*] log(softmax(x)) gives -inf and NaN gradients ...
      |
    4 | y = torch.log(F.softmax(x, dim=-1))
      |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
      |
      = help: use F.log_softmax (safe fix)

Lines are quoted from the checked files as they are after the run (``--fix`` has written them), and
from a notebook's cell with the cell's own line numbers.
"""
from __future__ import annotations

import unicodedata
from typing import Dict, List, Optional, Tuple

from torchlint import notebook, source
from torchlint.report import text
from torchlint.report.base import RunSummary
from torchlint.rule import Finding

# A span longer than this shows its first and last lines around an elision.
MAX_QUOTED_LINES = 6
HEAD_LINES, TAIL_LINES = 3, 2
TAB_WIDTH = 4


def render(run: RunSummary) -> str:
    files = _Files(run.sources)
    blocks = ["\n".join([text.headline(f, run)] + _quote(f, files.lines(f)) + _help(f, run)) for f in run.findings]
    footer = text.footer(run)
    parts = blocks + (["\n".join(footer)] if footer else [])
    return "\n\n".join(parts) + ("\n" if parts else "")


def _help(finding: Finding, run: RunSummary) -> List[str]:
    if finding.fix is None:
        return []
    applicability = finding.fix.applicability.value
    needs = "" if run.fixable(finding) else ", needs --unsafe-fixes"
    return [f"  = help: {finding.fix.message} ({applicability} fix{needs})"]


def _quote(finding: Finding, lines: Optional[List[str]]) -> List[str]:
    """The gutter-numbered lines of the finding's span with carets under it; nothing when the lines are not at hand."""
    loc = finding.location
    last = loc.end_line - 1 if loc.end_line > loc.line and loc.end_column == 1 else loc.end_line  # ends at a line start
    if lines is None or not 1 <= loc.line <= last <= len(lines):
        return []
    numbers = list(range(loc.line, last + 1))
    if len(numbers) > MAX_QUOTED_LINES:
        numbers = numbers[:HEAD_LINES] + [0] + numbers[-TAIL_LINES:]  # 0: the elision
    width = len(str(last))
    gutter = " " * width + " |"
    quoted = [gutter]
    for number in numbers:
        if number == 0:
            quoted.append(f"{gutter} ...")
            continue
        line = lines[number - 1]
        start = loc.column - 1 if number == loc.line else len(line) - len(line.lstrip())
        end = loc.end_column - 1 if number == loc.end_line else len(line)
        shown, offsets = _displayed(line)
        quoted.append(f"{number:>{width}} | {shown}".rstrip())
        if end > start or number == loc.line:
            # A span of no width still gets one caret.
            carets = max(1, offsets[min(end, len(line))] - offsets[min(start, len(line))])
            quoted.append(f"{gutter} {' ' * offsets[min(start, len(line))]}{'^' * carets}")
    quoted.append(gutter)
    return quoted


def _displayed(line: str) -> Tuple[str, List[int]]:
    """The line as a terminal shows it (tabs expanded), and the display column of each character offset (and of the end)."""
    shown: List[str] = []
    offsets = [0]
    column = 0
    for char in line:
        if char == "\t":
            piece = " " * (TAB_WIDTH - column % TAB_WIDTH)
        else:
            piece = char
        shown.append(piece)
        column += _width(piece)
        offsets.append(column)
    return "".join(shown), offsets


def _width(piece: str) -> int:
    if len(piece) != 1:
        return len(piece)  # spaces for a tab
    if unicodedata.combining(piece):
        return 0
    return 2 if unicodedata.east_asian_width(piece) in ("W", "F") else 1


class _Files:
    """The lines of each file (of each notebook cell) the findings are in, read once."""

    def __init__(self, sources: Dict[str, str]) -> None:
        self._sources = sources
        self._lines: Dict[Tuple[str, int], Optional[List[str]]] = {}

    def lines(self, finding: Finding) -> Optional[List[str]]:
        key = (finding.path, finding.cell.index if finding.cell is not None else 0)
        if key not in self._lines:
            self._lines[key] = self._read(*key)
        return self._lines[key]

    def _read(self, path: str, cell: int) -> Optional[List[str]]:
        """The lines of ``path`` (of its ``cell``, 1-based, when not 0) without their line breaks; None when unreadable."""
        try:
            content = self._sources[path] if path in self._sources else source.read(path).text
            if cell:
                cells = notebook.read(content).cells
                if cell > len(cells):
                    return None
                content = cells[cell - 1].source
        except (source.SourceError, notebook.NotebookError):
            return None
        return [line.rstrip("\r\n") for line in source.split_lines(content)]
