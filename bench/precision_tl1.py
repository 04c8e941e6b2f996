"""Precision of TL101-TL107 on real code: every finding, scored against the verdicts a person recorded.

    python bench/precision_tl1.py [--corpus DIR] [--set full|training|... | --packages timm,kornia,...]
                                  [--codes TL101,...] [--verdicts FILE] [--sample N] [--seed 101]

The corpus is the one ``bench/corpus.py`` assembles (the wheels' Python
sources of well-known PyTorch libraries, outside the repository; DIR defaults
to $TORCHLINT_CORPUS or ~/.cache/torchlint-corpus), one of its sets at a time:
``full`` (15 libraries) or ``training`` (19 libraries of losses and training
code).  Every finding of ``--codes`` (default TL101-TL107, the domain-guard
family) is listed.

This script never judges.  The verdicts are data a person wrote after reading
each finding in its source: ``bench/results/precision_tl1_verdicts.tsv``, one
row per finding (code, path, column, verdict, the flagged source line, reason,
needs), with verdict ``real``, ``real*`` (the norm of a model's feature vector,
zero only for an all-zero vector, which is possible but rare: the hand-written
``x / x.norm(...)`` that RULES.md names, or the root of a mean square) or
``false``.  A false alarm's ``needs`` says where the fact that makes it safe
lives: ``same-file`` or ``other-file`` source (the analysis could be taught
it), ``underflow`` (a softmax/sigmoid output, 0 only on float underflow:
RULES.md does not count those as positive for TL1xx), ``data`` (data,
configuration or trained values: in no source) or ``no-gradient`` (a gradient
hazard in code nothing marks as undifferentiated).  A row is keyed by code,
path, column and the flagged line's text, so it survives lines moving within a
file.  The script prints:

- the precision over the findings that have a verdict, real* counted as real
  and as false alarms;
- the false alarms by ``needs``, and the ceiling of teaching the analysis: the
  precision if every fact written in source were taught and underflow judged
  as RULES.md judges it;
- the findings with no verdict yet, with context, to be read and recorded;
- the recorded rows of the packages read that no finding matches any more,
  by verdict: a change to the analysis that drops a ``real`` row has lost a
  real hazard;
- with ``--prune``, the verdict file rewritten without those rows (once they
  are accounted for);
- with ``--sample N``, N findings drawn with a fixed seed (sorted by path,
  line, column and code first, so the draw is the same on every machine), for
  a reading of a sample when the list is long.

Exit status: 0, or 2 when the corpus is missing.
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torchlint import config, engine  # noqa: E402
from torchlint.rule import DEFAULT_CONFIDENCE_FLOOR, Confidence  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import SETS  # noqa: E402
from verdict_files import verdict_rows  # noqa: E402

CODES = ("TL101", "TL102", "TL103", "TL104", "TL105", "TL106", "TL107")
DEFAULT_VERDICTS = Path(__file__).resolve().parent / "results" / "precision_tl1_verdicts.tsv"
VERDICTS = ("real", "real*", "false")
# What the analysis would have to know to stay silent on a false alarm, by where that fact lives.
# Facts in source code can be taught; softmax/sigmoid underflow is RULES.md's call (TL1xx does not count
# their outputs as positive); facts about data, configuration or how code is used are in no source.
TEACHABLE = ("same-file", "other-file")
UNDERFLOW = "underflow"
UNWRITTEN = ("data", "no-gradient")
NEEDS = TEACHABLE + (UNDERFLOW,) + UNWRITTEN
COLUMNS = ("code", "path", "column", "verdict", "line", "reason", "needs")

Key = Tuple[str, str, int, str]


@dataclass(frozen=True)
class Verdict:
    verdict: str
    reason: str
    needs: str = ""


@dataclass(frozen=True)
class Listed:
    code: str
    path: str
    line: int
    column: int
    source_lines: Sequence[str]
    confidence: str = "high"

    @property
    def key(self) -> Key:
        return (self.code, self.path, self.column, self.source_lines[self.line - 1].strip())


def default_corpus() -> Path:
    return Path(os.environ.get("TORCHLINT_CORPUS", Path.home() / ".cache" / "torchlint-corpus"))


def python_files(root: Path):
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory) / name


def read_verdicts(path: Path) -> Dict[Key, Verdict]:
    """The recorded verdicts; a malformed row stops the run with its line number (a typo must not count)."""
    verdicts: Dict[Key, Verdict] = {}
    for number, row in verdict_rows(path, COLUMNS):
        code, file, column, verdict, line, reason, needs = row
        if verdict not in VERDICTS or not column.isdigit():
            raise SystemExit(f"{path}:{number}: expected {len(COLUMNS)} tab-separated fields, verdict one of {VERDICTS}")
        if (verdict == "false") != (needs in NEEDS) or (verdict != "false" and needs):
            raise SystemExit(f"{path}:{number}: a false alarm's needs is one of {NEEDS}; other verdicts leave it empty")
        verdicts[(code, file, int(column), line)] = Verdict(verdict, reason, needs)
    return verdicts


def lint_corpus(corpus: Path, packages: Sequence[str], codes: Sequence[str]) -> Tuple[List[Listed], int, int]:
    """Every finding of ``codes`` in ``packages`` at every confidence, sorted by path, line, column and code;
    files and lines read."""
    settings = config.Settings(enabled=frozenset(codes), confidence_floor=Confidence.LOW)
    found: List[Tuple[tuple, Listed]] = []
    files = lines = 0
    for package in packages:
        for path in python_files(corpus / package):
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            files += 1
            lines += text.count("\n")
            relative = path.relative_to(corpus).as_posix()
            source_lines = text.splitlines()
            for finding in engine.lint_text(text, relative, settings).findings:
                listed = Listed(
                    finding.code, relative, finding.location.line, finding.location.column, source_lines, finding.confidence.value
                )
                found.append((finding.sort_key, listed))
    found.sort(key=lambda item: item[0])
    return [listed for _, listed in found], files, lines


def score(listed: Sequence[Listed], verdicts: Dict[Key, Verdict], packages: Sequence[str]):
    """(counts of the listed findings' verdicts, the findings with none, the recorded rows of ``packages``
    nothing matches)."""
    counts: Counter = Counter()
    unjudged: List[Listed] = []
    for finding in listed:
        verdict = verdicts.get(finding.key)
        if verdict is None:
            unjudged.append(finding)
        else:
            counts[verdict.verdict] += 1
            if verdict.needs:
                counts[verdict.needs] += 1
    matched = {finding.key for finding in listed}
    gone = {
        key: verdict for key, verdict in verdicts.items()
        if key not in matched and key[1].split("/", 1)[0] in packages
    }
    return counts, unjudged, gone


def prune(path: Path, keys: set) -> None:
    """Rewrite the verdict file without the rows keyed by ``keys`` (through a temporary file, then a rename)."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    kept = [rows[0]] + [row for row in rows[1:] if (row[0], row[1], int(row[2]), row[4]) not in keys]
    temporary = path.with_suffix(".tmp")
    with temporary.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, delimiter="\t", lineterminator="\n").writerows(kept)
    temporary.replace(path)


def precision_line(counts: Counter) -> str:
    judged = sum(counts[v] for v in VERDICTS)
    if not judged:
        return "no finding has a recorded verdict"
    real = counts["real"] + counts["real*"]
    return (
        f"{judged} judged: real {counts['real']}, real* {counts['real*']}, false alarm {counts['false']}; "
        f"precision {real}/{judged} = {100 * real / judged:.0f} %, "
        f"counting real* as false alarms {counts['real']}/{judged} = {100 * counts['real'] / judged:.0f} %"
    )


def needs_line(counts: Counter) -> str:
    """The false alarms by what staying silent on them needs, and the precision left if every fact written
    in source were taught and underflow judged as RULES.md judges it: the ceiling of teaching the analysis."""
    if not counts["false"]:
        return "no false alarm"
    real = counts["real"] + counts["real*"] + counts[UNDERFLOW]
    left = sum(counts[need] for need in UNWRITTEN)
    ceiling = f"{real}/{real + left} = {100 * real / (real + left):.0f} %" if real + left else "no finding left"
    return (
        "false alarms by what silence needs: " + ", ".join(f"{need} {counts[need]}" for need in NEEDS)
        + f"; every written fact taught and underflow as RULES.md: precision at most {ceiling}"
    )


LEVELS = ("high", "medium", "low")


def shown_at(finding: Listed, floor: Confidence) -> bool:
    return Confidence(finding.confidence).at_least(floor)


def level_lines(listed: Sequence[Listed], verdicts: Dict[Key, Verdict], floor: Confidence = DEFAULT_CONFIDENCE_FLOOR) -> List[str]:
    """Per confidence level, and for the default floor: how many findings, and the precision of the judged ones."""
    lines = []
    groups = [(level, [f for f in listed if f.confidence == level]) for level in LEVELS]
    groups.append((f"floor ({floor.value} and above)", [f for f in listed if shown_at(f, floor)]))
    for label, group in groups:
        counts, _, _ = score(group, verdicts, ())
        lines.append(f"{label}: {len(group)} findings; {precision_line(counts)}")
    return lines


def level_sample(listed: Sequence[Listed], level: str, size: int, seed: int) -> List[Listed]:
    """``size`` findings of ``level`` drawn with ``seed`` from the list sorted by path, line, column and code."""
    group = [finding for finding in listed if finding.confidence == level]
    drawn = sorted(random.Random(f"{seed}:{level}").sample(range(len(group)), min(size, len(group))))
    return [group[index] for index in drawn]


def sample_lines(listed: Sequence[Listed], verdicts: Dict[Key, Verdict], size: int, seed: int) -> List[str]:
    """The precision a fixed-seed sample of ``size`` per level estimates, and the estimate for `high` and
    `medium` together, weighted by how many findings each level holds."""
    lines = []
    estimate_real = estimate_total = 0.0
    for level in ("high", "medium"):
        population = sum(1 for finding in listed if finding.confidence == level)
        drawn = level_sample(listed, level, size, seed)
        counts, unjudged, _ = score(drawn, verdicts, ())
        judged = sum(counts[v] for v in VERDICTS)
        real = counts["real"] + counts["real*"]
        lines.append(f"sample of {len(drawn)} {level} (seed {seed}): {precision_line(counts)}; not read yet: {len(unjudged)}")
        if judged:
            estimate_real += population * real / judged
            estimate_total += population
    if estimate_total:
        lines.append(f"high and medium together, estimated from the samples: {100 * estimate_real / estimate_total:.0f} %")
    return lines


def show(number: int, finding: Listed, verdict: Optional[Verdict]) -> None:
    label = f" [{verdict.verdict}: {verdict.reason}]" if verdict is not None else " [no verdict]"
    print(f"\n## {number}. {finding.code} ({finding.confidence}) {finding.path}:{finding.line}:{finding.column}{label}")
    lines = finding.source_lines
    for current in range(max(1, finding.line - 5), min(len(lines), finding.line + 2) + 1):
        marker = ">>" if current == finding.line else "  "
        print(f"{marker}{current:5d} | {lines[current - 1]}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--set", choices=tuple(SETS), default="full", help="the packages of a bench/corpus.py set")
    parser.add_argument("--packages", help="comma-separated package names instead of --set")
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--verdicts", type=Path, default=DEFAULT_VERDICTS)
    parser.add_argument("--sample", type=int, default=0, help="also print N findings drawn with --seed")
    parser.add_argument(
        "--sample-per-level", type=int, default=0, help="score (and print the unread of) N findings per confidence level"
    )
    parser.add_argument("--all-unjudged", action="store_true", help="print every finding with no verdict, low ones too")
    parser.add_argument("--prune", action="store_true", help="drop from --verdicts the rows no finding matches")
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument(
        "--floor", choices=[level.value for level in Confidence], default=DEFAULT_CONFIDENCE_FLOOR.value,
        help="score the findings at this level and above (default: the product's default floor)",
    )
    args = parser.parse_args(argv)

    codes = tuple(code.strip() for code in args.codes.split(",") if code.strip())
    if args.packages:
        packages = [package.strip() for package in args.packages.split(",") if package.strip()]
    else:
        packages = [requirement.split("==")[0] for requirement in SETS[args.set]]
    missing = [package for package in packages if not (args.corpus / package).is_dir()]
    if missing:
        print(f"missing packages in {args.corpus}: {', '.join(missing)}; run bench/corpus.py first", file=sys.stderr)
        return 2
    verdicts = read_verdicts(args.verdicts)

    started = time.perf_counter()
    listed, files, lines = lint_corpus(args.corpus, packages, codes)
    elapsed = time.perf_counter() - started
    per_code = Counter(finding.code for finding in listed)
    print(f"# {len(listed)} findings in {files} files, {lines} lines ({elapsed:.0f} s): "
          + ", ".join(f"{code} {per_code[code]}" for code in codes))

    floor = Confidence(args.floor)
    counts, unjudged, gone = score([f for f in listed if shown_at(f, floor)], verdicts, packages)
    # a row is gone only when no finding at any level matches it: one below the floor still holds its verdict
    gone = {key: verdict for key, verdict in gone.items() if key not in {f.key for f in listed}}
    print(f"# verdicts ({args.verdicts.name}), floor {floor.value}: {precision_line(counts)}")
    for line in level_lines(listed, verdicts, floor):
        print(f"#   {line}")
    print(f"# {needs_line(counts)}")
    print(f"# no verdict yet: {len(unjudged)}")
    gone_counts = Counter(verdict.verdict for verdict in gone.values())
    print(f"# recorded rows no finding matches: {len(gone)}"
          + (" (" + ", ".join(f"{v} {gone_counts[v]}" for v in VERDICTS if gone_counts[v]) + ")" if gone else ""))
    for (code, path, column, text), verdict in sorted(gone.items()):
        print(f"#   gone: {code} {path} col {column} [{verdict.verdict}] {text}")

    if args.prune and gone:
        prune(args.verdicts, set(gone))
        print(f"# pruned {len(gone)} rows from {args.verdicts}")
    if args.sample_per_level:
        for line in sample_lines(listed, verdicts, args.sample_per_level, args.seed):
            print(f"# {line}")
        to_read = [f for level in ("high", "medium") for f in level_sample(listed, level, args.sample_per_level, args.seed)]
        for number, finding in enumerate(to_read, start=1):
            if verdicts.get(finding.key) is None:
                show(number, finding, None)
        return 0
    shown = [f for f in listed if verdicts.get(f.key) is None] if args.all_unjudged else unjudged
    for number, finding in enumerate(shown, start=1):
        show(number, finding, None)
    if args.sample:
        print(f"\n# sample of {min(args.sample, len(listed))}, seed {args.seed}")
        drawn = sorted(random.Random(args.seed).sample(range(len(listed)), min(args.sample, len(listed))))
        for number, index in enumerate(drawn, start=1):
            show(number, listed[index], verdicts.get(listed[index].key))
    return 0


if __name__ == "__main__":
    sys.exit(main())
