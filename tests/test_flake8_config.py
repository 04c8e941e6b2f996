"""One ``[tool.torchlint]``, one result: the flake8 plugin honours ``select``, ``extend-select``, ``ignore`` and
``per-file-ignores`` as the CLI does (issue 35, point 3).

The plugin is driven in-process: its checker directly, and flake8's own ``main`` in this process (``-j 1``),
where flake8's ``--select``/``--extend-ignore`` still filter on top of what the configuration leaves.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import List, Set, Tuple

import pytest

from cli_support import check_json
from torchlint import flake8_plugin, registry

# TL201 on line 4, TL401 on line 5, TL101 on line 7, each found at the default confidence floor.
SOURCE = (
    "import torch\n"
    'import torch.nn.functional as F; CPU = torch.device("cpu")\n'
    'device = "cpu"\n'
    "y = torch.log(F.softmax(x, dim=-1))\n"
    "s = torch.load(p)\n"
    "w = torch.tensor(0.0, requires_grad=True)\n"
    "root = torch.sqrt(w)\n"
)
EVERY_CODE = {"TL101", "TL201", "TL401"}


@pytest.fixture(autouse=True)
def fresh_plugin_caches():
    flake8_plugin._settings_for_directory.cache_clear()
    flake8_plugin._project_for_root.cache_clear()
    yield
    flake8_plugin._settings_for_directory.cache_clear()
    flake8_plugin._project_for_root.cache_clear()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def plugin_codes(path: Path, filename: str = "") -> Set[str]:
    """The codes the plugin hands flake8 for ``path`` (flake8 passes the name as given on its command line)."""
    text = path.read_text(encoding="utf-8")
    checker = flake8_plugin.TorchlintChecker(ast.parse(text), filename or str(path), text.splitlines(keepends=True))
    return {message.split(" ", 1)[0] for _, _, message, _ in checker.run()}


def cli_codes(path: Path, cwd: Path) -> Set[str]:
    code, items, proc = check_json("--no-cache", str(path.relative_to(cwd)), cwd=cwd)
    assert code in (0, 1), proc.stderr
    return {item["code"] for item in items}


def flake8_in_process(capsys, cwd: Path, monkeypatch, *args: str) -> List[Tuple[str, int, str]]:
    from flake8.main import cli

    monkeypatch.chdir(cwd)
    status = cli.main(["--isolated", "-j", "1", "--format=%(path)s:%(row)d:%(code)s", *args])
    out = capsys.readouterr().out
    assert status in (0, 1), out
    found = []
    for line in out.splitlines():
        path, row, code = line.rsplit(":", 2)
        found.append((Path(path).as_posix().removeprefix("./"), int(row), code))
    return sorted(found)


# -- without a configuration nothing changes ------------------------------------------


def test_without_a_configuration_every_rule_runs(tmp_path):
    path = write(tmp_path / "tests" / "test_m.py", SOURCE)
    assert plugin_codes(path) == EVERY_CODE
    settings, error = flake8_plugin._settings_for_directory(str(path.parent))
    assert error is None and settings.config_path is None
    assert settings.enabled == frozenset(registry.all_rules())


def test_an_empty_table_reports_everything(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\n")
    path = write(tmp_path / "tests" / "test_m.py", SOURCE)
    assert plugin_codes(path) == EVERY_CODE == cli_codes(path, tmp_path)


# -- select, extend-select and ignore ------------------------------------------------------


def test_config_ignore_silences_the_code_in_flake8(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nignore = ["TL401"]\n')
    path = write(tmp_path / "m.py", SOURCE)
    assert plugin_codes(path) == {"TL101", "TL201"}
    assert cli_codes(path, tmp_path) == {"TL101", "TL201"}


def test_config_select_extend_select_and_ignore(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchlint]\nselect = ["TL4"]\nextend-select = ["log-of-softmax"]\nignore = ["TL401"]\n',
    )
    path = write(tmp_path / "m.py", SOURCE)
    assert plugin_codes(path) == {"TL201"} == cli_codes(path, tmp_path)


def test_the_nearest_table_decides_for_each_file(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201"]\n')
    write(tmp_path / "inner" / "pyproject.toml", '[tool.torchlint]\nignore = ["TL201"]\n')
    outer = write(tmp_path / "m.py", SOURCE)
    inner = write(tmp_path / "inner" / "pkg" / "m.py", SOURCE)
    assert plugin_codes(outer) == {"TL201"}
    assert plugin_codes(inner) == {"TL101", "TL401"}


# -- per-file-ignores -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table",
    [
        '[tool.torchlint]\nper-file-ignores = {"tests/*" = ["TL101"]}\n',
        '[tool.torchlint]\n[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL101"]\n',
    ],
    ids=["inline", "table"],
)
def test_per_file_ignores_apply_only_to_matching_files(tmp_path, table):
    write(tmp_path / "pyproject.toml", table)
    under_tests = write(tmp_path / "tests" / "test_m.py", SOURCE)
    deeper = write(tmp_path / "tests" / "unit" / "test_n.py", SOURCE)
    elsewhere = write(tmp_path / "src" / "m.py", SOURCE)
    assert plugin_codes(under_tests) == {"TL201", "TL401"} == cli_codes(under_tests, tmp_path)
    assert plugin_codes(deeper) == {"TL201", "TL401"} == cli_codes(deeper, tmp_path)
    assert plugin_codes(elsewhere) == EVERY_CODE == cli_codes(elsewhere, tmp_path)


def test_per_file_ignores_match_the_name_flake8_passes(tmp_path, monkeypatch):
    # flake8 hands the plugin the path as written on its command line, relative to where it runs.
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nper-file-ignores = {"tests/*" = ["TL101"]}\n')
    path = write(tmp_path / "tests" / "test_m.py", SOURCE)
    monkeypatch.chdir(tmp_path)
    assert plugin_codes(path, "./tests/test_m.py") == {"TL201", "TL401"}
    assert plugin_codes(path, "tests/test_m.py") == {"TL201", "TL401"}


# -- through flake8 itself ------------------------------------------------------------------------


def test_flake8_select_and_ignore_still_filter_on_top(tmp_path, capsys, monkeypatch):
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchlint]\nignore = ["TL401"]\nper-file-ignores = {"tests/*" = ["TL101"]}\n',
    )
    write(tmp_path / "tests" / "test_m.py", SOURCE)
    write(tmp_path / "src" / "m.py", SOURCE)
    files = ("src/m.py", "tests/test_m.py")
    assert flake8_in_process(capsys, tmp_path, monkeypatch, "--select", "TL", *files) == [
        ("src/m.py", 4, "TL201"),
        ("src/m.py", 7, "TL101"),
        ("tests/test_m.py", 4, "TL201"),
    ]
    assert flake8_in_process(capsys, tmp_path, monkeypatch, "--select", "TL1", *files) == [("src/m.py", 7, "TL101")]
    assert flake8_in_process(capsys, tmp_path, monkeypatch, "--select", "TL", "--extend-ignore", "TL201", *files) == [
        ("src/m.py", 7, "TL101"),
    ]
    # flake8 cannot show what the configuration turned off.
    assert flake8_in_process(capsys, tmp_path, monkeypatch, "--select", "TL401", *files) == []


def test_a_broken_table_still_runs_every_rule(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nignore = ["TL9999"]\n')
    path = write(tmp_path / "m.py", SOURCE)
    assert plugin_codes(path) == EVERY_CODE | {"TL000"}
