"""What LibCST's metadata providers cost, next to ast.parse and torchlint's own engine.

    python bench/metadata_cost.py --corpus /work/corpus [--files 300] [--repeat 1]
        [--packages timm,kornia,torchmetrics,peft] [--out bench/results/metadata_cost.md]

The corpus is the one bench/corpus.py assembles (``python bench/corpus.py
--dest DIR --set small`` rebuilds the default packages anywhere; ``--fetch``
here calls it for packages that are missing). The sample is deterministic:
the sorted .py files of each package, taken at an even stride, the same
number from each package.

Every stage runs on every file, one file after the other (so background load
spreads over all stages alike). Times are the CPU time of this process
(``time.process_time``, or wall time with ``--clock wall``): on shared cores wall
time mostly measures waiting for a core. A stage's time is the sum over files
of the fastest of ``--repeat`` runs. "parse + X" rows add the
LibCST parse to the stage's own time, as in PERF-NOTES.md. Files that either
parser rejects are left out of the sample and counted.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import corpus  # noqa: E402  (bench/corpus.py)
from torchlint import config, engine, registry  # noqa: E402

DEFAULT_PACKAGES = ("timm", "kornia", "torchmetrics", "peft")


class _EveryNode(cst.CSTVisitor):
    """A visitor that does nothing at every node: the price of a Python-level walk."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        return True


def sample(root: Path, packages: Sequence[str], total: int) -> List[Path]:
    per_package = max(1, total // len(packages))
    chosen: List[Path] = []
    for package in packages:
        files = sorted((root / package).rglob("*.py"))
        if not files:
            raise SystemExit(f"no .py files under {root / package}: run bench/corpus.py --dest {root} (or pass --fetch)")
        count = min(per_package, len(files))
        chosen.extend(files[index * len(files) // count] for index in range(count))
    return chosen


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
_clock = CLOCKS["cpu"]


def best_of(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = _clock()
        work()
        best = min(best, _clock() - start)
    return best


def measure(paths: Sequence[Path], repeat: int) -> Tuple[Dict[str, float], Dict[str, int]]:
    settings = config.Settings(enabled=frozenset(registry.all_rules()))
    times: Dict[str, float] = {}
    counts = {"files": 0, "lines": 0, "rejected": 0, "prefiltered_in": 0, "with_findings": 0, "findings": 0, "internal_errors": 0}

    def add(stage: str, seconds: float) -> None:
        times[stage] = times.get(stage, 0.0) + seconds

    for number, path in enumerate(paths, start=1):
        if number % 50 == 0:
            print(f"{number}/{len(paths)} files", file=sys.stderr, flush=True)
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
            ast.parse(text)
            cst.parse_module(text)
        except (UnicodeDecodeError, SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
            counts["rejected"] += 1
            continue
        counts["files"] += 1
        counts["lines"] += text.count("\n")

        add("read", best_of(repeat, path.read_bytes))
        add("ast", best_of(repeat, lambda: ast.parse(text)))
        add("cst", best_of(repeat, lambda: cst.parse_module(text)))
        module = cst.parse_module(text)
        add("wrapper_copy", best_of(repeat, lambda: MetadataWrapper(module)))
        add("wrapper_nocopy", best_of(repeat, lambda: MetadataWrapper(module, unsafe_skip_copy=True)))
        add("visit", best_of(repeat, lambda: module.visit(_EveryNode())))
        add("position", best_of(repeat, lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)))
        add("scope", best_of(repeat, lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)))
        add("qualified", best_of(repeat, lambda: MetadataWrapper(module, unsafe_skip_copy=True).resolve(QualifiedNameProvider)))
        add("engine", best_of(repeat, lambda: engine.lint_text(text, str(path), settings)))

        if engine.select_rules(text, settings.enabled):
            counts["prefiltered_in"] += 1
        result = engine.lint_text(text, str(path), settings)
        counts["findings"] += len(result.findings)
        counts["with_findings"] += bool(result.findings)
        counts["internal_errors"] += sum(d.kind == "internal" for d in result.diagnostics)
    return times, counts


ROWS = (
    # (label, stages summed)
    ("read the bytes", ("read",)),
    ("`ast.parse`", ("ast",)),
    ("`libcst.parse_module`", ("cst",)),
    ("parse + `MetadataWrapper(module)` (deep copy, the default)", ("cst", "wrapper_copy")),
    ("parse + `MetadataWrapper(module, unsafe_skip_copy=True)`", ("cst", "wrapper_nocopy")),
    ("parse + a do-nothing `CSTVisitor` over every node", ("cst", "visit")),
    ("parse + `PositionProvider`", ("cst", "position")),
    ("parse + `ScopeProvider`", ("cst", "scope")),
    ("parse + `QualifiedNameProvider` (resolves scopes too)", ("cst", "qualified")),
    ("torchlint `engine.lint_text`, all rules (prefilter, parse where triggered, one walk, positions of findings)", ("engine",)),
)


def table(times: Dict[str, float]) -> List[str]:
    base = times["ast"]
    lines = ["| work per file | seconds | × ast.parse | the stage alone, s |", "|---|---:|---:|---:|"]
    for label, stages in ROWS:
        total = sum(times[s] for s in stages)
        alone = times[stages[-1]]
        lines.append(f"| {label} | {total:.2f} | {total / base:.1f} | {alone:.2f} |")
    return lines


def per_rule(paths: Sequence[Path], repeat: int) -> List[str]:
    """``engine.lint_text`` with one rule at a time: which rules' triggers and work cost the most."""
    texts = []
    for path in paths:
        try:
            texts.append((path, path.read_bytes().decode("utf-8")))
        except UnicodeDecodeError:
            continue
    baseline = sum(best_of(repeat, lambda: cst.parse_module(text).visit(_EveryNode())) for _, text in texts)
    lines = [
        "",
        f"One rule at a time on {len(texts)} of these files (parse + an empty walk of all of them: {baseline:.2f} s):",
        "",
        "| rule | files its triggers let in | seconds |",
        "|---|---:|---:|",
    ]
    for code in sorted(registry.all_rules()):
        settings = config.Settings(enabled=frozenset({code}))
        seconds = sum(best_of(repeat, lambda: engine.lint_text(text, str(path), settings)) for path, text in texts)
        admitted = sum(bool(engine.select_rules(text, {code})) for _, text in texts)
        lines.append(f"| {code} | {admitted} | {seconds:.2f} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=corpus.default_dest())
    parser.add_argument("--packages", default=",".join(DEFAULT_PACKAGES))
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--fetch", action="store_true", help="download missing packages with bench/corpus.py")
    parser.add_argument("--out", type=Path, help="write the results as markdown")
    parser.add_argument("--per-rule", type=int, metavar="N", default=0, help="also time each rule alone on every k-th of N sample files")
    args = parser.parse_args(argv)

    packages = [p for p in args.packages.split(",") if p]
    global _clock
    _clock = CLOCKS[args.clock]
    if args.fetch:
        pinned = {r.split("==")[0]: r for r in corpus.FULL}
        for package in packages:
            corpus.fetch(pinned[package], args.corpus)
    paths = sample(args.corpus, packages, args.files)
    load_before = os.getloadavg()
    started = time.perf_counter()
    times, counts = measure(paths, args.repeat)
    wall = time.perf_counter() - started
    load_after = os.getloadavg()

    rules = sorted(registry.all_rules())
    libcst_version = getattr(cst, "__version__", None) or _distribution_version("libcst")
    header = [
        f"# LibCST metadata cost ({datetime.date.today().isoformat()})",
        "",
        f"Sample: {counts['files']} files / {counts['lines']:,} lines from {', '.join(packages)} "
        f"(every k-th sorted file, {args.files // len(packages)} per package; {counts['rejected']} rejected by a parser), "
        f"best of {args.repeat} per file and stage, {args.clock} time, one process.",
        f"Machine: {platform.machine()}, nproc {os.cpu_count()}, Python {platform.python_version()}, libcst {libcst_version}; "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (the cores are shared); run took {wall:.0f} s.",
        f"torchlint engine with {len(rules)} rules ({', '.join(rules)}): {counts['prefiltered_in']} files passed the "
        f"trigger prefilter, {counts['with_findings']} had findings ({counts['findings']} findings), "
        f"{counts['internal_errors']} internal errors.",
        "",
        f"Command: `python bench/metadata_cost.py --corpus {args.corpus} --files {args.files} --repeat {args.repeat} "
        f"--packages {','.join(packages)} --clock {args.clock}"
        + (f" --per-rule {args.per_rule}" if args.per_rule else "") + "`",
        "",
    ]
    rows = table(times)
    if args.per_rule:
        step = max(1, len(paths) // args.per_rule)
        rows += per_rule(paths[::step][: args.per_rule], args.repeat)
    report = "\n".join(header + rows) + "\n"
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report, encoding="utf-8")
    return 0


def _distribution_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
