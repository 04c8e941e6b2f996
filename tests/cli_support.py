"""Run the real console entry point (``python -m torchlint``) as a subprocess on files in a temporary folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Union

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
    measured_levels: bool = False,
) -> subprocess.CompletedProcess:
    """``python -m torchlint ARGS`` in ``cwd``; stdout/stderr decoded as UTF-8 (bytes kept in ``.stdout_bytes``).
    ``measured_levels``: with the measured level table that users get (tests/conftest.py turns it off)."""
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    env = dict(os.environ)
    if measured_levels:
        env.pop("TORCHLINT_LEVEL_TABLE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", *args],
        cwd=str(cwd),
        env=env,
        input=data if data is not None else b"",
        capture_output=True,
        timeout=timeout,
    )
    proc.stdout_bytes = proc.stdout  # type: ignore[attr-defined]
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
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
