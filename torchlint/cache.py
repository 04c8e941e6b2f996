"""The persistent cache of check runs: a file's findings and diagnostics, keyed by everything that decides them.

Layout: one manifest per *run key* (``<cache dir>/<run key>.json``).  The
run key hashes the entry format, the torchlint version, the code of the
installed package (an editable install changes without a version bump), the
settings fingerprint and the project root.  The manifest maps each checked
path to its entry: the absolute path, the file's ``stat`` when its bytes were
hashed, the hash of those bytes, the findings and diagnostics, the modules
its rules looked up in the project index (TL403) with the hash of their bytes
(or their absence), and the day it was last used.  A warm run reads one file
and makes one ``stat`` call per checked file.

When is a file unchanged?  The entry is keyed by content: the hash of the
bytes decides.  ``stat`` only saves reading: when size, mtime, ctime and inode
all equal the recorded ones, the recorded hash is taken as the file's;
otherwise the file is read and hashed, and an equal hash is still a hit (a
``touch`` or a checkout of the same bytes costs one read, never a re-check).
This is stricter than a key on mtime (ruff) or on size and mtime with a hash
when the mtime differs (mypy): an edit that keeps the size and puts the old
mtime back (``touch -d``, ``os.utime``, ``tar -x``) still changes the ctime,
which no user call can set.  The one hole of every stat shortcut, a second
write within the file system's clock tick after the file was hashed, is closed
as git closes it ("racily clean" entries): the stat is trusted only for a
file whose mtime and ctime were at least ``RACY_SECONDS`` older than the
moment it was hashed; a younger entry is re-hashed on the next run, and its
recorded stat refreshed then.  What it cannot see: a clock set backwards, or a
file server whose clock runs ``RACY_SECONDS`` behind this machine's.

An entry with TL403 dependencies is used only while each looked-up module
still resolves, through the run's project index, to the same path with the
same bytes (or is still absent): the index's module map is the run's own
file list whenever the project root is the one folder being checked, so that
check costs no second walk of the tree.

Safety: the manifest is JSON, never a pickle, so a cache folder that others
can write cannot run code in this process; a manifest that is not owned by
the user running torchlint is ignored (and replaced).  A manifest that cannot be read or decoded is a miss for every
file, never an error.  It is written to a temporary file and renamed into
place, so a reader sees a whole manifest or none; two runs writing at once
lose each other's new entries, never correctness.

A result with a read error is never remembered, nor one with an internal
error for want of stack or memory (``RecursionError``, ``MemoryError``);
other internal errors (a rule that crashes, a fix that cannot be built) repeat
for the same bytes, settings and code, and are cached like findings.

The rule catalog: resolving the selection needs every rule's code, name and
default, and asking the rules imports them and LibCST, most of a warm run's
time.  ``rules-<key>.json`` keeps that list per version of the package's code;
with it, a run whose files all hit imports neither LibCST nor a rule.

Pruning: an entry not used for ``KEEP_ENTRY_DAYS`` days is dropped when the
manifest is written; manifests of other run keys (other versions, settings,
projects) are deleted once unused for ``KEEP_OTHER_RUN_DAYS`` days, and only
the ``KEEP_OTHER_RUNS`` most recently used are kept; entries of the old
one-pickle-per-file layout are deleted.  The folder holds a ``.gitignore``
and a ``CACHEDIR.TAG`` so that it is neither committed nor backed up.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import fields
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from torchlint.cache_dir import DEFAULT_DIR_NAME, default_dir  # noqa: F401  (the cache's folder, by default)
from torchlint.rule import LEVEL_TABLE_VARIABLE, Applicability, Confidence, Diagnostic, Edit, Finding, Fix, Location, NotebookCell
from torchlint.version import __version__

# Bumped when the entry layout changes (1: one pickle per file).
FORMAT = 4  # 3: findings carry their confidence; 4: and their notebook cell
RACY_SECONDS = 2
KEEP_ENTRY_DAYS = 30
KEEP_OTHER_RUN_DAYS = 7
KEEP_OTHER_RUNS = 8
# Refresh the manifest's mtime (what pruning by other runs reads) at most this often when nothing else changed.
TOUCH_SECONDS = 3600

# Internal errors that depend on the process (its stack, its memory), not on the file: such a result is not
# remembered.  Any other internal error (a rule's crash, a fix that cannot be built) repeats for the same bytes,
# settings and code, so it is cached like a finding: re-checking it on every run would cost its whole check.
_ENVIRONMENTAL = re.compile(r"\b(RecursionError|MemoryError)\b")
_MANIFEST = re.compile(r"^(rules-)?[0-9a-f]{32}\.json$")
_OLD_RUN = re.compile(r"^[0-9a-f]{32}$")
_OLD_SHARD = re.compile(r"^[0-9a-f]{2}$")
_OLD_ENTRY = re.compile(r"^([0-9a-f]{40}|\.tmp-.*)$")


class Dependency(NamedTuple):
    module: str
    path: Optional[str]
    digest: Optional[str]


Result = Tuple[List[Finding], List[Diagnostic]]



def code_fingerprint(package: Optional[str] = None) -> str:
    """Size and modification time of every module and data file of the installed torchlint (rules included);
    ``package``: another copy of the package's folder."""
    package = package or os.path.dirname(os.path.abspath(__file__))  # this package's folder
    parts = [__version__]
    for directory, subdirs, names in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".json")):
                try:
                    stat = os.stat(os.path.join(directory, name))
                except OSError:
                    continue
                parts.append(f"{os.path.relpath(os.path.join(directory, name), package)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def digest_bytes(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def _stat_key(stat: os.stat_result) -> List[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _read_with_stat(path: str) -> Tuple[bytes, List[int], int]:
    """The bytes of ``path``, the stat of the file they were read from, and the clock just before."""
    now = time.time_ns()
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        return handle.read(), _stat_key(stat), now


# -- entries as JSON -------------------------------------------------------------------
#
# Hand-written for speed; _SCHEMA checks at import that the report classes still have the fields the
# encoding knows, and a cache whose classes grew a field stores nothing rather than losing it.

_SCHEMA = {
    Finding: ("code", "name", "path", "location", "message", "fix", "fix_edit_locations", "confidence", "cell", "fix_edit_cells"),
    Location: ("line", "column", "end_line", "end_column"),
    Fix: ("applicability", "message", "edits"),
    Edit: ("start", "end", "content"),
    Diagnostic: ("path", "message", "line", "column", "kind", "cell"),
    NotebookCell: ("index", "file_line"),
}
_ENCODABLE = all(tuple(f.name for f in fields(cls)) == names for cls, names in _SCHEMA.items())


def _encode_finding(finding: Finding) -> list:
    loc, fix = finding.location, finding.fix
    encoded_fix = None if fix is None else [fix.applicability.value, fix.message, [[e.start, e.end, e.content] for e in fix.edits]]
    return [finding.code, finding.name, finding.path, loc.line, loc.column, loc.end_line, loc.end_column, finding.message,
            encoded_fix, [list(span) for span in finding.fix_edit_locations], finding.confidence.value,
            _encode_cell(finding.cell), list(finding.fix_edit_cells)]


def _decode_finding(item: list) -> Finding:
    code, name, path, line, column, end_line, end_column, message, fix, spans, confidence, cell, edit_cells = item
    if fix is not None:
        fix = Fix(Applicability(fix[0]), fix[1], tuple(Edit(start, end, content) for start, end, content in fix[2]))
    return Finding(
        code, name, path, Location(line, column, end_line, end_column), message, fix, tuple(tuple(s) for s in spans),
        Confidence(confidence), _decode_cell(cell), tuple(edit_cells),
    )


def _encode_cell(cell: Optional[NotebookCell]) -> Optional[list]:
    return None if cell is None else [cell.index, cell.file_line]


def _decode_cell(item: Optional[list]) -> Optional[NotebookCell]:
    return None if item is None else NotebookCell(*item)


def _encode_diagnostic(diagnostic: Diagnostic) -> list:
    return [diagnostic.path, diagnostic.message, diagnostic.line, diagnostic.column, diagnostic.kind, _encode_cell(diagnostic.cell)]


def _decode_diagnostic(item: list) -> Diagnostic:
    path, message, line, column, kind, cell = item
    return Diagnostic(path, message, line, column, kind, _decode_cell(cell))


# An entry: [absolute path, [size, mtime_ns, ctime_ns, inode], hashed at (ns), digest, last used (day),
#            findings, diagnostics, dependencies as [module, path, digest]]
_ABSOLUTE, _STAT, _HASHED_AT, _DIGEST, _USED, _FINDINGS, _DIAGNOSTICS, _DEPENDENCIES = range(8)


class Cache:
    def __init__(self, directory: str, settings, version: Optional[str] = None, code: Optional[str] = None) -> None:
        self.directory = directory
        self.code = code if code is not None else code_fingerprint()
        # the level table in force decides the levels stored, like the settings
        levels = os.environ.get(LEVEL_TABLE_VARIABLE)
        run = repr((FORMAT, version or __version__, self.code, settings.fingerprint(), settings.root, levels))
        self.run_key = hashlib.blake2b(run.encode(), digest_size=16).hexdigest()
        self.manifest_path = os.path.join(directory, self.run_key + ".json")
        self.catalog_path = _catalog_path(directory, self.code)
        self.hits = 0
        self.misses = 0
        self._entries: Optional[Dict[str, list]] = None
        self._dirty = False
        self._manifest_mtime: Optional[float] = None
        self._today = int(time.time() // 86400)
        # Hashes of the bytes this run saw (or trusted through stat), by path: dependencies are checked against them.
        self.digests: Dict[str, str] = {}

    # -- reading ----------------------------------------------------------------------

    def _load_manifest(self) -> Dict[str, list]:
        if self._entries is not None:
            return self._entries
        self._entries = {}
        try:
            with open(self.manifest_path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                if not _trusted(stat):
                    self._dirty = True  # written anew, by and for this user
                    return self._entries
                data = json.loads(handle.read())
            if data.get("format") != FORMAT or data.get("run") != self.run_key or not isinstance(data.get("files"), dict):
                raise ValueError("another manifest")
            self._entries = data["files"]
            self._manifest_mtime = stat.st_mtime
        except Exception:  # missing, unreadable or corrupt: every file is a miss
            self._entries = {}
        return self._entries

    def lookup(self, paths: Sequence[str], index=None) -> List[Optional[Result]]:
        """The cached (findings, diagnostics) of each path as it is now, None for a miss.

        ``index`` (the run's project index, with ``dependencies(modules)``)
        checks entries with TL403 dependencies; without it such entries miss.
        """
        entries = self._load_manifest()
        candidates: List[Optional[list]] = [None] * len(paths)
        for position, path in enumerate(paths):
            entry = entries.get(path)
            try:
                if entry is None or entry[_ABSOLUTE] != os.path.abspath(path):
                    continue
                stat = _stat_key(os.stat(path))
                recorded, hashed_at = entry[_STAT], entry[_HASHED_AT]
                racy = max(recorded[1], recorded[2]) >= hashed_at - RACY_SECONDS * 1_000_000_000
                if stat != recorded or racy:
                    data, stat, hashed_at = _read_with_stat(path)
                    digest = digest_bytes(data)
                    self.digests[path] = digest
                    if digest != entry[_DIGEST]:
                        continue
                    entry[_STAT], entry[_HASHED_AT] = stat, hashed_at
                    self._dirty = True
                else:
                    self.digests[path] = entry[_DIGEST]
                candidates[position] = entry
            except Exception:  # unreadable file or a malformed entry: a miss
                continue

        results: List[Optional[Result]] = []
        for path, entry in zip(paths, candidates):
            result = None
            if entry is not None:
                try:
                    result = self._result(entry, index)
                except Exception:
                    result = None
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
                if entry[_USED] != self._today:
                    entry[_USED] = self._today
                    self._dirty = True
            results.append(result)
        self._touch()
        return results

    def _result(self, entry: list, index) -> Optional[Result]:
        dependencies = entry[_DEPENDENCIES]
        if dependencies:
            stored = tuple(Dependency(*d) for d in dependencies)
            if index is None or tuple(index.dependencies({d.module for d in stored}, self.digests)) != stored:
                return None  # a looked-up module changed, appeared or disappeared
        findings = [_decode_finding(item) for item in entry[_FINDINGS]]
        diagnostics = [_decode_diagnostic(item) for item in entry[_DIAGNOSTICS]]
        return findings, diagnostics

    def load(self, path: str, index=None) -> Optional[Result]:
        """The cached result of one path (see ``lookup``)."""
        return self.lookup([path], index)[0]

    # -- writing ----------------------------------------------------------------------

    def store(self, path: str, digest: str, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], dependencies: Sequence[Dependency] = ()) -> None:
        """Remember the result of checking ``path`` whose bytes hashed to ``digest`` (written by ``save``)."""
        if not _ENCODABLE or any(d.kind == "io" or (d.kind == "internal" and _ENVIRONMENTAL.search(d.message)) for d in diagnostics):
            return  # a read problem, or a crash for want of stack or memory, may not repeat: never remember it
        try:
            # The stat recorded must be the stat of the bytes that were checked: read them again and compare.
            data, stat, hashed_at = _read_with_stat(path)
        except OSError:
            return
        if digest_bytes(data) != digest:
            return  # changed while it was being checked
        entry = [os.path.abspath(path), stat, hashed_at, digest, self._today,
                 [_encode_finding(f) for f in findings], [_encode_diagnostic(d) for d in diagnostics],
                 [list(d) for d in dependencies]]
        self._load_manifest()[path] = entry
        self._dirty = True

    def save(self) -> None:
        """Write the manifest if anything changed, and prune; a cache that cannot be written is skipped silently."""
        if read_catalog(self.directory, self.code) is None:
            _write_catalog(self.catalog_path, self.directory, self.code)
        if not self._dirty or self._entries is None:
            return
        oldest = self._today - KEEP_ENTRY_DAYS
        files = {path: entry for path, entry in self._entries.items() if isinstance(entry, list) and len(entry) > _USED and entry[_USED] >= oldest}
        try:
            _write_json(self.manifest_path, self.directory, {"format": FORMAT, "run": self.run_key, "files": files})
            self._dirty = False
            self._prune()
        except Exception:
            pass

    def _touch(self) -> None:
        if self._manifest_mtime is not None and not self._dirty and time.time() - self._manifest_mtime > TOUCH_SECONDS:
            with _suppress():
                os.utime(self.manifest_path)
                self._manifest_mtime = time.time()

    def _prune(self) -> None:
        """Delete other run keys' manifests unused for a while (all but the newest few), and the old layout's entries."""
        now = time.time()
        others: List[Tuple[float, str]] = []
        for name in _listdir(self.directory):
            path = os.path.join(self.directory, name)
            if _MANIFEST.match(name) and path not in (self.manifest_path, self.catalog_path):
                with _suppress():
                    others.append((os.stat(path).st_mtime, path))
            elif _OLD_RUN.match(name) and os.path.isdir(path) and not os.path.islink(path):
                _remove_old_layout(path)
            elif name.startswith(".tmp-") and name.endswith(".json"):
                with _suppress():
                    if now - os.stat(path).st_mtime > 3600:  # left behind by a killed run
                        os.unlink(path)
        others.sort(reverse=True)
        for position, (mtime, path) in enumerate(others):
            if position >= KEEP_OTHER_RUNS or now - mtime > KEEP_OTHER_RUN_DAYS * 86400:
                with _suppress():
                    os.unlink(path)



# -- the rule catalog -------------------------------------------------------------------
#
# Resolving the selection (ALL, TL2, a rule's name, the defaults) needs every rule's code, name and default,
# and asking the rules means importing them, and LibCST with them: most of a warm run's time.  The cache keeps
# that list per version of the package's code (``rules-<code fingerprint>.json``), written by the first run
# that imported the rules anyway.


def _catalog_path(directory: str, code: str) -> str:
    key = hashlib.blake2b(code.encode(), digest_size=16).hexdigest()
    return os.path.join(directory, f"rules-{key}.json")


def read_catalog(directory: str, code: str) -> Optional[Dict[str, Tuple[str, bool]]]:
    """Code -> (name, enabled by default) of every rule of the package whose code fingerprint is ``code``, or None."""
    try:
        with open(_catalog_path(directory, code), "rb") as handle:
            if not _trusted(os.fstat(handle.fileno())):
                return None
            data = json.loads(handle.read())
        if data.get("format") != FORMAT or data.get("code") != code:
            return None
        rules = {str(c): (str(name), bool(enabled)) for c, (name, enabled) in data["rules"]}
        return rules or None
    except Exception:
        return None


def _write_catalog(path: str, directory: str, code: str) -> None:
    from torchlint import registry

    try:
        rules = [[c, [name, enabled]] for c, (name, enabled) in registry.catalog().items()]
        _write_json(path, directory, {"format": FORMAT, "code": code, "rules": rules})
    except Exception:
        pass


def _write_json(path: str, directory: str, data: dict) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file renamed into place), readable by this user only."""
    _prepare(directory)
    text = json.dumps(data, separators=(",", ":"))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        with _suppress():
            os.unlink(temporary)
        raise


def _prepare(directory: str) -> None:
    os.makedirs(directory, exist_ok=True)
    for name, text in ((".gitignore", "# Created by torchlint.\n*\n"), ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# Created by torchlint.\n")):
        marker = os.path.join(directory, name)
        if not os.path.exists(marker):
            with _suppress():
                with open(marker, "w", encoding="utf-8") as out:
                    out.write(text)


def _trusted(stat: os.stat_result) -> bool:
    """A file this user owns (written by a run of this user: others can replace it only with a file of theirs).

    The mode is not asked: the cache writes its files 0600, and file systems that fake modes (a Windows
    drive under WSL shows 0777) would otherwise never get a warm run.
    """
    if not hasattr(os, "geteuid"):
        return True
    return stat.st_uid == os.geteuid()


def _listdir(directory: str) -> Iterable[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return ()


def _remove_old_layout(run_directory: str) -> None:
    """Entries of format 1 (``<run key>/<2 hex>/<40 hex>`` pickles): only names of that shape, then the empty folders."""
    for shard in _listdir(run_directory):
        shard_path = os.path.join(run_directory, shard)
        if _OLD_SHARD.match(shard) and os.path.isdir(shard_path) and not os.path.islink(shard_path):
            for name in _listdir(shard_path):
                if _OLD_ENTRY.match(name):
                    with _suppress():
                        os.unlink(os.path.join(shard_path, name))
            with _suppress():
                os.rmdir(shard_path)
    with _suppress():
        os.rmdir(run_directory)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)
