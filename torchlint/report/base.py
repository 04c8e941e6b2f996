"""What every output format renders: the run's summary, and how a position is written."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from torchlint.rule import DEFAULT_CONFIDENCE_FLOOR, Confidence, Diagnostic, Finding, NotebookCell


@dataclass
class RunSummary:
    findings: List[Finding]  # what remains, sorted
    diagnostics: List[Diagnostic] = field(default_factory=list)
    # Path -> the code of each fix --fix applied there.
    fixes: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    fix_mode: bool = False
    quiet: bool = False  # findings only, no summary lines
    show_fixes: bool = False  # list the applied fixes per file
    # The text of checked files that are not on disk (standard input), by path: the full format quotes it.
    sources: Dict[str, str] = field(default_factory=dict)
    # Findings a plain check found below the floor and did not show, per level; and the floor.
    below_floor: Dict[Confidence, int] = field(default_factory=dict)
    floor: Confidence = DEFAULT_CONFIDENCE_FLOOR

    @property
    def hidden(self) -> int:
        return sum(self.below_floor.values())

    @property
    def fixed(self) -> int:
        return sum(len(codes) for codes in self.fixes.values())

    def fixable(self, finding: Finding) -> bool:
        """Whether ``--fix`` applies the finding's fix with this run's ``unsafe-fixes`` setting."""
        return finding.fix is not None and finding.fix.applicability.applied_by(self.unsafe_fixes)


def position(line: int, column: int, cell: Optional[NotebookCell] = None) -> str:
    """``line:column``, or ``cell N:line:column`` in a notebook (ruff's form)."""
    return f"cell {cell.index}:{line}:{column}" if cell is not None else f"{line}:{column}"
