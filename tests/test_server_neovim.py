"""A real editor: headless Neovim's built-in LSP client runs ``torchlint server``, applies a quick fix, saves.

Skipped where Neovim is not installed (``apt-get install neovim``; `.ci/run` installs it when apt can).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from cli_support import BAD, isolate, torchlint  # noqa: E402
from server_support import SERVER  # noqa: E402

from torchlint.rule import LEVEL_TABLE_VARIABLE  # noqa: E402

NVIM = shutil.which("nvim")
SCRIPT = Path(__file__).resolve().parent / "editors" / "neovim_quickfix.lua"


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed (apt-get install neovim)")
def test_neovim_applies_the_quick_fix_and_saves_what_fix_would_write(tmp_path):
    isolate(tmp_path)
    path = tmp_path / "model.py"
    path.write_text(BAD, encoding="utf-8")
    log = tmp_path / "nvim.log"
    env = {"TORCHLINT_SERVER_CMD": json.dumps(SERVER), "TORCHLINT_NVIM_LOG": str(log), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    # the server shows the levels the analysis finds, as the fix run below does (tests/conftest.py)
    env.update({key: value for key, value in os.environ.items() if key == LEVEL_TABLE_VARIABLE})
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", str(path), "-c", f"luafile {SCRIPT}"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    happened = log.read_text(encoding="utf-8") if log.exists() else ""
    assert proc.returncode == 0, (happened, proc.stdout, proc.stderr)
    # The CLI's positions, 0-based, as Neovim shows them.
    assert "DIAGNOSTIC TL201 3:4" in happened and "DIAGNOSTIC TL401 4:4" in happened, happened
    assert "ACTION torchlint TL201: Replace with `log_softmax`" in happened and "SAVED" in happened
    fixed = torchlint("check", "-", "--fix", "--stdin-filename", str(path), cwd=tmp_path, stdin=BAD).stdout
    assert path.read_text(encoding="utf-8") == fixed != BAD
