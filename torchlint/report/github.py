"""GitHub Actions workflow commands: one ::error annotation per finding."""
from __future__ import annotations

from torchlint.report import RunSummary


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(run: RunSummary) -> str:
    lines = []
    for f in run.findings:
        loc = f.location
        props = ",".join(
            [
                f"title={_escape_property(f'torchlint ({f.code})')}",
                f"file={_escape_property(f.path)}",
                f"line={loc.line}",
                f"col={loc.column}",
                f"endLine={loc.end_line}",
                f"endColumn={loc.end_column}",
            ]
        )
        lines.append(f"::error {props}::{_escape_data(f'{f.path}:{loc.line}:{loc.column}: {f.code} {f.message}')}")
    return "\n".join(lines) + ("\n" if lines else "")
