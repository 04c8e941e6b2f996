"""Precision of the default run on ordinary users' PyTorch code, scored against verdicts read blind.

    python bench/precision_user.py build [--corpus DIR] [--mirror DIR]
    python bench/precision_user.py score [--corpus DIR] [--verdicts FILE] [--unread FILE] [--write]

The corpus is the list of public repositories in ``bench/user_corpus.tsv`` (training scripts, RL and
GAN tutorials, paper re-implementations, course work, competition solutions; no libraries), each at
a pinned commit. Nothing of theirs is committed. ``build`` copies the Python sources, notebooks and
configuration files of each commit out of a git mirror into ``DIR/<owner>+<name>/``: the mirrors
the search tool's ``fetch`` leaves under ``/work/.mirror/<owner>+<name>/``, or a clone made by hand
(``git clone https://github.com/<owner>/<name> DIR/.git-mirrors/<owner>+<name>``). A mirror whose
newest commit is not the pinned one is used at the pinned commit when it has it, and refused when not.
DIR defaults to $TORCHLINT_USER_CORPUS or ~/.cache/torchlint-user-corpus.

``score`` runs the console script as a user does, once per repository with the repository as the
project (``torchlint check . --select ALL --confidence-level low --output-format json``), so that the
project-wide analyses see what they see on a user's machine. Every finding is then matched with a
verdict in ``bench/results/precision_user_verdicts.tsv``: one row per finding, keyed by repository,
path, code and the flagged line's text (stripped), with

- ``verdict``: ``real`` (the hazard happens on the inputs this code is written for), ``real*`` (it
  happens only for unusual but legitimate inputs: an all-zero feature vector, an empty mask) or
  ``false`` (it cannot happen, or the message is wrong about what breaks);
- ``fix``: ``ok``, ``wrong`` (the fix would change a correct program's meaning or crash) or ``none``
  (no fix offered);
- ``reason``: one line, what the reader saw (where the operand comes from, which caller guards it).

The verdicts are written by readers who see the code and the criteria, not the rules' internals.
The script prints precision (real and real* over all read findings) per confidence level and at the
default floor, findings per 10k lines, precision per rule at the default floor, wrong fixes, the
findings with no verdict (``--unread FILE`` writes them with context, for readers) and the verdict
rows no finding matches any more. ``--write`` records the table in ``bench/results/precision_user.md`` and the
figures the rule pages quote (``torchlint rule CODE``) in ``torchlint/data/measured_precision.json``.

Exit status: 0, or 2 when the corpus is missing or torchlint printed no JSON.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from verdict_files import verdict_rows  # noqa: E402
LIST = BENCH / "user_corpus.tsv"
VERDICTS = BENCH / "results" / "precision_user_verdicts.tsv"
REPORT = BENCH / "results" / "precision_user.md"
MEASURED = ROOT / "torchlint" / "data" / "measured_precision.json"
VERDICT_COLUMNS = ("repo", "path", "code", "line", "verdict", "fix", "reason")
VERDICT_VALUES = ("real", "real*", "false")
FIX_VALUES = ("ok", "wrong", "none")
LEVELS = ("high", "medium", "low")
# What build copies: the code torchlint reads and the configuration a project keeps beside it.
KEPT_SUFFIXES = (".py", ".pyi", ".ipynb", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".sh")
KEPT_MAX_BYTES = 2_000_000

Key = Tuple[str, str, str, str]


@dataclass(frozen=True)
class Repository:
    name: str  # owner/name
    commit: str
    kind: str

    @property
    def folder(self) -> str:
        return self.name.replace("/", "+")


OCCURRENCE_MARK = "#occurrence "


@dataclass(frozen=True)
class Finding:
    repo: str
    path: str
    line: int
    column: int
    code: str
    confidence: str
    message: str
    text: str  # the flagged line, stripped
    fix: Optional[dict]  # check's JSON fix: applicability, message, edits
    occurrence: int = 1  # the n-th finding of this rule on an identical line of the file

    @property
    def key(self) -> Key:
        """Repository, file, rule and flagged line; a repeat of an identical line carries its ordinal, so a
        verdict on one copy is not taken for another (an unused class repeating a used one)."""
        text = self.text if self.occurrence == 1 else f"{self.text} {OCCURRENCE_MARK}{self.occurrence}"
        return (self.repo, self.path, self.code, text)

    @property
    def shared_key(self) -> Key:
        return (self.repo, self.path, self.code, self.text)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    fix: str
    reason: str


def default_corpus() -> Path:
    return Path(os.environ.get("TORCHLINT_USER_CORPUS", Path.home() / ".cache" / "torchlint-user-corpus"))


def read_list(path: Path = LIST) -> List[Repository]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [Repository(row["repo"], row["commit"], row["kind"]) for row in rows if row["commit"]]


# ---------------------------------------------------------------------------------------------- build
def git_dir(mirrors: Sequence[Path], repository: Repository) -> Optional[Path]:
    for base in mirrors:
        for candidate in (base / repository.folder / "repo" / ".git", base / repository.folder / "repo",
                          base / repository.folder / ".git", base / repository.folder):
            if (candidate / "objects").is_dir():
                return candidate
    return None


def git(directory: Path, *arguments: str, binary: bool = False):
    result = subprocess.run(["git", f"--git-dir={directory}", *arguments], capture_output=True)
    if result.returncode != 0:
        return None
    return result.stdout if binary else result.stdout.decode("utf-8", "replace")


def build(corpus: Path, mirrors: Sequence[Path], repositories: Optional[Sequence[Repository]] = None) -> int:
    """Copy each pinned commit's kept files into the corpus (``repositories``, default the list of
    ``bench/user_corpus.tsv``); a blob the mirror lacks (large files are left out of snapshots) is
    skipped. Returns the number of repositories that could not be built."""
    missing = 0
    for repository in read_list() if repositories is None else repositories:
        target = corpus / repository.folder
        stamp = target / ".torchlint-corpus-commit"
        if stamp.exists() and stamp.read_text().strip() == repository.commit:
            continue
        directory = git_dir(mirrors, repository)
        if directory is None or git(directory, "cat-file", "-e", f"{repository.commit}^{{commit}}") is None:
            print(f"missing: {repository.name} at {repository.commit} (fetch it, or clone it into {mirrors[0]})",
                  file=sys.stderr)
            missing += 1
            continue
        listing = git(directory, "ls-tree", "-r", "-l", repository.commit) or ""
        copied = 0
        for row in listing.splitlines():
            meta, _, path = row.partition("\t")
            kind, sha, size = meta.split()[1:4]
            if kind != "blob" or not path.endswith(KEPT_SUFFIXES) or not size.isdigit() or int(size) > KEPT_MAX_BYTES:
                continue
            data = git(directory, "cat-file", "blob", sha, binary=True)
            if data is None:
                continue
            destination = target / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
            copied += 1
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(repository.commit + "\n")
        print(f"built: {repository.name}: {copied} files")
    return missing


# ---------------------------------------------------------------------------------------------- score
def code_lines(folder: Path) -> int:
    """Lines of Python: .py files, and the code cells of notebooks."""
    total = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue  # a folder may be named like a notebook
        if path.suffix == ".py":
            total += path.read_bytes().count(b"\n")
        elif path.suffix == ".ipynb":
            try:
                notebook = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            for cell in notebook.get("cells", []):
                if cell.get("cell_type") == "code":
                    source = cell.get("source", "")
                    total += len(source) if isinstance(source, list) else source.count("\n") + 1
    return total


def source_lines(path: Path, cell: Optional[int]) -> List[str]:
    """The lines of a file, or of one notebook cell (numbered from 1 over every cell, as check reports)."""
    try:
        if cell is not None:
            source = json.loads(path.read_text(encoding="utf-8"))["cells"][cell - 1]["source"]
            return ("".join(source) if isinstance(source, list) else source).splitlines()
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError, IndexError, KeyError, UnicodeDecodeError):
        return []


def flagged_line(folder: Path, entry: dict) -> str:
    lines = source_lines(folder / entry["path"], entry.get("cell"))
    return lines[entry["line"] - 1].strip() if 0 < entry["line"] <= len(lines) else ""


def lint(torchlint: str, corpus: Path, repository: Repository) -> List[Finding]:
    folder = corpus / repository.folder
    result = subprocess.run(
        [torchlint, "check", ".", "--select", "ALL", "--confidence-level", "low", "--no-cache",
         "--output-format", "json", "--exit-zero"],
        cwd=folder, capture_output=True, text=True,
    )
    try:
        entries = json.loads(result.stdout)
    except ValueError:
        raise SystemExit(f"torchlint printed no JSON on {repository.name}: {result.stderr[-2000:]}")
    crashes = [line for line in result.stderr.splitlines() if "internal error" in line]
    if crashes:
        # A rule that crashes on a file reports nothing there: the figures would hide lost findings.
        print(f"warning: {len(crashes)} internal errors on {repository.name}, first: {crashes[0]}", file=sys.stderr)
    findings = []
    for entry in entries:
        path = entry["path"].removeprefix("./")
        if entry.get("cell") is not None:
            path = f"{path}:cell {entry['cell']}"
        findings.append(Finding(
            repository.name, path, entry["line"], entry["column"], entry["code"], entry["confidence"],
            entry["message"], flagged_line(folder, entry), entry.get("fix"),
        ))
    return numbered_occurrences(findings)


def numbered_occurrences(findings: Sequence[Finding]) -> List[Finding]:
    """The findings with each repeat of a (file, rule, line text) numbered in line order."""
    seen: Counter = Counter()
    numbered = []
    for finding in sorted(findings, key=lambda f: (f.path, f.line, f.column, f.code)):
        seen[finding.shared_key] += 1
        numbered.append(replace(finding, occurrence=seen[finding.shared_key]))
    return numbered


def verdict_of(verdicts: Dict[Key, "Verdict"], finding: Finding) -> Optional["Verdict"]:
    """The verdict read for this finding. Draws read before repeats were numbered (d1-d26) hold one verdict per
    identical line; a repeat falls back to it, as those figures were made."""
    return verdicts.get(finding.key) or verdicts.get(finding.shared_key)


def read_verdicts(path: Path) -> Dict[Key, Verdict]:
    """The recorded verdicts; a malformed row stops the run with its line number (a typo must not count)."""
    verdicts: Dict[Key, Verdict] = {}
    for number, row in verdict_rows(path, VERDICT_COLUMNS):
        repo, file, code, line, verdict, fix, reason = row
        if verdict not in VERDICT_VALUES or fix not in FIX_VALUES:
            raise SystemExit(f"{path}:{number}: verdict one of {VERDICT_VALUES}, fix one of {FIX_VALUES}")
        verdicts[(repo, file, code, line)] = Verdict(verdict, fix, reason)
    return verdicts


def precision(counts: Counter) -> str:
    read = counts["real"] + counts["real*"] + counts["false"]
    if not read:
        return "n/a"
    return f"{(counts['real'] + counts['real*']) / read:.2f}"


def at_or_above(level: str, floor: str) -> bool:
    return LEVELS.index(level) <= LEVELS.index(floor)


def default_floor() -> str:
    sys.path.insert(0, str(ROOT))
    from torchlint.rule import DEFAULT_CONFIDENCE_FLOOR

    return DEFAULT_CONFIDENCE_FLOOR.value


def applied_by_fix(finding: Finding, floor: str) -> bool:
    """Whether ``torchlint check --fix`` (no --unsafe-fixes) applies the finding's fix."""
    return (
        finding.fix is not None
        and finding.fix["applicability"] in ("safe", "numerics")
        and at_or_above(finding.confidence, floor)
    )


def report(findings: Sequence[Finding], verdicts: Dict[Key, Verdict], lines: int, repos: int, floor: str) -> str:
    by_level = {level: Counter() for level in LEVELS}
    floor_counts: Counter = Counter()
    by_rule: Dict[str, Counter] = defaultdict(Counter)
    wrong_fixes = []
    for finding in findings:
        verdict = verdict_of(verdicts, finding)
        label = verdict.verdict if verdict else "unread"
        by_level[finding.confidence][label] += 1
        by_level[finding.confidence]["findings"] += 1
        if at_or_above(finding.confidence, floor):
            floor_counts[label] += 1
            floor_counts["findings"] += 1
            by_rule[finding.code][label] += 1
            by_rule[finding.code]["findings"] += 1
        if verdict and verdict.fix == "wrong" and finding.fix is not None:
            wrong_fixes.append((finding, verdict))
    out = [
        f"{repos} repositories, {lines:,} lines of Python; default floor `{floor}`.",
        "",
        "| level | findings | per 10k lines | real | real* | false | unread | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def row(name: str, counts: Counter) -> str:
        per = counts["findings"] / lines * 10_000 if lines else 0.0
        return (f"| {name} | {counts['findings']} | {per:.1f} | {counts['real']} | {counts['real*']} | "
                f"{counts['false']} | {counts['unread']} | {precision(counts)} |")

    for level in LEVELS:
        out.append(row(level, by_level[level]))
    out.append(row(f"default floor ({floor} and up)", floor_counts))
    out += ["", "At the default floor, by rule:", "",
            "| rule | findings | real | real* | false | unread | precision |", "|---|---:|---:|---:|---:|---:|---:|"]
    for code in sorted(by_rule):
        counts = by_rule[code]
        out.append(f"| {code} | {counts['findings']} | {counts['real']} | {counts['real*']} | {counts['false']} | "
                   f"{counts['unread']} | {precision(counts)} |")
    applied = [pair for pair in wrong_fixes if applied_by_fix(pair[0], floor)]
    out += ["", f"Wrong fixes among the read findings that still offer one: {len(wrong_fixes)}, "
                f"of which `--fix` applies {len(applied)} (safe or numerics, at the default floor)."]
    for finding, verdict in wrong_fixes:
        how = "applied by --fix" if applied_by_fix(finding, floor) else f"{finding.fix['applicability']}, {finding.confidence}"
        out.append(f"- {finding.repo} {finding.path}:{finding.line} {finding.code} ({how}): {verdict.reason}")
    return "\n".join(out) + "\n"


def write_unread(path: Path, corpus: Path, findings: Sequence[Finding], verdicts: Dict[Key, Verdict]) -> int:
    """The findings with no verdict, numbered, each with 12 lines of context either side, for readers."""
    unread = [finding for finding in findings if verdict_of(verdicts, finding) is None]
    with path.open("w", encoding="utf-8") as handle:
        for number, finding in enumerate(unread, start=1):
            handle.write(f"## {number}. {finding.repo} {finding.path}:{finding.line}:{finding.column} "
                         f"{finding.code} [{finding.confidence}]\n{finding.message}\n")
            handle.write("key: " + "\t".join(finding.key) + "\n")
            if finding.fix:
                handle.write(f"fix ({finding.fix['applicability']}): {finding.fix['message']}\n")
                for edit in finding.fix["edits"]:
                    where = f"cell {edit['cell']} " if edit.get("cell") is not None else ""
                    handle.write(f"  replace {where}{edit['line']}:{edit['column']}-{edit['end_line']}:{edit['end_column']}"
                                 f" with {edit['content']!r}\n")
            else:
                handle.write("fix: none offered\n")
            path, _, cell = finding.path.partition(":cell ")
            lines = source_lines(corpus / finding.repo.replace("/", "+") / path, int(cell) if cell else None)
            for index in range(max(finding.line - 13, 0), min(finding.line + 12, len(lines))):
                mark = ">>" if index == finding.line - 1 else "  "
                handle.write(f"{mark}{index + 1:5d} {lines[index]}\n")
            handle.write("\n")
    return len(unread)


def score(args) -> int:
    corpus = args.corpus
    repositories = read_list()
    absent = [r.name for r in repositories if not (corpus / r.folder / ".torchlint-corpus-commit").exists()]
    if absent:
        print(f"the corpus at {corpus} lacks {', '.join(absent)}: run `build` first", file=sys.stderr)
        return 2
    findings: List[Finding] = []
    lines = 0
    for repository in repositories:
        lines += code_lines(corpus / repository.folder)
        findings += lint(args.torchlint, corpus, repository)
    verdicts = read_verdicts(args.verdicts)
    floor = default_floor()
    text = report(findings, verdicts, lines, len(repositories), floor)
    print(text)
    matched = {key for finding in findings for key in (finding.key, finding.shared_key)}
    gone = [key for key in verdicts if key not in matched]
    if gone:
        print(f"{len(gone)} verdict rows match no finding any more:")
        for key in gone:
            print("  " + "\t".join(key) + f"\t{verdicts[key].verdict}")
    if args.unread:
        count = write_unread(args.unread, corpus, findings, verdicts)
        print(f"{count} unread findings written to {args.unread}")
    if args.write:
        REPORT.write_text("# Precision on users' code\n\n`python bench/precision_user.py score --write`\n\n" + text,
                          encoding="utf-8")
        MEASURED.write_text(json.dumps(measured(findings, verdicts, lines, len(repositories)), indent=1, sort_keys=True) + "\n",
                            encoding="utf-8")
    return 0


def measured(findings: Sequence[Finding], verdicts: Dict[Key, Verdict], lines: int, repos: int) -> dict:
    """The figures the rule pages quote (torchlint/data/measured_precision.json): read findings per level,
    overall and per rule, and how many of them were real or real*."""

    def tally(selected) -> dict:
        out = {}
        for level in LEVELS:
            read = [v for f in selected if f.confidence == level for v in [verdict_of(verdicts, f)] if v]
            out[level] = {"read": len(read), "real": sum(v.verdict in ("real", "real*") for v in read)}
        return out

    return {
        "corpus": f"{repos} repositories of users' PyTorch code, {lines:,} lines (bench/user_corpus.tsv)",
        "levels": tally(findings),
        "rules": {code: tally([f for f in findings if f.code == code]) for code in sorted({f.code for f in findings})},
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "score"))
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--mirror", type=Path, action="append", default=None,
                        help="a folder of git mirrors named <owner>+<name> (repeatable; default /work/.mirror and "
                             "DIR/.git-mirrors)")
    parser.add_argument("--torchlint", default=str(Path(sys.executable).with_name("torchlint")))
    parser.add_argument("--verdicts", type=Path, default=VERDICTS)
    parser.add_argument("--unread", type=Path, default=None)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "build":
        mirrors = args.mirror or [args.corpus / ".git-mirrors", Path("/work/.mirror")]
        return 2 if build(args.corpus, mirrors) else 0
    return score(args)


if __name__ == "__main__":
    sys.exit(main())
