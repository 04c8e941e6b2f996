"""Output formats: text (people), json (tools), sarif (code scanning), github (Actions annotations)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

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


def formatters() -> Dict[str, Callable[[RunSummary], str]]:
    from torchlint.report import github, json_format, sarif, text

    return {"text": text.render, "json": json_format.render, "sarif": sarif.render, "github": github.render}
