"""Where a cold run spends its time: cProfile (CPU clock) of the run over a deterministic sample of the corpus.

    python bench/profile_cold.py [--corpus DIR] [--packages a,b] [--files N] [--top K]

Checks every k-th file (sorted) of the packages in this process with every
rule, no cache, exactly as ``torchlint check --jobs 1`` does, and prints the
top functions by own time, the own time summed per torchlint module (each
rule module, each analysis module, the engine) and per library (libcst,
the standard library).  The corpus comes from ``bench/corpus.py``.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import sys
import time
from typing import Dict, List, Optional, Sequence

DEFAULT_CORPUS = os.environ.get("TORCHLINT_CORPUS", "/work/corpus")


def sample(corpus: str, packages: Sequence[str], count: int) -> List[str]:
    per_package = max(1, count // len(packages))
    chosen: List[str] = []
    for package in packages:
        files = []
        for directory, subdirs, names in os.walk(os.path.join(corpus, package)):
            subdirs.sort()
            files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
        step = max(1, len(files) // per_package)
        chosen.extend(files[::step][:per_package])
    return chosen


def _bucket(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    if "/torchlint/" in path:
        return "torchlint/" + path.rsplit("/torchlint/", 1)[1]
    if "/libcst/" in path:
        part = path.rsplit("/libcst/", 1)[1]
        return "libcst/" + part.split("/", 1)[0]
    if filename == "~":
        return "builtins (C)"
    if filename.startswith("<"):
        return filename.strip("<>")
    return "other: " + os.path.basename(filename)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--packages", default="timm,kornia,torchmetrics,peft")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    from torchlint import cli, config, runner

    files = sample(args.corpus, [p.strip() for p in args.packages.split(",") if p.strip()], args.files)
    lines = sum(open(p, "rb").read().count(b"\n") for p in files)
    settings = config.discover_and_resolve(files, config.Overrides(select=["ALL"]))
    namespace = cli.build_parser().parse_args(["check", "--select", "ALL", "--no-cache", "--jobs", "1"])
    load = os.getloadavg()
    profiler = cProfile.Profile(time.process_time)
    start = time.process_time()
    profiler.enable()
    outcomes = runner.run_files(files, files, namespace, settings, 1, None)
    profiler.disable()
    total = time.process_time() - start
    findings = sum(len(o.findings) for o in outcomes)
    print(f"{len(files)} files, {lines} lines from {args.packages}; {findings} findings; {total:.1f} s CPU under the profiler; "
          f"load average at start {load[0]:.2f}")

    stats = pstats.Stats(profiler)
    own: Dict[str, float] = collections.Counter()
    rows = []
    for (filename, line, name), (calls, ncalls, tottime, cumtime, _) in stats.stats.items():
        own[_bucket(filename)] += tottime
        rows.append((tottime, cumtime, ncalls, f"{_bucket(filename)}:{line}({name})"))
    rows.sort(reverse=True)
    print(f"\nTop {args.top} functions by own time (s): own, cumulative, calls")
    for tottime, cumtime, ncalls, where in rows[: args.top]:
        print(f"  {tottime:7.2f} {cumtime:7.2f} {ncalls:9d}  {where}")
    print("\nOwn time per module (s)")
    for bucket, seconds in sorted(own.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {seconds:7.2f}  {100 * seconds / total:5.1f}%  {bucket}")
    cumulative = {}
    for (filename, line, name), (_, _, _, cumtime, _) in stats.stats.items():
        if "/torchlint/rules/" in filename.replace(os.sep, "/") and name.startswith(("visit_", "leave_", "__init__")):
            key = _bucket(filename)
            cumulative[key] = cumulative.get(key, 0.0) + cumtime
    print("\nTime inside each rule's visit_/leave_/__init__ methods, cumulative (s; includes the analysis it calls)")
    for bucket, seconds in sorted(cumulative.items(), key=lambda item: -item[1])[: args.top]:
        print(f"  {seconds:7.2f}  {bucket}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
