from __future__ import annotations

import json
from typing import Any, Dict, List

from torchlint.report.base import RunSummary
from torchlint.rule import Finding


def finding_to_dict(f: Finding) -> Dict[str, Any]:
    fix = None
    if f.fix is not None:
        # In a notebook, lines and columns count within the cell that "cell" names (null elsewhere), as in ruff.
        cells = f.fix_edit_cells or (None,) * len(f.fix.edits)
        fix = {
            "applicability": f.fix.applicability.value,
            "message": f.fix.message,
            "edits": [
                {"cell": cell, "line": line, "column": column, "end_line": end_line, "end_column": end_column, "content": edit.content}
                for edit, (line, column, end_line, end_column), cell in zip(f.fix.edits, f.fix_edit_locations, cells)
            ],
        }
    loc = f.location
    return {
        "code": f.code,
        "name": f.name,
        "path": f.path,
        "cell": f.cell.index if f.cell else None,
        "line": loc.line,
        "column": loc.column,
        "end_line": loc.end_line,
        "end_column": loc.end_column,
        "message": f.message,
        "confidence": f.confidence.value,
        "fix": fix,
    }


def render(run: RunSummary) -> str:
    items: List[Dict[str, Any]] = [finding_to_dict(f) for f in run.findings]
    return json.dumps(items, indent=2) + "\n"
