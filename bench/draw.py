"""Validation draws: fresh repositories of users' PyTorch code, drawn at random from a candidate list.

    python bench/draw.py new NAME --n 20 --seed S      # draw N repositories no earlier draw used
    python bench/draw.py new NAME --n 15 --seed S --topic old-code   # ... of one topic only
    python bench/draw.py pin NAME [--mirror DIR]       # record each fetched snapshot's commit
    python bench/draw.py build NAME [--corpus DIR]     # copy the pinned commits' files out of the mirrors

Figures measured on code the rules were tuned on flatter the rules, so every figure the product quotes
comes from a draw: repositories that nobody read while writing rules, drawn from
``bench/candidates.tsv`` (public repositories of training scripts, paper re-implementations, course
work, competition solutions and research prototypes; no libraries), excluding the calibration corpus
(``bench/user_corpus.tsv``) and every repository an earlier draw took, whatever became of it.

``new`` writes ``bench/draws/NAME.tsv`` (repo, topic, kind, commit, status) with N rows ``drawn``,
spread over the candidates' topics (a random topic order, then a random repository of each in turn), or
from one topic with ``--topic`` (``old-code``: repositories whose newest commit predates 2021, to measure
the rules about code written for an older torch; kept in ``NAME.topic`` for the replacements),
and prints the repositories to fetch (the search tool's ``fetch`` leaves git mirrors under
``/work/.mirror/<owner>+<name>/``). ``pin`` records each mirror's newest commit (``pinned``); a
repository that has no mirror, holds no PyTorch code, or holds more than ``MAX_LINES`` lines of Python
is ``unavailable``, ``not-torch`` or ``too-large``, and the draw takes a replacement from the same
seeded sequence, which ``pin`` prints for fetching. These criteria are decided before anyone reads a
repository's code. ``build`` copies the pinned commits into ``DIR/NAME/<owner>+<name>/`` (the code
is never committed). ``bench/validate.py`` scores a draw.

A draw validates once: after its figures are recorded (``bench/results/draws/NAME/``), its
repositories may join the calibration corpus, and they never enter another draw.
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import precision_user  # noqa: E402

CANDIDATES = BENCH / "candidates.tsv"
DRAWS = BENCH / "draws"
# The revive benchmark's repositories are run and fixed, and their findings read: never a validation draw's.
REVIVE_REPOSITORIES = BENCH / "revive" / "repos.tsv"
COLUMNS = ("repo", "topic", "kind", "commit", "status")
STATUSES = ("drawn", "pinned", "unavailable", "not-torch", "too-large")
# A repository larger than this would outweigh the rest of a 20-repository draw.
MAX_LINES = 25_000


@dataclass(frozen=True)
class Row:
    repo: str
    topic: str
    kind: str
    commit: str = ""
    status: str = "drawn"


def default_corpus() -> Path:
    return Path(os.environ.get("TORCHLINT_DRAWS", Path.home() / ".cache" / "torchlint-draws"))


def read_rows(path: Path) -> List[Row]:
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    out = []
    for number, row in enumerate(rows, start=2):
        status = row.get("status", "drawn")
        if status not in STATUSES:
            raise SystemExit(f"{path}:{number}: status must be one of {', '.join(STATUSES)}")
        out.append(Row(row["repo"], row.get("topic", ""), row.get("kind", ""), row.get("commit", ""), status))
    return out


def write_rows(path: Path, rows: Sequence[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(COLUMNS)
        for row in rows:
            writer.writerow([row.repo, row.topic, row.kind, row.commit, row.status])


def draw_path(name: str) -> Path:
    return DRAWS / f"{name}.tsv"


def used_repositories(excluding: Optional[str] = None) -> set:
    """Every repository of the calibration corpus, of every draw (bar ``excluding``) and of the revive
    benchmark, lower-cased."""
    used = {repository.name.lower() for repository in precision_user.read_list()}
    if REVIVE_REPOSITORIES.exists():
        with REVIVE_REPOSITORIES.open(newline="", encoding="utf-8") as handle:
            used |= {row["repo"].lower() for row in csv.DictReader(handle, delimiter="\t")}
    for path in sorted(DRAWS.glob("*.tsv")):
        if path.stem != excluding:
            used |= {row.repo.lower() for row in read_rows(path)}
    return used


def drawing_order(candidates: Sequence[Row], seed: int) -> List[Row]:
    """The seeded order a draw takes candidates in: topics in a random order, a random repository of
    each in turn, so that 20 repositories cover most topics."""
    rng = random.Random(seed)
    by_topic: Dict[str, List[Row]] = {}
    for row in candidates:
        by_topic.setdefault(row.topic, []).append(row)
    topics = sorted(by_topic)
    rng.shuffle(topics)
    for topic in topics:
        rng.shuffle(by_topic[topic])
    order: List[Row] = []
    while any(by_topic[topic] for topic in topics):
        for topic in topics:
            if by_topic[topic]:
                order.append(by_topic[topic].pop())
    return order


def next_candidates(name: str, seed: int, count: int, taken: Sequence[Row], topic: Optional[str] = None) -> List[Row]:
    used = used_repositories(excluding=name) | {row.repo.lower() for row in taken}
    candidates = [row for row in read_rows(CANDIDATES) if topic is None or row.topic == topic]
    fresh = [row for row in drawing_order(candidates, seed) if row.repo.lower() not in used]
    if len(fresh) < count:
        raise SystemExit(f"only {len(fresh)} candidates left; add repositories to {CANDIDATES}")
    return fresh[:count]


def seed_of(name: str) -> int:
    path = DRAWS / f"{name}.seed"
    return int(path.read_text().strip())


def topic_of(name: str) -> Optional[str]:
    path = DRAWS / f"{name}.topic"
    return path.read_text().strip() if path.exists() else None


def new(name: str, count: int, seed: int, topic: Optional[str] = None) -> int:
    path = draw_path(name)
    if path.exists():
        raise SystemExit(f"{path} exists: a draw is made once")
    rows = next_candidates(name, seed, count, [], topic)
    write_rows(path, rows)
    (DRAWS / f"{name}.seed").write_text(f"{seed}\n")
    if topic is not None:
        (DRAWS / f"{name}.topic").write_text(f"{topic}\n")
    print(f"{path}: {len(rows)} repositories drawn with seed {seed}; fetch them:")
    for row in rows:
        print(f"  github:{row.repo}")
    return 0


def python_lines(directory: Path, commit: str) -> Optional[int]:
    """Lines of the commit's .py files and whether any of them imports torch (None: no PyTorch code)."""
    listing = precision_user.git(directory, "ls-tree", "-r", "-l", commit) or ""
    lines, torch = 0, False
    for row in listing.splitlines():
        meta, _, file = row.partition("\t")
        kind, sha, size = meta.split()[1:4]
        if kind != "blob" or not file.endswith((".py", ".ipynb")) or not size.isdigit():
            continue
        data = precision_user.git(directory, "cat-file", "blob", sha, binary=True)
        if data is None:
            continue
        if file.endswith(".py"):
            lines += data.count(b"\n")
        torch = torch or b"import torch" in data or b"from torch" in data
    return lines if torch else None


def pin(name: str, mirrors: Sequence[Path]) -> int:
    path = draw_path(name)
    rows = read_rows(path)
    wanted = sum(1 for row in rows if row.status in ("drawn", "pinned"))
    out: List[Row] = []
    for row in rows:
        if row.status != "drawn":
            out.append(row)
            continue
        repository = precision_user.Repository(row.repo, "", row.kind)
        directory = precision_user.git_dir(mirrors, repository)
        head = precision_user.git(directory, "rev-parse", "HEAD") if directory else None
        if not head:
            out.append(replace(row, status="unavailable"))
            continue
        commit = head.strip()
        lines = python_lines(directory, commit)
        status = "not-torch" if lines is None else "too-large" if lines > MAX_LINES else "pinned"
        out.append(replace(row, commit=commit if status == "pinned" else "", status=status))
    missing = wanted - sum(1 for row in out if row.status in ("drawn", "pinned"))
    if missing:
        replacements = next_candidates(name, seed_of(name), missing, out, topic_of(name))
        out += replacements
        print(f"{missing} repositories replaced; fetch them, then pin again:")
        for row in replacements:
            print(f"  github:{row.repo}")
    write_rows(path, out)
    pinned = [row for row in out if row.status == "pinned"]
    print(f"{path}: {len(pinned)} pinned, {sum(row.status == 'drawn' for row in out)} still to fetch")
    return 0


def pinned_repositories(name: str) -> List[precision_user.Repository]:
    return [precision_user.Repository(row.repo, row.commit, row.kind) for row in read_rows(draw_path(name))
            if row.status == "pinned"]


def build(name: str, corpus: Path, mirrors: Sequence[Path]) -> int:
    return 2 if precision_user.build(corpus / name, mirrors, pinned_repositories(name)) else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("new", "pin", "build"))
    parser.add_argument("name", help="the draw's name, e.g. d2")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--mirror", type=Path, action="append", default=None)
    parser.add_argument("--topic", help="new: draw from the candidates of this topic only")
    args = parser.parse_args(argv)
    mirrors = args.mirror or [Path("/work/.mirror")]
    if args.command == "new":
        if args.seed is None:
            parser.error("new needs --seed")
        return new(args.name, args.n, args.seed, args.topic)
    if args.command == "pin":
        return pin(args.name, mirrors)
    return build(args.name, args.corpus, mirrors)


if __name__ == "__main__":
    sys.exit(main())
