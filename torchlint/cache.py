"""The persistent cache of check runs: a file's findings and diagnostics, keyed by everything that decides them.

An entry's key hashes the torchlint version, the code of the installed
package (an editable install changes without a version bump), the settings
fingerprint and project root, the path as given, and the file's bytes.  An
entry of a file whose rules looked other modules up in the project index
(TL403) also lists those modules with the hash of their bytes (or their
absence): it is used only while they are unchanged.

Entries are pickles written to a temporary file and renamed into place, so a
reader sees a whole entry or none; an entry that cannot be read or unpickled
is a miss, never an error.  The folder holds a ``.gitignore`` and a
``CACHEDIR.TAG`` so that it is neither committed nor backed up.  Old entries
are not pruned: delete the folder to reclaim the space.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torchlint
from torchlint.rule import Diagnostic, Finding

DEFAULT_DIR_NAME = ".torchlint_cache"
# Bumped when the entry layout changes.
FORMAT = 1


class Dependency(NamedTuple):
    module: str
    path: Optional[str]
    digest: Optional[str]


def default_dir(config_path: Optional[str]) -> str:
    """``.torchlint_cache`` next to the configuration file, else in the current directory."""
    base = os.path.dirname(os.path.abspath(config_path)) if config_path else os.getcwd()
    return os.path.join(base, DEFAULT_DIR_NAME)


def code_fingerprint() -> str:
    """Size and modification time of every module of the installed torchlint (rules included)."""
    package = os.path.dirname(os.path.abspath(torchlint.__file__))
    parts = [torchlint.__version__]
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


class Cache:
    def __init__(self, directory: str, settings, version: Optional[str] = None, code: Optional[str] = None) -> None:
        self.directory = directory
        run = repr((FORMAT, version or torchlint.__version__, code if code is not None else code_fingerprint(), settings.fingerprint(), settings.root))
        self.run_key = hashlib.blake2b(run.encode(), digest_size=16).hexdigest()
        self.hits = 0
        self.misses = 0
        self._prepared = False

    def _entry_path(self, path: str, digest: str) -> str:
        key = hashlib.blake2b(f"{self.run_key}\0{path}\0{digest}".encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()
        return os.path.join(self.directory, self.run_key, key[:2], key)

    def load(self, path: str, index=None) -> Optional[Tuple[List[Finding], List[Diagnostic]]]:
        """The cached (findings, diagnostics) of ``path`` as it is now, or None."""
        try:
            with open(path, "rb") as handle:
                digest = hashlib.blake2b(handle.read(), digest_size=20).hexdigest()
            with open(self._entry_path(path, digest), "rb") as handle:
                entry = pickle.load(handle)
            form, findings, diagnostics, dependencies = entry
            if form != FORMAT:
                raise ValueError("another entry format")
            if dependencies:
                if index is None or tuple(index.dependencies({d.module for d in dependencies})) != tuple(dependencies):
                    raise ValueError("a looked-up module changed")
        except Exception:  # missing, unreadable, corrupt or stale: check the file again
            self.misses += 1
            return None
        self.hits += 1
        return list(findings), list(diagnostics)

    def store(self, path: str, digest: str, findings: Sequence[Finding], diagnostics: Sequence[Diagnostic], dependencies: Sequence[Dependency] = ()) -> None:
        """Write an entry atomically; a cache that cannot be written is skipped silently."""
        if any(d.kind == "internal" or d.kind == "io" for d in diagnostics):
            return  # a crash or a read problem may not repeat: never remember it
        target = self._entry_path(path, digest)
        try:
            self._prepare()
            os.makedirs(os.path.dirname(target), exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
            try:
                with os.fdopen(handle, "wb") as out:
                    pickle.dump((FORMAT, list(findings), list(diagnostics), tuple(dependencies)), out, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temporary, target)
            except BaseException:
                with _suppress():
                    os.unlink(temporary)
                raise
        except Exception:
            pass

    def _prepare(self) -> None:
        if self._prepared:
            return
        os.makedirs(self.directory, exist_ok=True)
        for name, text in ((".gitignore", "# Created by torchlint.\n*\n"), ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n# Created by torchlint.\n")):
            marker = os.path.join(self.directory, name)
            if not os.path.exists(marker):
                with _suppress():
                    with open(marker, "w", encoding="utf-8") as out:
                        out.write(text)
        self._prepared = True


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)
