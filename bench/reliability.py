"""Never crash, never corrupt: run torchlint over real PyTorch libraries and check every byte it writes.

    python bench/reliability.py [--corpus DIR] [--packages timm,kornia,torchmetrics | all]
                                [--jobs N] [--full-second-run] [--no-variants]
                                [--scratch DIR] [--keep] [--label TEXT] [--results FILE]

The default packages hold about 365,000 lines.  The script makes three full
lint passes (check and --diff side by side, then --fix), each minutes of CPU
with all rules; --jobs N splits every pass over N processes.

The corpus is the one `bench/corpus.py` assembles from the package registry
(default: $TORCHLINT_CORPUS, else ~/.cache/torchlint-corpus); packages that
are missing there are fetched with it.  The chosen packages are copied to a
scratch directory outside the repository (``original/``, never touched again)
and copied once more (``work/``), on which the command line runs as
subprocesses, exactly as a user would run it (from a copy of ``torchlint/``
taken at the start, so that rules landing meanwhile cannot skew the runs):

1. ``torchlint check --select ALL --output-format json``   findings per rule
2. ``torchlint check --select ALL --diff --unsafe-fixes``   "Would fix N", and the diff
3. ``torchlint check --select ALL --fix --unsafe-fixes``    the fixes, written
4. ``torchlint check --select ALL --fix --unsafe-fixes``    again, on the files step 3
   changed (every file with --full-second-run): must apply nothing

and checks that
- no run crashes (exit code 0, 1 or 2; no traceback) and no file gets an
  internal-error diagnostic (a rule crash, a fix that did not parse, a file
  too deep to analyse); parse and decode errors of the corpus itself are
  counted apart, and the exit code is 2 exactly when there is a diagnostic;
- every file the fix run changed still compiles (``compile()``);
- the second fix run applies nothing and changes no byte (fixpoint);
- every file with no applied fix (absent from the --diff output) is
  byte-identical to its original, and every file in it did change;
- the fixes applied equal the "Would fix N" of --diff, and the diff of each
  file is exactly the change the fix run wrote;
- each changed file keeps its encoding, BOM, line endings (CRLF, CR, LF) and
  its final newline (or lack of one).

Real libraries are almost all UTF-8 with LF endings, so unless --no-variants
is given a deterministic eighth of the files each is rewritten (in
``original/``, before anything runs) as CRLF, with a UTF-8 BOM, without its
final newline, or declared latin-1 with a latin-1 comment: the checks then
see every kind of file a fix may touch.

The counts are printed and appended to bench/results/reliability.md (date,
torchlint commit, corpus, files, lines, findings per rule, fixes, time).
Exit status: 0 when every check passes, 1 when one fails (listed).
"""
from __future__ import annotations

import argparse
import codecs
import collections
import datetime
import difflib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import corpus  # noqa: E402  (bench/corpus.py)

from torchlint import source as tl_source  # noqa: E402

# timm + kornia + torchmetrics: about 365,000 lines in 1,160 files.
DEFAULT_PACKAGES = ("timm", "kornia", "torchmetrics")
MIN_LINES = 300_000
RESULTS = HERE / "results" / "reliability.md"
VARIANTS = ("crlf", "bom", "no-final-newline", "latin-1")

# Diagnostics that are the linter's fault, as the CLI prints them.
INTERNAL_PATTERNS = (
    re.compile(r"internal error"),
    re.compile(r"produced code that does not parse"),
    re.compile(r"nested too deeply to analyse"),
)
DIAGNOSTIC_LINE = re.compile(r"^error: (?P<path>.+?):(?P<line>\d+):(?P<column>\d+): (?P<message>.*)$")
WOULD_FIX = re.compile(r"^Would fix (?P<count>\d+) errors?\.$", re.M)
FIXED = re.compile(r"^Found \d+ errors? \((?P<count>\d+) fixed, \d+ remaining\)\.$", re.M)


# -- the corpus -----------------------------------------------------------------------


def requirement_for(name: str) -> str:
    for requirement in corpus.FULL:
        if requirement.split("==")[0] == name:
            return requirement
    raise SystemExit(f"unknown corpus package {name!r}; choose from {', '.join(r.split('==')[0] for r in corpus.FULL)}")


def ensure_corpus(dest: Path, packages: Sequence[str]) -> Dict[str, str]:
    """package -> pinned requirement, fetching with bench/corpus.py what is missing."""
    pinned = {}
    for name in packages:
        target = dest / name
        marker = target / ".complete"
        if not marker.exists():
            print(f"fetching {name} into {dest} (bench/corpus.py)", flush=True)
            corpus.fetch(requirement_for(name), dest)
        pinned[name] = marker.read_text().strip()
    return pinned


def python_files(root: Path) -> List[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def _variant_of(relative: str) -> Optional[str]:
    bucket = hashlib.sha1(relative.encode()).digest()[0] % 8
    return VARIANTS[bucket] if bucket < len(VARIANTS) else None


def make_variant(data: bytes, variant: str) -> Optional[bytes]:
    """``data`` rewritten as ``variant``, or None when that variant does not apply to it."""
    if data.startswith(codecs.BOM_UTF8) or b"\r" in data or not data.strip():
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return None
    if encoding not in ("utf-8", "utf-8-sig"):
        return None
    if variant == "crlf":
        return data.replace(b"\n", b"\r\n")
    if variant == "bom":
        return codecs.BOM_UTF8 + data
    if variant == "no-final-newline":
        stripped = data.rstrip(b"\n")
        # A file ending in a backslash continuation or inside a comment stays valid without the newline.
        return stripped if stripped != data else None
    if variant == "latin-1":
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            return None
        lines = text.split("\n", 2)
        # The coding declaration must be on line 1 or 2; keep a shebang or an existing cookie-free line 1.
        header = "# -*- coding: latin-1 -*-\n# caf\u00e9 cr\u00e8me br\u00fbl\u00e9e\n"
        if lines[0].startswith("#!"):
            return (lines[0] + "\n" + header + text[len(lines[0]) + 1 :]).encode("latin-1")
        return (header + text).encode("latin-1")
    raise ValueError(variant)


def stage(dest: Path, packages: Sequence[str], scratch: Path, variants: bool) -> collections.Counter:
    """Copy the packages to scratch/original (with variants) and scratch/work; returns variant counts."""
    made: collections.Counter = collections.Counter()
    original = scratch / "original"
    for name in packages:
        shutil.copytree(dest / name, original / name, ignore=shutil.ignore_patterns(".complete"))
    if variants:
        for path in python_files(original):
            relative = path.relative_to(original).as_posix()
            variant = _variant_of(relative)
            if variant is None:
                continue
            data = path.read_bytes()
            new = make_variant(data, variant)
            if new is not None:
                path.write_bytes(new)
                made[variant] += 1
    shutil.copytree(original, scratch / "work")
    return made


# -- running the command line -------------------------------------------------------------


def snapshot_code(scratch: Path) -> Dict[str, str]:
    """Copy torchlint/ into the scratch directory and return the environment that runs that copy.

    Colleagues land rules while a run takes minutes: all four runs must see the same code.
    """
    code = scratch / "code"
    shutil.copytree(REPO / "torchlint", code / "torchlint", ignore=shutil.ignore_patterns("__pycache__"))
    path = os.pathsep.join(p for p in (str(code), os.environ.get("PYTHONPATH", "")) if p)
    # Bytes are decoded without newline translation (a diff of a CRLF file keeps its \r), as UTF-8.
    return dict(os.environ, PYTHONPATH=path, PYTHONIOENCODING="utf-8")


class Run:
    """One phase: the CLI over the chunks of files, one process per chunk, all running at once."""

    def __init__(self, name: str, args: Sequence[str], chunks: Sequence[Sequence[str]], cwd: Path, environment: Dict[str, str]) -> None:
        self.name = name
        self.started = time.perf_counter()
        self._outputs = []
        self._processes = []
        for chunk in chunks:
            # Files, not pipes: a chunk that prints a lot must not wait for another to be read.
            out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            self._outputs.append((out, err))
            self._processes.append(subprocess.Popen(torchlint(*args, *chunk), cwd=cwd, stdout=out, stderr=err, env=environment))

    def wait(self) -> "Run":
        self.codes = [process.wait() for process in self._processes]
        self.seconds = time.perf_counter() - self.started
        self.stdouts, self.stderrs = [], []
        for out, err in self._outputs:
            for handle, target in ((out, self.stdouts), (err, self.stderrs)):
                handle.seek(0)
                # Decoded without newline translation: a diff of a CRLF file keeps its \r.
                target.append(handle.read().decode("utf-8", errors="replace"))
                handle.close()
        self.stdout, self.stderr = "".join(self.stdouts), "".join(self.stderrs)
        bad = [code for code in self.codes if code not in (0, 1, 2)]
        self.code = bad[0] if bad else max(self.codes, default=0)
        self.diagnostics: List[Tuple[str, int, str]] = []
        for line in self.stderr.splitlines():
            match = DIAGNOSTIC_LINE.match(line)
            if match:
                self.diagnostics.append((match["path"], int(match["line"]), match["message"]))
        return self

    @property
    def crashed(self) -> bool:
        return self.code not in (0, 1, 2) or "Traceback (most recent call last)" in self.stderr

    def exit_code_problems(self) -> List[str]:
        """Exit 2 exactly when a chunk printed a diagnostic."""
        problems = []
        for code, err in zip(self.codes, self.stderrs):
            has_diagnostic = any(DIAGNOSTIC_LINE.match(line) for line in err.splitlines())
            if code in (0, 1, 2) and (code == 2) != has_diagnostic:
                problems.append(f"`{self.name}` exited {code} {'with' if has_diagnostic else 'without'} diagnostics")
        return problems

    def count(self, pattern: "re.Pattern", stream: str) -> int:
        return sum(int(m["count"]) for text in getattr(self, stream) for m in pattern.finditer(text))

    def internal(self) -> List[Tuple[str, int, str]]:
        return [d for d in self.diagnostics if any(p.search(d[2]) for p in INTERNAL_PATTERNS)]

    def corpus_errors(self) -> List[Tuple[str, int, str]]:
        internal = set(self.internal())
        return [d for d in self.diagnostics if d not in internal]


def chunked(scratch: Path, jobs: int) -> List[List[str]]:
    """The files a run over work/ lints, in ``jobs`` chunks of about equal size (["work"] for one job)."""
    if jobs <= 1:
        return [["work"]]
    from torchlint import config, files

    settings = config.discover_and_resolve([str(scratch / "work")], config.Overrides(select=["ALL"]))
    found, _ = files.discover([str(scratch / "work")], settings)
    sized = sorted(((os.path.getsize(p), os.path.relpath(p, scratch)) for p in found), reverse=True)
    chunks: List[List[str]] = [[] for _ in range(jobs)]
    weights = [0] * jobs
    for size, path in sized:
        lightest = weights.index(min(weights))
        chunks[lightest].append(path)
        weights[lightest] += size
    return [sorted(chunk) for chunk in chunks if chunk]


def torchlint(*args: str) -> List[str]:
    return [sys.executable, "-m", "torchlint", "check", "--no-cache", "--select", "ALL", *args]


# -- per-file properties ---------------------------------------------------------------


def newline_kinds(data: bytes) -> collections.Counter:
    crlf = data.count(b"\r\n")
    return collections.Counter({"crlf": crlf, "cr": data.count(b"\r") - crlf, "lf": data.count(b"\n") - crlf})


def final_newline(data: bytes) -> str:
    for ending in (b"\r\n", b"\r", b"\n"):
        if data.endswith(ending):
            return ending.decode()
    return ""


def encoding_of(data: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        return f"undetectable ({exc})"


def kept_format(before: bytes, after: bytes) -> List[str]:
    """What a fix changed about the file's format (empty when nothing)."""
    problems = []
    if before.startswith(codecs.BOM_UTF8) != after.startswith(codecs.BOM_UTF8):
        problems.append("BOM added or lost")
    if encoding_of(before) != encoding_of(after):
        problems.append(f"encoding {encoding_of(before)} became {encoding_of(after)}")
    else:
        try:
            after.decode(encoding_of(after))
        except (UnicodeDecodeError, LookupError) as exc:
            problems.append(f"no longer decodes: {exc}")
    old_kinds, new_kinds = newline_kinds(before), newline_kinds(after)
    for kind in ("crlf", "cr", "lf"):
        if new_kinds[kind] and not old_kinds[kind]:
            problems.append(f"introduced {kind} line endings into a file that had none")
    if final_newline(before) != final_newline(after):
        problems.append(f"final newline {final_newline(before)!r} became {final_newline(after)!r}")
    return problems


def compiles(data: bytes, path: str) -> Optional[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(data, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
    return None


def snapshot(root: Path) -> Dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in python_files(root)}


def split_diff(diff: str) -> Dict[str, str]:
    """The --diff output cut into one unified diff per file (keyed by the path it names)."""
    per_file: Dict[str, List[str]] = collections.defaultdict(list)
    current = None
    lines = diff.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("--- work/") and index + 1 < len(lines) and lines[index + 1].startswith("+++ work/"):
            current = line[4:].rstrip("\r\n")
        if current is not None:
            per_file[current].append(line)
        index += 1
    return {path: "".join(chunks) for path, chunks in per_file.items()}


def expected_diff(path: str, before: bytes, after: bytes) -> str:
    """The diff `--diff` prints for a file whose fix turns ``before`` into ``after`` (the CLI's own format)."""
    old = tl_source.decode(before).text
    new = tl_source.decode(after).text
    diff = difflib.unified_diff(tl_source.split_lines(old), tl_source.split_lines(new), fromfile=path, tofile=path)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in diff)


# -- the report ----------------------------------------------------------------------------


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "torchlint"], cwd=REPO, capture_output=True, text=True)
        return head.stdout.strip() + (" + uncommitted changes in torchlint/" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def rule_codes(scratch: Path, environment: Dict[str, str]) -> List[str]:
    """The rules of the snapshot the runs used (`torchlint rules`, first column)."""
    listed = subprocess.run([sys.executable, "-m", "torchlint", "rules"], cwd=scratch, capture_output=True, text=True, env=environment)
    return [line.split()[0] for line in listed.stdout.splitlines() if line.strip()]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=corpus.default_dest(), help="where bench/corpus.py unpacked the sources")
    parser.add_argument(
        "--packages",
        default=",".join(DEFAULT_PACKAGES),
        help=f"comma-separated corpus packages, or 'all' (default: {','.join(DEFAULT_PACKAGES)}, ~365k lines)",
    )
    parser.add_argument("--no-variants", dest="variants", action="store_false", help="leave every file as it was published")
    parser.add_argument("--scratch", type=Path, help="scratch directory (default: a new temporary one); must not exist")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--jobs", type=int, default=1, help="processes per run, each over a share of the files (default 1: one run over work/)")
    parser.add_argument("--full-second-run", action="store_true", help="run the second --fix over every file, not only the changed ones")
    parser.add_argument("--label", default="", help="a note for the results file (e.g. which rules had landed)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="markdown file the run is appended to ('-' for none)")
    args = parser.parse_args(argv)

    packages = [r.split("==")[0] for r in corpus.FULL] if args.packages == "all" else [p.strip() for p in args.packages.split(",") if p.strip()]
    pinned = ensure_corpus(args.corpus, packages)
    if args.scratch is not None:
        scratch = args.scratch.resolve()
        scratch.mkdir(parents=True)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="torchlint-reliability-"))
    if REPO in scratch.parents or scratch == REPO:
        raise SystemExit("the scratch directory must be outside the repository")
    try:
        return _run(args, packages, pinned, scratch)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"scratch kept at {scratch}")


def _run(args, packages: List[str], pinned: Dict[str, str], scratch: Path) -> int:
    started = time.perf_counter()
    made = stage(args.corpus, packages, scratch, args.variants)
    work = scratch / "work"
    original = snapshot(scratch / "original")
    files = len(original)
    lines = sum(data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0) for data in original.values())
    print(f"{files} files, {lines} lines from {', '.join(pinned.values())}; variants: {dict(made) or 'none'}", flush=True)
    failures: List[str] = []
    if lines < MIN_LINES:
        print(f"note: {lines} lines is below the {MIN_LINES} the reliability claim is about", flush=True)

    # The CLI prints paths as given; run from the scratch dir so they are relative to work/.
    environment = snapshot_code(scratch)
    codes = rule_codes(scratch, environment)
    commit = git_commit()
    print(f"torchlint {commit} with {len(codes)} rules: {' '.join(codes)}", flush=True)
    chunks = chunked(scratch, args.jobs)
    # check and diff only read: they run side by side.
    check = Run("check", ["--output-format", "json"], chunks, scratch, environment)
    diff = Run("diff", ["--diff", "--unsafe-fixes"], chunks, scratch, environment)
    check.wait(), diff.wait()
    fix = Run("fix", ["--fix", "--unsafe-fixes"], chunks, scratch, environment).wait()
    fixed = snapshot(work)
    # A file the first fix run left alone gives the same answer again (same bytes, same code), so by
    # default the second run only looks at the changed files: it is the slowest of the four otherwise.
    changed_paths = ["work/" + rel for rel in sorted(rel for rel in fixed if fixed[rel] != original.get(rel))]
    second_targets = ["work"] if args.full_second_run else changed_paths
    again = Run("fix again", ["--fix", "--unsafe-fixes"], [second_targets] if second_targets else [], scratch, environment).wait()
    after_again = snapshot(work)
    runs = [check, diff, fix, again]
    for run in runs:
        print(f"{run.name:<10} exit {run.code}  {run.seconds:7.1f} s  {len(run.diagnostics)} diagnostics", flush=True)

    # 1. never crashes
    for run in runs:
        if run.crashed:
            tail = "\n".join(run.stderr.strip().splitlines()[-15:])
            failures.append(f"`{run.name}` crashed (exit {run.code}):\n{tail}")
        for path, line, message in run.internal():
            failures.append(f"`{run.name}`: internal error on {path}:{line}: {message}")
        failures.extend(run.exit_code_problems())

    findings = [f for out in check.stdouts if out.strip().startswith("[") for f in json.loads(out)]
    per_rule = collections.Counter(f["code"] for f in findings)
    fixable = collections.Counter(f["code"] for f in findings if f["fix"] is not None)
    fixable_safe = sum(1 for f in findings if f["fix"] is not None and f["fix"]["applicability"] != "unsafe")

    # 2. the fixes the diff announced are the fixes the fix run applied
    would_fix = diff.count(WOULD_FIX, "stderrs")
    applied = fix.count(FIXED, "stdouts")
    applied_again = again.count(FIXED, "stdouts")
    if would_fix != applied:
        failures.append(f"--diff announced {would_fix} fixes, --fix applied {applied}")
    diffs = {path[len("work/") :] if path.startswith("work/") else path: text for path, text in split_diff(diff.stdout).items()}

    # 3. per file: untouched files are byte-identical, touched ones compile and keep their format
    changed = sorted(rel for rel in original if fixed.get(rel) != original[rel])
    format_problems = compile_problems = 0
    variants_touched: collections.Counter = collections.Counter()
    for rel in sorted(set(original) | set(fixed)):
        before, after = original.get(rel), fixed.get(rel)
        if before is None or after is None:
            failures.append(f"{rel}: file {'appeared' if before is None else 'disappeared'}")
            continue
        if rel not in diffs:
            if before != after:
                failures.append(f"{rel}: changed by --fix but absent from --diff")
            continue
        if before == after:
            failures.append(f"{rel}: in the --diff output but left unchanged by --fix")
            continue
        variant = _variant_of(rel) if args.variants else None
        if variant:
            variants_touched[variant] += 1
        error = compiles(after, rel)
        if error is not None:
            compile_problems += 1
            was = compiles(before, rel)
            failures.append(f"{rel}: does not compile after the fix: {error}" + (f" (nor before: {was})" if was else ""))
        for problem in kept_format(before, after):
            format_problems += 1
            failures.append(f"{rel}: {problem}")
        expected = expected_diff("work/" + rel, before, after)
        if diffs[rel] != expected:
            failures.append(f"{rel}: --diff showed a different change from the one --fix wrote")
    for rel in diffs:
        if rel not in original:
            failures.append(f"--diff names {rel}, which is not a corpus file")

    # 4. fixpoint
    if applied_again:
        failures.append(f"the second fix run applied {applied_again} more fixes")
    for rel in sorted(rel for rel in fixed if after_again.get(rel) != fixed[rel]):
        failures.append(f"{rel}: the second fix run changed it again")

    elapsed = time.perf_counter() - started
    corpus_errors = collections.Counter(message.split(":")[0] for _, _, message in check.corpus_errors())
    summary = {
        "files": files,
        "lines": lines,
        "findings": sum(per_rule.values()),
        "fixable": sum(fixable.values()),
        "fixable_safe": fixable_safe,
        "would_fix": would_fix,
        "applied": applied,
        "applied_again": applied_again,
        "files_changed": len(changed),
        "internal": sum(len(run.internal()) for run in runs),
        "crashes": sum(run.crashed for run in runs),
        "compile_problems": compile_problems,
        "format_problems": format_problems,
    }
    print(json.dumps(summary, indent=1))
    print("findings per rule:", dict(sorted(per_rule.items())) or "none")
    if failures:
        print(f"\n{len(failures)} FAILED CHECKS:")
        for failure in failures[:200]:
            print(" -", failure)
    else:
        print("\nall checks passed")

    if str(args.results) != "-":
        write_results(args, pinned, made, commit, codes, summary, per_rule, fixable, corpus_errors, variants_touched, runs, elapsed, failures)
    return 1 if failures else 0


def write_results(args, pinned, made, commit, codes, summary, per_rule, fixable, corpus_errors, variants_touched, runs, elapsed, failures) -> None:
    path: Path = args.results
    path.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = []
    if not path.exists():
        out.append("# Reliability runs over real PyTorch code\n")
        out.append(
            "Made by `python bench/reliability.py` (see its docstring for what each check means). "
            "Each run appends a section; the corpus comes from `bench/corpus.py` and is never committed.\n"
        )
    out.append(f"\n## {now}{' — ' + args.label if args.label else ''}\n")
    out.append(f"- torchlint: commit {commit} (a copy of torchlint/ taken at the start), {len(codes)} rules ({', '.join(codes)}), `--select ALL`")
    out.append(f"- corpus: {', '.join(pinned.values())}")
    out.append(f"- {summary['files']:,} files, {summary['lines']:,} lines")
    if made:
        out.append(f"- variants written before the run: {', '.join(f'{k} {v}' for k, v in sorted(made.items()))}")
    out.append(
        f"- result: **{'PASS' if not failures else f'FAIL ({len(failures)} checks)'}** — "
        f"{summary['crashes']} crashed runs, {summary['internal']} internal errors, "
        f"{summary['compile_problems']} fixed files that do not compile, {summary['format_problems']} format changes"
    )
    out.append(
        f"- findings: {summary['findings']} ({summary['fixable']} with a fix, {summary['fixable_safe']} of them safe/numerics); "
        f"`--diff` would fix {summary['would_fix']}; `--fix --unsafe-fixes` applied {summary['applied']} in "
        f"{summary['files_changed']} files; second run applied {summary['applied_again']}"
    )
    if variants_touched:
        out.append(f"- fixed files among the variants: {', '.join(f'{k} {v}' for k, v in sorted(variants_touched.items()))}")
    if corpus_errors:
        out.append(f"- corpus files torchlint could not read or parse (not its fault, reported with exit 2): "
                   f"{', '.join(f'{k} {v}' for k, v in corpus_errors.most_common())}")
    out.append(f"- {args.jobs} process(es) per run; check and diff side by side")
    out.append(f"- second fix run over {'every file' if args.full_second_run else 'the changed files'}")
    out.append(f"- time: {elapsed:.0f} s in all; " + ", ".join(f"{run.name} {run.seconds:.1f} s (exit {run.code})" for run in runs))
    out.append("")
    out.append("| rule | findings | with a fix |")
    out.append("| --- | ---: | ---: |")
    for code in codes:
        out.append(f"| {code} | {per_rule.get(code, 0)} | {fixable.get(code, 0)} |")
    if failures:
        out.append("")
        out.append("Failed checks (first 30):")
        out.append("")
        for failure in failures[:30]:
            out.append("    " + failure.replace("\n", "\n    "))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n".join(out) + "\n")
    print(f"appended to {path}")


if __name__ == "__main__":
    raise SystemExit(main())
