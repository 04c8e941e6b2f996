"""TorchFix and torchlint side by side: which TorchFix findings torchlint covers, and what the drift rules add.

    python bench/parity.py [--torchfix PATH] [--jobs N] [CORPUS ...]

Runs TorchFix (its own command, from the environment it is installed in: ``--torchfix`` or
$TORCHFIX, default ``torchfix`` on PATH) and torchlint (this interpreter's package) on the same
files: every ``.py`` file under each CORPUS folder (default /work/corpus and /work/ucorpus) that
contains "torch", the marker TorchFix itself filters files with.  TorchFix runs with its default
selection minus TOR203 (a style-only import rule) and TOR102 (``torch.load`` without
``weights_only``, which TL402 covers on its own terms); torchlint runs every rule at every
confidence level, and each finding keeps its level so the default (``high``) can be told apart.

A TorchFix finding is covered when a torchlint finding starts inside the node TorchFix reported
(TorchFix reports a whole ``from ... import`` statement or call, torchlint the imported name or the
keyword, possibly on a later line).  Printed: the TorchFix findings no torchlint finding covers,
the TL6xx findings inside no TorchFix node, and the counts per code.  A corpus folder that does not
exist is an error (exit 2): the figures would silently cover less.  Nothing from the corpora is
written anywhere; the output names files and lines only.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

DEFAULT_CORPORA = (Path("/work/corpus"), Path("/work/ucorpus"))
EXCLUDED_TORCHFIX_CODES = ("TOR203", "TOR102")
# TorchFix's own default: everything but TOR3xx, TOR4xx, TOR9xx (torchfix.py DISABLED_BY_DEFAULT).
TORCHFIX_DEFAULT_SELECT = "TOR0,TOR1,TOR2"
DRIFT_PREFIX = "TL6"
CHUNK = 400  # files per process invocation (command-line length)
_TORCHFIX_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<column>\d+): (?P<code>TOR\d+)(?: \[\*\])? (?P<message>.*)$")


@dataclass(frozen=True)
class Hit:
    path: str  # relative to its corpus folder
    line: int
    column: int
    code: str
    message: str
    level: str = ""  # torchlint's confidence


def python_files(root: Path) -> List[str]:
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(directory, name)
                try:
                    if "torch" in path.read_text(encoding="utf-8", errors="replace"):
                        found.append(str(path.relative_to(root)))
                except OSError:
                    continue
    return found


def chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def run_torchfix(torchfix: str, root: Path, files: Sequence[str], jobs: int) -> Tuple[List[Hit], List[str]]:
    """TorchFix's findings, and the files it failed on (it says so only with --show-stderr)."""
    hits, failed = [], []
    for part in chunks(files):
        result = subprocess.run(
            [torchfix, "--select", TORCHFIX_DEFAULT_SELECT, "--jobs", str(jobs), "--show-stderr", *part],
            cwd=root, capture_output=True, text=True, check=False,
        )
        for line in result.stdout.splitlines():
            match = _TORCHFIX_LINE.match(line.strip())
            if match and match["code"] not in EXCLUDED_TORCHFIX_CODES:
                hits.append(Hit(match["path"], int(match["line"]), int(match["column"]), match["code"], match["message"]))
        failed += [line[len("Failed to codemod "):].strip() for line in result.stderr.splitlines() if line.startswith("Failed to codemod ")]
    return hits, failed


def run_torchlint(root: Path, files: Sequence[str], jobs: int) -> List[Hit]:
    hits = []
    for part in chunks(files):
        result = subprocess.run(
            [sys.executable, "-m", "torchlint", "check", "--select", "ALL", "--confidence-level", "low", "--no-cache",
             "--exit-zero", "--output-format", "json", "--jobs", str(jobs), *part],
            cwd=root, capture_output=True, text=True, check=False,  # findings exit 1, unparsable files 2
        )
        for item in json.loads(result.stdout or "[]"):
            hits.append(Hit(item["path"], item["line"], item["column"], item["code"], item["message"], item["confidence"]))
    return hits


class Spans:
    """The line span of the node TorchFix reported at (line, column), read with ``ast``; the line alone
    when no node starts exactly there."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._starts: Dict[str, Dict[Tuple[int, int], int]] = {}

    def span(self, hit: Hit) -> Tuple[int, int]:
        starts = self._starts.get(hit.path)
        if starts is None:
            starts = self._starts[hit.path] = self._node_starts(hit.path)
        return hit.line, max(hit.line, starts.get((hit.line, hit.column - 1), hit.line))

    def _node_starts(self, path: str) -> Dict[Tuple[int, int], int]:
        try:
            tree = ast.parse((self.root / path).read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            return {}
        ends: Dict[Tuple[int, int], int] = {}
        for node in ast.walk(tree):
            if hasattr(node, "lineno") and getattr(node, "end_lineno", None):
                key = (node.lineno, node.col_offset)
                ends[key] = max(ends.get(key, 0), node.end_lineno)
        return ends


def compare(root: Path, torchfix: List[Hit], torchlint: List[Hit]):
    spans = Spans(root)
    ours: Dict[str, List[Hit]] = defaultdict(list)
    for hit in torchlint:
        ours[hit.path].append(hit)
    theirs_spans: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
    uncovered, uncovered_by_default = [], []
    covered_by: Counter = Counter()  # (TorchFix code, the torchlint codes inside its node)
    for hit in torchfix:
        first, last = spans.span(hit)
        theirs_spans[hit.path].append((first, last))
        inside = [h for h in ours.get(hit.path, ()) if first <= h.line <= last]
        covered_by[(hit.code, ",".join(sorted({h.code for h in inside})) or "-")] += 1
        if not inside:
            uncovered.append(hit)
        if not any(h.level == "high" for h in inside):
            uncovered_by_default.append(hit)
    extra = [
        hit for hit in torchlint
        if hit.code.startswith(DRIFT_PREFIX) and not any(a <= hit.line <= b for a, b in theirs_spans.get(hit.path, ()))
    ]
    return uncovered, uncovered_by_default, extra, covered_by


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="*", type=Path, default=list(DEFAULT_CORPORA))
    parser.add_argument("--torchfix", default=os.environ.get("TORCHFIX", "torchfix"), help="the torchfix command (default: $TORCHFIX, else torchfix on PATH)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)

    missing = [str(p) for p in args.corpora if not p.is_dir()]
    if missing:
        print(f"error: corpus folder not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    if shutil.which(args.torchfix) is None:
        print(f"error: torchfix command not found: {args.torchfix} (give --torchfix or set TORCHFIX)", file=sys.stderr)
        return 2

    totals: Counter = Counter()
    per_code_torchfix: Counter = Counter()
    per_code_uncovered: Counter = Counter()
    per_code_extra: Counter = Counter()
    per_pair: Counter = Counter()
    for root in args.corpora:
        files = python_files(root)
        torchfix, torchfix_failed = run_torchfix(args.torchfix, root, files, args.jobs)
        torchlint = run_torchlint(root, files, args.jobs)
        uncovered, uncovered_by_default, extra, covered_by = compare(root, torchfix, torchlint)
        per_pair.update(covered_by)
        totals.update(files=len(files), torchfix=len(torchfix), torchfix_failed=len(torchfix_failed), drift=sum(h.code.startswith(DRIFT_PREFIX) for h in torchlint),
                      uncovered=len(uncovered), uncovered_by_default=len(uncovered_by_default), extra=len(extra))
        per_code_torchfix.update(h.code for h in torchfix)
        per_code_uncovered.update(h.code for h in uncovered)
        per_code_extra.update(f"{h.code}:{h.level}" for h in extra)
        print(f"## {root}: {len(files)} files with 'torch', {len(torchfix)} TorchFix findings, {len(uncovered)} not covered")
        for path in torchfix_failed:
            print(f"  TorchFix failed on: {path}")
        for hit in uncovered:
            print(f"  not covered: {hit.path}:{hit.line}:{hit.column}: {hit.code} {hit.message}")
        for hit in uncovered_by_default:
            if hit not in uncovered:
                print(f"  covered below the default level only: {hit.path}:{hit.line}:{hit.column}: {hit.code} {hit.message}")
        for hit in extra:
            print(f"  drift finding TorchFix lacks: {hit.path}:{hit.line}:{hit.column}: {hit.code} ({hit.level}) {hit.message}")

    print("\n## totals")
    print(f"files: {totals['files']} (TorchFix failed on {totals['torchfix_failed']}); "
          f"TorchFix findings (without {', '.join(EXCLUDED_TORCHFIX_CODES)}): {totals['torchfix']}")
    print(f"TorchFix findings with no torchlint finding: {totals['uncovered']} (none at the default level: {totals['uncovered_by_default']})")
    print(f"torchlint drift findings: {totals['drift']}; inside no TorchFix finding: {totals['extra']}")
    print("TorchFix findings per code (not covered): " + ", ".join(f"{code} {n} ({per_code_uncovered[code]})" for code, n in sorted(per_code_torchfix.items())))
    print("TorchFix code -> torchlint codes on its node: " + ", ".join(f"{tf} -> {ours} {n}" for (tf, ours), n in sorted(per_pair.items())))
    print("drift findings TorchFix lacks per code and level: " + ", ".join(f"{key} {n}" for key, n in sorted(per_code_extra.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
