"""``torchlint trace`` end to end: the training programs of tests/data/trace/ run plain and traced.

Each traced run is a real ``python -m torchlint trace`` subprocess (about two seconds: it imports
torch); runs that several tests read are made once per module.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

DATA = Path(__file__).resolve().parent / "data" / "trace"

# (file, text on the flagged line, code) -> confirmed in a run of every scenario
SCENARIO_VERDICTS = {
    ("numerics_contrastive.py", "distances.sqrt()", "TL101"): True,
    ("numerics_contrastive.py", "torch.sqrt((embedding ** 2)", "TL101"): False,
    ("numerics_masked_mean.py", "/ mask.sum()", "TL104"): True,
    ("numerics_masked_mean.py", "features / features.norm", "TL104"): False,
    ("numerics_gem_pooling.py", "torch.pow(pooled, 1.0 / self.p)", "TL103"): True,
    ("numerics_gem_pooling.py", "torch.pow(F.relu(features), self.p)", "TL103"): False,
    ("numerics_gem_pooling.py", "features.var(dim=0) ** 0.5", "TL103"): False,
    ("numerics_count_log.py", "torch.log(counts)", "TL102"): True,
    ("numerics_count_log.py", "torch.log(features.std", "TL102"): False,
    ("numerics_half_precision.py", "features.half().norm(dim=1) + 1e-10", "TL105"): True,
    ("numerics_half_precision.py", "features.norm(dim=1) + 1e-10", "TL105"): False,
    ("numerics_half_precision.py", "torch.clamp(p, 1e-3, 1 - 1e-8)", "TL105"): True,
    ("numerics_where_and_filter.py", "torch.where(d > 0", "TL106"): True,
    ("numerics_where_and_filter.py", "torch.nan_to_num(torch.log(w)", "TL107"): True,
    ("numerics_where_and_filter.py", "torch.nan_to_num(torch.sqrt(x.var(0)))", "TL107"): False,
    ("numerics_angular.py", "torch.acos(cosine)", "TL108"): True,
    ("numerics_angular.py", "torch.atanh(torch.tanh(scores))", "TL108"): False,
    ("fused_log_softmax.py", "-torch.log(probabilities)", "TL201"): True,
    ("fused_log_softmax.py", "+ 1e-6).gather", "TL201"): False,
    ("fused_log_softmax.py", "torch.log(1 + rate)", "TL205"): True,
    ("fused_log_softmax.py", "torch.exp(z) - 1", "TL205"): False,
    ("fused_gan.py", "torch.log(discriminator(real))", "TL202"): False,
    ("fused_gan.py", "torch.log(1 - discriminator(fake.detach()))", "TL202"): True,
    ("fused_gan.py", "F.binary_cross_entropy(discriminator(fake)", "TL206"): True,
    ("fused_entropy.py", "weights * torch.log(weights)", "TL204"): True,
    ("fused_entropy.py", "torch.log(torch.sum(torch.exp(scores)", "TL203"): False,
    ("fused_entropy.py", "F.kl_div(F.softmax(scores", "TL207"): True,
}


# -- running ----------------------------------------------------------------------------------


def project(tmp_path: Path, case: str) -> Path:
    """A copy of ``tests/data/trace/<case>`` with a [tool.torchlint] table of its own: the project root."""
    folder = tmp_path / case
    shutil.copytree(DATA / case, folder)
    (folder / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    return folder


def run(folder: Path, *command: str, stdin: bytes = b"", env: Optional[Dict[str, str]] = None, timeout: float = 300):
    environment = dict(os.environ, **(env or {}))
    return subprocess.run(list(command), cwd=folder, input=stdin, capture_output=True, timeout=timeout, env=environment)


def plain(folder: Path, *arguments: str, stdin: bytes = b""):
    return run(folder, sys.executable, *arguments, stdin=stdin)


def trace(folder: Path, *arguments: str, stdin: bytes = b"", env: Optional[Dict[str, str]] = None) -> Tuple[subprocess.CompletedProcess, dict]:
    """``torchlint trace --output-format json --output-file ... ARGUMENTS`` in ``folder``: the process and the JSON report."""
    report = folder / "trace-report.json"
    if report.exists():
        report.unlink()
    proc = run(folder, sys.executable, "-m", "torchlint", "trace", "--output-format", "json", "--output-file", str(report), *arguments, stdin=stdin, env=env)
    assert report.exists(), proc.stderr.decode()
    return proc, json.loads(report.read_text(encoding="utf-8"))


def line_of(folder: Path, file: str, text: str) -> int:
    lines = (folder / file).read_text(encoding="utf-8").splitlines()
    found = [number for number, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, (file, text, found)
    return found[0]


def verdicts(report: dict) -> Dict[Tuple[str, int, str], dict]:
    return {(Path(item["path"]).name, item["line"], item["code"]): item for item in report["findings"]}


def planted_keys(folder: Path) -> Dict[Tuple[str, int, str], bool]:
    return {(file, line_of(folder, file, text), code): confirmed for (file, text, code), confirmed in SCENARIO_VERDICTS.items()}


def evidence_at(report: dict, folder: Path, file: str, text: str, code: str) -> dict:
    return verdicts(report)[(file, line_of(folder, file, text), code)]["evidence"]


# -- every scenario in one run ----------------------------------------------------------------


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    folder = project(tmp_path_factory.mktemp("trace"), "scenarios")
    proc, report = trace(folder, "run_all.py")
    return folder, proc, report


def test_planted_hazards_are_confirmed_and_look_alikes_not_reached(scenarios):
    folder, proc, report = scenarios
    assert proc.returncode == 0, proc.stderr.decode()
    found = verdicts(report)
    expected = planted_keys(folder)
    for key, confirmed in expected.items():
        assert key in found, f"no finding {key}; the report has {sorted(found)}"
        assert found[key]["confirmed"] is confirmed, (key, found[key]["evidence"])
        assert found[key]["evidence"].get("instrumented", True), (key, found[key]["evidence"])
    wrongly_confirmed = [key for key, item in found.items() if item["confirmed"] and not expected.get(key)]
    assert wrongly_confirmed == []


def test_evidence_names_the_call_the_values_and_the_dtype(scenarios):
    folder, _, report = scenarios

    distance = evidence_at(report, folder, "numerics_contrastive.py", "distances.sqrt()", "TL101")
    assert (distance["first_call"], distance["step"], distance["edge_entries"], distance["entries"]) == (4, 3, 1, 16)
    assert distance["value_at_first"] == 0 and distance["dtype"] == "float32"
    assert distance["gradient"]["kind"] == "inf" and distance["gradient"]["first_call"] == 4

    mean = evidence_at(report, folder, "numerics_masked_mean.py", "/ mask.sum()", "TL104")
    assert mean["first_call"] == 3 and mean["min_abs"] == 0 and mean["zero_over_zero_entries"] == 1

    eps = evidence_at(report, folder, "numerics_half_precision.py", "features.half().norm(dim=1) + 1e-10", "TL105")
    assert (eps["eps"], eps["rounded"], eps["dtype"]) == (1e-10, 0.0, "float16")
    kept = evidence_at(report, folder, "numerics_half_precision.py", "features.norm(dim=1) + 1e-10", "TL105")
    assert kept["calls"] == 3 and kept["calls_at_edge"] == 0 and kept["dtype"] == "float32"
    bound = evidence_at(report, folder, "numerics_half_precision.py", "torch.clamp(p, 1e-3, 1 - 1e-8)", "TL105")
    assert bound["edge"] == "upper_bound" and bound["rounded"] == 1.0

    cubes = evidence_at(report, folder, "numerics_gem_pooling.py", "torch.pow(F.relu(features), self.p)", "TL103")
    assert cubes["exponent"] == 3.0 and cubes["min"] == 0  # 0 under an integer power is no edge

    look_alike = evidence_at(report, folder, "numerics_contrastive.py", "torch.sqrt((embedding ** 2)", "TL101")
    assert look_alike["calls"] == 6 and look_alike["min"] > 0 and look_alike["gradient"] is None


def test_the_first_nonfinite_value_of_the_run_is_the_first_planted_one(scenarios):
    folder, proc, report = scenarios
    first = report["first_nonfinite"]
    assert first["path"] == "numerics_contrastive.py"
    assert first["line"] == line_of(folder, "numerics_contrastive.py", "distances.sqrt()")
    assert (first["phase"], first["op"], first["kind"], first["step"]) == ("backward", "SqrtBackward0", "inf", 3)
    assert first["findings"] == ["TL101"]
    text = proc.stderr.decode()
    assert "first non-finite value: inf in the gradient of SqrtBackward0 at numerics_contrastive.py:" in text
    assert proc.stdout.decode().splitlines()[-1] == "fused_entropy done"


def test_text_report_marks_each_finding(scenarios):
    folder, proc, _ = scenarios
    text = proc.stderr.decode()
    line = line_of(folder, "numerics_masked_mean.py", "features / features.norm")
    assert f"numerics_masked_mean.py:{line}:12: TL104 not reached in this run (ran 10 times; smallest |x|" in text
    line = line_of(folder, "numerics_masked_mean.py", "/ mask.sum()")
    assert f"numerics_masked_mean.py:{line}:12: TL104 confirmed: call 3 (after 8 optimizer steps) had 1 of 1 entries at 0 (min |x| 0, float32)" in text


def test_an_infinite_gradient_is_named_at_the_line_of_its_forward_op(tmp_path):
    folder = project(tmp_path, "scenarios")
    _, report = trace(folder, "run_all.py", "numerics_gem_pooling")
    first = report["first_nonfinite"]
    line = line_of(folder, "numerics_gem_pooling.py", "torch.pow(pooled")
    assert (first["path"], first["line"], first["phase"], first["op"], first["kind"]) == ("numerics_gem_pooling.py", line, "backward", "PowBackward0", "inf")


def test_device_side_checks_read_later_agree(tmp_path, scenarios):
    """The accelerator path (checks kept as tensors, read every N ops) on the CPU: the same verdicts and line."""
    _, _, immediate = scenarios
    folder = project(tmp_path, "scenarios")
    proc, deferred = trace(folder, "--sync-every", "7", "run_all.py", env={"TORCHLINT_TRACE_DEFERRED": "1"})
    assert proc.returncode == 0, proc.stderr.decode()
    assert {k: v["confirmed"] for k, v in verdicts(deferred).items()} == {k: v["confirmed"] for k, v in verdicts(immediate).items()}
    assert (deferred["first_nonfinite"]["path"], deferred["first_nonfinite"]["line"]) == (
        immediate["first_nonfinite"]["path"],
        immediate["first_nonfinite"]["line"],
    )


# -- one program each -------------------------------------------------------------------------


def test_sqrt_of_zero_backward_is_named_though_anomaly_mode_is_silent(tmp_path):
    folder = project(tmp_path, "sqrt_zero")
    alone = plain(folder, "train.py")
    assert alone.returncode == 0 and b"tensor(inf)" in alone.stdout  # anomaly detection raised nothing
    proc, report = trace(folder, "train.py")
    assert proc.returncode == 0 and proc.stdout == alone.stdout
    first = report["first_nonfinite"]
    assert (first["path"], first["line"], first["phase"], first["op"], first["kind"]) == (
        "train.py",
        line_of(folder, "train.py", "y = torch.sqrt(x)"),
        "backward",
        "SqrtBackward0",
        "inf",
    )
    (finding,) = report["findings"]
    assert finding["code"] == "TL101" and finding["confirmed"] and finding["evidence"]["gradient"]["kind"] == "inf"


def test_a_clean_program_confirms_nothing_and_prints_what_it_prints(tmp_path):
    folder = project(tmp_path, "clean")
    alone = plain(folder, "train.py")
    proc, report = trace(folder, "train.py")
    assert (proc.returncode, proc.stdout) == (alone.returncode, alone.stdout) == (0, alone.stdout)
    assert report["findings"] == [] and report["first_nonfinite"] is None
    assert report["run"]["optimizer_steps"] == 5 and report["run"]["backward_calls"] == 5
    assert proc.stderr.startswith(alone.stderr)


def test_the_programs_streams_arguments_and_exit_status_are_its_own(tmp_path):
    folder = project(tmp_path, "program_io")
    alone = plain(folder, "echo.py", "--flag", "two words", stdin=b"hello\n")
    proc, _ = trace(folder, "echo.py", "--flag", "two words", stdin=b"hello\n")
    assert alone.returncode == proc.returncode == 3
    assert proc.stdout == alone.stdout
    assert b"read hello" in proc.stdout and b"['--flag', 'two words']" in proc.stdout and b"__main__" in proc.stdout
    # The program's own standard error (torch's warning naming the program's line included) comes first, unchanged.
    assert b"echo.py:12: UserWarning: Implicit dimension choice for softmax" in alone.stderr
    assert proc.stderr.startswith(alone.stderr)
    assert b"torchlint trace: no numerics or fused-op findings" in proc.stderr[len(alone.stderr) :]


def test_a_program_that_raises_keeps_its_traceback_and_exit_status(tmp_path):
    folder = project(tmp_path, "raises")
    alone = plain(folder, "train.py")
    proc, report = trace(folder, "train.py")
    assert alone.returncode == proc.returncode == 1
    assert proc.stdout == alone.stdout == b"step 0\nstep 1\n"
    assert b"Traceback (most recent call last)" in alone.stderr and b"IndexError" in alone.stderr
    assert proc.stderr.startswith(alone.stderr)
    assert b"torchlint" not in proc.stderr[: len(alone.stderr)]
    assert report["run"]["optimizer_steps"] == 2


def test_a_module_with_arguments(tmp_path):
    folder = project(tmp_path, "package")
    proc, report = trace(folder, "-m", "trainer", "--steps", "3")
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"steps 3\n"
    (finding,) = report["findings"]
    assert (finding["path"], finding["code"], finding["confirmed"]) == (os.path.join("trainer", "losses.py"), "TL104", True)
    assert finding["evidence"]["first_call"] == 2
    first = report["first_nonfinite"]
    line = line_of(folder, os.path.join("trainer", "losses.py"), "error / error.sum()")
    assert (first["path"], first["line"], first["op"]) == (os.path.join("trainer", "losses.py"), line, "Tensor.div")


def test_max_steps_ends_the_run_before_the_planted_step(tmp_path):
    folder = project(tmp_path, "scenarios")
    proc, report = trace(folder, "--max-steps", "2", "run_all.py", "numerics_contrastive")
    assert proc.returncode == 0
    assert proc.stdout == b""  # stopped inside the scenario
    assert report["run"]["stopped"] == "max-steps" and report["run"]["optimizer_steps"] == 2
    distance = verdicts(report)[("numerics_contrastive.py", line_of(folder, "numerics_contrastive.py", "distances.sqrt()"), "TL101")]
    assert distance["confirmed"] is False and distance["evidence"]["calls"] == 2  # stopped right after the second step
    assert report["first_nonfinite"] is None
    assert "the run was stopped after 2 steps (--max-steps)" in proc.stderr.decode()


@pytest.mark.parametrize("deferred", [False, True], ids=["read-at-once", "read-later"])
def test_stop_on_first_ends_the_run_at_the_first_nonfinite_value(tmp_path, deferred):
    """Read later (as on a GPU), the checks are read at each backward call and step: the run still stops in
    the step that made the value."""
    folder = project(tmp_path, "scenarios")
    env = {"TORCHLINT_TRACE_DEFERRED": "1" if deferred else "0"}
    proc, report = trace(folder, "--stop-on-first", "run_all.py", "numerics_masked_mean", "numerics_contrastive", env=env)
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert report["run"]["stopped"] == "first-nonfinite"
    assert report["run"]["optimizer_steps"] == 2  # the NaN is born in the forward pass of the third step
    first = report["first_nonfinite"]
    line = line_of(folder, "numerics_masked_mean.py", "/ mask.sum()")
    assert (first["path"], first["line"], first["phase"], first["op"], first["kind"]) == ("numerics_masked_mean.py", line, "forward", "Tensor.div", "nan")
    assert evidence_at(report, folder, "numerics_contrastive.py", "distances.sqrt()", "TL101")["calls"] == 0


def test_ctrl_c_ends_the_program_as_it_would_and_the_report_is_still_made(tmp_path):
    folder = project(tmp_path, "interrupt")
    report = folder / "trace-report.json"

    def interrupted(command: List[str]) -> Tuple[int, bytes]:
        process = subprocess.Popen(
            command,
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            # A shell's background job inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
            # handler: give the child a terminal's default.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert process.stdout.readline() == b"ready\n"
        os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        _, err = process.communicate(timeout=120)
        return process.returncode, err

    alone = interrupted([sys.executable, "train.py"])
    traced = interrupted([sys.executable, "-m", "torchlint", "trace", "--output-format", "json", "--output-file", str(report), "train.py"])
    assert alone[0] == traced[0] == -signal.SIGINT
    assert b"KeyboardInterrupt" in traced[1] and b"stopped after some steps" in traced[1]
    assert b"torchlint trace: no numerics or fused-op findings" in traced[1]
    assert json.loads(report.read_text(encoding="utf-8"))["run"]["backward_calls"] >= 1


def test_trace_without_a_program_is_a_usage_error(tmp_path):
    proc = run(tmp_path, sys.executable, "-m", "torchlint", "trace")
    assert proc.returncode == 2 and b"give a script" in proc.stderr
    proc = run(tmp_path, sys.executable, "-m", "torchlint", "trace", "--max-steps", "0", "x.py")
    assert proc.returncode == 2


def test_a_missing_script_fails_with_python_s_exit_code_and_the_cli_s_wording(tmp_path):
    alone = plain(tmp_path, "missing.py")
    proc = run(tmp_path, sys.executable, "-m", "torchlint", "trace", "missing.py")
    assert alone.returncode == proc.returncode == 2
    assert proc.stderr == b"error: missing.py: no such file or directory\n"


def test_the_readme_example_shows_a_real_run(tmp_path):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Hunting a NaN with `torchlint trace`") :]
    program = section[section.index("```python\n") + len("```python\n") :]
    program = program[: program.index("```")]
    shown = section[section.index("```text\n") + len("```text\n") :]
    shown = shown[: shown.index("```")]
    (tmp_path / "train.py").write_text(program, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    proc = run(tmp_path, sys.executable, "-m", "torchlint", "trace", "train.py")
    stderr = proc.stderr.decode()
    assert proc.stdout.decode() + stderr[stderr.index("torchlint trace:") :] == shown


# -- mixed precision ---------------------------------------------------------------------------


@pytest.mark.parametrize("deferred", [False, True], ids=["read-at-once", "read-later"])
def test_the_scalers_overflow_is_counted_and_a_root_of_zero_is_still_the_birth(tmp_path, deferred):
    folder = project(tmp_path, "mixed_precision")
    alone = plain(folder, "train.py", "sqrt")
    proc, report = trace(folder, "train.py", "sqrt", env={"TORCHLINT_TRACE_DEFERRED": "1" if deferred else "0"})
    assert proc.returncode == 0 and proc.stdout == alone.stdout
    first = report["first_nonfinite"]
    assert (first["line"], first["phase"], first["op"], first["kind"], first["backward_calls"]) == (
        line_of(folder, "train.py", "torch.sqrt(out.float()"),
        "backward",
        "SqrtBackward0",
        "inf",
        9,
    )
    run_record = report["run"]
    # Steps 0-8 overflow the scale (halved each time down to 2**15, whose gradients fit float16) and step 9's
    # Inf is the root's: 10 skipped steps, 9 of them the scale's overflow, all 12 counted as steps.
    assert (run_record["optimizer_steps"], run_record["scaler_skipped_steps"], run_record["scaler_overflows"]) == (12, 10, 9)
    assert run_record["first_overflow"]["step"] == 0 and run_record["first_overflow"]["phase"] == "backward"


def test_without_a_planted_hazard_the_scalers_overflow_is_no_nonfinite_value(tmp_path):
    folder = project(tmp_path, "mixed_precision")
    proc, report = trace(folder, "train.py")
    assert proc.returncode == 0
    assert report["first_nonfinite"] is None and report["run"]["scaler_overflows"] == 9
    text = run(folder, sys.executable, "-m", "torchlint", "trace", "train.py").stderr.decode()
    assert "first non-finite value: none" in text and "(9 skipped by GradScaler)" in text
    assert "overflow skipped by GradScaler: 9 scaled backward passes" in text


def test_a_forward_overflow_under_autocast_is_a_birth(tmp_path):
    folder = project(tmp_path, "mixed_precision")
    _, report = trace(folder, "train.py", "forward")
    first = report["first_nonfinite"]
    assert (first["line"], first["phase"], first["kind"], first["step"]) == (line_of(folder, "train.py", "out * 1e5 * 1e5"), "forward", "inf", 9)


# -- several ranks ------------------------------------------------------------------------------


def torchrun(folder: Path, *arguments: str) -> Tuple[subprocess.CompletedProcess, Dict[int, dict]]:
    """``torchrun --nproc-per-node 2 -m torchlint trace --output-file t.json ARGUMENTS``: the launcher's process
    and each rank's JSON report (``t.rank0.json``, ``t.rank1.json``)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "torchlint", "trace"]
    proc = run(folder, *command, "--output-file", "t.json", *arguments)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert not (folder / "t.json").exists()
    return proc, {rank: json.loads((folder / f"t.rank{rank}.json").read_text(encoding="utf-8")) for rank in (0, 1)}


def test_each_rank_reports_and_a_gradient_from_the_other_rank_is_no_birth(tmp_path):
    folder = project(tmp_path, "two_ranks")
    proc, reports = torchrun(folder, "train.py")
    born, received = reports[1]["first_nonfinite"], reports[0]["first_nonfinite"]
    line = line_of(folder, "train.py", ".sqrt()")
    assert (born["op"], born["line"], born["backward_calls"], born.get("from_other_rank")) == ("SqrtBackward0", line, 2, None)
    assert (received["phase"], received["op"], received["from_other_rank"]) == ("collective", "gradient all-reduce", True)
    assert received["line"] == line_of(folder, "train.py", "loss.backward()") and received["step"] == 2
    assert (reports[0]["run"]["rank"], reports[1]["run"]["rank"]) == (0, 1)
    text = proc.stderr.decode()
    assert "[rank 0] first non-finite value: nan from another rank, received through the gradient all-reduce" in text
    assert "[rank 1] first non-finite value: inf in the gradient of SqrtBackward0" in text
    report_lines = [line for line in text.splitlines() if "torchlint trace:" in line or "first non-finite" in line]
    assert len(report_lines) == 4 and all(line.startswith(("[rank 0] ", "[rank 1] ")) for line in report_lines)


def test_a_value_a_collective_brings_from_the_other_rank_is_named_at_the_collective(tmp_path):
    folder = project(tmp_path, "two_ranks")
    _, reports = torchrun(folder, "train.py", "metric")
    born, received = reports[1]["first_nonfinite"], reports[0]["first_nonfinite"]
    assert (born["phase"], born["line"]) == ("forward", line_of(folder, "train.py", "hits / hits.sum()"))
    assert (received["op"], received["from_other_rank"], received["line"]) == (
        "torch.distributed.all_reduce",
        True,
        line_of(folder, "train.py", "dist.all_reduce(statistic)"),
    )


def test_without_a_launcher_the_output_file_keeps_its_name(tmp_path):
    folder = project(tmp_path, "clean")
    proc = run(folder, sys.executable, "-m", "torchlint", "trace", "--output-file", "t.json", "train.py", env={"RANK": ""})
    assert proc.returncode == 0 and (folder / "t.json").exists() and "[rank" not in proc.stderr.decode()


# -- what a run confirmed, in check and flake8 ----------------------------------------------------


def test_a_finding_the_run_confirmed_is_reported_at_high_by_check_and_flake8_until_its_line_changes(tmp_path):
    folder = project(tmp_path, "sqrt_zero")
    line = line_of(folder, "train.py", "y = torch.sqrt(x)")

    shown_levels = {"TORCHLINT_LEVEL_TABLE": "on"}  # the levels users see: this finding is below the default floor

    def check_codes():
        proc = run(folder, sys.executable, "-m", "torchlint", "check", "--output-format", "json", ".", env=shown_levels)
        return {(item["code"], item["line"]): item for item in json.loads(proc.stdout)}

    def flake8_lines():
        proc = run(folder, sys.executable, "-m", "flake8", "--isolated", "--select", "TL", "train.py", env=shown_levels)
        return [text for text in proc.stdout.decode().splitlines() if "TL101" in text]

    assert ("TL101", line) not in check_codes() and not flake8_lines()  # below the default floor before the run
    trace(folder, "train.py")
    store = json.loads((folder / ".torchlint_cache" / "confirmed.json").read_text(encoding="utf-8"))
    assert [(item["path"], item["code"]) for item in store["confirmed"]] == [("train.py", "TL101")]
    found = check_codes()[("TL101", line)]
    assert found["confidence"] == "high"
    assert "(confirmed by torchlint trace: call 1 (before the first backward pass) had 1 of 1 entries at or below 0" in found["message"]
    (flagged,) = flake8_lines()
    assert f"train.py:{line}:" in flagged and "confirmed by torchlint trace" in flagged
    source = (folder / "train.py").read_text(encoding="utf-8")
    (folder / "train.py").write_text("# a comment above moves the line\n" + source, encoding="utf-8")
    assert check_codes()[("TL101", line + 1)]["confidence"] == "high"  # moved, not changed
    (folder / "train.py").write_text(source.replace("y = torch.sqrt(x)", "y = torch.sqrt(x * 1.0)"), encoding="utf-8")
    assert ("TL101", line) not in check_codes() and not flake8_lines()


# -- code the watch does not enter ---------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "zero-over-zero-in-a-worker"])
def test_compiled_code_and_loader_workers_are_named_unwatched_and_the_run_is_unchanged(tmp_path, clean):
    folder = project(tmp_path, "out_of_sight")
    arguments = ["train.py", "clean"] if clean else ["train.py"]
    alone = plain(folder, *arguments)
    assert alone.returncode == 0, alone.stderr.decode()
    proc, report = trace(folder, *arguments)
    assert proc.returncode == 0 and proc.stdout == alone.stdout  # the same losses and weights, bitwise
    unwatched = report["run"]["unwatched"]
    assert any(text.startswith("the forward of Linear, compiled by torch.compile") for text in unwatched)
    assert any(text.startswith("DataLoader worker processes (num_workers=2): Shares's items") for text in unwatched)
    first = report["first_nonfinite"]
    if clean:
        assert first is None
    else:  # named where the worker's batch arrives, not in a backward pass it poisons later
        assert (first["phase"], first["op"], first["kind"]) == ("unwatched code", "a batch of Shares made by a DataLoader worker", "nan")
        assert first["line"] == line_of(folder, "train.py", "for batch in loader:")
