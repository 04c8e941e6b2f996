"""Recall and precision per rule on labelled bad code: real bug reports (../shared/bugs) and the fixtures.

    python bench/recall.py [--bugs DIR] [--confidence-level medium] [--show-misses] [--record]

Two bodies of labelled code are scored, each with the console script as a user runs it
(``torchlint check --select ALL``, at the confidence floor given, default the product's):

- ``bugs``: code from public bug reports, outside the repository (``../shared/bugs`` beside the
  project by default).  A line ending in ``# expect: FAMILY`` must be reported by one of the
  family's codes; a line ending in ``# safe: FAMILY`` must not be.  Families map to codes as in
  that folder's ``score.py`` (``FAMILIES``), read from there, never copied.
- ``fixtures``: the checker fixtures (``fixtures/TLxxx/checker/*.py``, ``# expect: TL101``
  annotations; ``good_*`` files hold traps).  The ``seed_*`` files, the seed documents' snippets
  in the same pattern, are also scored apart as ``seeds``.

For each body and rule it prints true positives, false negatives and false positives (a finding
of the rule on a ``safe`` line, or on a trap line of a fixture), recall and precision.

``--record`` writes ``bench/results/recall_cases.tsv``: one row per labelled bug-report site
(file, line, family, expect/safe, and whether it is found), keyed by the line's text too.
``tests/test_recall_cases.py`` fails when a site recorded as found is no longer found, or a safe
site recorded as silent is reported: new sites in ../shared/bugs do not fail it until recorded.

Exit status: 0, or 2 when torchlint printed no JSON.
"""
from __future__ import annotations

import argparse
import collections
import csv
import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUGS = ROOT.parent / "shared" / "bugs"
RECORD = ROOT / "bench" / "results" / "recall_cases.tsv"
BUG_MARK = re.compile(r"#\s*(expect|safe):\s*([A-Za-z0-9_,\- ]+?)\s*$")
FIXTURE_MARK = re.compile(r"#\s*expect:\s*(TL\d{3}(?::\w+)?(?:\s*,\s*TL\d{3}(?::\w+)?)*)")
RECORD_FIELDS = ("file", "line", "family", "kind", "found", "text")


@dataclass(frozen=True)
class Site:
    """A labelled line: ``codes`` must report it (``bad``) or must stay silent on it."""

    path: str
    line: int
    label: str  # a bug family, or a rule code for fixtures
    codes: frozenset
    bad: bool


def families(bugs: Path) -> Dict[str, Set[str]]:
    """FAMILIES of ``bugs/score.py``: family -> codes."""
    spec = importlib.util.spec_from_file_location("shared_bug_score", bugs / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {family: set(codes) for family, codes in module.FAMILIES.items()}


def bug_files(bugs: Path) -> List[Path]:
    return sorted(p for p in bugs.rglob("*.py") if p.name != "score.py")


def bug_sites(bugs: Path) -> List[Site]:
    table = families(bugs)
    sites = []
    for path in bug_files(bugs):
        for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            match = BUG_MARK.search(text)
            if not match:
                continue
            for family in (f.strip() for f in match.group(2).split(",")):
                if family in table:
                    sites.append(Site(str(path.resolve()), number, family, frozenset(table[family]), match.group(1) == "expect"))
    return sites


def fixture_files(seeds_only: bool = False) -> List[Path]:
    """The checker fixtures run with the product's settings: a file whose first line sets a torch
    target (``# fixture: target=2.4``) is scored by tests/test_fixtures.py alone."""
    files = sorted((ROOT / "fixtures").glob("*/checker/*.py"))
    files = [p for p in files if not p.read_text(encoding="utf-8").startswith("# fixture:")]
    return [p for p in files if p.name.startswith("seed_")] if seeds_only else files


def fixture_sites(files: Iterable[Path], floor: Optional[str]) -> List[Site]:
    """Every annotated line is a bad site of its codes; an annotation of a ``low`` finding
    (``TL101:low``) counts only when the floor is ``low``.  Findings on other lines are false
    positives (added when scored)."""
    sites = []
    for path in files:
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = FIXTURE_MARK.search(text)
            if match:
                for item in match.group(1).split(","):
                    code, _, level = item.strip().partition(":")
                    if level == "low" and floor not in ("low", "all"):
                        continue
                    sites.append(Site(str(path.resolve()), number, code, frozenset({code}), True))
    return sites


def run_torchlint(paths: Sequence[Path], floor: Optional[str]) -> List[dict]:
    """The JSON findings of ``torchlint check --select ALL`` over ``paths``, as a user would run it."""
    command = [sys.executable, "-m", "torchlint", "check", "--select", "ALL", "--no-cache", "--output-format", "json", "--exit-zero"]
    if floor:
        command += ["--confidence-level", floor]
    proc = subprocess.run(command + [str(p) for p in paths], capture_output=True, text=True, cwd=str(ROOT))
    try:
        return json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        sys.exit(f"torchlint printed no JSON (exit {proc.returncode}): {proc.stderr[-500:]}")


def index(findings: List[dict]) -> Dict[str, List[Tuple[int, int, str]]]:
    by_path: Dict[str, List[Tuple[int, int, str]]] = collections.defaultdict(list)
    for item in findings:
        end = max(item.get("end_line") or item["line"], item["line"])
        by_path[os.path.realpath(item["path"])].append((item["line"], end, item["code"]))
    return by_path


def is_found(site: Site, by_path) -> bool:
    return any(start <= site.line <= end and code in site.codes for start, end, code in by_path.get(os.path.realpath(site.path), ()))


@dataclass
class Score:
    tp: int = 0
    fn: int = 0
    fp: int = 0
    tn: int = 0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else float("nan")

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else float("nan")


def score_bugs(sites: List[Site], by_path) -> Tuple[Dict[str, Score], List[str]]:
    scores: Dict[str, Score] = collections.defaultdict(Score)
    misses = []
    for site in sites:
        hit = is_found(site, by_path)
        score = scores[site.label]
        if site.bad:
            score.tp += hit
            score.fn += not hit
        else:
            score.fp += hit
            score.tn += not hit
        if hit != site.bad:
            misses.append(f"{'fn' if site.bad else 'fp'} {site.label} {os.path.relpath(site.path)}:{site.line}")
    return scores, misses


def score_fixtures(sites: List[Site], by_path) -> Tuple[Dict[str, Score], List[str]]:
    """Per rule: annotated lines found (tp) or not (fn); findings on lines annotated for no such code (fp)."""
    scores: Dict[str, Score] = collections.defaultdict(Score)
    misses = []
    wanted = collections.defaultdict(set)
    for site in sites:
        wanted[os.path.realpath(site.path)].add((site.line, site.label))
        hit = is_found(site, by_path)
        scores[site.label].tp += hit
        scores[site.label].fn += not hit
        if not hit:
            misses.append(f"fn {site.label} {os.path.relpath(site.path)}:{site.line}")
    for path, found in by_path.items():
        for start, end, code in found:
            if not any((line, code) in wanted.get(path, ()) for line in range(start, end + 1)):
                scores[code].fp += 1
                misses.append(f"fp {code} {os.path.relpath(path)}:{start}")
    return scores, misses


def table(title: str, scores: Dict[str, Score]) -> str:
    rows = [f"{title}", f"  {'rule/family':28s} {'recall':>6s} {'prec.':>6s}   tp  fn  fp"]
    total = Score()
    for key in sorted(scores):
        s = scores[key]
        total.tp, total.fn, total.fp, total.tn = total.tp + s.tp, total.fn + s.fn, total.fp + s.fp, total.tn + s.tn
        rows.append(f"  {key:28s} {s.recall:6.2f} {s.precision:6.2f} {s.tp:4d} {s.fn:3d} {s.fp:3d}")
    rows.append(f"  {'all':28s} {total.recall:6.2f} {total.precision:6.2f} {total.tp:4d} {total.fn:3d} {total.fp:3d}")
    return "\n".join(rows)


def bug_records(bugs: Path, floor: Optional[str] = None) -> List[dict]:
    """One row per labelled bug-report site, with whether the current build finds it."""
    sites = bug_sites(bugs)
    by_path = index(run_torchlint(bug_files(bugs), floor))
    rows = []
    for site in sites:
        text = Path(site.path).read_text(encoding="utf-8", errors="replace").splitlines()[site.line - 1].strip()
        rows.append({
            "file": os.path.relpath(site.path, bugs), "line": str(site.line), "family": site.label,
            "kind": "expect" if site.bad else "safe", "found": "yes" if is_found(site, by_path) else "no", "text": text,
        })
    return rows


def write_record(rows: List[dict], path: Path = RECORD) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, RECORD_FIELDS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def read_record(path: Path = RECORD) -> List[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bugs", type=Path, default=DEFAULT_BUGS)
    parser.add_argument("--confidence-level", default=None, help="the floor to score at (default: the product's)")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument("--record", action="store_true", help=f"write {RECORD.relative_to(ROOT)}")
    args = parser.parse_args(argv)

    if args.bugs.is_dir():
        sites = bug_sites(args.bugs)
        scores, misses = score_bugs(sites, index(run_torchlint(bug_files(args.bugs), args.confidence_level)))
        print(table(f"bug reports ({args.bugs}), by family", scores))
        if args.show_misses:
            print("\n".join("  " + m for m in misses))
        if args.record:
            write_record(bug_records(args.bugs, args.confidence_level))
            print(f"recorded {RECORD.relative_to(ROOT)}")
    else:
        print(f"no bug reports at {args.bugs}: skipped")
    for title, files in (("fixtures", fixture_files()), ("seed snippets (fixtures/*/checker/seed_*.py)", fixture_files(True))):
        if not files:
            continue
        sites = fixture_sites(files, args.confidence_level)
        scores, misses = score_fixtures(sites, index(run_torchlint(files, args.confidence_level)))
        print(table(f"{title}, by rule", scores))
        if args.show_misses:
            print("\n".join("  " + m for m in misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
