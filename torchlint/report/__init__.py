"""Output formats: concise and full text (people), json (tools), sarif (code scanning), github (Actions annotations)."""
from __future__ import annotations

from typing import Callable, Dict, Tuple

from torchlint.report.base import RunSummary, position

__all__ = ["TEXT_FORMATS", "RunSummary", "fix_enumeration", "formatters", "position", "statistics_formatters"]

# The formats for people: they end with the summary lines and, with --show-fixes, the applied fixes.
TEXT_FORMATS = ("concise", "text", "full")


def formatters() -> Dict[str, Callable[[RunSummary], str]]:
    from torchlint.report import full, github, json_format, sarif, text

    # "text" is the concise format's first name, kept for scripts and hooks that pass it.
    return {
        "concise": text.render,
        "text": text.render,
        "full": full.render,
        "json": json_format.render,
        "sarif": sarif.render,
        "github": github.render,
    }


def statistics_formatters() -> Dict[str, Callable[[RunSummary], str]]:
    """``--statistics`` output by ``--output-format`` (the text formats share one table)."""
    from torchlint.report import statistics

    return {**{name: statistics.render for name in TEXT_FORMATS}, "json": statistics.render_json}


def fix_enumeration(fixes: Dict[str, Tuple[str, ...]], verb: str) -> str:
    """``{verb} N findings:`` and the fixes of each file, for the formats that do not include it."""
    from torchlint.report import text

    return "\n".join(text.fix_enumeration(fixes, verb)) + "\n"
