"""Time torchlint against its floors and its peers on a real PyTorch corpus, in one run, side by side.

    python bench/speed.py [--corpus DIR] [--packages a,b | --full] [--skip NAME,...] [--warm-runs N]

The corpus is made by ``bench/corpus.py`` (``python bench/corpus.py --dest DIR --set full``);
it lives outside the repository and is never committed.  The default is a
~100k-line subset (peft and accelerate) so that a run takes minutes on a
loaded 2-core machine; ``--full`` takes every package under the corpus.

What is timed (wall clock and the CPU time of the child processes):

- ``torchlint check --select ALL --no-cache`` with 1 and 2 jobs, a cache fill
  and then ``--warm-runs`` warm cached runs over the unchanged tree (on a
  shared machine one warm sample says little: take several);
- ``ruff check --select ALL --no-cache --output-format concise`` and TorchFix
  0.7 (standalone and as a flake8 plugin), each from its own throwaway venv
  outside the repository (``--ruff``/``--torchfix`` name the executables; a
  peer that is not installed is skipped with a message);
- the floors: ``ast.parse`` and ``libcst.parse_module`` of every file, in 1 and 2 processes.

Ratios are printed against the 2-process LibCST floor and against ruff.  ``--baseline REV --repeat N``
also times the package as it was at git revision REV, cold with 2 jobs, in N pairs alternating with this
tree's, and prints the ratio of the medians: a change's cost measured in one run, on one machine's load.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

DEFAULT_PACKAGES = ["peft", "accelerate"]
DEFAULT_CORPUS = os.environ.get("TORCHLINT_CORPUS", "/work/corpus")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- the floors (run in a child process so that their CPU time is measured like the others) --


def _parse_one(args: Tuple[str, str]) -> int:
    kind, path = args
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        if kind == "ast":
            import ast

            ast.parse(data)
        else:
            import libcst

            libcst.parse_module(data)
    except Exception:  # a file a parser rejects still costs what it cost
        return 1
    return 0


def _floor(kind: str, processes: int, list_file: str) -> None:
    with open(list_file, encoding="utf-8") as handle:
        files = handle.read().splitlines()
    jobs = [(kind, path) for path in files]
    if processes == 1:
        failures = sum(map(_parse_one, jobs))
    else:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            failures = sum(pool.imap_unordered(_parse_one, jobs, chunksize=16))
    print(f"{len(files)} files, {failures} rejected", file=sys.stderr)


# -- measuring ----------------------------------------------------------------------


def _timed(command: Sequence[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> Tuple[float, float, int, str]:
    """Wall seconds, child CPU seconds, exit code and the last line of output of one command."""
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(list(command), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    tail = (done.stdout.strip().splitlines() or [""])[-1] if done.stdout.strip() else (done.stderr.strip().splitlines() or [""])[-1]
    return wall, cpu, done.returncode, tail[:120]


def _python_files(roots: Sequence[str]) -> List[str]:
    found = []
    for root in roots:
        for directory, subdirs, names in os.walk(root):
            subdirs.sort()
            found.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return found


def _count_lines(files: Sequence[str]) -> int:
    total = 0
    for path in files:
        with open(path, "rb") as handle:
            total += handle.read().count(b"\n")
    return total


def _find_tool(explicit: Optional[str], venv_name: str, executable: str) -> Optional[str]:
    candidates = [explicit] if explicit else []
    candidates += [os.path.join(tempfile.gettempdir(), "speedvenvs", venv_name, "bin", executable), shutil.which(executable)]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--packages", default=",".join(DEFAULT_PACKAGES), help="comma-separated package folders of the corpus")
    parser.add_argument("--full", action="store_true", help="every package of the corpus")
    parser.add_argument("--skip", default="", help="comma-separated rows to leave out (e.g. torchfix,flake8-torchfix)")
    parser.add_argument("--ruff", help="the ruff executable (default: /tmp/speedvenvs/ruff/bin/ruff, then PATH)")
    parser.add_argument("--torchfix", help="the torchfix executable (default: /tmp/speedvenvs/torchfix/bin/torchfix, then PATH)")
    parser.add_argument("--warm-runs", type=int, default=1, help="how many warm cached runs to time after the fill")
    parser.add_argument(
        "--baseline", metavar="REV",
        help="also time the torchlint package of git revision REV, cold with 2 jobs, alternating with this tree's",
    )
    parser.add_argument("--repeat", type=int, default=1, help="with --baseline: how many alternating pairs of cold runs")
    parser.add_argument("--markdown", help="append the table as markdown to this file")
    parser.add_argument("--floor", nargs=3, metavar=("KIND", "PROCS", "LIST"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor:
        _floor(args.floor[0], int(args.floor[1]), args.floor[2])
        return 0

    if not os.path.isdir(args.corpus):
        print(f"no corpus at {args.corpus}: build it with python bench/corpus.py --dest {args.corpus}", file=sys.stderr)
        return 2
    packages = sorted(p for p in os.listdir(args.corpus) if os.path.isdir(os.path.join(args.corpus, p)) and not p.startswith(".")) if args.full else [
        p.strip() for p in args.packages.split(",") if p.strip()
    ]
    roots = [os.path.join(args.corpus, p) for p in packages]
    missing = [r for r in roots if not os.path.isdir(r)]
    if missing:
        print(f"missing from the corpus: {', '.join(missing)}", file=sys.stderr)
        return 2
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    files = _python_files(roots)
    lines = _count_lines(files)
    load = os.getloadavg()
    print(f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; nproc {os.cpu_count()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"Python {platform.python_version()}; packages {','.join(packages)}: {len(files)} files, {lines} lines", flush=True)

    work = tempfile.mkdtemp(prefix="torchlint-speed-")
    list_file = os.path.join(work, "files.txt")
    with open(list_file, "w", encoding="utf-8") as handle:
        handle.write("\n".join(files) + "\n")
    cache_dir = os.path.join(work, "cache")
    # A frozen copy of the package: every torchlint row runs the same code, and the cache (keyed by the
    # package's code) stays warm even while the working tree is being edited.
    snapshot = os.path.join(work, "code")
    shutil.copytree(os.path.join(REPO, "torchlint"), os.path.join(snapshot, "torchlint"), ignore=shutil.ignore_patterns("__pycache__"))
    environment = dict(os.environ, PYTHONPATH=snapshot + os.pathsep + os.environ.get("PYTHONPATH", ""))
    torchlint = [sys.executable, "-m", "torchlint", "check", "--select", "ALL", "--exit-zero", "-q"]
    me = [sys.executable, os.path.abspath(__file__), "--floor"]
    baseline_environment = None
    if args.baseline:
        # The package as it was at REV, beside this tree's: both timed in this run, on this machine's load.
        base = os.path.join(work, "baseline")
        os.makedirs(base)
        archive = subprocess.run(["git", "archive", args.baseline, "torchlint"], cwd=REPO, stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        baseline_environment = dict(os.environ, PYTHONPATH=base + os.pathsep + os.environ.get("PYTHONPATH", ""))

    rows: List[Tuple[str, List[str]]] = [
        ("ast.parse, 1 process", me + ["ast", "1", list_file]),
        ("ast.parse, 2 processes", me + ["ast", "2", list_file]),
        ("libcst.parse_module, 1 process", me + ["libcst", "1", list_file]),
        ("libcst.parse_module, 2 processes", me + ["libcst", "2", list_file]),
        ("torchlint --no-cache, 1 job", torchlint + ["--no-cache", "--jobs", "1"] + roots),
        ("torchlint --no-cache, 2 jobs", torchlint + ["--no-cache", "--jobs", "2"] + roots),
        ("torchlint cache fill, 2 jobs", torchlint + ["--cache-dir", cache_dir, "--jobs", "2"] + roots),
    ]
    pairs = []
    if args.baseline:
        for run in range(1, max(1, args.repeat) + 1):
            head_name, base_name = f"torchlint --no-cache, 2 jobs (pair {run})", f"baseline {args.baseline} --no-cache, 2 jobs (pair {run})"
            rows.append((head_name, torchlint + ["--no-cache", "--jobs", "2"] + roots))
            rows.append((base_name, torchlint + ["--no-cache", "--jobs", "2"] + roots))
            pairs.append((head_name, base_name))
    for run in range(1, max(1, args.warm_runs) + 1):
        suffix = f" (run {run})" if args.warm_runs > 1 else ""
        rows.append((f"torchlint warm cache, 2 jobs{suffix}", torchlint + ["--cache-dir", cache_dir, "--jobs", "2"] + roots))
    ruff = _find_tool(args.ruff, "ruff", "ruff")
    if ruff:
        rows.append(("ruff check --select ALL", [ruff, "check", "--select", "ALL", "--no-cache", "--output-format", "concise", "--exit-zero"] + roots))
    else:
        print("ruff not found (pip install ruff into a throwaway venv and pass --ruff): skipped", file=sys.stderr)
    torchfix = _find_tool(args.torchfix, "torchfix", "torchfix")
    if torchfix:
        rows.append(("torchfix 0.7 standalone", [torchfix, "--select", "ALL"] + roots))
        flake8 = os.path.join(os.path.dirname(torchfix), "flake8")
        if os.path.isfile(flake8):
            rows.append(("torchfix 0.7 as a flake8 plugin", [flake8, "--select", "TOR", "--exit-zero", "-j", "2"] + roots))
    else:
        print("torchfix not found (pip install torchfix==0.7.0 into a throwaway venv and pass --torchfix): skipped", file=sys.stderr)

    results: Dict[str, Tuple[float, float, int, str]] = {}
    for name, command in rows:
        if any(s in name for s in skip):
            continue
        print(f"  running: {name} ...", end="", flush=True)
        env = baseline_environment if name.startswith("baseline") else environment if name.startswith("torchlint") else None
        results[name] = _timed(command, cwd=work, env=env)
        wall, cpu, code, tail = results[name]
        print(f" {wall:.1f} s wall, {cpu:.1f} s CPU, exit {code}: {tail}", flush=True)
    end_load = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)

    floor = results.get("libcst.parse_module, 2 processes")
    ruff_row = results.get("ruff check --select ALL")
    table = ["| command | wall s | CPU s | × libcst floor (2 procs, wall) | × ruff (wall) |", "|---|---:|---:|---:|---:|"]
    for name, (wall, cpu, code, _) in results.items():
        vs_floor = f"{wall / floor[0]:.2f}" if floor and floor[0] else "-"
        vs_ruff = f"{wall / ruff_row[0]:.1f}" if ruff_row and ruff_row[0] else "-"
        flag = "" if code in (0, 1) else f" (exit {code})"
        table.append(f"| {name}{flag} | {wall:.2f} | {cpu:.2f} | {vs_floor} | {vs_ruff} |")
    footer = f"load average at the end {end_load[0]:.2f} {end_load[1]:.2f} {end_load[2]:.2f}"
    timed_pairs = [(results[head][0], results[base][0]) for head, base in pairs if head in results and base in results]
    if timed_pairs:
        heads, bases = sorted(h for h, _ in timed_pairs), sorted(b for _, b in timed_pairs)
        median = lambda values: values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        footer += (
            f"; cold 2 jobs, median of {len(timed_pairs)}: this tree {median(heads):.2f} s, {args.baseline} {median(bases):.2f} s, "
            f"ratio {median(heads) / median(bases):.2f}"
        )
    print("\n".join(table))
    print(footer)
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as handle:
            handle.write(
                f"\n## {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC: {', '.join(packages)} ({len(files)} files, {lines} lines)\n\n"
                f"nproc {os.cpu_count()}, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {footer}; "
                f"Python {platform.python_version()}.\n\n" + "\n".join(table) + "\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
