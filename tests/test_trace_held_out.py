"""The held-out programs of tests/data/trace/held_out/ (see its README): what their writer expected from the
documentation alone, before they first ran under torchlint."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HELD_OUT = Path(__file__).resolve().parent / "data" / "trace" / "held_out"
TRACE = [sys.executable, "-m", "torchlint", "trace", "--output-file", "t.json"]
TWO_RANKS = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "torchlint", "trace", "--output-file", "t.json"]


def case(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(HELD_OUT / name, folder)
    return folder


def run(folder: Path, *command: str, **environment: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **environment)
    return subprocess.run(list(command), cwd=folder, capture_output=True, text=True, timeout=300, env=env)


def report(folder: Path, name: str = "t.json") -> dict:
    return json.loads((folder / name).read_text(encoding="utf-8"))


def where(event: dict) -> tuple:
    return (Path(event["path"]).name, event["line"])


def confirmed(document: dict) -> list:
    return [(item["code"], Path(item["path"]).name, item["line"]) for item in document["findings"] if item["confirmed"]]


def test_c1_the_scalers_overflow_alone_is_no_birth(tmp_path):
    folder = case(tmp_path, "c1_amp_overflow_only")
    plain, traced = run(folder, sys.executable, "train.py"), run(folder, *TRACE, "train.py")
    assert traced.returncode == 0 and traced.stdout == plain.stdout, traced.stderr
    document = report(folder)
    assert document["first_nonfinite"] is None
    record = document["run"]
    assert (record["optimizer_steps"], record["scaler_skipped_steps"], record["scaler_overflows"]) == (12, 7, 7)
    assert (record["first_overflow"]["op"], where(record["first_overflow"]), record["first_overflow"]["step"]) == ("AddmmBackward0", ("head.py", 14), 0)


def test_c2_a_root_of_zero_after_the_overflows_is_the_birth(tmp_path):
    folder = case(tmp_path, "c2_amp_overflow_plus_sqrt0")
    plain, traced = run(folder, sys.executable, "train.py"), run(folder, *TRACE, "train.py")
    assert traced.returncode == 0 and traced.stdout == plain.stdout, traced.stderr
    document = report(folder)
    first = document["first_nonfinite"]
    assert (first["phase"], first["op"], where(first), first["step"], first["backward_calls"]) == ("backward", "SqrtBackward0", ("pairs.py", 7), 9, 9)
    assert (document["run"]["scaler_skipped_steps"], document["run"]["scaler_overflows"]) == (6, 5)
    assert confirmed(document) == [("TL101", "pairs.py", 7)]


def test_c3_a_forward_overflow_the_scaler_never_sees(tmp_path):
    folder = case(tmp_path, "c3_amp_forward_overflow")
    traced = run(folder, *TRACE, "train.py")
    assert traced.returncode == 0, traced.stderr
    document = report(folder)
    first = document["first_nonfinite"]
    assert (first["phase"], where(first), first["step"], first["kind"]) == ("forward", ("scorer.py", 12), 4, "inf")
    assert (document["run"]["scaler_skipped_steps"], document["run"]["scaler_overflows"]) == (0, 0)


def test_c4_a_gradient_ddp_hands_over_is_from_the_other_rank(tmp_path):
    folder = case(tmp_path, "c4_ddp_rank1_grad_inf")
    traced = run(folder, *TWO_RANKS, "train.py")
    assert traced.returncode == 0, traced.stderr[-3000:]
    born, received = report(folder, "t.rank1.json"), report(folder, "t.rank0.json")
    first = born["first_nonfinite"]
    assert (first["op"], where(first), first["step"], first.get("from_other_rank")) == ("SqrtBackward0", ("objective.py", 5), 3, None)
    assert confirmed(born) == [("TL101", "objective.py", 5)]
    other = received["first_nonfinite"]
    assert other["from_other_rank"] is True and other["step"] == 3 and confirmed(received) == []


def test_c5_a_value_all_reduce_hands_over_is_from_the_other_rank(tmp_path):
    folder = case(tmp_path, "c5_allreduce_rank1_nan")
    traced = run(folder, *TWO_RANKS, "train.py")
    assert traced.returncode == 0, traced.stderr[-3000:]
    first = report(folder, "t.rank1.json")["first_nonfinite"]
    assert (first["phase"], where(first), first["step"], first["kind"]) == ("forward", ("stats.py", 8), 2, "nan")
    other = report(folder, "t.rank0.json")["first_nonfinite"]
    assert (other["from_other_rank"], where(other), other["step"]) == (True, ("train.py", 23), 2)


def test_c6_a_nan_in_a_module_the_block_imports(tmp_path):
    folder = case(tmp_path, "c6_watch_nan_in_module")
    plain, watched = run(folder, sys.executable, "run.py", TL_NO_WATCH="1"), run(folder, sys.executable, "run.py")
    assert watched.returncode == 0, watched.stderr
    steps = [line for line in watched.stdout.splitlines() if line.startswith("step")]
    assert steps == [line for line in plain.stdout.splitlines() if line.startswith("step")] and len(steps) == 5
    document = report(folder, "w.json")
    first = document["first_nonfinite"]
    assert (first["phase"], where(first), first["step"], first["kind"]) == ("forward", ("layers.py", 14), 2, "nan")
    assert confirmed(document) == [("TL104", "layers.py", 14)]


@pytest.mark.parametrize("deferred", ["0", "1"], ids=["read-at-once", "read-later"])
def test_c7_stop_on_first_raises_naming_the_line(tmp_path, deferred):
    folder = case(tmp_path, "c7_watch_stop_on_first")
    watched = run(folder, sys.executable, "run.py", TORCHLINT_TRACE_DEFERRED=deferred)
    assert watched.returncode == 3, watched.stderr
    lines = watched.stdout.splitlines()
    assert [line.split(" loss")[0] for line in lines if line.startswith("step")] == ["step 0", "step 1", "step 2"]
    (stopped,) = [line for line in lines if line.startswith("stopped:")]
    assert "NonFiniteValueError" in stopped and "proj/heads.py:13" in stopped
    assert "finished all steps" not in watched.stdout


def test_c8_a_clean_decorated_function_prints_bitwise_what_it_prints_unwatched(tmp_path):
    folder = case(tmp_path, "c8_watch_clean_decorator")
    plain, watched = run(folder, sys.executable, "run.py", TL_NO_WATCH="1"), run(folder, sys.executable, "run.py")
    assert watched.returncode == 0 and watched.stdout == plain.stdout, watched.stderr
    document = report(folder, "w.json")
    assert document["first_nonfinite"] is None and confirmed(document) == []
    assert (document["run"]["optimizer_steps"], document["run"]["backward_calls"]) == (25, 25)
