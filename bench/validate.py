"""Score a validation draw: precision per level and per rule, wrong fixes, and the recall of a hand hunt.

    python bench/validate.py DRAW [--label L] [--torchlint BIN] [--rerun] [--write]
    python bench/validate.py DRAW --packet DIR [--parts K] [--label L ...] [--codes CODE ...] [--levels LEVEL ...]
    python bench/validate.py DRAW --record FILE [FILE ...]
    python bench/validate.py --measured DRAW [DRAW ...] [--label L] [--onto]
    python bench/validate.py --calibrate DRAW [DRAW ...] [--label L] [--prior TABLE.md] [--write]

A draw (``bench/draw.py``) is read twice, blind, by readers with fresh eyes:

- **findings**: ``--packet DIR`` writes every finding that has no verdict yet (of every label scored so
  far: the tree before a change and after it are read together) into ``DIR/part-K.md``, numbered,
  with its message, its fix and 12 lines of context either side, and *not* its rule code or its
  confidence level. A reader writes one row per finding, ``id<TAB>verdict<TAB>fix<TAB>reason``
  (verdict ``real``/``real*``/``false``, fix ``ok``/``wrong``/``none``, as in
  ``bench/precision_user.py``); ``--record`` turns the rows into ``bench/results/draws/DRAW/verdicts.tsv``
  (keyed like the calibration corpus's verdicts: repository, path, code, flagged line);
- **hunt**: the same repositories searched by hand, without torchlint, for every real or real* site of
  the families in the rule catalogue, recorded in ``bench/results/draws/DRAW/hunt.tsv`` (repo, path,
  line, code, verdict, what). A hunted site is found when a finding of the same family
  (``FAMILIES``) is reported in the same file within ``LINE_SLACK`` lines of it. Rows a hunter got
  wrong about torch itself (an API that torch 2.13 neither removed nor deprecates), checked with torch,
  are moved to ``hunt_rejected.tsv`` with the reason, and not counted.

The default command lints the draw's corpus with ``--torchlint`` (a console script: the tree before a
change can be scored from its own virtual environment under another ``--label``), caches the
findings beside the corpus, and prints the figures; ``--write`` records them in
``bench/results/draws/DRAW/LABEL.md``. ``--measured`` writes the figures the product quotes
(``torchlint/data/measured_precision.json``, read by ``torchlint rule CODE``) from the named draws
together: validation draws only. ``--calibrate`` applies the decision rule to draws that have become
calibration: it lints them with the level table off and writes the table (``--write``:
``torchlint/data/level_calibration.json`` and ``bench/results/draws/calibration.md``). ``--prior`` adds the
counts of an earlier calibration's table (draws whose corpora are no longer at hand, read with the tree of
their day) to each form's counts before the rule is applied.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import draw  # noqa: E402
import precision_user  # noqa: E402
from precision_user import Finding, Key, Verdict  # noqa: E402
from verdict_files import verdict_rows  # noqa: E402

sys.path.insert(0, str(BENCH.parent))
from torchlint.rule import LEVEL_TABLE_VARIABLE  # noqa: E402

RESULTS = BENCH / "results" / "draws"
HUNT_COLUMNS = ("repo", "path", "line", "code", "verdict", "what")
READING_COLUMNS = ("id", "verdict", "fix", "reason")
# A finding and a hunted site match when they are this many lines apart or fewer (a statement that
# spans lines is reported at one of them).
LINE_SLACK = 2
# Codes that name one hazard from two sides: a hunter's TL101 on ``x ** 0.5`` is torchlint's TL103 too; a
# log of a softmax is TL201 to one and an unguarded log (TL102) to the other; a whole object under the
# weights_only default is the catalogue's TL402 and torchlint's TL406; a backward through parameters an
# optimizer step changed is a second backward (TL303) to a hunter and TL305 to torchlint; a Parameter moved
# after it was made (TL307) is a parameter cut from training (TL302) to a hunter. Every drift
# code (TL6xx) matches every other, and a keyword torch removed is drift to a hunter and TL405 to torchlint.
FAMILIES: Tuple[frozenset, ...] = (
    frozenset({"TL101", "TL103"}),
    frozenset({"TL102", "TL201", "TL202"}),
    frozenset({"TL203", "TL205"}),
    frozenset({"TL206", "TL207"}),
    frozenset({"TL402", "TL406"}),
    frozenset({"TL303", "TL305"}),
    frozenset({"TL302", "TL307"}),
)


@dataclass(frozen=True)
class HuntedSite:
    repo: str
    path: str
    line: int
    code: str
    verdict: str
    what: str


def results_of(name: str) -> Path:
    return RESULTS / name


def same_family(first: str, second: str) -> bool:
    drift = ("TL6", "TL405")
    if first == second or (first.startswith(drift) and second.startswith(drift)):
        return True
    return any(first in family and second in family for family in FAMILIES)


# ---------------------------------------------------------------------------------------------- findings
def state_file(corpus: Path, name: str, file_name: str) -> Path:
    """Where the validation keeps a draw's findings and packet index: beside the draw's folder, not in it, so
    that a blind reader browsing the repositories never meets the rules and levels (a draw validated before
    kept them in its folder: read from there while no new file exists)."""
    kept = corpus / ".validate" / name / file_name
    legacy = corpus / name / f".{file_name}"
    return legacy if not kept.exists() and legacy.exists() else kept


def findings_path(corpus: Path, name: str, label: str) -> Path:
    return state_file(corpus, name, f"findings-{label}.json")


def lint_draw(name: str, corpus: Path, torchlint: str, label: str, rerun: bool) -> Tuple[List[Finding], int]:
    """The findings of ``torchlint`` on every pinned repository of the draw (cached per label), and the
    draw's lines of Python."""
    repositories = draw.pinned_repositories(name)
    root = corpus / name
    absent = [r.name for r in repositories if not (root / r.folder / ".torchlint-corpus-commit").exists()]
    if absent:
        raise SystemExit(f"{root} lacks {', '.join(absent)}: run `python bench/draw.py build {name}` first")
    lines = sum(precision_user.code_lines(root / r.folder) for r in repositories)
    cache = findings_path(corpus, name, label)
    if cache.exists() and not rerun:
        return precision_user.numbered_occurrences(
            [Finding(**entry) for entry in json.loads(cache.read_text(encoding="utf-8"))]), lines
    findings: List[Finding] = []
    for repository in repositories:
        findings += precision_user.lint(torchlint, root, repository)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps([f.__dict__ for f in findings], indent=0), encoding="utf-8")
    return findings, lines


def cached_labels(corpus: Path, name: str) -> List[str]:
    kept = {p.name[len("findings-"):-len(".json")] for p in (corpus / ".validate" / name).glob("findings-*.json")}
    legacy = {p.name[len(".findings-"):-len(".json")] for p in (corpus / name).glob(".findings-*.json")}
    return sorted(kept | legacy)


# ---------------------------------------------------------------------------------------------- reading
def write_packet(name: str, corpus: Path, labels: Sequence[str], out: Path, parts: int,
                 codes: Optional[Sequence[str]] = None, levels: Optional[Sequence[str]] = None) -> int:
    """The unread findings of ``labels`` (of ``codes`` only, when given: a calibration draw's new findings of
    a changed rule; at ``levels`` only, when given: the forms a level table would move) as blind reading
    packets; returns how many."""
    verdicts = precision_user.read_verdicts(results_of(name) / "verdicts.tsv")
    unread: Dict[Key, Finding] = {}
    for label in labels:
        for finding in lint_draw(name, corpus, "", label, rerun=False)[0]:
            if codes and finding.code not in codes:
                continue
            if levels and finding.confidence not in levels:
                continue
            if finding.key not in verdicts:
                unread[finding.key] = finding  # a later label's message wins
    ordered = sorted(unread.values(), key=lambda f: (f.repo, f.path, f.line, f.code))
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    per_part = max(1, -(-len(ordered) // parts))
    for part in range(parts):
        chunk = ordered[part * per_part:(part + 1) * per_part]
        if not chunk:
            continue
        with (out / f"part-{part + 1}.md").open("w", encoding="utf-8") as handle:
            for offset, finding in enumerate(chunk):
                number = part * per_part + offset + 1
                index[str(number)] = list(finding.key)
                handle.write(blind_entry(number, finding, corpus / name))
    # The index names each finding's rule: it stays with the corpus, out of the readers' packets.
    index_path = state_file(corpus, name, "packet-index.json")
    index_path.parent.mkdir(parents=True, exist_ok=True)
    index_path.write_text(json.dumps(index, indent=0), encoding="utf-8")
    return len(ordered)


def edited_lines(source: Sequence[str], edits: Sequence[dict]) -> Dict[int, str]:
    """The lines that single-line edits change, as they read once the edits are applied (1-based columns)."""
    by_line: Dict[int, List[dict]] = defaultdict(list)
    for edit in edits:
        if edit["line"] == edit["end_line"] and 1 <= edit["line"] <= len(source):
            by_line[edit["line"]].append(edit)
    out = {}
    for number, line_edits in by_line.items():
        text = source[number - 1]
        for edit in sorted(line_edits, key=lambda e: e["column"], reverse=True):
            text = text[: edit["column"] - 1] + edit["content"] + text[edit["end_column"] - 1:]
        out[number] = text
    return out


def blind_entry(number: int, finding: Finding, root: Path) -> str:
    """One finding as a reader sees it: where, the message, the fix, the code around it."""
    lines = [f"## {number}. {finding.repo} {finding.path}:{finding.line}:{finding.column}", finding.message]
    if finding.fix:
        lines.append(f"fix: {finding.fix['message']}")
        for edit in finding.fix["edits"]:
            where = f"cell {edit['cell']} " if edit.get("cell") is not None else ""
            lines.append(f"  replace {where}{edit['line']}:{edit['column']}-{edit['end_line']}:{edit['end_column']}"
                         f" with {edit['content']!r}")
    else:
        lines.append("fix: none offered")
    path, _, cell = finding.path.partition(":cell ")
    source = precision_user.source_lines(root / finding.repo.replace("/", "+") / path, int(cell) if cell else None)
    if finding.fix:
        # The edits are minimal column ranges, easy to misread (d11's readers took a dropped `p='fro'` for kept):
        # show each edited line as the fix leaves it.
        for number, text in sorted(edited_lines(source, finding.fix["edits"]).items()):
            lines.append(f"  after the fix, line {number}: {text}")
    for index in range(max(finding.line - 13, 0), min(finding.line + 12, len(source))):
        mark = ">>" if index == finding.line - 1 else "  "
        lines.append(f"{mark}{index + 1:5d} {source[index]}")
    return "\n".join(lines) + "\n\n"


def record(name: str, corpus: Path, readings: Sequence[Path]) -> int:
    """Append the readers' rows to the draw's verdicts, keyed through the packet's index."""
    index = json.loads(state_file(corpus, name, "packet-index.json").read_text(encoding="utf-8"))
    target = results_of(name) / "verdicts.tsv"
    known = precision_user.read_verdicts(target)
    rows = []
    for path in readings:
        for number, (identifier, verdict, fix, reason) in verdict_rows(path, READING_COLUMNS):
            if identifier not in index:
                raise SystemExit(f"{path}:{number}: no finding {identifier} in the packet")
            if verdict not in precision_user.VERDICT_VALUES or fix not in precision_user.FIX_VALUES:
                raise SystemExit(f"{path}:{number}: verdict one of {precision_user.VERDICT_VALUES}, "
                                 f"fix one of {precision_user.FIX_VALUES}")
            key = tuple(index[identifier])
            if key in known:
                continue
            known[key] = Verdict(verdict, fix, reason)
            rows.append(list(key[:3]) + [key[3], verdict, fix, reason.replace("\t", " ")])
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = not target.exists()
    with target.open("a", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        if fresh:
            writer.writerow(precision_user.VERDICT_COLUMNS)
        writer.writerows(rows)
    print(f"{len(rows)} verdicts recorded in {target}")
    return 0


# ---------------------------------------------------------------------------------------------- scoring
def read_hunt(name: str) -> List[HuntedSite]:
    path = results_of(name) / "hunt.tsv"
    sites = []
    for number, (repo, file, line, code, verdict, what) in verdict_rows(path, HUNT_COLUMNS):
        if verdict not in ("real", "real*") or not line.isdigit():
            raise SystemExit(f"{path}:{number}: a hunted site is real or real*, at a line number")
        sites.append(HuntedSite(repo, file, int(line), code, verdict, what))
    return sites


def misplaced_sites(sites: Sequence[HuntedSite], root: Path) -> List[str]:
    """Hunted rows whose file is missing or shorter than their line: a hunter's slip that would count as a miss."""
    problems = []
    for site in sites:
        path, _, cell = site.path.partition(":cell ")
        lines = precision_user.source_lines(root / site.repo.replace("/", "+") / path, int(cell) if cell.isdigit() else None)
        if site.line > len(lines):
            problems.append(f"{site.repo} {site.path}:{site.line}: the file has {len(lines)} lines")
    return problems


def matches(site: HuntedSite, finding: Finding) -> bool:
    return (site.repo == finding.repo and site.path == finding.path
            and abs(site.line - finding.line) <= LINE_SLACK and same_family(site.code, finding.code))


def recall(sites: Sequence[HuntedSite], findings: Sequence[Finding], floor: str) -> str:
    at_floor = [f for f in findings if precision_user.at_or_above(f.confidence, floor)]
    out = ["", f"Hunt: {len(sites)} real or real* sites found by hand."]
    if not sites:
        return "\n".join(out) + "\n"
    found_floor = [s for s in sites if any(matches(s, f) for f in at_floor)]
    found_any = [s for s in sites if any(matches(s, f) for f in findings)]
    out += [
        f"- found at the default floor: {len(found_floor)} of {len(sites)} ({len(found_floor) / len(sites):.2f})",
        f"- found at any level: {len(found_any)} of {len(sites)} ({len(found_any) / len(sites):.2f})",
        "", "| family | sites | at the floor | at any level |", "|---|---:|---:|---:|",
    ]
    by_code: Dict[str, Counter] = defaultdict(Counter)
    for site in sites:
        family = "TL6xx" if site.code.startswith("TL6") else site.code
        by_code[family]["sites"] += 1
        by_code[family]["floor"] += site in found_floor
        by_code[family]["any"] += site in found_any
    for family in sorted(by_code):
        counts = by_code[family]
        out.append(f"| {family} | {counts['sites']} | {counts['floor']} | {counts['any']} |")
    missed = [s for s in sites if s not in found_any]
    if missed:
        out += ["", "Missed at every level:"]
        out += [f"- {s.repo} {s.path}:{s.line} {s.code} ({s.verdict}): {s.what}" for s in missed]
    return "\n".join(out) + "\n"


def per_rule_levels(findings: Sequence[Finding], verdicts: Dict[Key, Verdict]) -> str:
    counts: Dict[Tuple[str, str], Counter] = defaultdict(Counter)
    for finding in findings:
        verdict = precision_user.verdict_of(verdicts, finding)
        counts[(finding.code, finding.confidence)][verdict.verdict if verdict else "unread"] += 1
    out = ["", "By rule and level (real+real* / read; unread):", "", "| rule | high | medium | low |", "|---|---|---|---|"]
    for code in sorted({code for code, _ in counts}):
        cells = []
        for level in precision_user.LEVELS:
            c = counts.get((code, level), Counter())
            read = c["real"] + c["real*"] + c["false"]
            cells.append("" if not (read or c["unread"]) else
                         f"{c['real'] + c['real*']}/{read}" + (f"; {c['unread']} unread" if c["unread"] else ""))
        out.append(f"| {code} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def without_drift(findings: Sequence[Finding], verdicts: Dict[Key, Verdict], floor: str) -> str:
    counts = Counter()
    for finding in findings:
        if finding.code.startswith("TL6") or not precision_user.at_or_above(finding.confidence, floor):
            continue
        verdict = precision_user.verdict_of(verdicts, finding)
        counts[verdict.verdict if verdict else "unread"] += 1
    read = counts["real"] + counts["real*"] + counts["false"]
    return (f"\nDefault floor without the API drift rules (TL6xx): {counts['real'] + counts['real*']} of {read} read "
            f"real or real* ({precision_user.precision(counts)}); {counts['unread']} unread.\n")


def figures(name: str, label: str, findings: Sequence[Finding], lines: int, corpus: Path) -> str:
    sites = read_hunt(name)
    problems = misplaced_sites(sites, corpus / name)
    if problems:
        raise SystemExit("hunt rows that point at no line of their file (locate them again):\n" + "\n".join(problems))
    verdicts = precision_user.read_verdicts(results_of(name) / "verdicts.tsv")
    floor = precision_user.default_floor()
    repositories = len(draw.pinned_repositories(name))
    text = precision_user.report(findings, verdicts, lines, repositories, floor)
    text += without_drift(findings, verdicts, floor)
    text += per_rule_levels(findings, verdicts)
    text += recall(sites, findings, floor)
    return text


_MEASURED_CORPUS = re.compile(r"validation draws (?P<draws>[^(]+) \(\S+\): (?P<repositories>\d+) repositories.*?(?P<lines>[\d,]+) lines")


def measured(names: Sequence[str], label: str, corpus: Path, onto: bool = False) -> int:
    """Write the published figures from ``names``; with ``onto``, add them to the published figures of earlier
    draws (whose corpora and cached findings need not be at hand: their counts are kept in the file)."""
    findings: List[Finding] = []
    verdicts: Dict[Key, Verdict] = {}
    lines = repositories = 0
    for name in names:
        found, counted = lint_draw(name, corpus, "", label, rerun=False)
        findings += found
        lines += counted
        repositories += len(draw.pinned_repositories(name))
        verdicts.update(precision_user.read_verdicts(results_of(name) / "verdicts.tsv"))
    data = precision_user.measured(findings, verdicts, lines, repositories)
    if onto:
        earlier = json.loads(precision_user.MEASURED.read_text(encoding="utf-8"))
        described = _MEASURED_CORPUS.match(earlier["corpus"])
        if described is None:
            raise SystemExit(f"cannot read which draws {precision_user.MEASURED} holds: {earlier['corpus']!r}")
        names = [*described["draws"].split(", "), *names]
        repositories += int(described["repositories"])
        lines += int(described["lines"].replace(",", ""))
        data["levels"] = _summed(earlier["levels"], data["levels"])
        for code in set(earlier["rules"]) | set(data["rules"]):
            data["rules"][code] = _summed(earlier["rules"].get(code, {}), data["rules"].get(code, {}))
        data["rules"] = dict(sorted(data["rules"].items()))
    data["corpus"] = (f"validation draws {', '.join(names)} ({datetime.date.today().isoformat()}): {repositories} "
                      f"repositories of users' PyTorch code nobody tuned the rules on, {lines:,} lines")
    precision_user.MEASURED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {precision_user.MEASURED}")
    return 0


def _summed(first: Dict[str, Dict[str, int]], second: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, int]]:
    """Per level, the read and real counts of both."""
    return {
        level: {key: first.get(level, {}).get(key, 0) + second.get(level, {}).get(key, 0) for key in ("read", "real")}
        for level in sorted(set(first) | set(second))
    }


# The decision rule: the share of real (or real*) findings each level promises. A form (a rule's findings
# at the level the analysis found them) is shown at the highest level whose promise it kept on the
# calibration draws; ``low`` promises nothing.
PROMISES = (("high", 0.90), ("medium", 0.50))
LEVEL_TABLE = BENCH.parent / "torchlint" / "data" / "level_calibration.json"
CALIBRATION = RESULTS / "calibration.md"


def level_counts(findings: Sequence[Finding], verdicts: Dict[Key, Verdict]) -> Dict[Tuple[str, str], Counter]:
    counts: Dict[Tuple[str, str], Counter] = defaultdict(Counter)
    for finding in findings:
        verdict = precision_user.verdict_of(verdicts, finding)
        counts[(finding.code, finding.confidence)][verdict.verdict if verdict else "unread"] += 1
    return counts


# A form moves down only when the upper end of the one-sided 90% Wilson interval of its read share misses
# the promise: one or two readings cannot move a form alone. On validation draws d6 and d7 the table this
# gave from d1-d5 read better at high than the point estimate's (18/22 and 25/29 against 11/15 and 22/26)
# and found more there (19 and 29 sites against 12 and 26).
WILSON_Z = 1.2816


def _wilson(real: int, read: int, z: float, sign: int) -> float:
    share = real / read
    centre = share + z * z / (2 * read)
    spread = z * math.sqrt(share * (1 - share) / read + z * z / (4 * read * read))
    return (centre + sign * spread) / (1 + z * z / read)


def upper_bound(real: int, read: int, z: float = WILSON_Z) -> float:
    """The upper end of Wilson's score interval for ``real`` of ``read``."""
    return _wilson(real, read, z, 1) if read else 1.0


def lower_bound(real: int, read: int, z: float = WILSON_Z) -> float:
    """The lower end of Wilson's score interval for ``real`` of ``read``."""
    return _wilson(real, read, z, -1) if read else 0.0


def shown_level(found: str, counts: Counter) -> str:
    """The level the decision rule shows a form found at ``found`` at, from its read findings: down to the
    highest level at or below ``found`` whose promise the upper bound still reaches; up to a higher level only
    when even the lower bound keeps that level's promise (the readings show the analysis too cautious)."""
    read = counts["real"] + counts["real*"] + counts["false"]
    if not read:
        return found
    real = counts["real"] + counts["real*"]
    for level, promise in PROMISES:
        if precision_user.at_or_above(found, level):
            if upper_bound(real, read) >= promise:
                return level
        elif lower_bound(real, read) >= promise:
            return level
    return "low"


_PRIOR_ROW = re.compile(r"^\| (TL\d+) (high|medium|low) \| (\d+) \| (\d+) \|.*\| (\d+) \| \w+ \|$")
_PRIOR_TITLE = re.compile(r"^# Calibration: the decision rule on draws (.+)$")


def prior_counts(path: Path) -> Tuple[List[str], Dict[Tuple[str, str], Counter]]:
    """The draws and per-form counts (read, real or real*, unread) of an earlier calibration table."""
    draws: List[str] = []
    counts: Dict[Tuple[str, str], Counter] = defaultdict(Counter)
    for line in path.read_text(encoding="utf-8").splitlines():
        title = _PRIOR_TITLE.match(line)
        if title:
            draws = [name.strip() for name in title.group(1).split(",")]
        row = _PRIOR_ROW.match(line)
        if row:
            code, level, read, real, unread = row.groups()
            counts[(code, level)].update(real=int(real), false=int(read) - int(real), unread=int(unread))
    if not draws or not counts:
        raise SystemExit(f"{path}: no calibration table (title and form rows) in it")
    return draws, counts


def calibrate(names: Sequence[str], label: str, torchlint: str, corpus: Path, rerun: bool, write: bool,
              prior: Optional[Path] = None) -> int:
    """Lint the calibration draws at the levels the analysis finds (the level table off), and show each form
    at the level the decision rule gives it; ``write`` records the table and its evidence. ``prior``: an
    earlier table whose counts join this one's."""
    findings: List[Finding] = []
    verdicts: Dict[Key, Verdict] = {}
    lines = repositories = 0
    previous = os.environ.get(LEVEL_TABLE_VARIABLE)
    os.environ[LEVEL_TABLE_VARIABLE] = "off"
    try:
        for name in names:
            found, counted = lint_draw(name, corpus, torchlint, f"{label}-found", rerun)
            findings += found
            lines += counted
            repositories += len(draw.pinned_repositories(name))
            verdicts.update(precision_user.read_verdicts(results_of(name) / "verdicts.tsv"))
    finally:
        if previous is None:
            os.environ.pop(LEVEL_TABLE_VARIABLE, None)
        else:
            os.environ[LEVEL_TABLE_VARIABLE] = previous
    counts = level_counts(findings, verdicts)
    drawn = list(names)
    prior_note = ""
    command = f"`python bench/validate.py --calibrate {' '.join(names)} --label {label}`"
    if prior is not None:
        earlier, earlier_counts = prior_counts(prior)
        for form, counted in earlier_counts.items():
            counts.setdefault(form, Counter()).update(counted)
        drawn = earlier + drawn
        command = command[:-1] + f" --prior {prior.relative_to(BENCH.parent) if prior.is_absolute() else prior}`"
        prior_note = (f" The counts of draws {', '.join(earlier)} come from {prior.name}, read with the tree of their "
                      "day (their corpora are not kept), and are added to each form's.")
    moves = {}
    out = [f"# Calibration: the decision rule on draws {', '.join(drawn)}", "",
           command, "",
           f"{repositories} repositories, {lines:,} lines linted now; every finding at the level the analysis found it "
           "(the level table off), against the verdicts read blind. A form whose share of real findings cannot "
           "reach 0.90 (the upper end of its one-sided 90% Wilson interval is below it) is shown at `medium` "
           "when it is found at `high`, and one that cannot reach 0.50 at `low`; a form whose share is sure to "
           "keep a higher level's promise (the lower end reaches it) is shown at that level." + prior_note, "",
           "| form | read | real or real* | share | lower bound | upper bound | unread | shown at |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for (code, level) in sorted(counts, key=lambda k: (k[0], precision_user.LEVELS.index(k[1]))):
        c = counts[(code, level)]
        read = c["real"] + c["real*"] + c["false"]
        real = c["real"] + c["real*"]
        shown = shown_level(level, c)
        if shown != level:
            moves[f"{code}:{level}"] = shown
        share = f"{real / read:.2f}" if read else ""
        bound = f"{upper_bound(real, read):.2f}" if read else ""
        low = f"{lower_bound(real, read):.2f}" if read else ""
        out.append(f"| {code} {level} | {read} | {real} | {share} | {low} | {bound} | {c['unread']} | {shown} |")
    text = "\n".join(out) + "\n"
    print(text)
    print(json.dumps(moves, indent=1, sort_keys=True))
    if write:
        CALIBRATION.write_text(text, encoding="utf-8")
        table = {
            "note": (f"The decision rule applied to calibration draws {', '.join(drawn)} (of them, {repositories} "
                     f"repositories and {lines:,} lines linted with this tree; read blind): a form (CODE:level found) whose real share cannot reach 0.90 "
                     "(the upper end of its one-sided 90% Wilson interval) is shown at medium, one that cannot reach "
                     "0.50 at low, where torchlint trace can confirm it; one sure to keep a higher promise (the lower "
                     "end reaches it) is shown there. Evidence: "
                     "bench/results/draws/calibration.md; written by bench/validate.py --calibrate."),
            "moves": dict(sorted(moves.items())),
        }
        LEVEL_TABLE.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {CALIBRATION} and {LEVEL_TABLE}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("draws", nargs="+", help="the draw (several with --measured or --calibrate)")
    parser.add_argument("--label", action="append", default=None,
                        help="which tree's findings (default 'after'; repeatable with --packet)")
    parser.add_argument("--torchlint", default=str(Path(sys.executable).with_name("torchlint")))
    parser.add_argument("--corpus", type=Path, default=draw.default_corpus())
    parser.add_argument("--rerun", action="store_true", help="lint again instead of reading the cached findings")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--packet", type=Path, default=None)
    parser.add_argument("--parts", type=int, default=1)
    parser.add_argument("--codes", nargs="+", default=None, help="with --packet: only these rules' findings")
    parser.add_argument("--levels", nargs="+", default=None, choices=("high", "medium", "low"),
                        help="with --packet: only findings at these levels (as the label recorded them)")
    parser.add_argument("--record", type=Path, nargs="+", default=None)
    parser.add_argument("--measured", action="store_true")
    parser.add_argument("--onto", action="store_true",
                        help="with --measured: add the draws to the figures already published (corpora of those not needed)")
    parser.add_argument("--calibrate", action="store_true",
                        help="apply the decision rule to the named calibration draws (with --write: the level table)")
    parser.add_argument("--prior", type=Path,
                        help="with --calibrate: an earlier calibration table whose counts join the draws'")
    args = parser.parse_args(argv)
    labels = args.label or ["after"]
    if args.measured:
        return measured(args.draws, labels[0], args.corpus, args.onto)
    if args.calibrate:
        return calibrate(args.draws, labels[0], args.torchlint, args.corpus, args.rerun, args.write, args.prior)
    if len(args.draws) != 1:
        parser.error("one draw at a time, except with --measured")
    name = args.draws[0]
    if args.packet is not None:
        count = write_packet(name, args.corpus, labels, args.packet, args.parts, args.codes, args.levels)
        print(f"{count} unread findings written to {args.packet}")
        return 0
    if args.record is not None:
        return record(name, args.corpus, args.record)
    findings, lines = lint_draw(name, args.corpus, args.torchlint, labels[0], args.rerun)
    text = figures(name, labels[0], findings, lines, args.corpus)
    print(text)
    if args.write:
        target = results_of(name) / f"{labels[0]}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"# Draw {name}, {labels[0]}\n\n`python bench/validate.py {name} --label {labels[0]}`\n\n"
                          + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
