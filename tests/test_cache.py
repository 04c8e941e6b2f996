"""The persistent cache (torchlint/cache.py): a warm run reports what a cold run does, and every input invalidates it.

Each test fills the cache, changes one input (the file, the configuration,
the torchlint version or code, another module of the project) and checks
both that the report follows the change and, where it says something, that
the unchanged files were still served from the cache.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cli_support import BAD, CLEAN, HEADER, TL201_LINE, TL401_LINE
from fixture_support import FIXTURES
from torchlint import cli, config, runner
from torchlint import cache as cache_module
from torchlint.cache import Cache, default_dir


@pytest.fixture
def check(capsys, monkeypatch):
    """Run ``torchlint check --output-format json ARGS`` in ``cwd`` in this process; (exit code, report, stderr).

    The code fingerprint is pinned: in a shared tree a colleague's edit between two runs would make a warm run
    cold for a reason that is not the one tested (tests of the fingerprint build their own Cache).
    """
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "pinned")

    def run(*args: str, cwd: Path):
        here = os.getcwd()
        os.chdir(cwd)
        try:
            code = cli.main(["check", "--output-format", "json", "--jobs", "1", *args])
        finally:
            os.chdir(here)
        out = capsys.readouterr()
        return code, [(item["path"], item["line"], item["code"]) for item in json.loads(out.out)], out.err

    return run


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    return tmp_path


def _manifests(folder: Path) -> list:
    return sorted(p for p in folder.glob("*.json") if len(p.stem) == 32)


def _entries(folder: Path) -> dict:
    """The cached entries of every run key in ``folder``, by path."""
    found = {}
    for manifest in _manifests(folder):
        found.update(json.loads(manifest.read_text(encoding="utf-8"))["files"])
    return found


def test_a_warm_run_reports_what_the_cold_run_did_from_the_cache(project, check, monkeypatch):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    cold = check(".", cwd=project)
    assert {c for _, _, c in cold[1]} >= {"TL201", "TL401"}
    assert sorted(_entries(project / ".torchlint_cache")) == ["./clean.py", "./model.py"]

    def no_checking(*args, **kwargs):
        raise AssertionError("a warm run must not check an unchanged file")

    monkeypatch.setattr(runner, "check_path", no_checking)
    assert check(".", cwd=project) == cold


def test_a_changed_file_is_checked_again(project, check):
    path = project / "model.py"
    path.write_text(HEADER + "\n" + TL201_LINE + "\n", encoding="utf-8")
    assert [c for _, _, c in check("--select", "TL201,TL401", ".", cwd=project)[1]] == ["TL201"]
    path.write_text(HEADER + "\n" + TL201_LINE + "\n" + TL401_LINE + "\n", encoding="utf-8")
    assert [c for _, _, c in check("--select", "TL201,TL401", ".", cwd=project)[1]] == ["TL201", "TL401"]
    path.write_text(CLEAN, encoding="utf-8")
    assert check("--select", "TL201,TL401", ".", cwd=project)[1] == []


def test_a_changed_selection_or_config_is_checked_again(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    assert [c for _, _, c in check("--select", "TL201", ".", cwd=project)[1]] == ["TL201"]
    assert [c for _, _, c in check("--select", "TL401", ".", cwd=project)[1]] == ["TL401"]
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL201"]\n', encoding="utf-8")
    assert [c for _, _, c in check(".", cwd=project)[1]] == ["TL201"]
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL201", "TL401"]\nper-file-ignores = {"model.py" = ["TL201"]}\n', encoding="utf-8")
    assert [c for _, _, c in check(".", cwd=project)[1]] == ["TL401"]


def _settings(**changes) -> config.Settings:
    return config.Settings(**{"enabled": frozenset({"TL201", "TL401"}), **changes})


def test_the_key_covers_eps_target_version_torchlint_version_and_code(tmp_path):
    source = tmp_path / "model.py"
    source.write_text(BAD, encoding="utf-8")
    digest = runner.file_digest(str(source))
    base = Cache(str(tmp_path / "c"), _settings(), version="1.0", code="a")
    base.store(str(source), digest, [], [])
    base.save()
    assert Cache(str(tmp_path / "c"), _settings(), version="1.0", code="a").load(str(source)) == ([], [])
    for other in (
        Cache(str(tmp_path / "c"), _settings(eps=1e-3), version="1.0", code="a"),
        Cache(str(tmp_path / "c"), _settings(target_torch_version=(1, 13)), version="1.0", code="a"),
        Cache(str(tmp_path / "c"), _settings(enabled=frozenset({"TL201"})), version="1.0", code="a"),
        Cache(str(tmp_path / "c"), _settings(root=str(tmp_path / "elsewhere")), version="1.0", code="a"),
        Cache(str(tmp_path / "c"), _settings(), version="1.1", code="a"),
        Cache(str(tmp_path / "c"), _settings(), version="1.0", code="b"),
    ):
        assert other.load(str(source)) is None


def test_a_changed_eps_changes_the_cached_fix(project, capsys):
    # The fix a finding carries (shown in the JSON report) is built from eps: the cache must not serve the old one.
    (project / "model.py").write_text("import torch\n\n\ndef loss(pred, target):\n    return torch.log(pred / target)\n", encoding="utf-8")

    def report() -> str:
        here = os.getcwd()
        os.chdir(project)
        try:
            cli.main(["check", "--output-format", "json", "--exit-zero", "--jobs", "1", "--select", "TL102", "--confidence-level", "low", "."])
        finally:
            os.chdir(here)
        return capsys.readouterr().out

    (project / "pyproject.toml").write_text("[tool.torchlint]\neps = 0.001\n", encoding="utf-8")
    first = report()
    assert "clamp_min(0.001)" in first
    (project / "pyproject.toml").write_text("[tool.torchlint]\neps = 0.01\n", encoding="utf-8")
    second = report()
    assert "clamp_min(0.01)" in second and "clamp_min(0.001)" not in second
    (project / "pyproject.toml").write_text("[tool.torchlint]\neps = 0.001\n", encoding="utf-8")
    assert report() == first


def test_the_code_fingerprint_changes_when_a_rule_changes(tmp_path):
    """A copy of the package: editing one rule's code, or a data table, gives another fingerprint; touching nothing
    keeps it."""
    import shutil

    import torchlint

    copy = tmp_path / "torchlint"
    shutil.copytree(Path(torchlint.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = cache_module.code_fingerprint(str(copy))
    assert cache_module.code_fingerprint(str(copy)) == before
    rule = copy / "rules" / "fused" / "tl201_log_of_softmax.py"
    rule.write_text(rule.read_text(encoding="utf-8").replace("log_softmax", "log_softmaX", 1), encoding="utf-8")
    os.utime(rule, ns=(rule.stat().st_atime_ns, rule.stat().st_mtime_ns + 1_000_000_000))
    edited = cache_module.code_fingerprint(str(copy))
    assert edited != before
    table = copy / "data" / "torch_api.json"
    table.write_text(table.read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert cache_module.code_fingerprint(str(copy)) not in (before, edited)


def test_an_edited_dataset_class_in_another_module_changes_tl403(tmp_path, check):
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "TL403" / "project" / "package_reexport", root)
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    data = root / "textpkg" / "data.py"
    variable = data.read_text(encoding="utf-8")
    fixed = variable.replace("truncation=True, max_length", 'padding="max_length", truncation=True, max_length')
    assert fixed != variable

    # Only train.py is checked (a pre-commit run): data.py reaches the result through the project index alone.
    assert check("--select", "TL403", "train.py", cwd=root)[1] == [("train.py", 10, "TL403")]
    assert check("--select", "TL403", "train.py", cwd=root)[1] == [("train.py", 10, "TL403")]  # warm
    data.write_text(fixed, encoding="utf-8")
    assert check("--select", "TL403", "train.py", cwd=root)[1] == []
    data.write_text(variable, encoding="utf-8")
    assert check("--select", "TL403", "train.py", cwd=root)[1] == [("train.py", 10, "TL403")]
    # The dataset module disappears from the project: the class is unknown, silence.
    os.rename(data, root / "textpkg" / "moved.py")
    assert check("--select", "TL403", "train.py", cwd=root)[1] == []


def test_corrupt_or_unreadable_manifests_are_ignored(project, check, monkeypatch):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    cold = check(".", cwd=project)
    (manifest,) = _manifests(project / ".torchlint_cache")
    good = json.loads(manifest.read_text(encoding="utf-8"))
    checked = []
    real_check_path = runner.check_path
    monkeypatch.setattr(runner, "check_path", lambda path, *a, **k: (checked.append(path), real_check_path(path, *a, **k))[1])
    broken_entry = {**good, "files": {path: entry[:3] for path, entry in good["files"].items()}}
    wrong_types = {**good, "files": {path: [None, "x", {}, 3, [], {}, 1, 2] for path in good["files"]}}
    for garbage in (b"\x80\x04not json", b"", b"[]", b'{"format": 2}', json.dumps(broken_entry).encode(), json.dumps(wrong_types).encode()):
        manifest.write_bytes(garbage)
        checked.clear()
        assert check(".", cwd=project) == cold, garbage
        assert sorted(os.path.basename(p) for p in checked) == ["clean.py", "model.py"], garbage
    # The last run rewrote a good manifest: a warm run checks nothing.
    checked.clear()
    assert check(".", cwd=project) == cold and checked == []
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        manifest.chmod(0)
        assert check(".", cwd=project) == cold


def test_a_cache_that_cannot_be_written_is_not_fatal(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    (project / "blocked").write_text("a file where the cache folder would be", encoding="utf-8")
    code, found, err = check("--cache-dir", str(project / "blocked"), ".", cwd=project)
    assert code == 1 and {c for _, _, c in found} >= {"TL201", "TL401"}
    assert "error" not in err


def test_no_cache_neither_reads_nor_writes(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    check("--no-cache", ".", cwd=project)
    assert not (project / ".torchlint_cache").exists()


def test_fix_runs_do_not_use_the_cache(project, check):
    (project / "model.py").write_text(BAD, encoding="utf-8")
    check("--fix", "--select", "TL201,TL401", ".", cwd=project)
    assert not (project / ".torchlint_cache").exists()
    assert "log_softmax" in (project / "model.py").read_text(encoding="utf-8")


def test_default_dir_is_next_to_the_config(tmp_path):
    assert default_dir(str(tmp_path / "pyproject.toml")) == str(tmp_path / ".torchlint_cache")
    assert default_dir(None) == os.path.join(os.getcwd(), ".torchlint_cache")
