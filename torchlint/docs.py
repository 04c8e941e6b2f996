"""Rule documentation pages, shared by `torchlint rule`, SARIF and the README table."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Type

from torchlint.rule import Rule

README_URL = "https://github.com/torchlint/torchlint/blob/main/README.md"


def help_uri(rule: Type[Rule]) -> str:
    return f"{README_URL}#{rule.code.lower()}"


def fix_summary(rule: Type[Rule]) -> str:
    if rule.fix_applicability is None:
        return "Fix: none (see Fix safety)."
    return f"Fix class: {rule.fix_applicability.value}."


CONFIDENCE_LEVELS_TEXT = (
    "A level is a promise: `high` means at least 9 in 10 of its findings are real (or real for unusual "
    "inputs), `medium` at least 1 in 2, `low` is what is left. Only `high` is shown by default; choose the "
    "floor with `--confidence-level low|medium|high` or `confidence-level` in `[tool.torchlint]` (JSON has a "
    "`confidence` key, SARIF a `rank`). Below `high`, a numerics fix is offered as unsafe."
)
_MEASURED = Path(__file__).resolve().parent / "data" / "measured_precision.json"


@functools.lru_cache(maxsize=1)
def _measured() -> dict:
    try:
        return json.loads(_MEASURED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def measured_summary(rule: Type[Rule]) -> str:
    """What users' code showed of each level, for all rules and for this one (bench/precision_user.py)."""
    data = _measured()
    if not data:
        return ""

    def figures(levels: dict) -> str:
        parts = []
        for level in ("high", "medium", "low"):
            counts = levels.get(level, {})
            read, real = counts.get("read", 0), counts.get("real", 0)
            parts.append(f"`{level}` {real}/{read} real" if read else f"`{level}` none read")
        return ", ".join(parts)

    text = f"Measured on {data['corpus']}, findings read blind: all rules {figures(data['levels'])}"
    own = data.get("rules", {}).get(rule.code)
    return text + (f"; this rule {figures(own)}." if own else "; this rule had no finding there.")


def confidence_summary(rule: Type[Rule]) -> str:
    """The rule's own levels (``confidence_levels``), else its single default level, then the general text and
    the measured figures."""
    from torchlint.rule import measured_level_moves

    own = rule.confidence_levels or f"This rule's findings are `{rule.confidence.value}` confidence."
    moves = sorted((key.split(":", 1)[1], level) for key, level in measured_level_moves().items() if key.split(":", 1)[0] == rule.code)
    if moves:
        own += "\n\nWhat validation draws measured moves these levels (the decision rule: a form that cannot keep its level's promise, 9 in 10 real at `high` or 1 in 2 at `medium`, moves down; one sure to keep a higher promise moves up): " + "; ".join(
            f"`{before}` findings are shown at `{after}`" for before, after in moves
        ) + "."
    measured = measured_summary(rule)
    return f"## Confidence\n{own}\n\n{CONFIDENCE_LEVELS_TEXT}" + (f"\n\n{measured}" if measured else "")


def section(rule: Type[Rule], heading: str) -> str:
    """The text under ``## heading`` of the rule's documentation ("" when it has none)."""
    marker = f"## {heading}\n"
    doc = rule.documentation()
    start = doc.find(marker)
    if start == -1:
        return ""
    body = doc[start + len(marker) :]
    end = body.find("\n## ")
    return (body if end == -1 else body[:end]).strip()


def summary(rule: Type[Rule]) -> str:
    """A few lines of markdown for an editor's hover: what breaks, what the rule flags, its fix class and page."""
    fix = rule.fix_applicability.value if rule.fix_applicability else "none"
    return (
        f"**{rule.code}** `{rule.name}` (fix: {fix})\n\n{rule.message}\n\n{section(rule, 'What it does')}\n\n"
        f"[Documentation]({help_uri(rule)}) · `torchlint rule {rule.code}`"
    )


def page(rule: Type[Rule]) -> str:
    return f"# {rule.name} ({rule.code})\n\n{fix_summary(rule)}\n\n{rule.documentation()}\n\n{confidence_summary(rule)}\n"


def rules_table() -> str:
    """The README's rules table, one row per registered rule, with the anchors help URIs point at."""
    from torchlint import registry

    rows = ["| code | name | fix | what breaks |", "|---|---|---|---|"]
    for rule in registry.all_rules().values():
        fix = rule.fix_applicability.value if rule.fix_applicability else "none"
        message = rule.message.replace("|", "\\|")
        rows.append(f'| <a id="{rule.code.lower()}"></a>`{rule.code}` | `{rule.name}` | {fix} | {message} |')
    return "\n".join(rows) + "\n"
