"""Run torchlint's command line on files in a temporary folder: in this process (``cli.main`` with its own working
folder, standard streams and environment) or, where the console script itself is what a test is about, as
``python -m torchlint`` in a subprocess."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional, Union

# Code that TL201 and TL401 flag, and nothing else ought to: the snippets the CLI tests lint.
TL201_LINE = "y = torch.log(F.softmax(x, dim=-1))"
TL401_LINE = "s = torch.load(p).to(device)"
# The file picks the CPU, so the device its checkpoints were saved from is one it may lack (TL401 is `high`).
HEADER = "import torch\nimport torch.nn.functional as F; CPU = torch.device(\"cpu\")\n"
# The device line gives TL401's unsafe fix (``map_location=device``) a device to name, and the load's `.to(device)`
# shows the code puts what it loads there; data left where it loads, or no device in scope, gets no fix.
BAD = HEADER + 'device = "cpu"\n' + TL201_LINE + "\n" + TL401_LINE + "\n"
CLEAN = "import torch\n\nx = torch.zeros(3)\n"
# The two rules these tests are about; other rules land all the time and must not change the expectations.
ONLY = ("--select", "TL201,TL401")


def torchlint(
    *args: str, cwd: Union[str, Path], stdin: Optional[Union[str, bytes]] = None, timeout: float = 300,
    measured_levels: bool = False, console: bool = False,
) -> subprocess.CompletedProcess:
    """``torchlint ARGS`` in ``cwd``: exit code, stdout/stderr decoded as UTF-8 (bytes kept in ``.stdout_bytes``).

    Runs ``cli.main`` in this process, which proves what the command does at a fraction of an interpreter's start;
    ``console=True`` (and ``trace``/``server``, which run programs or speak over the process's own streams) runs
    ``python -m torchlint`` as a subprocess instead. ``measured_levels``: with the measured level table that users
    get (tests/conftest.py turns it off)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
    if console or (args and args[0] in ("trace", "server")):
        return _console(args, cwd, data, timeout, measured_levels)
    return _in_process(args, cwd, data, measured_levels)


def _console(args, cwd, data: bytes, timeout: float, measured_levels: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if measured_levels:
        env.pop("TORCHLINT_LEVEL_TABLE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", *args], cwd=str(cwd), env=env, input=data, capture_output=True, timeout=timeout,
    )
    return _decoded(proc.args, proc.returncode, proc.stdout, proc.stderr)


def _in_process(args, cwd, data: bytes, measured_levels: bool) -> subprocess.CompletedProcess:
    from torchlint import cli

    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    with _working_folder(cwd), _level_table(measured_levels), _streams(stdin, stdout, stderr):
        try:
            code = cli.main(list(args))
        except SystemExit as stop:  # argparse's --help and usage errors
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
    return _decoded(["torchlint", *args], code, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _working_folder(cwd: Union[str, Path]) -> Iterator[None]:
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _streams(stdin, stdout, stderr) -> Iterator[None]:
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@contextlib.contextmanager
def _level_table(measured_levels: bool) -> Iterator[None]:
    from torchlint.rule import LEVEL_TABLE_VARIABLE, measured_level_moves

    saved = os.environ.get(LEVEL_TABLE_VARIABLE)
    if measured_levels:
        os.environ.pop(LEVEL_TABLE_VARIABLE, None)
        measured_level_moves.cache_clear()
    try:
        yield
    finally:
        if measured_levels:
            if saved is not None:
                os.environ[LEVEL_TABLE_VARIABLE] = saved
            measured_level_moves.cache_clear()


def _decoded(argv, code: int, stdout: bytes, stderr: bytes) -> subprocess.CompletedProcess:
    proc = subprocess.CompletedProcess(argv, code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))
    proc.stdout_bytes = stdout  # type: ignore[attr-defined]
    return proc


def check_json(*args: str, cwd: Union[str, Path], stdin: Optional[Union[str, bytes]] = None) -> tuple:
    """(exit code, parsed json list) of ``torchlint check --output-format json ARGS``."""
    proc = torchlint("check", "--output-format", "json", *args, cwd=cwd, stdin=stdin)
    return proc.returncode, json.loads(proc.stdout), proc


def isolate(folder: Path) -> None:
    """An empty [tool.torchlint] table here, so no configuration above the temporary folder leaks in."""
    (folder / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")


def codes_by_line(items) -> list:
    return [(item["path"], item["line"], item["code"]) for item in items]


def snapshot(path: Path) -> tuple:
    """What a rewrite would change: inode, mtime, size and bytes."""
    info = os.stat(path)
    return (info.st_ino, info.st_mtime_ns, info.st_size, path.read_bytes())


def age(path: Path, seconds: int = 100) -> None:
    """Move the mtime into the past so that any rewrite, however fast, shows."""
    info = os.stat(path)
    os.utime(path, ns=(info.st_atime_ns - seconds * 10**9, info.st_mtime_ns - seconds * 10**9))
