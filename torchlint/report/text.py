from __future__ import annotations

from torchlint.report.base import RunSummary, position


def render(run: RunSummary) -> str:
    lines = []
    fixable = hidden = 0
    for f in run.findings:
        marker = ""
        if f.fix is not None:
            if f.fix.applicability.applied_by(run.unsafe_fixes):
                marker = " [*]"
                fixable += 1
            else:
                hidden += 1
        lines.append(f"{f.path}:{position(f.location.line, f.location.column, f.cell)}: {f.code}{marker} {f.message}")
    remaining = len(run.findings)
    if run.quiet:
        return "\n".join(lines) + ("\n" if lines else "")
    if run.fix_mode and run.fixed:
        lines.append(f"Found {remaining + run.fixed} {_plural(remaining + run.fixed)} ({run.fixed} fixed, {remaining} remaining).")
    elif remaining:
        lines.append(f"Found {remaining} {_plural(remaining)}.")
    elif not run.diagnostics:
        lines.append("All checks passed!")
    if fixable and not run.fix_mode:
        lines.append(f"[*] {fixable} fixable with `torchlint check --fix`.")
    if hidden:
        lines.append(f"({hidden} more fixable with the `--unsafe-fixes` option.)")
    return "\n".join(lines) + ("\n" if lines else "")


def _plural(count: int) -> str:
    return "error" if count == 1 else "errors"
