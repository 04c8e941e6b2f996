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


def page(rule: Type[Rule]) -> str:
    return f"# {rule.name} ({rule.code})\n\n{fix_summary(rule)}\n\n{rule.documentation()}\n"


def rules_table() -> str:
    """The README's rules table, one row per registered rule, with the anchors help URIs point at."""
    from torchlint import registry

    rows = ["| code | name | fix | what breaks |", "|---|---|---|---|"]
    for rule in registry.all_rules().values():
        fix = rule.fix_applicability.value if rule.fix_applicability else "none"
        message = rule.message.replace("|", "\\|")
        rows.append(f'| <a id="{rule.code.lower()}"></a>`{rule.code}` | `{rule.name}` | {fix} | {message} |')
    return "\n".join(rows) + "\n"
