"""The concise text format (``--output-format concise``, also ``text``): one line per finding, then the summary."""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Tuple

from torchlint import registry
from torchlint.report.base import RunSummary, position
from torchlint.rule import Confidence, Finding


def render(run: RunSummary) -> str:
    return _joined([headline(f, run) for f in run.findings] + footer(run))


def headline(finding: Finding, run: RunSummary) -> str:
    """``path:line:col: CODE [*] message``; ``[*]`` when ``--fix`` would fix it."""
    marker = " [*]" if run.fixable(finding) else ""
    return f"{finding.path}:{position(finding.location.line, finding.location.column, finding.cell)}: {finding.code}{marker} {finding.message}"


def footer(run: RunSummary) -> List[str]:
    """What follows the findings: the applied fixes (``--show-fixes``), then the summary lines (unless quiet)."""
    lines: List[str] = []
    if run.show_fixes and run.fix_mode and run.fixes:
        lines += fix_enumeration(run.fixes, "Fixed") + [""]
    if run.quiet:
        return lines
    remaining = len(run.findings)
    if run.fix_mode and run.fixed:
        lines.append(f"Found {remaining + run.fixed} {_plural(remaining + run.fixed)} ({run.fixed} fixed, {remaining} remaining).")
    elif remaining:
        lines.append(f"Found {remaining} {_plural(remaining)}.")
    elif not run.diagnostics and not run.hidden:
        lines.append("All checks passed!")
    elif not run.diagnostics:
        lines.append(f"No findings at the `{run.floor.value}` level.")
    lines += below_floor(run)
    fixable = sum(1 for f in run.findings if run.fixable(f))
    hidden = sum(1 for f in run.findings if f.fix is not None) - fixable
    if fixable and not run.fix_mode:
        lines.append(f"[*] {fixable} fixable with `torchlint check --fix`.")
    if hidden:
        lines.append(f"({hidden} more fixable with the `--unsafe-fixes` option.)")
    return lines


def below_floor(run: RunSummary) -> List[str]:
    """The findings a check did not show because they are below the floor: how many, and how to see or confirm them."""
    if not run.hidden:
        return []
    levels = [level for level in (Confidence.MEDIUM, Confidence.LOW) if run.below_floor.get(level)]
    parts = ", ".join(f"{run.below_floor[level]} {level.value}" for level in levels)
    lowest = levels[-1].value
    return [
        f"{run.hidden} more {'finding' if run.hidden == 1 else 'findings'} below the `{run.floor.value}` level ({parts}): "
        f"`--confidence-level {lowest}` shows them; `torchlint trace SCRIPT` confirms on a real run the ones it meets."
    ]


def fix_enumeration(fixes: Dict[str, Tuple[str, ...]], verb: str) -> List[str]:
    """``{verb} N findings:`` then, per file, how many fixes of each rule (``2 × TL201 (log-of-softmax)``)."""
    total = sum(len(codes) for codes in fixes.values())
    names = registry.catalog()
    lines = [f"{verb} {total} {'finding' if total == 1 else 'findings'}:"]
    for path in sorted(fixes):
        lines.append(f"- {path}:")
        for code, count in sorted(Counter(fixes[path]).items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"    {count} × {code} ({names[code][0]})")
    return lines


def _joined(lines: List[str]) -> str:
    return "\n".join(lines) + ("\n" if lines else "")


def _plural(count: int) -> str:
    return "error" if count == 1 else "errors"
