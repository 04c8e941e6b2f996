from __future__ import annotations

import json
from typing import Any, Dict, List

from torchlint.report import RunSummary
from torchlint.rule import Finding


def finding_to_dict(f: Finding) -> Dict[str, Any]:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.applicability.value,
            "message": f.fix.message,
            "edits": [
                {"line": line, "column": column, "end_line": end_line, "end_column": end_column, "content": edit.content}
                for edit, (line, column, end_line, end_column) in zip(f.fix.edits, f.fix_edit_locations)
            ],
        }
    loc = f.location
    return {
        "code": f.code,
        "name": f.name,
        "path": f.path,
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
