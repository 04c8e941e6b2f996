"""SARIF 2.1.0, with rule metadata (help text and a help URI) for code-scanning UIs."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

from torchlint import registry
from torchlint.version import __version__
from torchlint.docs import README_URL, help_uri, page
from torchlint.report.base import RunSummary, position
from torchlint.rule import Confidence

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
CONFIDENCE_RANK = {Confidence.HIGH: 90.0, Confidence.MEDIUM: 60.0, Confidence.LOW: 30.0}


def _uri(path: str) -> str:
    if os.path.isabs(path):
        return Path(path).as_uri()
    return Path(path).as_posix()


def render(run: RunSummary) -> str:
    rules = list(registry.all_rules().values())
    index = {rule.code: i for i, rule in enumerate(rules)}
    descriptors: List[Dict[str, Any]] = []
    for rule in rules:
        descriptors.append(
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.message},
                "fullDescription": {"text": rule.documentation().split("## Why is this bad?")[0].replace("## What it does", "").strip()},
                "help": {"text": page(rule), "markdown": page(rule)},
                "helpUri": help_uri(rule),
                "defaultConfiguration": {"level": "error"},
                "properties": {
                    "fix": rule.fix_applicability.value if rule.fix_applicability else None,
                    "tags": ["pytorch"],
                },
            }
        )
    results = []
    for f in run.findings:
        loc = f.location
        region: Dict[str, Any] = {"startLine": loc.line, "startColumn": loc.column, "endLine": loc.end_line, "endColumn": loc.end_column}
        properties: Dict[str, Any] = {"confidence": f.confidence.value}
        message = f.message
        if f.cell is not None:
            # A notebook: the region is the file's line that holds the code, the cell goes in the message.
            region = {"startLine": f.cell.file_line}
            properties.update(cell=f.cell.index, cellLine=loc.line, cellColumn=loc.column)
            message = f"{position(loc.line, loc.column, f.cell)}: {f.message}"
        result: Dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": "error",
            # SARIF's rank (0-100) orders results by how sure the tool is; the level name rides along.
            "rank": CONFIDENCE_RANK[f.confidence],
            "properties": properties,
            "message": {"text": message},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.path)}, "region": region}}],
        }
        # A fix in a notebook edits a cell's source, not the file's bytes: SARIF cannot say it.
        if f.fix is not None and f.cell is None:
            result["fixes"] = [
                {
                    "description": {"text": f.fix.message},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(f.path)},
                            "replacements": [
                                {
                                    "deletedRegion": {
                                        "startLine": line,
                                        "startColumn": column,
                                        "endLine": end_line,
                                        "endColumn": end_column,
                                    },
                                    "insertedContent": {"text": edit.content},
                                }
                                for edit, (line, column, end_line, end_column) in zip(f.fix.edits, f.fix_edit_locations)
                            ],
                        }
                    ],
                }
            ]
        results.append(result)
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchlint",
                        "version": __version__,
                        "informationUri": README_URL,
                        "rules": descriptors,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
