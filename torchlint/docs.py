"""Rule documentation pages, shared by `torchlint rule`, SARIF and the README table."""
from __future__ import annotations

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
    "Every finding carries a confidence: `high` when the value reaches the hazard by its own "
    "construction, `medium` when nothing shows it cannot, in code that gradients flow through, "
    "`low` when nothing shows it cannot, elsewhere. Findings of `medium` and above are shown; "
    "choose the floor with `--confidence-level low|medium|high` or `confidence-level` in "
    "`[tool.torchlint]` (JSON has a `confidence` key, SARIF a `rank`)."
)


def confidence_summary(rule: Type[Rule]) -> str:
    """The rule's own levels (``confidence_levels``), else its single default level, then the general text."""
    own = rule.confidence_levels or f"This rule's findings are `{rule.confidence.value}` confidence."
    return f"## Confidence\n{own}\n\n{CONFIDENCE_LEVELS_TEXT}"


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
