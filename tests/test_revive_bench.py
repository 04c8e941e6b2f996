"""bench/revive/run.py reads a smoke run as a user would: the exception and the line of the repository's code it
came from, the warnings the repository's lines raised, and which lines a fix changed."""
from __future__ import annotations

import sys
import textwrap

import pytest

from bench_support import bench_module

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def revive():
    with bench_module("revive/run.py", "revive_bench") as module:
        yield module


LIBRARY = textwrap.dedent(
    """\
    import warnings

    import torch


    def step():
        warnings.warn("an old spelling", FutureWarning)
        loss = torch.ones(3).sum()
        return loss.data[0]
    """
)
SMOKE = "import smoke_support\nimport lib\n\nsmoke_support.succeeded(lib.step())\n"


def _repository(root, library=LIBRARY):
    root.mkdir()
    (root / "lib.py").write_text(library, encoding="utf-8")
    return root


def test_a_crash_is_placed_on_the_repository_line_it_came_from(revive, tmp_path):
    root = _repository(tmp_path / "repo")
    smoke = tmp_path / "smoke.py"
    smoke.write_text(SMOKE, encoding="utf-8")
    run = revive.run_smoke(sys.executable, smoke, root)
    assert not run.ok
    assert run.error.startswith("IndexError: invalid index of a 0-dim tensor")
    assert (run.crash.path, run.crash.line, run.crash.text) == ("lib.py", 9, "return loss.data[0]")
    assert ("lib.py:7", "FutureWarning", "an old spelling") in run.warnings


def test_a_crash_in_a_script_run_by_its_relative_path_is_placed_on_its_line(revive, tmp_path):
    # runpy.run_path("main.py"), as a smoke script runs a repository's training script: its frames read File "main.py"
    root = tmp_path / "repo"
    root.mkdir()
    (root / "main.py").write_text(LIBRARY + "\nstep()\n", encoding="utf-8")
    smoke = tmp_path / "smoke.py"
    smoke.write_text("import runpy\n\nimport smoke_support\n\nrunpy.run_path('main.py', run_name='__main__')\n", encoding="utf-8")
    run = revive.run_smoke(sys.executable, smoke, root)
    assert (run.crash.path, run.crash.line) == ("main.py", 9)
    assert ("main.py:7", "FutureWarning", "an old spelling") in run.warnings


def test_a_fixed_copy_runs_and_its_changed_lines_are_numbered_as_before(revive, tmp_path):
    before = _repository(tmp_path / "before")
    after = _repository(tmp_path / "after", LIBRARY.replace("loss.data[0]", "loss.item()"))
    smoke = tmp_path / "smoke.py"
    smoke.write_text(SMOKE, encoding="utf-8")
    run = revive.run_smoke(sys.executable, smoke, after)
    assert run.ok and run.crash is None
    assert revive.changed_lines(before, after) == [("lib.py", 9)]


def test_a_crash_site_is_found_at_the_best_level_on_its_line(revive):
    site = revive.Site("lib.py", 9, "return loss.data[0]")
    findings = [
        {"path": "lib.py", "line": 9, "end_line": 9, "confidence": "medium"},
        {"path": "lib.py", "line": 8, "end_line": 9, "confidence": "high"},
        {"path": "other.py", "line": 9, "end_line": 9, "confidence": "high"},
    ]
    assert revive.found_level(findings, site) == "high"
    assert revive.found_level(findings[:1], site) == "medium"
    assert revive.found_level(findings[2:], site) == ""
