"""One lint of one document view: the engine run with the document's settings and project index.

Runs on the server's lint thread.  Whatever goes wrong is carried back in the
outcome (a rule's crash as the engine reports it, any other exception as an
internal problem) for the server to log; nothing here raises.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import FrozenSet, List, Optional, Sequence

from torchlint.analysis.model import project_index
from torchlint.rule import Diagnostic, Finding
from torchlint.server.documents import DocumentEdits, DocumentView
from torchlint.server.projects import DocumentSettings, Projects

_result_ids = itertools.count(1)


@dataclass
class Outcome:
    view: DocumentView
    settings: DocumentSettings
    findings: List[Finding] = field(default_factory=list)
    # Problems of the run: a syntax error (shown as a diagnostic), internal errors (logged).
    problems: List[Diagnostic] = field(default_factory=list)
    # Modules of the project that the rules looked up (TL403): a change to one of them invalidates this outcome.
    looked_up: FrozenSet[str] = frozenset()
    excluded: bool = False
    result_id: str = field(default_factory=lambda: str(next(_result_ids)))

    @property
    def syntax_errors(self) -> List[Diagnostic]:
        return [p for p in self.problems if p.kind == "parse"]

    @property
    def internal_errors(self) -> List[Diagnostic]:
        return [p for p in self.problems if p.kind != "parse"]


def lint(view: DocumentView, projects: Projects, folders: Sequence[str] = ()) -> Outcome:
    settings = projects.settings_for(view.path, folders)
    outcome = Outcome(view, settings)
    if settings.settings.is_excluded(view.path):
        # As ruff's server does: a file the configuration excludes gets no diagnostics.
        outcome.excluded = True
        return outcome
    index = projects.index_for(settings.settings)
    index.looked_up = set()
    try:
        with project_index.activated(index):
            result = view.lint(settings.settings)
        outcome.findings, outcome.problems = result.findings, result.diagnostics
    except Exception as exc:  # an engine bug on this text must not stop the server
        outcome.problems = [Diagnostic(view.path, f"internal error: {type(exc).__name__}: {exc}", kind="internal")]
    finally:
        outcome.looked_up = frozenset(index.looked_up or ())
        index.looked_up = None
    return outcome


def fix_all(outcome: Outcome, projects: Projects) -> Optional[DocumentEdits]:
    """The edits of the safe and numerics fixes, as ``--fix`` applies them; None when nothing changes."""
    settings = outcome.settings.settings
    with project_index.activated(projects.index_for(settings)):
        return outcome.view.fix_all(settings)
