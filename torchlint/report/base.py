"""What every output format renders: the run's summary, and how a position is written."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from torchlint.rule import Diagnostic, Finding, NotebookCell


@dataclass
class RunSummary:
    findings: List[Finding]  # what remains, sorted
    diagnostics: List[Diagnostic] = field(default_factory=list)
    fixed: int = 0
    unsafe_fixes: bool = False
    fix_mode: bool = False
    quiet: bool = False  # findings only, no summary lines


def position(line: int, column: int, cell: Optional[NotebookCell] = None) -> str:
    """``line:column``, or ``cell N:line:column`` in a notebook (ruff's form)."""
    return f"cell {cell.index}:{line}:{column}" if cell is not None else f"{line}:{column}"
