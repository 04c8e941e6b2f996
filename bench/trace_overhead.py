"""What ``torchlint trace`` costs a training loop: plain, traced, and under anomaly detection.

A small CPU training loop (an MLP on 784 features, batch 64, Adam, one intra-op thread; its
forward pass has two sites of numerics/fused-op findings: a division by a norm and the log of a
chosen probability) runs in subprocesses, the three modes interleaved round after round:

- plain:   ``python train.py``
- traced:  ``python -m torchlint trace train.py`` (then the same steps again with the watch off the
  mode stack, in the same process: the watch's own cost, free of how processes were scheduled)
- anomaly: ``python train.py --anomaly`` (``torch.autograd.set_detect_anomaly(True)``)

Each run times its own loop after 20 warm-up steps (CPU time of the process, and wall time) and
prints its final loss, which must be the same float in every mode: the checks only read values.
The whole run's wall time is measured too (for trace it includes the static check and starting
the traced process).  Medians over the rounds; ratios to plain.  Writes
bench/results/trace_overhead.md.

    python bench/trace_overhead.py [--rounds 7] [--steps 200]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "trace_overhead.md"

TRAIN = '''\
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
if "--anomaly" in sys.argv:
    torch.autograd.set_detect_anomaly(True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        h = h / h.norm(dim=1, keepdim=True)
        return self.fc3(h)


def loss_fn(logits, labels):
    probabilities = torch.softmax(logits, dim=1)
    return -torch.log(probabilities.gather(1, labels[:, None])).mean()


steps = int(sys.argv[sys.argv.index("--steps") + 1])
model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
xs, ys = torch.randn(20, 64, 784), torch.randint(0, 10, (20, 64))


def train(count):
    for step in range(count):
        loss = loss_fn(model(xs[step % 20]), ys[step % 20])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss


train(20)
cpu, wall = time.process_time(), time.perf_counter()
loss = train(steps)
print(f"cpu {time.process_time() - cpu!r} wall {time.perf_counter() - wall!r} loss {loss.item()!r}")
if "--unwatched" in sys.argv and torch._C._len_torch_function_stack():
    # The same steps again with torch trace's watch off the mode stack (its site probes stay).
    watch = torch._C._get_function_stack_at(0)
    watch.__exit__(None, None, None)
    cpu = time.process_time()
    train(steps)
    print(f"unwatched cpu {time.process_time() - cpu!r}")
    watch.__enter__()
'''

MODES = ("plain", "traced", "anomaly")
_LINE = re.compile(r"cpu (\S+) wall (\S+) loss (\S+)")
_UNWATCHED = re.compile(r"unwatched cpu (\S+)")


def command(mode: str, script: Path, steps: int) -> List[str]:
    arguments = [str(script), "--steps", str(steps)]
    if mode == "traced":
        return [sys.executable, "-m", "torchlint", "trace", *arguments, "--unwatched"]
    if mode == "anomaly":
        return [sys.executable, *arguments, "--anomaly"]
    return [sys.executable, *arguments]


def run_once(mode: str, script: Path, steps: int) -> Dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.run(command(mode, script, steps), cwd=script.parent, capture_output=True, text=True, timeout=900)
    total = time.perf_counter() - start
    found = _LINE.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{mode} run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    result = {"cpu": float(found.group(1)), "wall": float(found.group(2)), "loss": found.group(3), "total": total}
    unwatched = _UNWATCHED.search(proc.stdout)
    if unwatched is not None:
        result["watch"] = result["cpu"] / float(unwatched.group(1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="trace-overhead-") as folder:
        script = Path(folder) / "train.py"
        script.write_text(TRAIN, encoding="utf-8")
        (Path(folder) / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
        runs: Dict[str, List[Dict[str, float]]] = {mode: [] for mode in MODES}
        for round_number in range(args.rounds):
            for mode in MODES:
                runs[mode].append(run_once(mode, script, args.steps))
            print(f"round {round_number + 1}/{args.rounds}: " + ", ".join(f"{m} {runs[m][-1]['cpu']:.3f}s" for m in MODES), flush=True)

    losses = {mode: {run["loss"] for run in runs[mode]} for mode in MODES}
    if losses["traced"] != losses["plain"]:
        raise SystemExit(f"the traced loop computed another loss: {losses}")
    medians = {mode: {key: statistics.median(run[key] for run in runs[mode]) for key in ("cpu", "wall", "total")} for mode in MODES}
    # Each round's runs follow one another: their ratio cancels most of the drift of a shared machine.
    for mode in MODES:
        medians[mode]["paired"] = statistics.median(run["cpu"] / plain["cpu"] for run, plain in zip(runs[mode], runs["plain"]))
    watch = statistics.median(run["watch"] for run in runs["traced"])
    report = render(medians, losses["plain"], watch, args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")
    print(report)


def render(medians: Dict[str, Dict[str, float]], losses, watch: float, args: argparse.Namespace) -> str:
    import torch  # for the version line only: the benchmark itself runs torch in subprocesses

    plain = medians["plain"]
    rows = []
    for mode in MODES:
        m = medians[mode]
        rows.append(
            f"| {mode} | {m['cpu']:.3f} | {m['cpu'] / plain['cpu']:.2f}x | {m['paired']:.2f}x | {m['wall']:.3f} "
            f"| {m['wall'] / plain['wall']:.2f}x | {m['total']:.2f} | {m['total'] / plain['total']:.2f}x |"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join(
        [
            "# torchlint trace: overhead on a small CPU training loop",
            "",
            (
                f"`python bench/trace_overhead.py --rounds {args.rounds} --steps {args.steps}`: an MLP 784-256-256-10, batch 64, "
                f"Adam, one intra-op thread, {args.steps} timed steps after 20 warm-up steps; the three modes interleaved, "
                f"{args.rounds} rounds, medians. Loop = the timed steps inside the program (CPU time of the process, and wall "
                "time); per round = the median over rounds of each run's loop CPU time over the plain run's of the same "
                "round; run = the whole command (for trace: the static check, starting the traced process, importing "
                "torch, the report)."
            ),
            "",
            "| mode | loop CPU s | vs plain | vs plain, per round | loop wall s | vs plain | run wall s | vs plain |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Final loss, the same float in every traced and plain run: {', '.join(sorted(losses))}.",
            "",
            (
                "The watch alone: each traced run then repeats the timed steps with the watch taken off the mode stack "
                f"(its site probes and step hooks stay); the watched steps took {watch:.2f}x the unwatched ones "
                "(median), in the same process: this ratio does not depend on how two processes were scheduled."
            ),
            "",
            (
                f"Machine: {platform.platform()}, Python {platform.python_version()}, torch {torch.__version__}, "
                f"{os.cpu_count()} CPUs, load average {load:.1f} when written (other jobs shared the CPUs: CPU time is "
                "the steadier figure)."
            ),
            "",
        ]
    )


if __name__ == "__main__":
    main()
