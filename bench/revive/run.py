"""The revive benchmark: old repositories on today's torch, before and after ``torchlint check --fix``.

    python bench/revive/run.py [--only OWNER/NAME ...] [--python-core PY] [--python-vision PY] [--keep DIR]

Each row of ``bench/revive/repos.tsv`` is a public repository last changed before 2021, pinned to a commit
whose snapshot lies under ``/work/.mirror/<owner>+<name>/repo`` (the search tool's ``fetch``; the code is
never committed), and a smoke script of ours (``bench/revive/smoke/<owner>+<name>.py``) that builds the
repository's model from its own modules and runs one forward pass, loss, backward and optimizer step on
synthetic batches, on the CPU. For each repository the runner

1. copies the pinned snapshot and runs the smoke script on it (``python -W default``): success, or the
   exception and the line of the repository's code it was raised from (the crash site), and every warning
   a line of the repository's code triggered;
2. lints the copy as a user would (``torchlint check --target-torch-version 2.13``, the default selection)
   at every level, to see whether the crash site and the warning sites are found, at the default floor
   (``high``) or only below it;
3. applies ``torchlint check --fix --unsafe-fixes --target-torch-version 2.13`` to a fresh copy (the
   default floor, what a user runs) and runs the smoke script again.

A run that worked before and fails after, or that fails after on a line the fix changed, is a fix that
broke a run. Results: ``bench/results/revive.md`` (and ``revive.json``).

Two interpreters: ``core`` has torch 2.13.0 (the CPU build); ``vision`` has torch and torchvision for the
repositories that import torchvision (no torchvision build imports beside torch 2.13.0's CPU build here),
with its versions printed in the results. As measured:

    python -m venv core && core/bin/pip install torch==2.13.0 numpy scipy pillow pandas tqdm pyyaml gin-config
    python -m venv vision && vision/bin/pip install torch==2.14.1 torchvision==0.29.1 numpy scipy pillow pandas tqdm yacs
    python bench/revive/run.py --python-core core/bin/python --python-vision vision/bin/python

Every repository of ``repos.tsv`` was last changed before 2021 (its pinned commit's date).
"""
from __future__ import annotations

import argparse
import csv
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path.insert(0, str(BENCH))

import precision_user  # noqa: E402
ROOT = BENCH.parent
REPOS = HERE / "repos.tsv"
SMOKE = HERE / "smoke"
RESULTS = BENCH / "results"
MIRRORS = Path(os.environ.get("TORCHLINT_MIRRORS", "/work/.mirror"))
SUCCESS = "REVIVE-SMOKE-OK"
TIMEOUT_S = 600
TARGET = "2.13"

_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
_WARNING = re.compile(r"^(?P<path>[^:\s][^:]*\.py):(?P<line>\d+): (?P<category>\w*Warning): (?P<message>.*)$")
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)|AssertionError)(?::\s*(?P<message>.*))?$")


@dataclass
class Site:
    path: str  # relative to the repository
    line: int
    text: str  # the source line, stripped

    def key(self) -> Tuple[str, int]:
        return (self.path, self.line)


@dataclass
class Run:
    ok: bool
    seconds: float
    error: str = ""  # "TypeError: ..." for a crash, "timeout" past the limit
    crash: Optional[Site] = None  # the repository's line the exception came from
    warnings: List[Tuple[str, str, str]] = field(default_factory=list)  # (site or torch file, category, message)
    warning_sites: List[Site] = field(default_factory=list)
    tail: str = ""


@dataclass
class Outcome:
    repo: str
    interpreter: str
    before: Run
    after: Run
    findings: List[dict]  # every level, default selection, before the fix
    fixed_lines: List[Tuple[str, int]]  # lines the fix changed, as they were numbered before
    crash_found: str = ""  # "high", "medium", "low" or "" (not found), for the crash before the fix
    warning_found: Dict[str, str] = field(default_factory=dict)  # "path:line" -> level or ""
    broke: bool = False
    note: str = ""


def read_repos(path: Path = REPOS) -> List[Dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [row for row in csv.DictReader(handle, delimiter="\t") if row["repo"] and not row["repo"].startswith("#")]


def snapshot(repo: str, commit: str, dest: Path) -> None:
    """Every file of ``commit`` whose blob the snapshot holds (large files are left out of snapshots)."""
    directory = precision_user.git_dir([MIRRORS], precision_user.Repository(repo, commit, ""))
    if directory is None:
        raise SystemExit(f"{repo}: no snapshot under {MIRRORS} (fetch it first)")
    listing = precision_user.git(directory, "ls-tree", "-r", commit)
    if listing is None:
        raise SystemExit(f"{repo}: the snapshot lacks commit {commit}")
    dest.mkdir(parents=True)
    for row in listing.splitlines():
        meta, _, path = row.partition("\t")
        kind, sha = meta.split()[1:3]
        data = precision_user.git(directory, "cat-file", "blob", sha, binary=True) if kind == "blob" else None
        if data is None:
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def source_line(root: Path, relative: str, line: int) -> str:
    try:
        return (root / relative).read_text(encoding="utf-8", errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""


def _inside(path: str, root: Path) -> Optional[str]:
    """``path`` relative to ``root``, when it lies there; a relative path is the smoke run's (its working folder is
    the copy: ``runpy.run_path("main.py")`` frames read ``File "main.py"``)."""
    try:
        resolved = (Path(path) if os.path.isabs(path) else root / path).resolve()
        return str(resolved.relative_to(root.resolve()))
    except (ValueError, OSError):
        return None


def run_smoke(python: str, smoke: Path, root: Path) -> Run:
    import time

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(HERE)]), PYTHONDONTWRITEBYTECODE="1",
               CUDA_VISIBLE_DEVICES="", MPLBACKEND="Agg", PYTHONHASHSEED="0")
    started = time.perf_counter()
    try:
        done = subprocess.run([python, "-W", "default", str(smoke)], cwd=root, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Run(False, time.perf_counter() - started, "timeout")
    seconds = time.perf_counter() - started
    output = done.stdout + done.stderr
    ok = done.returncode == 0 and SUCCESS in done.stdout
    run = Run(ok, seconds, tail="\n".join(output.splitlines()[-25:]))
    seen = set()
    for text in done.stderr.splitlines():
        match = _WARNING.match(text)
        if not match:
            continue
        relative = _inside(match["path"], root)
        if relative is None and _inside(match["path"], HERE) is not None:
            continue  # the smoke script's own line
        where = f"{relative}:{match['line']}" if relative else match["path"].rsplit("site-packages/", 1)[-1]
        key = (where, match["category"], match["message"].strip())
        if key in seen:
            continue
        seen.add(key)
        run.warnings.append(key)
        if relative:
            run.warning_sites.append(Site(relative, int(match["line"]), source_line(root, relative, int(match["line"]))))
    if not ok:
        lines = done.stderr.splitlines()
        errors = [text for text in lines if _EXCEPTION.match(text)]
        run.error = errors[-1].strip() if errors else (f"exit {done.returncode}" if done.returncode else "no success line")
        frames = [(m["path"], int(m["line"])) for m in map(_FRAME.match, lines) if m]
        for path, line in reversed(frames):
            relative = _inside(path, root)
            if relative is not None and not relative.startswith(".revive"):
                run.crash = Site(relative, line, source_line(root, relative, line))
                break
    return run


def lint(root: Path, *extra: str) -> List[dict]:
    command = [sys.executable, "-m", "torchlint", "check", "--target-torch-version", TARGET, "--no-cache",
               "--exit-zero", *extra, str(root)]
    done = subprocess.run(command, capture_output=True, text=True)
    if "--output-format" not in extra:
        return []
    try:
        found = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        raise SystemExit(f"torchlint printed no JSON on {root}: {done.stderr[-2000:]}")
    for finding in found:
        finding["path"] = _inside(finding["path"], root) or finding["path"]
    return found


def changed_lines(before: Path, after: Path) -> List[Tuple[str, int]]:
    """(path, line numbered as before) of every line the fix replaced or removed, in the Python files."""
    changed = []
    for path in sorted(before.rglob("*.py")):
        relative = path.relative_to(before)
        old = path.read_text(encoding="utf-8", errors="replace").splitlines()
        other = after / relative
        new = other.read_text(encoding="utf-8", errors="replace").splitlines() if other.exists() else []
        if old == new:
            continue
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, first, last, _, _ in matcher.get_opcodes():
            if tag != "equal":
                changed += [(str(relative), number + 1) for number in range(first, max(last, first + 1))]
    return changed


def found_level(findings: Sequence[dict], site: Optional[Site]) -> str:
    if site is None:
        return ""
    levels = [f["confidence"] for f in findings if f["path"] == site.path and f["line"] <= site.line <= f.get("end_line", f["line"])]
    for level in ("high", "medium", "low"):
        if level in levels:
            return level
    return ""


def revive(row: Dict[str, str], pythons: Dict[str, str], scratch: Path) -> Outcome:
    repo, commit, interpreter = row["repo"], row["commit"], row["torch"]
    smoke = SMOKE / f"{repo.replace('/', '+')}.py"
    before_root, after_root = scratch / "before", scratch / "after"
    snapshot(repo, commit, before_root)
    snapshot(repo, commit, after_root)
    python = pythons[interpreter]
    before = run_smoke(python, smoke, before_root)
    findings = lint(before_root, "--confidence-level", "low", "--output-format", "json")
    lint(after_root, "--fix", "--unsafe-fixes")
    fixed = changed_lines(before_root, after_root)
    after = run_smoke(python, smoke, after_root)
    outcome = Outcome(repo, interpreter, before, after, findings, fixed, note=row.get("note", ""))
    outcome.crash_found = found_level(findings, before.crash)
    for site in before.warning_sites:
        outcome.warning_found[f"{site.path}:{site.line}"] = found_level(findings, site)
    fixed_set = set(fixed)
    outcome.broke = (before.ok and not after.ok) or (after.crash is not None and after.crash.key() in fixed_set
                                                     and not (before.crash is not None and before.crash.key() == after.crash.key()))
    return outcome


def versions(python: str) -> str:
    code = "import torch\ntry:\n import torchvision; v=' torchvision '+torchvision.__version__\nexcept Exception: v=''\nprint('torch '+torch.__version__+v)"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def report(outcomes: Sequence[Outcome], pythons: Dict[str, str]) -> str:
    out = ["# Revive: old repositories on today's torch, before and after `torchlint check --fix`", "",
           "`python bench/revive/run.py` (bench/revive/repos.tsv; the smoke scripts in bench/revive/smoke/)", "",
           "Interpreters: " + "; ".join(f"{name}: {versions(python)}" for name, python in sorted(pythons.items())), "",
           "Each smoke script builds the repository's model from its own modules and runs one forward pass, loss, "
           "backward and optimizer step on synthetic batches on the CPU. *Before*: the pinned snapshot as it is. "
           "*Fix*: `torchlint check --fix --unsafe-fixes --target-torch-version 2.13` (default selection and floor). "
           "*Found*: the level of torchlint's finding on the line the crash came from (`-` when none).", "",
           "| repository | before | crash site | found | lines fixed | after |",
           "|---|---|---|---|---:|---|"]
    crash_sites = found_high = found_any = revived = broke = 0
    warnings_before = warnings_after = 0
    for o in outcomes:
        crash = f"`{o.before.crash.path}:{o.before.crash.line}`" if o.before.crash else ""
        before = "runs" if o.before.ok else _short(o.before.error)
        after = "runs" if o.after.ok else _short(o.after.error)
        if o.after.crash and not o.after.ok:
            after += f" (`{o.after.crash.path}:{o.after.crash.line}`)"
        if o.broke:
            after += " **broken by the fix**"
        out.append(f"| {o.repo} | {before} | {crash} | {o.crash_found or '-'} | {len(o.fixed_lines)} | {after} |")
        if o.before.crash is not None:
            crash_sites += 1
            found_high += o.crash_found == "high"
            found_any += bool(o.crash_found)
            revived += o.after.ok
        broke += o.broke
        warnings_before += len(o.before.warnings)
        warnings_after += len(o.after.warnings)
    out += ["", f"- {len(outcomes)} repositories; {sum(o.before.ok for o in outcomes)} ran before the fix, "
            f"{sum(o.after.ok for o in outcomes)} after.",
            f"- Crash sites in the repositories' code before the fix: {crash_sites}; found at the default floor "
            f"{found_high}, at any level {found_any}; runs that crashed and run after the fix: {revived}.",
            f"- Runs broken by a fix: {broke}.",
            f"- Distinct warnings (site, category, message): {warnings_before} before, {warnings_after} after.", ""]
    for o in outcomes:
        out += [f"## {o.repo}", ""]
        if o.note:
            out += [o.note, ""]
        if o.before.crash:
            out.append(f"- Crash before: {o.before.error} at `{o.before.crash.path}:{o.before.crash.line}` "
                       f"(`{o.before.crash.text}`); torchlint: {o.crash_found or 'no finding on that line'}.")
        elif not o.before.ok:
            out.append(f"- Failed before: {o.before.error}.")
        for (where, category, message) in o.before.warnings:
            level = o.warning_found.get(where, None)
            shown = "" if level is None else f"; torchlint: {level or 'no finding'}"
            out.append(f"- Warning before at `{where}`: {category}: {_short(message, 140)}{shown}.")
        codes: Dict[str, int] = {}
        for finding in o.findings:
            if finding["confidence"] == "high":
                codes[finding["code"]] = codes.get(finding["code"], 0) + 1
        out.append(f"- Findings at the default floor: {', '.join(f'{c} x{n}' for c, n in sorted(codes.items())) or 'none'}; "
                   f"lines changed by the fix: {len(o.fixed_lines)}.")
        if o.after.ok:
            out.append(f"- After the fix: runs; {len(o.after.warnings)} distinct warnings.")
        else:
            where = f" at `{o.after.crash.path}:{o.after.crash.line}` (`{o.after.crash.text}`)" if o.after.crash else ""
            out.append(f"- After the fix: {o.after.error}{where}.")
        for (where, category, message) in o.after.warnings:
            out.append(f"- Warning after at `{where}`: {category}: {_short(message, 140)}.")
        out.append("")
    return "\n".join(out)


def _short(text: str, limit: int = 90) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="these repositories (owner/name) only; results are not written")
    parser.add_argument("--python-core", default=os.environ.get("REVIVE_PYTHON_CORE", sys.executable))
    parser.add_argument("--python-vision", default=os.environ.get("REVIVE_PYTHON_VISION", sys.executable))
    parser.add_argument("--keep", type=Path, help="keep the copies under this folder")
    args = parser.parse_args(argv)
    pythons = {"core": args.python_core, "vision": args.python_vision}
    rows = [row for row in read_repos() if not args.only or row["repo"] in args.only]
    outcomes = []
    for row in rows:
        scratch = Path(tempfile.mkdtemp(prefix="revive-", dir=args.keep))
        try:
            outcome = revive(row, pythons, scratch)
        finally:
            if args.keep is None:
                shutil.rmtree(scratch, ignore_errors=True)
        outcomes.append(outcome)
        state = lambda run: "runs" if run.ok else run.error[:100]  # noqa: E731
        print(f"{row['repo']}: before {state(outcome.before)}; crash site found: {outcome.crash_found or '-'}; "
              f"{len(outcome.fixed_lines)} lines fixed; after {state(outcome.after)}{' BROKEN' if outcome.broke else ''}",
              flush=True)
        if args.only:
            print(outcome.before.tail if not outcome.before.ok else "", "\n---\n", outcome.after.tail if not outcome.after.ok else "")
    text = report(outcomes, pythons)
    if not args.only:
        (RESULTS / "revive.md").write_text(text, encoding="utf-8")
        kept = []
        for outcome in outcomes:
            record = asdict(outcome)
            record["findings"] = [[f["path"], f["line"], f["code"], f["confidence"]] for f in outcome.findings]
            kept.append(record)
        (RESULTS / "revive.json").write_text(json.dumps(kept, indent=1, default=str) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS / 'revive.md'}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
