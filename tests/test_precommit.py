"""The pre-commit door: real ``pre-commit try-repo`` of this repository in a temporary git repository.

try-repo installs the hooks of .pre-commit-hooks.yaml from the repository's
HEAD plus the uncommitted changes of tracked files into a fresh virtualenv
(pip, from the package registry) and runs them on the files in the
temporary repository's index. It keeps that virtualenv in its own temporary
store, so each call below builds one (about ten seconds here); the calls are
kept few (three): both hooks run in one call on the file with a bug.
PRE_COMMIT_HOME points at one directory per module so that pre-commit's own
files never land in the user's cache.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
MISSING = [name for name, present in (
    ("git", shutil.which("git") is not None),
    ("pre-commit", importlib.util.find_spec("pre_commit") is not None),
) if not present]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} on this machine")

BAD = """\
import torch
import torch.nn.functional as F


def log_probs(logits):
    return torch.log(F.softmax(logits, dim=-1))
"""
FIXED = BAD.replace("torch.log(F.softmax(logits, dim=-1))", "F.log_softmax(logits, dim=-1)")


def notebook_of(code: str) -> str:
    """A notebook (pre-commit's ``jupyter`` type) with ``code`` in its second cell, as Jupyter writes it."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    return nbformat.writes(new_notebook(cells=[new_markdown_cell("# Exploration"), new_code_cell(code)])) + "\n"


# The notebook calls what it defines (a function a notebook never calls is unreached, shown at `low`).
NOTEBOOK = notebook_of(BAD + "\n\nprint(log_probs(torch.zeros(2, 3)))\n")
NO_TORCH = """\
import math


def softmax(xs):
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    return [e / sum(exps) for e in exps]


def log_probs(xs):
    return [math.log(p) for p in softmax(xs)]
"""


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    env = dict(os.environ)
    env["PRE_COMMIT_HOME"] = str(tmp_path_factory.mktemp("pre-commit-home"))
    # A commit made by try-repo (for uncommitted changes) needs an identity; keep user config out.
    env.update(
        GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@example.com",
        GIT_CONFIG_NOSYSTEM="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    env.pop("GIT_DIR", None)
    env.pop("GIT_INDEX_FILE", None)
    return env


def git_repository(path: Path, files: dict, env: dict) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    subprocess.run(["git", "add", "--", *files], cwd=path, check=True, env=env)
    return path


def try_repo(repository: Path, env: dict, *hooks: str) -> subprocess.CompletedProcess:
    """``pre-commit try-repo REPO_ROOT [HOOK] --all-files`` inside ``repository``; no hook id runs them all."""
    command = [sys.executable, "-m", "pre_commit", "try-repo", str(REPO_ROOT), *hooks, "--all-files", "--color", "never"]
    return subprocess.run(command, cwd=repository, env=env, capture_output=True, text=True, timeout=600)


def hook_sections(output: str) -> dict:
    """``{hook name: (status, the hook's own output)}`` from pre-commit's ``name....Status`` blocks."""
    sections = {}
    name = None
    for line in output.splitlines():
        status = next((s for s in ("Passed", "Failed", "Skipped") if line.endswith(s) and "..." in line), None)
        if status is not None:
            name = line.split("...", 1)[0].replace("(no files to check)", "").rstrip(".")
            sections[name] = (status, [])
        elif name is not None:
            sections[name][1].append(line)
    return {name: (status, "\n".join(body)) for name, (status, body) in sections.items()}


@pytest.fixture(scope="module")
def bad_commit(tmp_path_factory, environment):
    """Both hooks (check first, then fix: pre-commit orders them by id) on a file with a TL201 bug,
    beside a copy in a folder that [tool.torchlint] excludes (pre-commit names it; --force-exclude skips it)."""
    files = {
        "model/head.py": BAD,
        "model/explore.ipynb": NOTEBOOK,
        "vendored/head.py": BAD,
        # log(softmax) is shown from `medium` (level table): the hooks follow the configured floor.
        "pyproject.toml": '[tool.torchlint]\nextend-exclude = ["vendored"]\nconfidence-level = "medium"\n',
    }
    repository = git_repository(tmp_path_factory.mktemp("bad") / "project", files, environment)
    completed = try_repo(repository, environment)
    return repository, completed, hook_sections(completed.stdout + completed.stderr)


def test_check_hook_fails_and_names_the_bug(bad_commit):
    _, completed, sections = bad_commit
    assert completed.returncode == 1, completed.stdout + completed.stderr
    status, output = sections["torchlint"]
    assert status == "Failed", output
    assert "model/head.py:6:12: TL201" in output
    assert "model/explore.ipynb:cell 2:6:12: TL201" in output  # hooks run on notebooks too
    assert "- exit code: 1" in output
    assert "files were modified" not in output  # the check hook writes nothing
    assert "vendored" not in output


def test_fix_hook_rewrites_the_file_and_fails_the_commit(bad_commit):
    repository, completed, sections = bad_commit
    status, output = sections["torchlint (fix)"]
    # A hook that modifies files fails, so that the user reviews and re-stages them.
    assert status == "Failed", output
    assert "files were modified by this hook" in output
    assert (repository / "model/head.py").read_text(encoding="utf-8") == FIXED
    assert (repository / "model/explore.ipynb").read_text(encoding="utf-8") == NOTEBOOK.replace(
        "torch.log(F.softmax(logits, dim=-1))", "F.log_softmax(logits, dim=-1)"
    )
    assert (repository / "vendored/head.py").read_text(encoding="utf-8") == BAD


def test_no_python_files_passes_quietly(tmp_path, environment):
    repository = git_repository(tmp_path / "project", {"README.md": "# notes\n", "data/config.yaml": "lr: 0.1\n"}, environment)
    completed = try_repo(repository, environment)
    sections = hook_sections(completed.stdout + completed.stderr)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert sections == {"torchlint": ("Skipped", ""), "torchlint (fix)": ("Skipped", "")}


def test_no_torch_code_passes_quietly(tmp_path, environment):
    files = {"stats.py": NO_TORCH, "pkg/__init__.py": "", "pkg/types.pyi": "def softmax(xs: list) -> list: ...\n"}
    repository = git_repository(tmp_path / "project", files, environment)
    completed = try_repo(repository, environment)
    sections = hook_sections(completed.stdout + completed.stderr)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # Hooks that pass print nothing of their own.
    assert sections == {"torchlint": ("Passed", ""), "torchlint (fix)": ("Passed", "")}
    assert (repository / "stats.py").read_text(encoding="utf-8") == NO_TORCH
