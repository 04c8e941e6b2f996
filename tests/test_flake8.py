"""The flake8 door: real ``flake8`` processes, compared with the CLI on the same files.

flake8 adds 1 to the 0-based column a plugin reports; torchlint's own
columns are 1-based, so the plugin subtracts one. These tests pin that both
doors print the same line:column, that ``# noqa`` is flake8's business, and
that options come from the ``[tool.torchlint]`` nearest to each file.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Sequence, Set, Tuple

from fixture_support import FIXTURES, checker_files, python_parses

FLAKE8_FORMAT = "%(path)s:%(row)d:%(col)d:%(code)s"
TL201_LINE = "    return torch.log(F.softmax(logits, dim=-1))\n"
TORCH_HEADER = "import torch\nimport torch.nn.functional as F\n\n\n"

Position = Tuple[str, int, int, str]


def run_flake8(paths: Sequence[Path], cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    # --isolated: no flake8 config files of the surrounding project; [tool.torchlint] is still read.
    command = [sys.executable, "-m", "flake8", "--isolated", "--select", "TL", f"--format={FLAKE8_FORMAT}", *extra]
    return subprocess.run(command + [str(p) for p in paths], cwd=cwd, capture_output=True, text=True, timeout=300)


def flake8_positions(paths: Sequence[Path], cwd: Path, *extra: str) -> Set[Position]:
    completed = run_flake8(paths, cwd, *extra)
    assert completed.returncode in (0, 1), completed.stderr
    positions = set()
    for line in completed.stdout.splitlines():
        path, row, col, code = line.rsplit(":", 3)
        positions.add((str(Path(cwd, path).resolve()), int(row), int(col), code))
    return positions


def cli_positions(paths: Sequence[Path], cwd: Path) -> Set[Position]:
    command = [sys.executable, "-m", "torchlint", "check", "--select", "ALL", "--output-format", "json", "--exit-zero"]
    completed = subprocess.run(command + [str(p) for p in paths], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return {
        (str(Path(cwd, item["path"]).resolve()), item["line"], item["column"], item["code"])
        for item in json.loads(completed.stdout)
    }


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_plugin_is_registered_with_flake8():
    completed = subprocess.run([sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0
    assert "torchlint" in completed.stdout


def test_column_is_the_1_based_column_of_the_cli(tmp_path):
    # `torch.log(` starts at character 12 (1-based) of line 6.
    path = write(tmp_path / "model.py", TORCH_HEADER + "def head(logits):\n" + TL201_LINE)
    completed = run_flake8([path], tmp_path)
    assert completed.returncode == 1
    assert completed.stdout.splitlines() == [f"{path}:6:12:TL201"]
    assert cli_positions([path], tmp_path) == {(str(path.resolve()), 6, 12, "TL201")}


def test_positions_equal_the_cli_on_every_checker_fixture(tmp_path):
    # One project for both doors (its own [tool.torchlint] root): the facts read across a project (float16
    # runs, device choices, traced models) then come from the same files in the CLI and in flake8.
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    paths = []
    for source in filter(python_parses, checker_files()):  # flake8 runs no plugin on a file it cannot parse
        copy = tmp_path / source.relative_to(FIXTURES)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
        paths.append(copy)
    cli = {p for p in cli_positions(paths, tmp_path) if p[3] != "TL000"}
    flake8 = flake8_positions(paths, tmp_path)
    assert cli, "the fixtures must produce findings for the comparison to mean anything"
    assert {p[3] for p in cli} >= {"TL201", "TL401"}
    assert flake8 == cli


def test_positions_equal_the_cli_on_awkward_lines(tmp_path):
    # Non-ASCII text before the finding, a tab, a CRLF file, a finding inside a nested call.
    awkward = write(
        tmp_path / "awkward.py",
        TORCH_HEADER
        + "def head(logits):\n"
        + '    label = "확률"; p = torch.log(F.softmax(logits, dim=-1))\n'
        + '    return p, torch.load(open("ckpt.pt", "rb"))\n'
        + "\n\ndef tabbed(logits):\n"
        + "\treturn (logits.softmax(-1).log(),)\n",
    )
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes((TORCH_HEADER + "def head(logits):\n" + TL201_LINE).replace("\n", "\r\n").encode())
    cli = cli_positions([awkward, crlf], tmp_path)
    assert len(cli) == 4
    assert flake8_positions([awkward, crlf], tmp_path) == cli


NOQA_SOURCE = TORCH_HEADER + textwrap.dedent(
    """\
    def head(x):
        a = torch.log(F.softmax(x, dim=-1))
        b = torch.log(F.softmax(x, dim=-1))  # noqa: TL201
        c = torch.log(F.softmax(x, dim=-1))  # noqa: TL401
        d = torch.log(F.softmax(x, dim=-1))  # noqa:TL2
        e = torch.log(F.softmax(x, dim=-1))  # NOQA
        f = torch.log(F.softmax(x, dim=-1)), torch.load("p")  # noqa: TL201
        g = torch.log(F.softmax(x, dim=-1)), torch.load("q")  # noqa: TL201,TL401
        return a, b, c, d, e, f, g
    """
)


def test_noqa_is_honoured_by_flake8_as_by_the_cli(tmp_path):
    path = write(tmp_path / "noqa.py", NOQA_SOURCE)
    key = str(path.resolve())
    everything = flake8_positions([path], tmp_path, "--disable-noqa")
    # The plugin reports every finding; only flake8's noqa handling removes them.
    assert {(line, code) for _, line, _, code in everything} == {
        (6, "TL201"), (7, "TL201"), (8, "TL201"), (9, "TL201"), (10, "TL201"),
        (11, "TL201"), (11, "TL401"), (12, "TL201"), (12, "TL401"),
    }
    shown = flake8_positions([path], tmp_path)
    assert shown == {(key, 6, 9, "TL201"), (key, 8, 9, "TL201"), (key, 11, 42, "TL401")}
    assert cli_positions([path], tmp_path) == shown


# Runs real flake8 in one process (-j 1) and records the settings the plugin hands
# to the engine: no current rule's findings depend on eps, so watch the value itself.
SETTINGS_PROBE = textwrap.dedent(
    """\
    import json, sys
    from flake8.main import cli
    from torchlint import engine

    seen = []
    real_lint_text = engine.lint_text

    def probe(source, path, settings, **kwargs):
        seen.append([path, settings.eps, settings.target_torch_version])
        return real_lint_text(source, path, settings, **kwargs)

    engine.lint_text = probe
    try:
        status = cli.main(["--isolated", "-j", "1", "--select", "TL"] + sys.argv[2:])
    finally:
        with open(sys.argv[1], "w") as handle:
            json.dump(seen, handle)
    sys.exit(status)
    """
)


def test_options_come_from_the_nearest_tool_torchlint_table(tmp_path):
    write(tmp_path / "a" / "pyproject.toml", '[tool.torchlint]\neps = 1e-3\ntarget-torch-version = "2.1"\n')
    # A pyproject.toml without a [tool.torchlint] table does not hide the one above it.
    write(tmp_path / "a" / "sub" / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    write(tmp_path / "b" / "pyproject.toml", "[tool.torchlint]\neps = 1e-5\n")
    under_a = write(tmp_path / "a" / "sub" / "pkg" / "model.py", TORCH_HEADER + "def head(logits):\n" + TL201_LINE)
    under_b = write(tmp_path / "b" / "model.py", TORCH_HEADER + "def head(logits):\n" + TL201_LINE)
    elsewhere = write(tmp_path / "c" / "model.py", TORCH_HEADER + "def head(logits):\n" + TL201_LINE)
    probe = write(tmp_path / "probe.py", SETTINGS_PROBE)
    record = tmp_path / "seen.json"
    completed = subprocess.run(
        [sys.executable, str(probe), str(record), str(under_a), str(under_b), str(elsewhere)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.count("TL201") == 3
    seen = {Path(path).resolve(): (eps, version) for path, eps, version in json.load(record.open())}
    assert seen == {
        under_a.resolve(): (1e-3, [2, 1]),
        under_b.resolve(): (1e-5, None),
        elsewhere.resolve(): (1e-6, None),  # no table anywhere above /tmp: the default
    }


def test_a_broken_config_is_reported_not_ignored(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nepsilon = 1e-3\n")
    path = write(tmp_path / "model.py", TORCH_HEADER + "def head(logits):\n" + TL201_LINE)
    completed = run_flake8([path], tmp_path, "--format=%(row)d:%(col)d:%(code)s %(text)s")
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("1:1:TL000 ")
    assert "'epsilon'" in lines[0] and str(tmp_path / "pyproject.toml") in lines[0]
    # The findings are still reported, with the defaults.
    assert lines[1].startswith("6:12:TL201 ")


def test_files_without_torch_code_yield_nothing(tmp_path):
    plain = write(tmp_path / "plain.py", "import os\n\n\ndef main():\n    return os.getcwd()\n")
    numpy_softmax = write(
        tmp_path / "numpy_softmax.py",
        textwrap.dedent(
            """\
            import numpy as np


            def softmax(x):
                e = np.exp(x - x.max())
                return e / e.sum()


            def log_probs(x):
                return np.log(softmax(x))


            def load(path):
                return np.load(path)
            """
        ),
    )
    empty = write(tmp_path / "empty.py", "")
    completed = run_flake8([plain, numpy_softmax, empty], tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout == ""
    assert cli_positions([plain, numpy_softmax, empty], tmp_path) == set()
