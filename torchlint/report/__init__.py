"""Output formats: text (people), json (tools), sarif (code scanning), github (Actions annotations)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List

from torchlint.rule import Diagnostic, Finding


@dataclass
class RunSummary:
    findings: List[Finding]  # what remains, sorted
    diagnostics: List[Diagnostic] = field(default_factory=list)
    fixed: int = 0
    unsafe_fixes: bool = False
    fix_mode: bool = False
    quiet: bool = False  # findings only, no summary lines


def formatters() -> Dict[str, Callable[[RunSummary], str]]:
    from torchlint.report import github, json_format, sarif, text

    return {"text": text.render, "json": json_format.render, "sarif": sarif.render, "github": github.render}
