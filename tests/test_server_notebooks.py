"""``torchlint server`` on notebook documents (LSP 3.17 ``notebookDocument/*``), end to end with pytest-lsp:
the cells are one module, and each cell's document gets its own diagnostics, quick fixes and hovers."""
from __future__ import annotations

import json
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

pytest.importorskip("pytest_lsp")  # Python 3.10+

from lsprotocol import types  # noqa: E402
from pytest_lsp import client_capabilities  # noqa: E402

from cli_support import TL201_LINE, check_json, torchlint  # noqa: E402
from server_support import (  # noqa: E402
    apply_text_edits,
    cell_uri,
    change_cell,
    change_notebook,
    code_actions,
    diagnostics_of,
    edits_for,
    open_notebook,
    server_with,
    session,
    until,
    with_notebooks,
)

# The import in cell 1 serves the TL201 finding in cell 3; magics around them; TL401 in cell 2, which the settings ignore.
CELLS = (
    "%matplotlib inline\nimport torch\nimport torch.nn.functional as F",
    "x = torch.randn(4, 10)\ns = torch.load(p)\n!nvidia-smi",
    "%%time\nz = 1\n" + TL201_LINE,
)
SETTINGS = 'ignore = ["TL401"]\n'
VS_CODE = "visual-studio-code"


def _project(tmp_path, sources=CELLS, table: str = SETTINGS):
    """A folder with a configuration and the notebook of these code cells written as Jupyter writes it."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{table}", encoding="utf-8")
    notebook = new_notebook(metadata={"language_info": {"name": "python"}})
    notebook.cells = [new_code_cell(source) for source in sources]
    path = tmp_path / "nb.ipynb"
    nbformat.write(notebook, str(path))
    return path


def _fixed_by_cli(path, exit_codes=(0, 1)) -> list:
    """The sources of the notebook's cells after ``torchlint check --fix`` (which rewrites the file)."""
    proc = torchlint("check", "--fix", path.name, cwd=path.parent)
    assert proc.returncode in exit_codes, proc.stdout + proc.stderr
    return ["".join(cell["source"]) for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def _span(diagnostic) -> tuple:
    rng = diagnostic.range
    return rng.start.line, rng.start.character, rng.end.line, rng.end.character


def _close(client, path, uris) -> None:
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            types.NotebookDocumentIdentifier(path.as_uri()), [types.TextDocumentIdentifier(uri) for uri in uris]
        )
    )


@pytest.mark.asyncio
async def test_the_cells_are_one_module_and_each_gets_its_findings_and_fixes(tmp_path):
    path = _project(tmp_path)
    _, (expected,), _ = check_json(path.name, cwd=tmp_path)
    fixed = _fixed_by_cli(path)
    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE))) as (client, result):
        (selector,) = result.capabilities.notebook_document_sync.notebook_selector
        assert selector.notebook == "jupyter-notebook" and [cell.language for cell in selector.cells] == ["python"]
        uris = open_notebook(client, path, CELLS)
        (diagnostic,) = await diagnostics_of(client, uris[2], count=1)
        # Published in one go, the other cells' (empty: magics are masked, TL401 is ignored by the settings) first.
        assert list(client.diagnostics[uris[0]]) == [] and list(client.diagnostics[uris[1]]) == []
        assert expected["cell"] == 3 and diagnostic.code == expected["code"] == "TL201"
        assert _span(diagnostic) == (expected["line"] - 1, expected["column"] - 1, expected["end_line"] - 1, expected["end_column"] - 1)
        assert _span(diagnostic)[0] == 2  # the cell's own line, below %%time

        actions = await code_actions(client, uris[2], diagnostic)
        (fix,) = [a for a in actions if a.title.startswith("torchlint TL201: Replace")]
        fix = await client.code_action_resolve_async(fix)
        assert [(change.text_document.uri, change.text_document.version) for change in fix.edit.document_changes] == [(uris[2], 1)]
        assert apply_text_edits(CELLS[2], edits_for(fix.edit, uris[2])) == fixed[2] != CELLS[2]

        # Fix-all asked on cell 1 fixes the notebook, as --fix does.
        anywhere = types.Range(types.Position(0, 0), types.Position(0, 0))
        context = types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll])
        (fix_all,) = await client.text_document_code_action_async(
            types.CodeActionParams(types.TextDocumentIdentifier(uris[0]), anywhere, context)
        )
        fix_all = await client.code_action_resolve_async(fix_all)
        assert [apply_text_edits(source, edits_for(fix_all.edit, uri)) for source, uri in zip(CELLS, uris)] == fixed

        hover = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uris[2]), diagnostic.range.start))
        assert "`log-of-softmax`" in hover.contents.value


@pytest.mark.asyncio
async def test_a_change_of_a_cell_relints_the_notebook_and_closing_it_clears_the_cells(tmp_path):
    path = _project(tmp_path)
    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE))) as (client, _):
        uris = open_notebook(client, path, CELLS)
        await diagnostics_of(client, uris[2], count=1)
        # Cell 1 loses `import torch` (an edit of a range): torch.log in cell 3 is no longer torch's.
        without_import = types.TextDocumentContentChangePartial(range=types.Range(types.Position(1, 0), types.Position(2, 0)), text="")
        change_cell(client, path, uris[0], 2, without_import)
        assert await diagnostics_of(client, uris[2], count=0) == []
        change_cell(client, path, uris[0], 3, types.TextDocumentContentChangeWholeDocument(text=CELLS[0]))
        assert [d.code for d in await diagnostics_of(client, uris[2], count=1)] == ["TL201"]
        change_cell(client, path, uris[2], 4, types.TextDocumentContentChangeWholeDocument(text="%%time\nz = 1\n"))
        assert await diagnostics_of(client, uris[2], count=0) == []
        change_cell(client, path, uris[2], 5, types.TextDocumentContentChangeWholeDocument(text=CELLS[2]))
        await diagnostics_of(client, uris[2], count=1)
        _close(client, path, uris)
        assert await diagnostics_of(client, uris[2], count=0) == []


@pytest.mark.asyncio
async def test_cells_added_moved_retyped_and_removed(tmp_path):
    path = _project(tmp_path)
    added = cell_uri(path, 9)
    code_cell = lambda uri: types.NotebookCell(types.NotebookCellKind.Code, uri)  # noqa: E731

    def structure(version, start, delete_count, cells, did_open=None, did_close=None):
        array = types.NotebookCellArrayChange(start=start, delete_count=delete_count, cells=cells)
        change = types.NotebookDocumentCellChangeStructure(array=array, did_open=did_open, did_close=did_close)
        change_notebook(client, path, version, types.NotebookDocumentCellChanges(structure=change))

    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE))) as (client, _):
        uris = open_notebook(client, path, CELLS)
        await diagnostics_of(client, uris[2], count=1)
        # A cell inserted after the imports, with a finding of its own.
        structure(2, 1, 0, [code_cell(added)], did_open=[types.TextDocumentItem(added, "python", 1, "w = torch.log(torch.softmax(x, -1))")])
        (new,) = await diagnostics_of(client, added, count=1)
        assert new.code == "TL201" and _span(new)[0] == 0
        # Moved last (the three cells after the first, reordered): its text goes with it.
        del client.diagnostics[added]
        structure(3, 1, 3, [code_cell(uris[1]), code_cell(uris[2]), code_cell(added)])
        assert _span((await diagnostics_of(client, added, count=1))[0]) == _span(new)
        # Made a markdown cell: not Python, no diagnostics.
        markdown = types.NotebookCell(types.NotebookCellKind.Markup, added)
        change_notebook(client, path, 4, types.NotebookDocumentCellChanges(data=[markdown]))
        assert await diagnostics_of(client, added, count=0) == []
        # Cell 3 removed: its diagnostics are cleared.
        structure(5, 2, 1, [], did_close=[types.TextDocumentIdentifier(uris[2])])
        assert await diagnostics_of(client, uris[2], count=0) == []


@pytest.mark.asyncio
async def test_a_cell_that_does_not_parse_is_reported_there_and_the_others_are_still_checked(tmp_path):
    sources = (CELLS[0], "def broken(:\n    pass", CELLS[2])
    path = _project(tmp_path, sources)
    proc = torchlint("check", path.name, cwd=tmp_path)
    line, column, message = re.search(r"nb\.ipynb:cell 2:(\d+):(\d+): (.*)", proc.stderr).groups()
    fixed = _fixed_by_cli(path, exit_codes=(2,))  # 2: a cell does not parse
    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE))) as (client, _):
        uris = open_notebook(client, path, sources)
        (finding,) = await diagnostics_of(client, uris[2], count=1)
        (error,) = await diagnostics_of(client, uris[1], count=1)
        assert error.severity == types.DiagnosticSeverity.Error and error.message == message
        assert (error.range.start.line, error.range.start.character) == (int(line) - 1, int(column) - 1)
        assert finding.code == "TL201" and list(client.diagnostics[uris[0]]) == []
        # The other cells' fixes are still offered.
        (fix,) = [a for a in await code_actions(client, uris[2], finding) if a.title.startswith("torchlint TL201: Replace")]
        fix = await client.code_action_resolve_async(fix)
        assert apply_text_edits(sources[2], edits_for(fix.edit, uris[2])) == fixed[2] != sources[2]


@pytest.mark.asyncio
async def test_the_noqa_action_in_a_cell_silences_its_finding(tmp_path):
    path = _project(tmp_path)
    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE))) as (client, _):
        uris = open_notebook(client, path, CELLS)
        (diagnostic,) = await diagnostics_of(client, uris[2], count=1)
        (noqa,) = [a for a in await code_actions(client, uris[2], diagnostic) if "noqa" in a.title]
        assert [change.text_document.uri for change in noqa.edit.document_changes] == [uris[2]]
        silenced = apply_text_edits(CELLS[2], edits_for(noqa.edit, uris[2]))
        assert silenced == CELLS[2] + "  # noqa: TL201"
        change_cell(client, path, uris[2], 2, types.TextDocumentContentChangeWholeDocument(text=silenced))
        assert await diagnostics_of(client, uris[2], count=0) == []


@pytest.mark.asyncio
async def test_a_pulling_client_pulls_each_cells_diagnostics(tmp_path):
    path = _project(tmp_path)
    async with session(tmp_path, with_notebooks(client_capabilities("neovim@v0.11.0"))) as (client, _):
        uris = open_notebook(client, path, CELLS)
        params = types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uris[2]))
        report = await client.text_document_diagnostic_async(params)
        assert report.kind == "full" and [d.code for d in report.items] == ["TL201"]
        assert _span(report.items[0])[0] == 2
        first = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uris[0])))
        assert first.kind == "full" and list(first.items) == []
        params.previous_result_id = report.result_id
        assert (await client.text_document_diagnostic_async(params)).kind == "unchanged"
        change_cell(client, path, uris[2], 2, types.TextDocumentContentChangeWholeDocument(text="z = 1\n"))
        cleared = await client.text_document_diagnostic_async(params)
        assert cleared.kind == "full" and list(cleared.items) == []
    assert not any(uri in client.diagnostics for uri in uris)


@pytest.mark.asyncio
async def test_a_crashing_rule_on_a_notebook_is_logged_and_the_server_goes_on(tmp_path):
    sources = (CELLS[0], "s = torch.load(p)", CELLS[2])
    path = _project(tmp_path, sources, table="")
    async with session(tmp_path, with_notebooks(client_capabilities(VS_CODE)), command=server_with("--crash", "TL201")) as (client, _):
        uris = open_notebook(client, path, sources)
        (load,) = await diagnostics_of(client, uris[1], count=1)
        # each cell's diagnostics are published on their own: wait for the third cell's (none) as well
        assert load.code == "TL401" and await diagnostics_of(client, uris[2], count=0) == []
        await until(lambda: any("TL201" in m.message for m in client.log_messages), what="the crash's log message")
        # one message per lint of the notebook: a slow machine may lint it twice before this line
        crashes = [m for m in client.log_messages if "TL201" in m.message]
        for logged in crashes:
            assert logged.type == types.MessageType.Error and str(path) in logged.message and "test double crashed" in logged.message
        change_cell(client, path, uris[1], 2, types.TextDocumentContentChangeWholeDocument(text="s = torch.load(p)\nt = torch.load(q)"))
        assert [d.code for d in await diagnostics_of(client, uris[1], count=2)] == ["TL401", "TL401"]
