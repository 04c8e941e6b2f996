"""``torchlint trace`` fails at once, running nothing, when the run could not confirm anything: the script
does not exist, or the interpreter that would run the program cannot import torch (issue 35, point 4).

"torch is missing" is simulated with ``sys.modules["torch"] = None`` (``importlib.util.find_spec`` then
finds no torch), in this process or in a subprocess that starts torchlint's ``main`` after setting it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchlint.cli import main
from torchlint.trace import command

# A program with a TL201 finding that leaves a mark when it runs.
PROGRAM = """\
from pathlib import Path

Path("ran.txt").write_text("ran")
import torch

x = torch.randn(3)
y = -torch.log(torch.softmax(x, 0))
"""

# Another file of the project with a finding: a static check would list it.
OTHER = """\
import torch

scores = torch.randn(4)
loss = -torch.log(torch.softmax(scores, 0)).mean()
"""

WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; from torchlint.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "prog.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "other.py").write_text(OTHER, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def nothing_runs(monkeypatch):
    """Neither the static check nor the program may run."""

    def static(*args, **kwargs):
        pytest.fail("the static check ran")

    def traced(*args, **kwargs):
        pytest.fail("the program ran")

    monkeypatch.setattr(command, "static_findings", static)
    monkeypatch.setattr(command, "_run_traced", traced)


def torchlint(folder: Path, *arguments: str, without_torch: bool = False) -> subprocess.CompletedProcess:
    start = ["-c", WITHOUT_TORCH] if without_torch else ["-m", "torchlint"]
    return subprocess.run([sys.executable, *start, *arguments], cwd=folder, capture_output=True, timeout=300)


def error_lines(stderr: str):
    return [line for line in stderr.splitlines() if line.strip()]


# -- torch missing ----------------------------------------------------------------------------------


def test_torch_missing_fails_at_once_naming_the_interpreter_and_the_install(folder, nothing_runs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["trace", "prog.py", "--lr", "0.1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = error_lines(err)
    assert line.startswith("error: torch is not installed for ")
    assert sys.executable in line
    assert "pip install torch" in line
    assert "confirmed" not in err
    assert not (folder / "ran.txt").exists()


def test_torch_missing_in_a_real_run_runs_nothing(folder):
    proc = torchlint(folder, "trace", "prog.py", without_torch=True)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert proc.stdout == b""
    [line] = error_lines(stderr)
    assert line == "error: " + command._torch_missing_message(sys.executable)
    assert "ModuleNotFoundError" not in stderr and "never imported torch" not in stderr and "other.py" not in stderr
    assert not (folder / "ran.txt").exists()


def test_torch_missing_stops_a_module_run_too(folder, nothing_runs, monkeypatch, capsys):
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "pkg" / "__main__.py").write_text(PROGRAM, encoding="utf-8")
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["trace", "-m", "pkg"]) == 2
    assert "torch is not installed for" in capsys.readouterr().err


def test_torch_next_to_the_program_counts_as_importable(tmp_path, monkeypatch):
    """The program's sys.path starts with its folder: a torch there is the one it imports."""
    monkeypatch.setitem(sys.modules, "torch", None)
    assert not command.torch_importable([str(tmp_path)])
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("", encoding="utf-8")
    assert command.torch_importable([str(tmp_path)])


def test_an_installed_torch_is_found_without_importing_it(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert command.torch_importable([str(tmp_path)])
    assert "torch" not in sys.modules


# -- the script does not exist ----------------------------------------------------------------------


def test_a_missing_script_fails_before_the_static_check(folder):
    proc = torchlint(folder, "trace", "missing.py", "--lr", "0.1")
    assert proc.returncode == 2
    assert proc.stdout == b""
    assert proc.stderr.decode() == "error: missing.py: no such file or directory\n"


def test_a_missing_script_in_a_folder_is_named_as_given(folder, nothing_runs, capsys):
    assert main(["trace", os.path.join("scripts", "train.py")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"error: {os.path.join('scripts', 'train.py')}: no such file or directory\n"


def test_a_missing_script_is_reported_before_a_missing_torch(folder, nothing_runs, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["trace", "missing.py"]) == 2
    assert capsys.readouterr().err == "error: missing.py: no such file or directory\n"


def test_a_module_that_does_not_exist_is_left_to_python(folder):
    """-m: no path to check; the module is found (or not) as python -m finds it."""
    alone = subprocess.run([sys.executable, "-m", "no_such_module_here"], cwd=folder, capture_output=True, timeout=60)
    proc = torchlint(folder, "trace", "-m", "no_such_module_here")
    assert proc.returncode == alone.returncode != 0
    assert proc.stderr.startswith(alone.stderr)
    assert b"no such file or directory" not in proc.stderr
