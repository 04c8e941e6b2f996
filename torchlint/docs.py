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
