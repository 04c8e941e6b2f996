"""Output formats: text (people), json (tools), sarif (code scanning), github (Actions annotations)."""
from __future__ import annotations

from typing import Callable, Dict

from torchlint.report.base import RunSummary, position

__all__ = ["RunSummary", "formatters", "position"]


def formatters() -> Dict[str, Callable[[RunSummary], str]]:
    from torchlint.report import github, json_format, sarif, text

    return {"text": text.render, "json": json_format.render, "sarif": sarif.render, "github": github.render}
