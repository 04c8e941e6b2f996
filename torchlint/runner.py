"""The run over files: one file's work, the persistent cache in front of it, and a process pool behind it.

Every file is checked by ``check_path`` (read, then ``process_text``: lint or fix, write back),
in this process or in a worker; outcomes come back in the order of the file
list, so the output of N jobs is byte-for-byte the output of one.  The cache
is consulted here, in the parent, before any worker starts: a warm run over
an unchanged tree reads one manifest, stats the files and never starts the pool.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import difflib
import io
import multiprocessing
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from torchlint import config, noqa, notebook, source
from torchlint.analysis.model import project_index
from torchlint.cache import Cache, Dependency, digest_bytes
from torchlint.files import project_files
from torchlint.rule import Confidence, Diagnostic, Finding

# Fewer files than this per job are checked in this process: starting workers would cost more.
MIN_FILES_PER_JOB = 8


@dataclass
class FileOutcome:
    findings: List[Finding] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    fixes: Tuple[str, ...] = ()  # the code of each fix applied (--diff: that would be applied)
    noqa_directives: int = 0  # --add-noqa: the noqa comments written or extended
    output: str = ""  # what the file printed to stdout (--diff)
    digest: Optional[str] = None  # hash of the bytes that were checked
    dependencies: Tuple[Dependency, ...] = ()  # project modules a rule looked up (TL403)


class RecordingIndex(project_index.ProjectIndex):
    """The run's project index, noting which modules each file's rules looked up (for the cache)."""

    def __init__(self, files_source) -> None:
        super().__init__(files_source)
        self.looked_up: Optional[Set[str]] = None
        self._digests: Dict[str, Optional[str]] = {}
        self._every: Optional[str] = None

    def _read(self, module: str) -> None:
        super()._read(module)
        if self.looked_up is not None and self._records(module):
            self.looked_up.add(module)

    def _read_all(self, modules) -> None:
        super()._read_all(modules)
        if self.looked_up is not None:
            self.looked_up |= self._recorded(modules)

    def dependencies(self, modules: Set[str], known: Optional[Dict[str, str]] = None) -> Tuple[Dependency, ...]:
        """(module, path, hash of its bytes) of each module, path and hash None when the run has no such module.

        ``known`` holds hashes this run already took (the cache's, by path); others are hashed once per process.
        """
        paths = self._ensure()
        found = []
        for module in sorted(modules):
            if module == project_index.EVERY_FILE:
                found.append(Dependency(module, None, self._every_digest(known)))
                continue
            path = paths.get(module)
            digest = None
            if path is not None:
                digest = (known or {}).get(path) or self._digests.get(path)
                if digest is None:
                    digest = self._digests[path] = file_digest(path)
            found.append(Dependency(module, path, digest))
        return tuple(found)


    def _every_digest(self, known: Optional[Dict[str, str]]) -> str:
        """One digest of every file of the project (its path and the digest of its bytes), once per process."""
        if self._every is None:
            parts = []
            for path in sorted(set(self._ensure().values()) | set(self.files())):
                digest = (known or {}).get(path) or self._digests.get(path)
                if digest is None:
                    digest = self._digests[path] = file_digest(path)
                parts.append(f"{path}\0{digest}")
            self._every = digest_bytes("\n".join(parts).encode("utf-8", "surrogateescape"))
        return self._every


def file_digest(path: Optional[str]) -> Optional[str]:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return digest_bytes(handle.read())
    except OSError:
        return None


def build_index(files: Sequence[str], paths: Sequence[str], settings: config.Settings) -> RecordingIndex:
    # Rebuilt in each worker rather than pickled: it is lazy (a callable and a lock), so building it costs nothing
    # until a rule asks, and a worker then walks the project once and parses only the modules it is asked about.
    return RecordingIndex(project_files(files, paths, settings))


@dataclass
class RunResults:
    """What the checks of a run (or of one file) found and fixed."""

    findings: List[Finding] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    # Path -> the code of each fix applied there (--diff: that would be applied), for files with one.
    fixes: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    noqa_directives: Dict[str, int] = field(default_factory=dict)  # --add-noqa: path -> comments written or extended
    # How many findings of each level below the run's floor a plain check found and did not show.
    below_floor: Dict[Confidence, int] = field(default_factory=dict)

    @property
    def fixed(self) -> int:
        return sum(len(codes) for codes in self.fixes.values())


def process_text(text: str, path: str, args: argparse.Namespace, settings: config.Settings, run: RunResults) -> Optional[str]:
    """Lint (and fix) one decoded text; returns the fixed text when it changed.

    Whatever goes wrong inside the engine on this file is reported as an
    internal error for this file, and the run goes on with the next one.
    """
    try:
        return _lint_or_fix(text, path, args, settings, run)
    except Exception as exc:  # e.g. a RecursionError outside the rules: one file must not stop the run
        run.diagnostics.append(
            Diagnostic(path, f"internal error: {type(exc).__name__}: {exc}; please report it", kind="internal")
        )
        return None


def _lint_or_fix(text: str, path: str, args: argparse.Namespace, settings: config.Settings, run: RunResults) -> Optional[str]:
    from torchlint import engine  # LibCST and the rules: only when a file is really checked

    # A notebook is checked as the module its code cells make (torchlint/notebook.py): the same calls.
    checker = notebook if notebook.is_notebook(path) else engine
    if args.add_noqa:
        result = checker.lint_text(text, path, settings)
        run.diagnostics.extend(result.diagnostics)
        return _add_noqa(text, path, result.findings, run)
    if not (args.fix or args.diff):
        result = checker.lint_text(text, path, settings)
        run.findings.extend(result.findings)
        run.diagnostics.extend(result.diagnostics)
        return None
    fixed = checker.fix_text(text, path, settings)
    run.diagnostics.extend(fixed.result.diagnostics)
    if fixed.applied_codes:
        run.fixes[path] = fixed.applied_codes
    if args.diff:
        # --diff reports what it would change, not the findings; a notebook's diff is one per changed cell.
        if isinstance(fixed, notebook.NotebookFixResult):
            for cell in fixed.cells:
                sys.stdout.write(_unified_diff(cell.before, cell.after, f"{path}:cell {cell.index}"))
        elif fixed.text != text:
            sys.stdout.write(_unified_diff(text, fixed.text, path))
        return None
    run.findings.extend(fixed.result.findings)
    return fixed.text if fixed.text != text else None


def _add_noqa(text: str, path: str, findings: Sequence[Finding], run: RunResults) -> Optional[str]:
    """The text with a ``# noqa`` comment for each finding (None when none was written); the findings no comment can silence remain."""
    if not findings:
        return None
    added = (notebook.add_noqa if notebook.is_notebook(path) else noqa.add_noqa)(text, findings)
    run.findings.extend(added.unplaced)
    if not added.directives:
        return None
    run.noqa_directives[path] = added.directives
    return added.text


def _unified_diff(before: str, after: str, name: str) -> str:
    diff = difflib.unified_diff(source.split_lines(before), source.split_lines(after), fromfile=name, tofile=name)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in diff)


def check_path(path: str, args: argparse.Namespace, settings: config.Settings, index: Optional[RecordingIndex] = None) -> FileOutcome:
    """Lint (or fix) one file and write the fix back; never raises for a bad file."""
    run = RunResults()
    outcome = FileOutcome()
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        outcome.diagnostics.append(Diagnostic(path, f"cannot read file: {exc.strerror or exc}", kind="io"))
        return outcome
    outcome.digest = digest_bytes(data)
    try:
        decoded = source.decode(data)
    except source.SourceError as exc:
        outcome.diagnostics.append(Diagnostic(path, exc.message, exc.line, exc.column, exc.kind))
        return outcome
    if index is not None:
        index.looked_up = set()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            new_text = process_text(decoded.text, path, args, settings, run)
        if new_text is not None:
            try:
                source.write_atomic(path, decoded.encode(new_text))
            except (OSError, UnicodeEncodeError) as exc:
                run.diagnostics.append(Diagnostic(path, f"cannot write fixed file: {exc}", kind="io"))
                run.noqa_directives.pop(path, None)  # not written: not added
        if index is not None and index.looked_up:
            outcome.dependencies = index.dependencies(index.looked_up)
    finally:
        if index is not None:
            index.looked_up = None
    outcome.findings, outcome.diagnostics = run.findings, run.diagnostics
    outcome.fixes, outcome.noqa_directives = run.fixes.get(path, ()), run.noqa_directives.get(path, 0)
    outcome.output = printed.getvalue()
    return outcome


# -- the worker side ------------------------------------------------------------------

_WORKER: Dict[str, object] = {}


def _start_worker(args: argparse.Namespace, settings: config.Settings, files: Sequence[str], paths: Sequence[str]) -> None:
    _WORKER["args"], _WORKER["settings"] = args, settings
    _WORKER["index"] = build_index(files, paths, settings)


def _check_in_worker(path: str) -> FileOutcome:
    index = _WORKER["index"]
    with project_index.activated(index):
        return check_path(path, _WORKER["args"], _WORKER["settings"], index)


def _pool_context():
    # fork starts a worker in milliseconds (the rules are already imported); spawn where fork is unsafe or absent.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") and "fork" in methods else "spawn")


def default_jobs() -> int:
    return os.cpu_count() or 1


# -- the run ----------------------------------------------------------------------------


def run_files(
    files: Sequence[str],
    paths: Sequence[str],
    args: argparse.Namespace,
    settings: config.Settings,
    jobs: int,
    cache: Optional[Cache] = None,
) -> List[FileOutcome]:
    """The outcome of every file, in the order of ``files``."""
    outcomes: List[Optional[FileOutcome]] = [None] * len(files)
    index = build_index(files, paths, settings) if cache is not None else None
    hits = cache.lookup(files, index) if cache is not None else [None] * len(files)
    todo: List[int] = []
    for position, hit in enumerate(hits):
        if hit is not None:
            outcomes[position] = FileOutcome(findings=hit[0], diagnostics=hit[1])
        else:
            todo.append(position)

    pending = [files[i] for i in todo]
    if jobs <= 1 or len(pending) < MIN_FILES_PER_JOB * 2:
        index = index or build_index(files, paths, settings)
        with project_index.activated(index):
            computed = [check_path(path, args, settings, index) for path in pending]
    else:
        computed = _in_pool(pending, files, paths, args, settings, jobs)

    for position, outcome in zip(todo, computed):
        outcomes[position] = outcome
        if cache is not None and outcome.digest is not None:
            cache.store(files[position], outcome.digest, outcome.findings, outcome.diagnostics, outcome.dependencies)
    if cache is not None:
        cache.save()
    return outcomes  # type: ignore[return-value]


def _in_pool(
    pending: Sequence[str], files: Sequence[str], paths: Sequence[str], args: argparse.Namespace, settings: config.Settings, jobs: int
) -> List[FileOutcome]:
    jobs = min(jobs, max(1, len(pending) // MIN_FILES_PER_JOB))
    # The CLI imports the engine and the rules only when a file needs checking: import them before the fork so
    # that every worker inherits them instead of importing them again.
    from torchlint import engine, registry  # noqa: F401

    registry.all_rules()
    # Chunks amortise the round trip; several per worker keep the load balanced when one file is slow.
    chunksize = max(1, min(32, len(pending) // (jobs * 8)))
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs, mp_context=_pool_context(), initializer=_start_worker, initargs=(args, settings, list(files), list(paths))
    ) as pool:
        try:
            return list(pool.map(_check_in_worker, pending, chunksize=chunksize))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
