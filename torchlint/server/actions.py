"""Code actions: a quick fix per finding that has one, a ``# noqa`` per finding, and fix-all for the document.

The edits of a quick fix are its finding's own (the edits ``--fix`` applies for it),
offered only when the fixed text parses; fix-all is ``--fix`` on the whole document
(safe and numerics fixes).  Both cost a parse or more of the file, so the server
lists them without edits and computes an edit when the client resolves the action
(or at once for a client that cannot resolve).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from lsprotocol import types

from torchlint.rule import Applicability, Finding
from torchlint.server.diagnostics import finding_diagnostic, finding_offsets
from torchlint.server.documents import DocumentEdits, DocumentView
from torchlint.server.linting import Outcome

FIX_ALL = "source.fixAll.torchlint"


def wanted(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether a request limited to the kinds ``only`` (None: any) asks for actions of ``kind`` (kinds are hierarchical)."""
    return only is None or any(kind == asked or kind.startswith(asked + ".") for asked in only)


def findings_between(outcome: Outcome, start: int, end: int) -> List[int]:
    """Indexes into ``outcome.findings`` of the findings that touch offsets ``start``..``end``."""
    touching = []
    for number, finding in enumerate(outcome.findings):
        first, last = finding_offsets(outcome.view, finding)
        if first <= end and start <= last:
            touching.append(number)
    return touching


def findings_of(outcome: Outcome, diagnostics: Sequence[types.Diagnostic]) -> List[int]:
    """Indexes into ``outcome.findings`` of the findings that ``diagnostics`` (sent back by the client) show.

    A client asks for the actions of the diagnostics on the cursor's line (Neovim) or under
    the cursor (VS Code); the range of the request alone does not say which."""
    shown = {(d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character) for d in diagnostics}
    found = []
    for number, finding in enumerate(outcome.findings):
        placed = finding_diagnostic(outcome.view, finding)
        if placed is not None:
            rng = placed[1].range
            if (finding.code, rng.start.line, rng.start.character, rng.end.line, rng.end.character) in shown:
                found.append(number)
    return found


def fix_title(finding: Finding) -> str:
    title = f"torchlint {finding.code}: {finding.fix.message}"
    return title + " (unsafe fix)" if finding.fix.applicability is Applicability.UNSAFE else title


def quick_fix(outcome: Outcome, number: int) -> Optional[types.CodeAction]:
    """The quick fix of finding ``number``, without its edit (``data`` says which it is)."""
    finding = outcome.findings[number]
    placed = finding_diagnostic(outcome.view, finding)
    if finding.fix is None or placed is None:
        return None
    return types.CodeAction(
        title=fix_title(finding),
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[placed[1]],
        is_preferred=finding.fix.applicability is not Applicability.UNSAFE,
        data={"uri": outcome.view.uri, "result": outcome.result_id, "finding": number},
    )


def noqa_action(outcome: Outcome, number: int, versioned: bool) -> Optional[types.CodeAction]:
    finding = outcome.findings[number]
    view = outcome.view
    placed = finding_diagnostic(view, finding)
    edit = view.noqa_edit(finding)
    edits = view.text_edits([edit]) if edit is not None else None
    if placed is None or edits is None:
        return None
    return types.CodeAction(
        title=f"torchlint {finding.code}: disable for this line (# noqa)",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[placed[1]],
        edit=workspace_edit(view, edits, versioned),
    )


def fix_all_action(outcome: Outcome) -> Optional[types.CodeAction]:
    """Fix-all, without its edit; None when no finding has a fix that ``--fix`` applies."""
    if not any(f.fix is not None and f.fix.applicability is not Applicability.UNSAFE for f in outcome.findings):
        return None
    return types.CodeAction(
        title="torchlint: fix all safe and numerics fixes",
        kind=FIX_ALL,
        data={"uri": outcome.view.uri, "result": outcome.result_id, "fixAll": True},
    )


def quick_fix_edits(outcome: Outcome, number: int) -> Optional[DocumentEdits]:
    """The edits of finding ``number``'s fix; None when the fixed text would not parse."""
    edits = outcome.view.fix_edits(outcome.findings[number])
    return outcome.view.text_edits(edits) if edits is not None else None


def workspace_edit(view: DocumentView, edits: DocumentEdits, versioned: bool) -> types.WorkspaceEdit:
    """``edits`` as a workspace edit; ``versioned``: tied to the document version they were computed on,
    so that a client whose document has changed since refuses them rather than misplaces them."""
    if not versioned or any(view.version_of(uri) is None for uri in edits):
        return types.WorkspaceEdit(changes=dict(edits))
    changes: List[types.TextDocumentEdit] = [
        types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(uri, view.version_of(uri)), list(uri_edits))
        for uri, uri_edits in edits.items()
    ]
    return types.WorkspaceEdit(document_changes=changes)


def resolve_target(data: object) -> Optional[Dict[str, object]]:
    """The payload of an action this server listed, else None."""
    if isinstance(data, dict) and isinstance(data.get("uri"), str) and isinstance(data.get("result"), str):
        return data
    return None
