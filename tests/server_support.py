"""Driving ``torchlint server`` over stdio from the tests, and the server with test doubles.

Run as a script, this module is the server with doubles installed first:
``--levels`` adds the confidence tests' rule (TL995 reports ``low(x)``, ``medium(x)``,
``high(x)`` at those levels) and ``--crash CODE`` makes a rule raise on every node it visits.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

TESTS = Path(__file__).resolve().parent
SERVER = [sys.executable, "-m", "torchlint", "server"]


def server_with(*options: str) -> List[str]:
    """The command of a server started with test doubles (see the module's docstring)."""
    return [sys.executable, str(TESTS / "server_support.py"), *options]


async def until(condition: Callable[[], object], timeout: float = 60.0, what: str = "the condition") -> object:
    """Wait for ``condition()`` to be true (a server answers in its own time), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def session(root: Path, capabilities=None, command: Sequence[str] = SERVER, encodings: Optional[List[str]] = None):
    """An initialized pytest-lsp client talking to a server started with ``command`` in ``root``."""
    from lsprotocol import types
    from pytest_lsp import ClientServerConfig, client_capabilities

    capabilities = capabilities or client_capabilities("neovim@v0.7.0")
    if encodings is not None:
        capabilities.general = types.GeneralClientCapabilities(position_encodings=encodings)
    client = await ClientServerConfig(server_command=list(command)).start()
    folder = types.WorkspaceFolder(uri=root.as_uri(), name=root.name)
    result = await client.initialize_session(
        types.InitializeParams(capabilities=capabilities, root_uri=root.as_uri(), workspace_folders=[folder])
    )
    try:
        yield client, result
    finally:
        await client.shutdown_session()
        await client.stop()


def open_document(client, path: Path, text: Optional[str] = None, version: int = 1) -> str:
    from lsprotocol import types

    uri = path.as_uri()
    text = path.read_text(encoding="utf-8") if text is None else text
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", version, text)))
    return uri


def change_document(client, uri: str, text: str, version: int) -> None:
    from lsprotocol import types

    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def with_notebooks(capabilities):
    """``capabilities`` with LSP 3.17 notebook document sync, as VS Code's for Jupyter notebooks."""
    from lsprotocol import types

    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(types.NotebookDocumentSyncClientCapabilities())
    return capabilities


def cell_uri(path: Path, number: int) -> str:
    """The URI of a notebook cell's document, in VS Code's scheme (the fragment tells the cells apart)."""
    return f"vscode-notebook-cell:{path.as_posix()}#cell{number}"


def open_notebook(client, path: Path, sources: Sequence[str], version: int = 1) -> List[str]:
    """Open the Jupyter notebook ``path`` with one Python code cell per source; the cells' URIs."""
    from lsprotocol import types

    uris = [cell_uri(path, number) for number in range(len(sources))]
    cells = [types.NotebookCell(types.NotebookCellKind.Code, uri) for uri in uris]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            types.NotebookDocument(path.as_uri(), "jupyter-notebook", version, cells),
            [types.TextDocumentItem(uri, "python", version, source) for uri, source in zip(uris, sources)],
        )
    )
    return uris


def change_notebook(client, path: Path, version: int, cells) -> None:
    """Send ``cells`` (a ``NotebookDocumentCellChanges``) as the notebook's change to ``version``."""
    from lsprotocol import types

    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            types.VersionedNotebookDocumentIdentifier(version=version, uri=path.as_uri()),
            types.NotebookDocumentChangeEvent(cells=cells),
        )
    )


def change_cell(client, path: Path, uri: str, version: int, *changes) -> None:
    """Change the text of the cell ``uri`` (to ``version``, the notebook's too) by ``changes``."""
    from lsprotocol import types

    content = types.NotebookDocumentCellContentChanges(types.VersionedTextDocumentIdentifier(version=version, uri=uri), list(changes))
    change_notebook(client, path, version, types.NotebookDocumentCellChanges(text_content=[content]))


async def code_actions(client, uri: str, diagnostic, only=None):
    """The code actions the server offers for ``diagnostic`` of ``uri``, asked as an editor asks on its range."""
    from lsprotocol import types

    context = types.CodeActionContext(diagnostics=[diagnostic], only=only)
    return await client.text_document_code_action_async(types.CodeActionParams(types.TextDocumentIdentifier(uri), diagnostic.range, context))


async def diagnostics_of(client, uri: str, count: Optional[int] = None) -> list:
    """The diagnostics the server published for ``uri`` (at least one publication; ``count`` of them when given)."""
    await until(
        lambda: uri in client.diagnostics and (count is None or len(client.diagnostics[uri]) == count),
        what=f"diagnostics of {uri}",
    )
    return list(client.diagnostics[uri])


def apply_text_edits(text: str, edits) -> str:
    """Apply LSP text edits (UTF-16 positions, one range each, none overlapping) the way an editor does."""

    def offset(position) -> int:
        lines = text.splitlines(keepends=True) or [""]
        if position.line >= len(lines):
            return len(text)
        line = lines[position.line]
        units = line.encode("utf-16-le")[: 2 * position.character].decode("utf-16-le")
        return sum(len(previous) for previous in lines[: position.line]) + len(units)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def edits_for(workspace_edit, uri: str) -> list:
    """The text edits of ``uri`` in a workspace edit, whichever of its two shapes it has."""
    if workspace_edit.document_changes:
        return [e for change in workspace_edit.document_changes if change.text_document.uri == uri for e in change.edits]
    return list((workspace_edit.changes or {}).get(uri, []))


# -- the server with doubles ------------------------------------------------------------


def _install_levels() -> None:
    from torchlint import registry

    sys.path.insert(0, str(TESTS))
    from test_confidence import LevelNamed

    rules: Dict = dict(registry.all_rules())
    rules[LevelNamed.code] = LevelNamed
    registry.all_rules = lambda: dict(sorted(rules.items()))


def _install_crash(code: str) -> None:
    from torchlint import registry
    from torchlint.rule import handler_names

    rule = registry.all_rules()[code]

    def crash(self, node):
        raise RuntimeError(f"{code} test double crashed")

    for name in handler_names(rule):
        setattr(rule, name, crash)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", action="store_true")
    parser.add_argument("--crash", metavar="CODE")
    options = parser.parse_args()
    if options.levels:
        _install_levels()
    if options.crash:
        _install_crash(options.crash)
    from torchlint.server import main

    sys.exit(main())
