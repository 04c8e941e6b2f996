"""``torchlint server`` end to end: a real LSP client (pytest-lsp) drives the server over stdio."""
from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

pytest.importorskip("pytest_lsp")  # Python 3.10+; the server extra itself runs on 3.9

from lsprotocol import types  # noqa: E402
from pytest_lsp import client_capabilities  # noqa: E402

from cli_support import BAD, TL201_LINE, TL401_LINE, check_json, torchlint  # noqa: E402
from server_support import (  # noqa: E402
    SERVER,
    apply_text_edits,
    change_document,
    code_actions,
    diagnostics_of,
    edits_for,
    open_document,
    server_with,
    session,
    until,
)
from torchlint import confirmations, registry  # noqa: E402
from torchlint.docs import help_uri  # noqa: E402


# Findings with a safe fix (TL201, TL202), an unsafe one (TL401) and one of each on a line with a non-ASCII string.
FIXABLE = (
    "import torch\n"
    "import torch.nn.functional as F\n"
    "\n"
    "y = torch.log(F.softmax(x, dim=-1))\n"
    "z = torch.log(torch.sigmoid(x))\n"
    "s = torch.load(p)\n"
    'label = "😋 π"; w = torch.log(F.softmax(x, dim=1))\n'
)


def _project(tmp_path, text: str = FIXABLE, table: str = ""):
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{table}", encoding="utf-8")
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    return path


def _fixed_by_cli(path, text: str, *flags: str) -> str:
    proc = torchlint("check", "-", "--fix", "--stdin-filename", str(path), *flags, cwd=path.parent, stdin=text)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


@pytest.mark.asyncio
async def test_initialize_announces_what_the_server_does(tmp_path):
    async with session(tmp_path) as (client, result):
        capabilities = result.capabilities
        assert result.server_info.name == "torchlint"
        assert capabilities.text_document_sync.change == types.TextDocumentSyncKind.Full
        assert capabilities.text_document_sync.open_close and capabilities.text_document_sync.save
        assert set(capabilities.code_action_provider.code_action_kinds) == {"quickfix", "source.fixAll.torchlint"}
        assert capabilities.code_action_provider.resolve_provider
        assert capabilities.hover_provider
        assert capabilities.diagnostic_provider.identifier == "torchlint"
        assert capabilities.diagnostic_provider.inter_file_dependencies


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8", "utf-32"])
@pytest.mark.asyncio
async def test_diagnostics_on_open_stand_where_the_cli_puts_them(tmp_path, encoding):
    path = _project(tmp_path)
    _, expected, _ = check_json(str(path), "--no-cache", cwd=tmp_path)
    async with session(tmp_path, encodings=[encoding]) as (client, result):
        assert result.capabilities.position_encoding == encoding
        uri = open_document(client, path)
        diagnostics = await diagnostics_of(client, uri)
    units = {"utf-8": lambda s: len(s.encode()), "utf-16": lambda s: len(s.encode("utf-16-le")) // 2, "utf-32": len}[encoding]
    lines = FIXABLE.splitlines()

    def character(line: int, column: int) -> int:  # the CLI's 1-based column in code points, in the client's units
        return units(lines[line - 1][: column - 1])

    got = [
        (d.code, d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character)
        for d in sorted(diagnostics, key=lambda d: (d.range.start.line, d.range.start.character))
    ]
    want = [
        (f["code"], f["line"] - 1, character(f["line"], f["column"]), f["end_line"] - 1, character(f["end_line"], f["end_column"]))
        for f in expected
    ]
    assert got == want and len(want) == 4
    emoji_line = [d for d in diagnostics if d.range.start.line == 6][0]
    assert emoji_line.range.start.character == {"utf-8": 23, "utf-16": 20, "utf-32": 19}[encoding]
    first = diagnostics[0]
    rule = registry.all_rules()[first.code]
    assert first.source == "torchlint" and first.severity == types.DiagnosticSeverity.Warning
    assert first.code_description.href == help_uri(rule)
    assert first.message == rule.message
    assert first.data["name"] == rule.name and first.data["confidence"] == "high"


@pytest.mark.parametrize("client_name", ["neovim@v0.7.0", "visual-studio-code", "no-resolve"])
@pytest.mark.asyncio
async def test_a_quick_fix_makes_the_edit_that_fix_makes(tmp_path, client_name):
    text = "import torch\nimport torch.nn.functional as F\n\n" + TL201_LINE + "\n"
    path = _project(tmp_path, text)
    if client_name == "no-resolve":
        capabilities = client_capabilities("neovim@v0.7.0")
        capabilities.text_document.code_action.resolve_support = None
    else:
        capabilities = client_capabilities(client_name)
    async with session(tmp_path, capabilities) as (client, _):
        uri = open_document(client, path)
        (diagnostic,) = await diagnostics_of(client, uri)
        actions = await code_actions(client, uri, diagnostic)
        (fix,) = [a for a in actions if a.title.startswith("torchlint TL201: Replace")]
        assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred and fix.diagnostics[0].code == "TL201"
        if fix.edit is None:
            fix = await client.code_action_resolve_async(fix)
    fixed = apply_text_edits(text, edits_for(fix.edit, uri))
    assert fixed == _fixed_by_cli(path, text) != text
    if client_name == "visual-studio-code":  # it applies edits tied to the version they were made for
        assert fix.edit.document_changes[0].text_document.version == 1


@pytest.mark.asyncio
async def test_unsafe_fixes_are_offered_and_labelled(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        diagnostics = await diagnostics_of(client, uri, count=2)
        (load,) = [d for d in diagnostics if d.code == "TL401"]
        actions = await code_actions(client, uri, load, only=[types.CodeActionKind.QuickFix])
        (fix,) = [a for a in actions if "noqa" not in a.title]
        assert fix.title.endswith("(unsafe fix)") and not fix.is_preferred
        fix = await client.code_action_resolve_async(fix)
    fixed = apply_text_edits(BAD, edits_for(fix.edit, uri))
    assert fixed == _fixed_by_cli(path, BAD, "--select", "TL401", "--unsafe-fixes")


@pytest.mark.asyncio
async def test_fix_all_applies_the_safe_and_numerics_fixes_of_the_document(tmp_path):
    path = _project(tmp_path)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        diagnostics = await diagnostics_of(client, uri, count=4)
        actions = await code_actions(client, uri, diagnostics[0], only=[types.CodeActionKind.SourceFixAll])
        (fix_all,) = actions
        assert fix_all.kind == "source.fixAll.torchlint"
        fix_all = await client.code_action_resolve_async(fix_all)
    fixed = apply_text_edits(FIXABLE, edits_for(fix_all.edit, uri))
    assert fixed == _fixed_by_cli(path, FIXABLE)
    assert "torch.load(p)" in fixed and "log_softmax" in fixed  # the unsafe fix is left for the user


@pytest.mark.asyncio
async def test_the_noqa_action_silences_the_finding_and_nothing_else(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        diagnostics = await diagnostics_of(client, uri, count=2)
        (softmax,) = [d for d in diagnostics if d.code == "TL201"]
        (noqa,) = [a for a in await code_actions(client, uri, softmax) if "noqa" in a.title]
        silenced = apply_text_edits(BAD, edits_for(noqa.edit, uri))
        assert TL201_LINE + "  # noqa: TL201\n" in silenced
        change_document(client, uri, silenced, version=2)
        (left,) = await diagnostics_of(client, uri, count=1)
        assert left.code == "TL401"


@pytest.mark.asyncio
async def test_a_change_that_removes_the_findings_clears_the_diagnostics(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        await diagnostics_of(client, uri, count=2)
        change_document(client, uri, "import torch\n", version=2)
        assert await diagnostics_of(client, uri, count=0) == []
        # Unsaved text is what is checked: the file on disk still has both findings.
        change_document(client, uri, BAD + "t = torch.load(q)\n", version=3)
        assert len(await diagnostics_of(client, uri, count=3)) == 3
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
        assert await diagnostics_of(client, uri, count=0) == []  # a closed file keeps no diagnostics


@pytest.mark.asyncio
async def test_a_burst_of_changes_is_linted_once_and_never_reported_out_of_date(tmp_path):
    from pygls.lsp.client import LanguageClient

    path = _project(tmp_path, BAD)
    client = LanguageClient("burst", "1")
    published = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        published.append((params.version, len(params.diagnostics)))

    await client.start_io(*SERVER)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri()))
    client.initialized(types.InitializedParams())
    uri = open_document(client, path)
    await until(lambda: published, what="the first diagnostics")
    for version in range(2, 12):  # typing: ten changes within a few milliseconds, the last adds a finding
        change_document(client, uri, BAD + ("t = torch.load(q)\n" if version == 11 else "#" * version + "\n"), version)
    await until(lambda: published[-1] == (11, 3), what="the last version's diagnostics")
    await asyncio.sleep(0.5)  # nothing older may arrive after it
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    assert published[0] == (1, 2) and published[-1] == (11, 3)
    assert [version for version, _ in published] == sorted(version for version, _ in published)
    assert len(published) < 11  # the burst was not linted change by change


@pytest.mark.asyncio
async def test_a_syntax_error_is_an_error_diagnostic_and_the_next_edit_recovers(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path, "import torch\ny = torch.log(\n")
        (error,) = await diagnostics_of(client, uri, count=1)
        assert error.severity == types.DiagnosticSeverity.Error and "never closed" in error.message
        assert error.range.start.line == 1
        change_document(client, uri, BAD, version=2)
        assert {d.code for d in await diagnostics_of(client, uri, count=2)} == {"TL201", "TL401"}


@pytest.mark.asyncio
async def test_settings_come_from_the_nearest_pyproject_and_follow_its_changes(tmp_path):
    path = _project(tmp_path, BAD, table='ignore = ["TL401"]\n')
    nested = tmp_path / "sub"
    nested.mkdir()
    (nested / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL401"]\n', encoding="utf-8")
    (nested / "other.py").write_text(BAD, encoding="utf-8")
    async with session(tmp_path, client_capabilities("visual-studio-code")) as (client, _):
        uri = open_document(client, path)
        other = open_document(client, nested / "other.py")
        assert [d.code for d in await diagnostics_of(client, uri, count=1)] == ["TL201"]
        assert [d.code for d in await diagnostics_of(client, other, count=1)] == ["TL401"]
        (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams([types.FileEvent((tmp_path / "pyproject.toml").as_uri(), types.FileChangeType.Changed)])
        )
        assert {d.code for d in await diagnostics_of(client, uri, count=2)} == {"TL201", "TL401"}
        assert [d.code for d in client.diagnostics[other]] == ["TL401"]


@pytest.mark.asyncio
async def test_a_broken_configuration_is_shown_and_the_defaults_apply(tmp_path):
    path = _project(tmp_path, BAD, table='select = ["TL9"]\n')
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        assert len(await diagnostics_of(client, uri, count=2)) == 2
        await until(lambda: client.messages, what="the configuration error")
        assert "TL9" in client.messages[0].message and client.messages[0].type == types.MessageType.Error


@pytest.mark.asyncio
async def test_the_confidence_floor_applies_and_diagnostics_carry_the_level(tmp_path):
    text = "low(x)\nmedium(x)\nhigh(x)\n"
    path = _project(tmp_path, text, table='select = ["TL995"]\n')
    async with session(tmp_path, command=server_with("--levels")) as (client, _):
        uri = open_document(client, path)
        shown = await diagnostics_of(client, uri, count=1)
        assert [(d.range.start.line, d.data["confidence"]) for d in shown] == [(2, "high")]
        (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL995"]\nconfidence-level = "low"\n', encoding="utf-8")
        change_document(client, uri, text, version=2)  # an edit re-reads a changed configuration even unannounced
        shown = await diagnostics_of(client, uri, count=3)
        assert [d.data["confidence"] for d in shown] == ["low", "medium", "high"]
        assert [d.severity for d in shown] == [
            types.DiagnosticSeverity.Hint,
            types.DiagnosticSeverity.Information,
            types.DiagnosticSeverity.Warning,
        ]


@pytest.mark.asyncio
async def test_a_finding_a_run_confirmed_is_shown_at_high_until_its_line_changes(tmp_path):
    text = "low(x)\nmedium(x)\nhigh(x)\n"
    path = _project(tmp_path, text, table='select = ["TL995"]\n')
    async with session(tmp_path, command=server_with("--levels")) as (client, _):
        uri = open_document(client, path)
        assert [d.range.start.line for d in await diagnostics_of(client, uri, count=1)] == [2]
        evidence = "call 2 (after 1 optimizer step) had 1 of 4 entries at 0 (min |x| 0, float32)"
        confirmations.record(
            str(tmp_path / ".torchlint_cache"),
            [confirmations.Confirmation("model.py", "TL995", confirmations.site_digest(text, 1, 1), evidence, "2026-11-29")],
        )
        change_document(client, uri, text, version=2)
        shown = await diagnostics_of(client, uri, count=2)
        confirmed = [d for d in shown if d.range.start.line == 0]
        assert [(d.data["confidence"], d.severity) for d in confirmed] == [("high", types.DiagnosticSeverity.Warning)]
        assert confirmed[0].message.endswith(f"(confirmed by torchlint trace: {evidence}, 2026-11-29)")
        change_document(client, uri, "low(x + 1)\nmedium(x)\nhigh(x)\n", version=3)  # the site's text changed
        assert [d.range.start.line for d in await diagnostics_of(client, uri, count=1)] == [2]


@pytest.mark.asyncio
async def test_a_pulling_client_gets_reports_and_no_pushed_copies(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path, client_capabilities("neovim@v0.11.0")) as (client, result):
        assert result.capabilities.position_encoding == "utf-8"  # Neovim's preference
        uri = open_document(client, path)
        params = types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri))
        report = await client.text_document_diagnostic_async(params)
        assert report.kind == "full" and {d.code for d in report.items} == {"TL201", "TL401"}
        params.previous_result_id = report.result_id
        assert (await client.text_document_diagnostic_async(params)).kind == "unchanged"
        change_document(client, uri, "import torch\n", version=2)
        cleared = await client.text_document_diagnostic_async(params)
        assert cleared.kind == "full" and list(cleared.items) == [] and cleared.result_id != report.result_id
    assert uri not in client.diagnostics


@pytest.mark.asyncio
async def test_a_pulling_client_is_asked_to_pull_again_when_the_settings_change(tmp_path):
    path = _project(tmp_path, BAD, table='ignore = ["TL401"]\n')
    capabilities = client_capabilities("neovim@v0.11.0")
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    capabilities.workspace.did_change_watched_files.dynamic_registration = True
    async with session(tmp_path, capabilities) as (client, _):
        uri = open_document(client, path)
        params = types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri))
        first = await client.text_document_diagnostic_async(params)
        assert [d.code for d in first.items] == ["TL201"]
        (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
        client.workspace_did_change_watched_files(
            types.DidChangeWatchedFilesParams([types.FileEvent((tmp_path / "pyproject.toml").as_uri(), types.FileChangeType.Changed)])
        )
        await until(lambda: client.diagnostic_refresh_count, what="workspace/diagnostic/refresh")
        params.previous_result_id = first.result_id
        again = await client.text_document_diagnostic_async(params)
        assert again.kind == "full" and {d.code for d in again.items} == {"TL201", "TL401"}


@pytest.mark.asyncio
async def test_hover_on_a_noqa_code_or_a_diagnostic_shows_the_rule(tmp_path):
    text = BAD.replace(TL401_LINE, TL401_LINE + "  # noqa: TL401")
    path = _project(tmp_path, text)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        (diagnostic,) = await diagnostics_of(client, uri, count=1)
        line = text.splitlines().index(TL401_LINE + "  # noqa: TL401")
        on_code = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, len(TL401_LINE + "  # noqa: TL"))))
        assert "`load-without-map-location`" in on_code.contents.value
        on_finding = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), diagnostic.range.start))
        assert "`log-of-softmax`" in on_finding.contents.value and help_uri(registry.all_rules()["TL201"]) in on_finding.contents.value
        elsewhere = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(0, 0)))
        assert elsewhere is None


@pytest.mark.asyncio
async def test_dataset_lookups_across_files_are_refreshed_when_a_file_is_saved(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    dataset = tmp_path / "dataset.py"
    variable = (
        "from torch.utils.data import Dataset\n\n\nclass Chunks(Dataset):\n"
        "    def __init__(self, samples, bounds):\n        self.samples, self.bounds = samples, bounds\n\n"
        "    def __len__(self):\n        return len(self.bounds) - 1\n\n"
        "    def __getitem__(self, idx):\n        return self.samples[self.bounds[idx] : self.bounds[idx + 1]]\n"
    )
    dataset.write_text(variable, encoding="utf-8")
    train = tmp_path / "train.py"
    train.write_text(
        "from torch.utils.data import DataLoader\n\nfrom dataset import Chunks\n\n\n"
        "def loaders(samples, bounds):\n    return DataLoader(Chunks(samples, bounds), batch_size=8)\n\n\n"
        'if __name__ == "__main__":\n    loaders([1, 2, 3], [0, 1, 3])\n',
        encoding="utf-8",
    )
    async with session(tmp_path) as (client, _):
        train_uri = open_document(client, train)
        assert [d.code for d in await diagnostics_of(client, train_uri, count=1)] == ["TL403"]
        dataset_uri = open_document(client, dataset)
        # Fixed-length items, and a finding that shows when this text has been linted.
        fixed_length = variable.replace("self.samples[self.bounds[idx] : self.bounds[idx + 1]]", "self.samples[idx]")
        fixed_length += "\n\nimport torch\n\nstate = torch.load('s.pt')\n"
        change_document(client, dataset_uri, fixed_length, version=2)
        assert [d.code for d in await diagnostics_of(client, dataset_uri, count=1)] == ["TL401"]
        assert len(client.diagnostics[train_uri]) == 1  # unsaved: the project still reads the file on disk
        dataset.write_text(fixed_length, encoding="utf-8")
        client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(dataset_uri)))
        assert await diagnostics_of(client, train_uri, count=0) == []


@pytest.mark.asyncio
async def test_a_crashing_rule_is_logged_and_the_server_goes_on(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path, command=server_with("--crash", "TL201")) as (client, _):
        uri = open_document(client, path)
        (load,) = await diagnostics_of(client, uri, count=1)
        assert load.code == "TL401"
        await until(lambda: any("TL201" in m.message for m in client.log_messages), what="the crash's log message")
        (logged,) = [m for m in client.log_messages if "TL201" in m.message]
        assert logged.type == types.MessageType.Error and "internal error in TL201" in logged.message
        assert str(path) in logged.message and "test double crashed" in logged.message
        change_document(client, uri, BAD + "t = torch.load(q)\n", version=2)
        assert len(await diagnostics_of(client, uri, count=2)) == 2


@pytest.mark.asyncio
async def test_shutdown_and_exit_end_the_process_cleanly(tmp_path):
    path = _project(tmp_path, BAD)
    async with session(tmp_path) as (client, _):
        uri = open_document(client, path)
        await diagnostics_of(client, uri, count=2)
        server = client._server
    assert server.returncode == 0


def test_the_check_path_imports_neither_the_server_nor_torch(tmp_path):
    path = _project(tmp_path, BAD)
    probe = (
        "import sys\nfrom torchlint import cli, flake8_plugin\n"
        f"cli.main(['check', '--no-cache', '--exit-zero', {str(path)!r}])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pygls', 'lsprotocol'))\n"
        "print(heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert "TL201" in proc.stdout, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_the_server_without_its_extra_says_what_to_install(tmp_path):
    # A module named like the missing package that fails to import stands for its absence.
    (tmp_path / "pygls.py").write_text("raise ImportError('absent', name='pygls')\n", encoding="utf-8")
    proc = subprocess.run(SERVER, capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and 'pip install "torchlint[server]"' in proc.stderr
