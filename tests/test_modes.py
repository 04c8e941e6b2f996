"""Every way of running torchlint gives the same findings: 1 job, 2 jobs, a cache fill, a warm cache, and flake8.

The fixtures folder (checker, codemod and project fixtures) is copied to a
temporary folder and checked with every rule; the JSON reports must be
byte-identical, in the same sorted order.  --fix and --diff with 2 jobs must
write and print exactly what 1 job does.  The CLI runs in this process (its
workers are forked from it), so every mode runs the same code even while the
rules on disk are being edited.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint import cli
from fixture_support import FIXTURES, python_parses
from test_flake8 import run_flake8

ALL = ("--select", "ALL", "--output-format", "json", "--exit-zero")


class _Proc:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def torchlint(capsys):
    def run(*args: str, cwd: Path) -> _Proc:
        assert args[0] == "check"
        here = os.getcwd()
        os.chdir(cwd)
        try:
            code = cli.main(list(args))
        finally:
            os.chdir(here)
        out = capsys.readouterr()
        return _Proc(code, out.out, out.err)

    return run


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("modes")
    shutil.copytree(FIXTURES, root / "fixtures")
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    return root


@pytest.fixture
def one_job(tree, torchlint) -> str:
    proc = torchlint("check", *ALL, "--no-cache", "--jobs", "1", "fixtures", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) > 100, "the fixtures must produce findings for the comparison to mean anything"
    return proc.stdout


def test_two_jobs_a_cache_fill_and_a_warm_run_give_the_same_report_in_the_same_order(tree, one_job, torchlint):
    proc = torchlint("check", *ALL, "--no-cache", "--jobs", "2", "fixtures", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == one_job
    cache = tree / "cache"
    fill = torchlint("check", *ALL, "--cache-dir", str(cache), "--jobs", "2", "fixtures", cwd=tree)
    assert fill.stdout == one_job
    (manifest,) = [p for p in cache.glob("*.json") if len(p.stem) == 32]
    assert len(json.loads(manifest.read_text(encoding="utf-8"))["files"]) >= 150, "every fixture file gets an entry"
    warm = torchlint("check", *ALL, "--cache-dir", str(cache), "--jobs", "2", "fixtures", cwd=tree)
    assert warm.stdout == one_job
    # Text output too (it shows which findings are fixable: the cached fixes must survive the round trip).
    text_cold = torchlint("check", "--select", "ALL", "--exit-zero", "--no-cache", "--jobs", "1", "fixtures", cwd=tree)
    text_warm = torchlint("check", "--select", "ALL", "--exit-zero", "--cache-dir", str(cache), "fixtures", cwd=tree)
    assert text_warm.stdout == text_cold.stdout


def test_the_default_cache_lives_next_to_the_config_and_is_ignored_by_git(tree, torchlint):
    proc = torchlint("check", *ALL, "--jobs", "1", "fixtures/TL201", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    assert (tree / ".torchlint_cache" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert (tree / ".torchlint_cache" / "CACHEDIR.TAG").is_file()


def test_flake8_finds_what_the_cli_finds(tree, one_job):
    cli = {(str((tree / item["path"]).resolve()), item["line"], item["column"], item["code"]) for item in json.loads(one_job)}
    # flake8 runs no plugin on a file Python cannot parse (it reports E999): torchlint reads those with a stand-in
    cli = {p for p in cli if p[3] != "TL000" and python_parses(p[0])}
    completed = run_flake8([tree / "fixtures"], tree, "--jobs", "2")
    assert completed.returncode in (0, 1), completed.stderr
    flake8 = set()
    for line in completed.stdout.splitlines():
        path, row, col, code = line.rsplit(":", 3)
        flake8.add((str((tree / path).resolve()), int(row), int(col), code))
    assert flake8 == cli


def _fix_inputs(target: Path) -> Path:
    target.mkdir()
    for source in sorted(FIXTURES.glob("*/fix/*.in.py")):
        shutil.copy(source, target / f"{source.parent.parent.name}_{source.name}")
    (target / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    return target


@pytest.mark.parametrize("mode", ["--fix", "--diff"])
def test_fix_and_diff_with_two_jobs_equal_one_job(tmp_path, mode, torchlint):
    results = []
    for jobs in ("1", "2"):
        folder = _fix_inputs(tmp_path / f"jobs{jobs}")
        assert len(list(folder.glob("*.py"))) >= 16, "enough files for the pool to start"
        proc = torchlint("check", "--select", "ALL", "--unsafe-fixes", mode, "--jobs", jobs, ".", cwd=folder)
        assert proc.returncode in (0, 1), proc.stderr
        files = {p.name: p.read_bytes() for p in sorted(folder.glob("*.py"))}
        results.append((proc.stdout, proc.stderr, files))
    assert results[0] == results[1]
    stdout, _, files = results[0]
    if mode == "--fix":
        assert any(f"{p.parent.parent.name}_{p.name}" in files and files[f"{p.parent.parent.name}_{p.name}"] != p.read_bytes()
                   for p in FIXTURES.glob("*/fix/*.in.py")), "--fix changed nothing"
    else:
        assert stdout.startswith("---"), "--diff printed no diff"


def test_jobs_must_be_positive(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", "--jobs", "0", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--jobs" in proc.stderr
