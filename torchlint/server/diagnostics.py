"""An outcome's findings as LSP diagnostics, per document."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from lsprotocol import types

from torchlint import registry
from torchlint.docs import help_uri
from torchlint.rule import Confidence, Diagnostic, Finding
from torchlint.server.documents import DocumentView
from torchlint.server.linting import Outcome

SOURCE = "torchlint"
# What the editor shows each level as (a finding a run confirmed is at high): only high findings are
# warnings; those below the default floor, shown when the configuration lowers it, are quieter.
SEVERITIES = {
    Confidence.HIGH: types.DiagnosticSeverity.Warning,
    Confidence.MEDIUM: types.DiagnosticSeverity.Information,
    Confidence.LOW: types.DiagnosticSeverity.Hint,
}


def finding_offsets(view: DocumentView, finding: Finding) -> Tuple[int, int]:
    location = finding.location
    return (
        view.location_offset(location.line, location.column, finding.cell),
        view.location_offset(location.end_line, location.end_column, finding.cell),
    )


def finding_diagnostic(view: DocumentView, finding: Finding) -> Optional[Tuple[str, types.Diagnostic]]:
    placed = view.range(*finding_offsets(view, finding))
    if placed is None:
        return None
    rule = registry.all_rules()[finding.code]
    return placed[0], types.Diagnostic(
        range=placed[1],
        severity=SEVERITIES[finding.confidence],
        code=finding.code,
        code_description=types.CodeDescription(href=help_uri(rule)),
        source=SOURCE,
        message=finding.message,
        data={
            "name": finding.name,
            "confidence": finding.confidence.value,
            "fix": finding.fix.applicability.value if finding.fix else None,
        },
    )


def syntax_error_diagnostic(view: DocumentView, problem: Diagnostic) -> Tuple[str, types.Diagnostic]:
    start = view.location_offset(problem.line, problem.column, problem.cell)
    # One character wide, so that editors show it; none at the end of a line.
    end = start + 1 if start < view.line_span(start)[1] else start
    uri, rng = view.range(start, end) or view.range(start, start)
    return uri, types.Diagnostic(range=rng, severity=types.DiagnosticSeverity.Error, source=SOURCE, message=problem.message)


def outcome_diagnostics(outcome: Outcome) -> Dict[str, List[types.Diagnostic]]:
    """Every document of the outcome's view with its diagnostics (an empty list clears a document's)."""
    view = outcome.view
    found: Dict[str, List[types.Diagnostic]] = {uri: [] for uri in view.uris()}
    for finding in outcome.findings:
        placed = finding_diagnostic(view, finding)
        if placed is not None:
            found.setdefault(placed[0], []).append(placed[1])
    for problem in outcome.syntax_errors:
        uri, diagnostic = syntax_error_diagnostic(view, problem)
        found.setdefault(uri, []).append(diagnostic)
    return found
