"""Interrupted writes lose nothing (issue 8): a failure or a kill between writing the temporary
file and the rename leaves every file either old or new, never truncated, and no temporary file
when the process could still clean up."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cli_support import BAD, ONLY, TL201_LINE, isolate, torchlint
from torchlint import cli, source

FIXED = BAD.replace(TL201_LINE, "y = F.log_softmax(x, dim=-1)")


def leftovers(folder):
    return sorted(p.name for p in folder.rglob(".torchlint-*"))


def test_write_atomic_failure_before_rename_keeps_the_original(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_bytes(b"original\r\n")
    seen = {}

    def failing_replace(src, dst):
        seen["temporary"] = open(src, "rb").read()  # the new content was fully written...
        raise OSError(28, "No space left on device")  # ...and then the rename fails

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        source.write_atomic(str(path), b"new content\r\n")
    assert seen["temporary"] == b"new content\r\n"
    assert path.read_bytes() == b"original\r\n"
    assert leftovers(tmp_path) == []


def test_write_atomic_failure_while_writing(tmp_path, monkeypatch):
    path = tmp_path / "m.py"
    path.write_bytes(b"original\n")

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        source.write_atomic(str(path), b"new\n" * 1000)
    assert path.read_bytes() == b"original\n"
    assert leftovers(tmp_path) == []


def test_write_atomic_success_keeps_mode(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"old\n")
    os.chmod(path, 0o751)
    source.write_atomic(str(path), b"new\n")
    assert path.read_bytes() == b"new\n"
    assert os.stat(path).st_mode & 0o777 == 0o751
    assert leftovers(tmp_path) == []


def test_cli_reports_a_failed_rename_and_goes_on(tmp_path, monkeypatch, capsys):
    isolate(tmp_path)
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(BAD, encoding="utf-8")
    real_replace = os.replace

    def replace_fails_for_b(src, dst):
        if os.path.basename(dst) == "b.py":
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_fails_for_b)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["check", *ONLY, "--fix", "a.py", "b.py", "c.py"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "b.py" in err and "cannot write fixed file" in err and "No space left on device" in err
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXED
    assert (tmp_path / "b.py").read_text(encoding="utf-8") == BAD
    assert (tmp_path / "c.py").read_text(encoding="utf-8") == FIXED
    assert leftovers(tmp_path) == []


# A fix run whose second rename blocks until the test interrupts it.
PAUSING_RUN = textwrap.dedent(
    """
    import os, signal, sys, time
    # A run started in the background by a shell without job control ignores SIGINT; a user's does not.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    real_replace = os.replace
    calls = []
    def paused_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            open({marker!r}, "w").close()
            time.sleep(120)
        real_replace(src, dst)
    os.replace = paused_replace
    from torchlint.cli import main
    sys.exit(main(["check", "--select", "TL201,TL401", "--fix", "a.py", "b.py", "c.py"]))
    """
)


def _run_until_paused(tmp_path):
    isolate(tmp_path)
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(BAD, encoding="utf-8")
    marker = tmp_path / "paused"
    proc = subprocess.Popen(
        [sys.executable, "-c", PAUSING_RUN.format(marker=str(marker))],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the fix run never reached the second rename: {err.decode(errors='replace')}")
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_fix_run_leaves_old_or_new_and_cleans_up(tmp_path, sig):
    proc = _run_until_paused(tmp_path)
    # The temporary file of b.py is complete and waiting for its rename.
    assert len(leftovers(tmp_path)) == 1
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXED
    assert (tmp_path / "b.py").read_text(encoding="utf-8") == BAD
    assert (tmp_path / "c.py").read_text(encoding="utf-8") == BAD
    assert leftovers(tmp_path) == []
    # Running again finishes the job.
    proc = torchlint("check", *ONLY, "--fix", "a.py", "b.py", "c.py", cwd=tmp_path)
    assert proc.returncode == 1  # TL401 (unsafe fix) remains in each
    assert all((tmp_path / n).read_text(encoding="utf-8") == FIXED for n in ("a.py", "b.py", "c.py"))


def test_killed_fix_run_leaves_old_or_new(tmp_path):
    proc = _run_until_paused(tmp_path)
    proc.kill()  # SIGKILL: no chance to clean up
    proc.communicate(timeout=60)
    assert (tmp_path / "a.py").read_text(encoding="utf-8") == FIXED
    assert (tmp_path / "b.py").read_text(encoding="utf-8") == BAD
    assert (tmp_path / "c.py").read_text(encoding="utf-8") == BAD
    # What a SIGKILL can leave: one complete temporary file, hidden and never a .py file, so
    # the next run neither lints nor trips over it.
    (left,) = leftovers(tmp_path)
    assert left.startswith(".torchlint-") and left.endswith(".tmp")
    assert (tmp_path / left).read_text(encoding="utf-8") == FIXED
    proc = torchlint("check", *ONLY, "--fix", ".", cwd=tmp_path)
    assert proc.returncode == 1
    assert left not in proc.stdout + proc.stderr
