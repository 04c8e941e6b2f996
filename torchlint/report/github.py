"""GitHub Actions workflow commands: one ::error annotation per finding."""
from __future__ import annotations

from torchlint.report.base import RunSummary, position


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def render(run: RunSummary) -> str:
    lines = []
    for f in run.findings:
        loc = f.location
        props = [f"title={_escape_property(f'torchlint ({f.code})')}", f"file={_escape_property(f.path)}"]
        if f.cell is None:
            props += [f"line={loc.line}", f"col={loc.column}", f"endLine={loc.end_line}", f"endColumn={loc.end_column}"]
        else:
            # The annotation points at the notebook file's line that holds the code; the cell is in the message.
            props.append(f"line={f.cell.file_line}")
        text = f"{f.path}:{position(loc.line, loc.column, f.cell)}: {f.code} {f.message}"
        lines.append(f"::error {','.join(props)}::{_escape_data(text)}")
    return "\n".join(lines) + ("\n" if lines else "")
