"""What ``torchlint trace`` costs a training loop: plain, traced, and under anomaly detection.

Two programs, each run in subprocesses with the three modes interleaved round after round:

- ``mlp``: an MLP on 784 features, batch 64, Adam (CPU, one intra-op thread); its forward pass has
  two sites of numerics/fused-op findings: a division by a norm and the log of a chosen probability;
- ``transformer``: a decoder-only language model of about 23M parameters (token and position
  embeddings tied to the output, 6 pre-norm blocks of width 512 with causal attention written out
  and a GELU MLP, layer norms, AdamW), its per-token loss averaged over a padding mask (a division
  by the mask's count: a finding), in fp32 or under bfloat16 autocast, on the CPU or a GPU.

Modes:

- plain:   ``python train.py``
- traced:  ``python -m torchlint trace train.py`` (then the same steps again with the watch off the
  mode stack, in the same process: the watch's own cost, free of how processes were scheduled)
- anomaly: ``python train.py --anomaly`` (``torch.autograd.set_detect_anomaly(True)``)
- baseline (with ``--baseline-tree DIR``): traced, by the ``torchlint`` package in DIR (an earlier tree,
  unpacked there with ``git archive REV torchlint | tar -x -C DIR``): before and after in the same run

Each run times its own loop after warm-up steps (on the CPU the process's CPU time and wall time; on
a GPU wall time between two synchronizations) and prints its final loss and a sum of its weights,
which must be the same floats in every mode: the checks only read values (deterministic algorithms
on, so that two plain runs agree bitwise too).  The whole run's wall time is measured as well (for
trace it includes the static check and starting the traced process).  Medians over the rounds;
ratios to plain.

``--plant-check`` also runs the transformer traced with its padding mask emptied at one step (the
mean's denominator is 0: 0/0 in the forward pass) and checks that the report names the line of that
division as the first non-finite value, on each device given.

    python bench/trace_overhead.py [--rounds 7] [--steps N]                      # the MLP on the CPU
    python bench/trace_overhead.py --config mlp transformer:cpu:fp32 transformer:cpu:bf16 --rounds 3 --plant-check
    python bench/trace_overhead.py --config transformer:cuda:fp32 transformer:cuda:bf16 --rounds 3 --plant-check   # on a GPU
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "trace_overhead.md"

TRAIN_MLP = '''\
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

TRAIN_TRANSFORMER = '''\
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torch.nn as nn
import torch.nn.functional as F


def option(name, default):
    return type(default)(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


steps = option("--steps", 20)
device = option("--device", "cpu")
dtype = option("--dtype", "fp32")
plant = option("--plant", -1)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
if device == "cpu":
    torch.set_num_threads(1)
if "--anomaly" in sys.argv:
    torch.autograd.set_detect_anomaly(True)

VOCAB, WIDTH, LAYERS, HEADS = 8192, 512, 6, 8
CONTEXT, BATCH = (256, 32) if device == "cuda" else (64, 2)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.down = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x, causal):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, WIDTH // HEADS).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (WIDTH // HEADS) ** -0.5
        scores = scores.masked_fill(causal[:t, :t], float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, WIDTH))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.position = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        self.register_buffer("causal", torch.ones(CONTEXT, CONTEXT, dtype=torch.bool).triu(1))
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x, self.causal)
        return self.norm(x) @ self.embed.weight.t()


def masked_loss(logits, targets, mask):
    token_loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")
    return (token_loss * mask.flatten()).sum() / mask.sum()


model = LanguageModel().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
batches = torch.randint(0, VOCAB, (8, BATCH, CONTEXT + 1), device=device)
lengths = torch.randint(CONTEXT // 2, CONTEXT + 1, (8, BATCH, 1), device=device)
masks = (torch.arange(CONTEXT, device=device) < lengths).float()


def train(first, count):
    for step in range(first, first + count):
        tokens = batches[step % 8]
        mask = torch.zeros_like(masks[0]) if step == plant else masks[step % 8]
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=dtype == "bf16"):
            logits = model(tokens[:, :-1])
        loss = masked_loss(logits, tokens[:, 1:], mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss


def synchronize():
    if device == "cuda":
        torch.cuda.synchronize()


def weight_sum():
    with torch.no_grad():
        return sum(p.double().sum() for p in model.parameters()).item()


WARMUP = 5
train(0, WARMUP)
synchronize()
cpu, wall = time.process_time(), time.perf_counter()
loss = train(WARMUP, steps)
synchronize()
print(f"cpu {time.process_time() - cpu!r} wall {time.perf_counter() - wall!r} loss {loss.item()!r}/{weight_sum()!r}")
if "--unwatched" in sys.argv and torch._C._len_torch_function_stack():
    # The same steps again with torch trace's watch off the mode stack (its site probes stay).
    watch = torch._C._get_function_stack_at(0)
    watch.__exit__(None, None, None)
    synchronize()
    cpu, wall = time.process_time(), time.perf_counter()
    train(WARMUP, steps)
    synchronize()
    print(f"unwatched cpu {time.process_time() - cpu!r} wall {time.perf_counter() - wall!r}")
    watch.__enter__()
'''

PROGRAMS = {"mlp": TRAIN_MLP, "transformer": TRAIN_TRANSFORMER}
MODES = ("plain", "traced", "anomaly")
BASELINE = "baseline"
_LINE = re.compile(r"cpu (\S+) wall (\S+) loss (\S+)")
_UNWATCHED = re.compile(r"unwatched cpu (\S+)(?: wall (\S+))?")
# The planted 0/0: the line of the transformer's masked mean.
PLANTED_DIVISION = "return (token_loss * mask.flatten()).sum() / mask.sum()"


class Config(NamedTuple):
    program: str
    device: str
    dtype: str

    @classmethod
    def parse(cls, text: str) -> "Config":
        program, device, dtype = (text.split(":") + ["cpu", "fp32"])[:3] if ":" in text else (text, "cpu", "fp32")
        if program not in PROGRAMS or device not in ("cpu", "cuda") or dtype not in ("fp32", "bf16"):
            raise argparse.ArgumentTypeError(f"{text}: expected PROGRAM[:DEVICE[:DTYPE]], PROGRAM in {sorted(PROGRAMS)}, DEVICE cpu|cuda, DTYPE fp32|bf16")
        if program == "mlp" and (device, dtype) != ("cpu", "fp32"):
            raise argparse.ArgumentTypeError("the MLP runs on the CPU in fp32 only")
        return cls(program, device, dtype)

    @property
    def label(self) -> str:
        return f"{self.program}, {self.device}, {self.dtype}"

    @property
    def timed(self) -> str:
        """The loop time compared: CPU time on the CPU; wall time between synchronizations on a GPU."""
        return "cpu" if self.device == "cpu" else "wall"


def command(mode: str, script: Path, config: Config, steps: int, extra: List[str] = ()) -> List[str]:
    arguments = [str(script), "--steps", str(steps), *extra]
    if config.program == "transformer":
        arguments += ["--device", config.device, "--dtype", config.dtype]
    if mode in ("traced", BASELINE):
        return [sys.executable, "-m", "torchlint", "trace", *arguments, "--unwatched"]
    if mode == "anomaly":
        return [sys.executable, *arguments, "--anomaly"]
    return [sys.executable, *arguments]


def run_once(mode: str, script: Path, config: Config, steps: int, baseline_tree: Optional[Path] = None) -> Dict[str, float]:
    env = dict(os.environ)
    if mode == BASELINE:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(baseline_tree), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    proc = subprocess.run(command(mode, script, config, steps), cwd=script.parent, capture_output=True, text=True, timeout=900, env=env)
    total = time.perf_counter() - start
    found = _LINE.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise SystemExit(f"{mode} run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    result = {"cpu": float(found.group(1)), "wall": float(found.group(2)), "loss": found.group(3), "total": total}
    unwatched = _UNWATCHED.search(proc.stdout)
    if unwatched is not None:
        alone = float(unwatched.group(1)) if config.timed == "cpu" else float(unwatched.group(2))
        result["watch"] = result[config.timed] / alone
    return result


def write_programs(folder: Path) -> Dict[str, Path]:
    (folder / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    scripts = {}
    for name, text in PROGRAMS.items():
        scripts[name] = folder / f"train_{name}.py"
        scripts[name].write_text(text, encoding="utf-8")
    return scripts


def measure(config: Config, script: Path, rounds: int, steps: int, baseline: Optional[Dict[str, str]] = None, modes=MODES) -> str:
    modes = tuple(modes) + ((BASELINE,) if baseline else ())
    tree = Path(baseline["tree"]) if baseline else None
    runs: Dict[str, List[Dict[str, float]]] = {mode: [] for mode in modes}
    for round_number in range(rounds):
        for mode in modes:
            runs[mode].append(run_once(mode, script, config, steps, tree))
        print(f"{config.label}: round {round_number + 1}/{rounds}: " + ", ".join(f"{m} {runs[m][-1][config.timed]:.3f}s" for m in modes), flush=True)
    losses = {mode: {run["loss"] for run in runs[mode]} for mode in modes}
    if any(losses[mode] != losses["plain"] for mode in ("traced", BASELINE) if mode in modes) or len(losses["plain"]) != 1:
        raise SystemExit(f"{config.label}: a traced loop computed another result, or two plain runs differ: {losses}")
    medians = {mode: {key: statistics.median(run[key] for run in runs[mode]) for key in ("cpu", "wall", "total")} for mode in modes}
    # Each round's runs follow one another: their ratio cancels most of the drift of a shared machine.
    for mode in modes:
        medians[mode]["paired"] = statistics.median(run[config.timed] / plain[config.timed] for run, plain in zip(runs[mode], runs["plain"]))
    watch = {mode: statistics.median(run["watch"] for run in runs[mode]) for mode in ("traced", BASELINE) if mode in modes}
    return render(config, medians, losses["plain"], watch, rounds, steps, baseline)


def planted(script: Path, config: Config) -> str:
    """Trace the transformer with the mask emptied at step 3 (of 5 warm-up and 3 timed steps): the report
    must name the division's line as where the first non-finite value was born."""
    line = next(number for number, text in enumerate(script.read_text(encoding="utf-8").splitlines(), 1) if PLANTED_DIVISION in text)
    report = script.parent / f"planted-{config.device}-{config.dtype}.json"
    argv = command("traced", script, config, 3, ["--plant", "3"])
    argv = [*argv[:4], "--output-file", str(report), *argv[4:-1]]
    proc = subprocess.run(argv, cwd=script.parent, capture_output=True, text=True, timeout=900)
    event = json.loads(report.read_text(encoding="utf-8")).get("first_nonfinite") if report.exists() else None
    if event is None:
        named, holds = f"nothing (exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]})", False
    else:
        named = f"{Path(event.get('path', '')).name}:{event.get('line')} ({event.get('phase')}, {event.get('op')}, {event.get('kind')})"
        holds = (Path(event.get("path", "")).name, event.get("line")) == (script.name, line)
    return f"- {'PASS' if holds else 'FAIL'} {config.label}: the mask emptied at step 3 plants 0/0 at {script.name}:{line}; the report names {named}"


def default_steps(config: Config) -> int:
    return 200 if config.program == "mlp" else 20 if config.device == "cpu" else 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", nargs="+", type=Config.parse, default=[Config("mlp", "cpu", "fp32")], metavar="PROGRAM:DEVICE:DTYPE")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default: 200 for the MLP, 20 for the transformer on the CPU, 30 on a GPU)")
    parser.add_argument("--plant-check", action="store_true", help="also trace the transformer with a planted 0/0, on each config's device")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="the modes to run (plain always runs)")
    parser.add_argument("--baseline-tree", type=Path, help="also trace with the torchlint package of this folder (an earlier tree)")
    parser.add_argument("--baseline-label", default="an earlier tree", help="what --baseline-tree holds, for the table (a commit)")
    args = parser.parse_args()
    baseline = {"tree": str(args.baseline_tree.resolve()), "label": args.baseline_label} if args.baseline_tree else None

    sections = []
    with tempfile.TemporaryDirectory(prefix="trace-overhead-") as folder:
        scripts = write_programs(Path(folder))
        for config in args.config:
            modes = ["plain"] + [mode for mode in MODES[1:] if mode in args.modes]
            sections.append(measure(config, scripts[config.program], args.rounds, args.steps or default_steps(config), baseline, modes))
        if args.plant_check:
            checks = [planted(scripts["transformer"], config) for config in args.config if config.program == "transformer"]
            sections.append("\n".join(["## A planted 0/0", "", *checks, ""]))
            print("\n".join(checks), flush=True)
    report = "\n".join([header(args), *sections])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report, encoding="utf-8")
    print(report)


def header(args: argparse.Namespace) -> str:
    import torch  # for the version line only: the benchmark itself runs torch in subprocesses

    configs = " ".join(f"{c.program}:{c.device}:{c.dtype}" for c in args.config)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    card = torch.cuda.get_device_name(0) if any(c.device == "cuda" for c in args.config) and torch.cuda.is_available() else "none used"
    return "\n".join(
        [
            "# torchlint trace: overhead on training loops",
            "",
            (
                f"`python bench/trace_overhead.py --config {configs} --rounds {args.rounds}{f' --steps {args.steps}' if args.steps else ''}"
                f"{' --plant-check' if args.plant_check else ''}"
                f"{' --modes ' + ' '.join(args.modes) if list(args.modes) != list(MODES) else ''}"
                f"{f' --baseline-tree DIR --baseline-label {args.baseline_label}' if args.baseline_tree else ''}`: the modes interleaved, {args.rounds} rounds, medians. "
                "Loop = the timed steps inside the program (on the CPU its CPU time, the steadier figure on a shared "
                "machine; on a GPU wall time between synchronizations); per round = the median over rounds of each "
                "run's loop time over the plain run's of the same round; run = the whole command (for trace: the static "
                "check, starting the traced process, importing torch, the report)."
            ),
            "",
            (
                f"Machine: {platform.platform()}, Python {platform.python_version()}, torch {torch.__version__}, "
                f"{os.cpu_count()} CPUs, load average {load:.1f} when written; GPU: {card}."
            ),
            "",
        ]
    )


def render(
    config: Config, medians: Dict[str, Dict[str, float]], losses, watch: Dict[str, float], rounds: int, steps: int, baseline: Optional[Dict[str, str]] = None
) -> str:
    plain = medians["plain"]
    timed = config.timed
    names = {BASELINE: f"traced by {baseline['label']}" if baseline else BASELINE}
    rows = []
    for mode in medians:
        m = medians[mode]
        rows.append(
            f"| {names.get(mode, mode)} | {m[timed]:.3f} | {m[timed] / plain[timed]:.2f}x | {m['paired']:.2f}x | {m['total']:.2f} | {m['total'] / plain['total']:.2f}x |"
        )
    what = {
        "mlp": "an MLP 784-256-256-10, batch 64, Adam, one intra-op thread, 20 warm-up steps",
        "transformer": (
            "the transformer language model (about 23M parameters), "
            + ("batch 32 x 256 tokens" if config.device == "cuda" else "batch 2 x 64 tokens, one intra-op thread")
            + (", bfloat16 autocast" if config.dtype == "bf16" else ", fp32")
            + ", AdamW, 5 warm-up steps"
        ),
    }[config.program]
    return "\n".join(
        [
            f"## {config.label}",
            "",
            f"{what}; {steps} timed steps.",
            "",
            f"| mode | loop {'CPU' if timed == 'cpu' else 'wall'} s | vs plain | vs plain, per round | run wall s | vs plain |",
            "|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Final loss (and, for the transformer, the sum of its weights), the same floats in every traced and plain run: {', '.join(sorted(losses))}.",
            "",
            (
                "The watch alone: each traced run then repeats the timed steps with the watch taken off the mode stack "
                "(its site probes and step hooks stay); the watched steps took "
                + "; ".join(f"{ratio:.2f}x the unwatched ones ({names.get(mode, mode)})" for mode, ratio in watch.items())
                + " (medians), in the same process."
            ),
            "",
        ]
    )


if __name__ == "__main__":
    main()
