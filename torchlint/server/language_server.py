"""The language server: documents in, diagnostics, code actions and hovers out (pygls over stdio).

Linting runs on one thread of its own, one document at a time, so the protocol
keeps answering while a large file is checked.  Every change bumps a document's
revision: a lint still running for an older revision is dropped when it ends, and
only the newest text of a document waits to be linted (a burst of keystrokes costs
one lint after it, ``debounce`` seconds after the last).

Diagnostics are pushed (``textDocument/publishDiagnostics``) unless the client
pulls them (``textDocument/diagnostic``, LSP 3.17): a client that can pull gets
no pushed copies.

A notebook (LSP 3.17 ``notebookDocument/*``) is linted as one unit, the module its
cells make; its diagnostics, code actions and hovers go to each cell's document.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from torchlint import collection, registry
from torchlint.version import __version__
from torchlint.docs import summary
from torchlint.files import PYTHON_SUFFIXES
from torchlint.noqa import code_at
from torchlint.notebook import NOTEBOOK_SUFFIX
from torchlint.report import position
from torchlint.server import actions, linting
from torchlint.server.diagnostics import outcome_diagnostics
from torchlint.server.documents import (
    CellDocument,
    DocumentView,
    NotebookView,
    TextView,
    cell_document,
    changed_cells,
    changed_text,
)
from torchlint.server.positions import UTF16
from torchlint.server.projects import Projects

# Seconds between the last change of a document and its lint.
DEBOUNCE_SECONDS = 0.05
CONFIG_FILE = "pyproject.toml"
# The notebooks whose Python cells the client sends (VS Code's name for Jupyter's); markdown cells are not needed.
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithNotebook(notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")])
    ]
)


@dataclass(eq=False)
class Opened:
    """What the client has open and the server lints as one unit: a text document or a notebook."""

    uri: str
    path: str
    version: Optional[int]
    # Bumped by every change of the text or of what its lint read; a lint of an older revision is dropped.
    revision: int = 0
    outcome: Optional[linting.Outcome] = None
    task: Optional["asyncio.Task[Optional[linting.Outcome]]"] = None
    closed: bool = False

    def view(self, encoding: str) -> DocumentView:
        raise NotImplementedError


@dataclass(eq=False)
class OpenDocument(Opened):
    text: str = ""

    def view(self, encoding: str) -> DocumentView:
        return TextView(self.uri, self.path, self.text, self.version, encoding)


@dataclass(eq=False)
class OpenNotebook(Opened):
    cells: List[CellDocument] = field(default_factory=list)

    def view(self, encoding: str) -> DocumentView:
        return NotebookView(self.uri, self.path, self.cells, self.version, encoding)


class TorchlintServer(LanguageServer):
    def __init__(self, debounce: float = DEBOUNCE_SECONDS) -> None:
        # Full sync: the client sends the whole text, so the server's copy follows LSP's line rules exactly.
        super().__init__(
            "torchlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full, notebook_document_sync=NOTEBOOK_SYNC
        )
        self.debounce = debounce
        self.documents: Dict[str, OpenDocument] = {}
        self.notebooks: Dict[str, OpenNotebook] = {}
        self.cells: Dict[str, OpenNotebook] = {}  # a cell's document URI -> its notebook
        self.projects = Projects()
        self.linter = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-lint")
        self.encoding = UTF16
        self.pull_diagnostics = False
        self.diagnostic_refresh = False
        self.resolves_edits = False
        self.versioned_edits = False
        self.watches_files = False
        self._reported_config_errors: set = set()
        self._register()

    def _register(self) -> None:
        # pygls marks the functions it registers; a bound method cannot be marked, a partial of it can.
        self.feature(types.INITIALIZE)(_handler(self.initialize))
        self.feature(types.INITIALIZED)(_handler(self.initialized))
        self.feature(types.SHUTDOWN)(_handler(self.shutdown_request))
        self.feature(types.TEXT_DOCUMENT_DID_OPEN)(_handler(self.did_open))
        self.feature(types.TEXT_DOCUMENT_DID_CHANGE)(_handler(self.did_change))
        self.feature(types.TEXT_DOCUMENT_DID_CLOSE)(_handler(self.did_close))
        self.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(_handler(self.did_save))
        self.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(_handler(self.did_change_watched_files))
        self.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)(_handler(self.did_open_notebook))
        self.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)(_handler(self.did_change_notebook))
        self.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)(_handler(self.did_close_notebook))
        self.feature(
            types.TEXT_DOCUMENT_DIAGNOSTIC,
            types.DiagnosticOptions(identifier="torchlint", inter_file_dependencies=True, workspace_diagnostics=False),
        )(_handler(self.pull))
        self.feature(
            types.TEXT_DOCUMENT_CODE_ACTION,
            types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL], resolve_provider=True),
        )(_handler(self.code_action))
        self.feature(types.CODE_ACTION_RESOLVE)(_handler(self.resolve_code_action))
        self.feature(types.TEXT_DOCUMENT_HOVER)(_handler(self.hover))

    # -- session ---------------------------------------------------------------------

    def initialize(self, params: types.InitializeParams) -> None:
        capabilities = params.capabilities
        encoding = self.workspace.position_encoding
        self.encoding = getattr(encoding, "value", encoding) or UTF16
        self.pull_diagnostics = get_capability(capabilities, "text_document.diagnostic") is not None
        self.diagnostic_refresh = bool(get_capability(capabilities, "workspace.diagnostics.refresh_support", False))
        properties = get_capability(capabilities, "text_document.code_action.resolve_support.properties", []) or []
        self.resolves_edits = "edit" in properties
        self.versioned_edits = bool(get_capability(capabilities, "workspace.workspace_edit.document_changes", False))
        self.watches_files = bool(get_capability(capabilities, "workspace.did_change_watched_files.dynamic_registration", False))

    def initialized(self, params: types.InitializedParams) -> None:
        if self.watches_files:
            watchers = [types.FileSystemWatcher(glob_pattern=f"**/{CONFIG_FILE}")]
            watchers += [types.FileSystemWatcher(glob_pattern=f"**/*{suffix}") for suffix in PYTHON_SUFFIXES]
            options = types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers)
            registration = types.Registration(id="torchlint-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)
            self.client_register_capability(types.RegistrationParams(registrations=[registration]))
        # Import the rules now rather than on the first document.
        self.linter.submit(registry.all_rules)

    def shutdown_request(self, params: None) -> None:
        for document in self.opened():
            if document.task is not None:
                document.task.cancel()
        self.linter.shutdown(wait=False, cancel_futures=True)

    def folders(self) -> List[str]:
        """The workspace's folders as paths: the project root of files that no configuration governs."""
        uris = list(self.workspace.folders) + ([self.workspace.root_uri] if self.workspace.root_uri else [])
        return [path for path in (to_fs_path(uri) for uri in uris) if path]

    def path_of(self, uri: str, suffixes: Tuple[str, ...] = PYTHON_SUFFIXES) -> str:
        path = to_fs_path(uri)
        if path is not None:
            return path
        # An unsaved document (``untitled:Untitled-1``): linted as a file of the first workspace folder.
        name = uri.rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "untitled"
        folders = self.folders()
        return os.path.join(folders[0] if folders else os.getcwd(), name if name.endswith(suffixes) else name + suffixes[0])

    def opened(self) -> List[Opened]:
        """The open text documents and notebooks."""
        return [*self.documents.values(), *self.notebooks.values()]

    def opened_as(self, uri: str) -> Optional[Opened]:
        """What is linted for the document ``uri``: itself, or the notebook of a cell; or the notebook ``uri``."""
        return self.documents.get(uri) or self.cells.get(uri) or self.notebooks.get(uri)

    # -- documents ------------------------------------------------------------------------

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        path = self.path_of(item.uri)
        if item.language_id != "python" and not path.endswith(PYTHON_SUFFIXES):
            return
        self._close(self.documents.pop(item.uri, None))  # opened again: the earlier copy's lint must not report
        document = self.documents[item.uri] = OpenDocument(item.uri, path, item.version, text=item.text)
        self._changed(document, delay=0)

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        document = self.documents.get(params.text_document.uri)
        if document is None:
            return
        # Partial changes are not asked for (the server syncs full texts), but applied with LSP's own line rules if sent.
        document.text = changed_text(document.text, params.content_changes, self.encoding)
        document.version = params.text_document.version
        self._changed(document, delay=self.debounce)

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        if self._close(self.documents.pop(params.text_document.uri, None)):
            self._clear([params.text_document.uri])

    def did_open_notebook(self, params: types.DidOpenNotebookDocumentParams) -> None:
        item = params.notebook_document
        self._close_notebook(item.uri)  # opened again: the earlier copy's lint must not report
        texts = {document.uri: document for document in params.cell_text_documents}
        cells = [cell_document(cell, texts.get(cell.document)) for cell in item.cells]
        notebook = self.notebooks[item.uri] = OpenNotebook(item.uri, self.path_of(item.uri, (NOTEBOOK_SUFFIX,)), item.version, cells=cells)
        self.cells.update((cell.uri, notebook) for cell in cells)
        self._changed(notebook, delay=0)

    def did_change_notebook(self, params: types.DidChangeNotebookDocumentParams) -> None:
        notebook = self.notebooks.get(params.notebook_document.uri)
        if notebook is None:
            return
        notebook.version = params.notebook_document.version
        if params.change.cells is None:
            return  # the notebook's metadata alone: the lint reads the cells' kinds and languages, not it
        before = {cell.uri for cell in notebook.cells}
        notebook.cells = changed_cells(notebook.cells, params.change.cells, self.encoding)
        removed = before - {cell.uri for cell in notebook.cells}
        for uri in removed:
            del self.cells[uri]
        self.cells.update((cell.uri, notebook) for cell in notebook.cells)
        self._clear(sorted(removed))
        self._changed(notebook, delay=self.debounce)

    def did_close_notebook(self, params: types.DidCloseNotebookDocumentParams) -> None:
        notebook = self._close_notebook(params.notebook_document.uri)
        if notebook is not None:
            self._clear([cell.uri for cell in notebook.cells])

    def _close_notebook(self, uri: str) -> Optional[OpenNotebook]:
        notebook = self.notebooks.pop(uri, None)
        if notebook is not None:
            self._close(notebook)
            for cell in notebook.cells:
                self.cells.pop(cell.uri, None)
        return notebook

    def _close(self, document: Optional[Opened]) -> bool:
        if document is None:
            return False
        document.closed = True
        if document.task is not None:
            document.task.cancel()
        return True

    def _clear(self, uris: Iterable[str]) -> None:
        """Clear the diagnostics of documents that are no longer linted (a pulling client drops them itself)."""
        if not self.pull_diagnostics:
            for uri in uris:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def did_save(self, params: types.DidSaveTextDocumentParams) -> None:
        self._files_changed([self.path_of(params.text_document.uri)])

    def did_change_watched_files(self, params: types.DidChangeWatchedFilesParams) -> None:
        self._files_changed([self.path_of(change.uri) for change in params.changes])

    # -- linting ---------------------------------------------------------------------------

    def _changed(self, document: Opened, delay: float) -> None:
        """The document's text or what its lint read changed: drop its outcome, lint it again."""
        document.revision += 1
        document.outcome = None
        if document.task is not None and not document.task.done():
            document.task.cancel()
        document.task = None
        if not self.pull_diagnostics:  # a pulling client asks for the lint itself
            self._schedule(document, delay)

    def _schedule(self, document: Opened, delay: float) -> None:
        document.task = asyncio.ensure_future(self._lint(document, document.revision, delay))

    async def _lint(self, document: Opened, revision: int, delay: float) -> Optional[linting.Outcome]:
        if delay:
            await asyncio.sleep(delay)
        view = document.view(self.encoding)
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(self.linter, linting.lint, view, self.projects, self.folders())
        if document.revision != revision or document.closed:
            return None
        document.outcome = outcome
        self._report(outcome)
        if not self.pull_diagnostics:
            for uri, diagnostics in outcome_diagnostics(outcome).items():
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=view.version_of(uri))
                )
        return outcome

    async def _current(self, document: Optional[Opened]) -> Optional[linting.Outcome]:
        """The outcome of the document's current text, waiting for (or starting) its lint; None once it is closed."""
        while document is not None and not document.closed:
            if document.outcome is not None:
                return document.outcome
            if document.task is None or document.task.done():
                self._schedule(document, 0)
            task = document.task
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # this request was cancelled, not the lint
        return None

    def _report(self, outcome: linting.Outcome) -> None:
        """Log what went wrong in a lint: a rule's crash, an engine error, a broken configuration."""
        for problem in outcome.internal_errors:
            self.window_log_message(
                types.LogMessageParams(
                    type=types.MessageType.Error,
                    message=f"torchlint: {problem.path}:{position(problem.line, problem.column, problem.cell)}: {problem.message}",
                )
            )
        error = outcome.settings.error
        if error is not None and error not in self._reported_config_errors:
            self._reported_config_errors.add(error)
            message = f"torchlint: {error}; the default settings are used until it is fixed"
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=message))
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    def _files_changed(self, paths: Iterable[str]) -> None:
        asyncio.ensure_future(self._refresh(list(paths)))

    async def _refresh(self, paths: List[str]) -> None:
        """Lint again the open documents whose lint read a file that changed (a project module, a configuration)."""
        python = [p for p in paths if p.endswith(PYTHON_SUFFIXES)]
        configuration = any(os.path.basename(p) == CONFIG_FILE for p in paths)
        if not python and not configuration:
            return
        loop = asyncio.get_running_loop()
        modules = await loop.run_in_executor(self.linter, lambda: {self.projects.file_changed(p) for p in python})
        folders = self.folders()
        stale = []
        for document in self.opened():
            outcome = document.outcome
            if outcome is None:
                continue  # its lint is still to come and reads the files as they are now
            if outcome.looked_up & modules:
                stale.append(document)
            elif configuration:
                settings = await loop.run_in_executor(self.linter, self.projects.settings_for, document.path, folders)
                if settings != outcome.settings:
                    stale.append(document)
        for document in stale:
            if document.outcome is not None:
                self._changed(document, delay=0)
        if stale and self.pull_diagnostics and self.diagnostic_refresh:
            self.workspace_diagnostic_refresh(None)

    # -- requests ----------------------------------------------------------------------------

    async def pull(self, params: types.DocumentDiagnosticParams) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        outcome = await self._current(self.opened_as(uri))
        if outcome is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[])
        if params.previous_result_id == outcome.result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=outcome.result_id)
        items = outcome_diagnostics(outcome).get(uri, [])
        return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=outcome.result_id)

    async def code_action(self, params: types.CodeActionParams) -> Optional[List[types.CodeAction]]:
        uri = params.text_document.uri
        outcome = await self._current(self.opened_as(uri))
        if outcome is None:
            return None
        view = outcome.view
        start, end = view.offset(uri, params.range.start), view.offset(uri, params.range.end)
        if start is None or end is None:
            return None
        only = params.context.only
        found: List[types.CodeAction] = []
        if actions.wanted(only, types.CodeActionKind.QuickFix):
            suppressed = set()
            touching = actions.findings_between(outcome, start, end) + actions.findings_of(outcome, params.context.diagnostics)
            for number in sorted(set(touching)):
                finding = outcome.findings[number]
                fix = actions.quick_fix(outcome, number)
                if fix is not None:
                    found.append(fix)
                if (finding.code, finding.location.line) not in suppressed:
                    suppressed.add((finding.code, finding.location.line))
                    noqa = actions.noqa_action(outcome, number, self.versioned_edits)
                    if noqa is not None:
                        found.append(noqa)
        if actions.wanted(only, actions.FIX_ALL):
            fix_all = actions.fix_all_action(outcome)
            if fix_all is not None:
                found.append(fix_all)
        if not self.resolves_edits:
            # A client that cannot resolve gets the edits now; an action whose edit cannot be made is not offered.
            loop = asyncio.get_running_loop()
            pending = [action for action in found if action.edit is None]
            edits = await loop.run_in_executor(self.linter, lambda: [self._edit(outcome, a.data) for a in pending])
            for action, edit in zip(pending, edits):
                action.edit = edit
            found = [action for action in found if action.edit is not None]
        return found or None

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        target = actions.resolve_target(action.data)
        if target is None or action.edit is not None:
            return action
        outcome = await self._current(self.opened_as(str(target["uri"])))
        if outcome is None or outcome.result_id != target["result"]:
            message = f"torchlint: '{action.title}' was offered for an earlier text of the document; ask for the actions again"
            self.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message))
            return action
        action.edit = await asyncio.get_running_loop().run_in_executor(self.linter, self._edit, outcome, target)
        return action

    def _edit(self, outcome: linting.Outcome, target: Dict[str, object]) -> Optional[types.WorkspaceEdit]:
        """The edit of a listed action (on the lint thread); None when there is none to make."""
        view = outcome.view
        if target.get("fixAll"):
            edits = linting.fix_all(outcome, self.projects)
        else:
            number = target.get("finding")
            if not isinstance(number, int) or not 0 <= number < len(outcome.findings):
                return None
            edits = actions.quick_fix_edits(outcome, number)
            if edits is None:
                code = outcome.findings[number].code
                self.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Error,
                        message=f"torchlint: {view.path}: the fix for {code} produced code that does not parse; it is not offered",
                    )
                )
        return actions.workspace_edit(view, edits, self.versioned_edits) if edits is not None else None

    async def hover(self, params: types.HoverParams) -> Optional[types.Hover]:
        uri = params.text_document.uri
        document = self.opened_as(uri)
        if document is None:
            return None
        view = document.view(self.encoding)
        offset = view.offset(uri, params.position)
        if offset is None:
            return None
        rules = registry.all_rules()
        start, end = view.line_span(offset)
        code = code_at(view.text[start:end], offset - start)
        if code in rules:
            codes = [code]
        else:
            revision = document.revision
            outcome = await self._current(document)
            if outcome is None or document.revision != revision:  # the text changed: the offset is not the outcome's
                return None
            codes = list(dict.fromkeys(outcome.findings[n].code for n in actions.findings_between(outcome, offset, offset)))
        if not codes:
            return None
        text = "\n\n---\n\n".join(summary(rules[code]) for code in codes)
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))


def _handler(method: Callable) -> Callable:
    return functools.partial(method)


def serve() -> int:
    """Run the server on standard input and output until the client says exit."""
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print anywhere must not corrupt the protocol stream
    collection.collect_less()
    TorchlintServer().start_io(sys.stdin.buffer, protocol_out)
    return 0
