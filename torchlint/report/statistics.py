"""``--statistics``: how many findings each rule has, most first, instead of the findings.

Text: ``count  code  [*] name`` per rule, ``[*]`` when ``--fix`` fixes at least one of its findings
(``[ ]`` otherwise, once any rule is fixable); JSON: a list of ``{"code", "name", "count", "fixable"}``
where ``fixable`` counts the findings ``--fix`` fixes.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Dict, List

from torchlint.report import text
from torchlint.report.base import RunSummary


@dataclass
class RuleCount:
    code: str
    name: str
    count: int = 0
    fixable: int = 0  # of them, fixed by --fix with this run's unsafe-fixes setting


def counts(run: RunSummary) -> List[RuleCount]:
    """One row per rule with findings, by count descending, then by code."""
    rows: Dict[str, RuleCount] = {}
    for finding in run.findings:
        row = rows.setdefault(finding.code, RuleCount(finding.code, finding.name))
        row.count += 1
        row.fixable += run.fixable(finding)
    return sorted(rows.values(), key=lambda row: (-row.count, row.code))


def render(run: RunSummary) -> str:
    rows = counts(run)
    lines = []
    if rows:
        width = len(str(rows[0].count))
        any_fixable = any(row.fixable for row in rows)
        for row in rows:
            marker = "[*] " if row.fixable else ("[ ] " if any_fixable else "")
            lines.append(f"{row.count:>{width}}  {row.code}  {marker}{row.name}")
    if run.show_fixes and run.fix_mode and run.fixes:
        lines += ([""] if lines else []) + text.fix_enumeration(run.fixes, "Fixed")
    return "\n".join(lines) + ("\n" if lines else "")


def render_json(run: RunSummary) -> str:
    return json.dumps([asdict(row) for row in counts(run)], indent=2) + "\n"
