"""Settings and project indexes for the documents a server lints, kept in step with the files on disk.

A document's settings are the CLI's: the nearest ``pyproject.toml`` with a
``[tool.torchlint]`` table, resolved with ``config.resolve``.  They are cached per
directory together with the state (modification time and size) of every
``pyproject.toml`` on the way up and of the store of what runs confirmed (confirmations.py); a
lookup re-reads them as soon as one of those files changes, appears or disappears, whether or not
the editor reports it.

The project index (TL403's dataset lookups across files) is the CLI's, one per
project root, built lazily; saving or changing a Python file drops the indexes that
hold it, and the next lint builds a fresh one.  Every method is called from the one
thread that lints.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint import config, confirmations
from torchlint.cache_dir import default_dir as default_cache_dir
from torchlint.analysis.model import project_index
from torchlint.files import discover
from torchlint.runner import RecordingIndex

Signature = Optional[Tuple[int, int]]


def _signature(path: str) -> Signature:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


@dataclass(frozen=True)
class DocumentSettings:
    settings: config.Settings
    # The configuration's error, when it has one (the defaults are used meanwhile).
    error: Optional[str] = None


@dataclass
class _Cached:
    candidates: Tuple[str, ...]  # the pyproject.toml files the lookup read or looked for
    signatures: Tuple[Signature, ...]
    found: DocumentSettings


class Projects:
    def __init__(self) -> None:
        self._by_directory: Dict[str, _Cached] = {}
        self._indexes: Dict[str, RecordingIndex] = {}

    def settings_for(self, path: str, folders: Sequence[str] = ()) -> DocumentSettings:
        """The settings of the file ``path`` (which need not exist yet); ``folders``: the workspace's folders,
        the root of files that no configuration governs."""
        directory = config.nearest_existing(os.path.dirname(os.path.abspath(path)))
        cached = self._by_directory.get(directory)
        if cached is not None and tuple(map(_signature, cached.candidates)) == cached.signatures:
            return cached.found
        candidates = _candidates(directory)
        signatures = tuple(map(_signature, candidates))  # taken before reading: a change meanwhile shows next time
        config_path = config.find_config(directory)
        if config_path in candidates:  # the files above the configuration are not read
            kept = candidates.index(config_path) + 1
            candidates, signatures = candidates[:kept], signatures[:kept]
        root = _folder_of(directory, folders) or directory
        # What runs confirmed is read with the settings: a trace run that keeps more is seen at the next lint.
        store = confirmations.store_path(default_cache_dir(config_path, root))
        candidates, signatures = candidates + (store,), signatures + (_signature(store),)
        try:
            found = DocumentSettings(config.resolve(config_path, config.Overrides(), cwd=root))
        except config.ConfigError as exc:
            found = DocumentSettings(config.resolve(None, config.Overrides(), cwd=root), str(exc))
        self._by_directory[directory] = _Cached(candidates, signatures, found)
        return found

    def index_for(self, settings: config.Settings) -> RecordingIndex:
        """The project index of the root of ``settings`` (its configuration's folder, else the workspace folder)."""
        root = os.path.abspath(settings.root)
        index = self._indexes.get(root)
        if index is None:
            index = self._indexes[root] = RecordingIndex(lambda: discover([root], settings)[0])
        return index

    def file_changed(self, path: str) -> str:
        """Forget the indexes that hold the Python file ``path``; returns its module name, which lookups record."""
        absolute = os.path.abspath(path)
        for root in [r for r in self._indexes if absolute.startswith(os.path.join(r, ""))]:
            del self._indexes[root]
        return project_index.module_name(absolute)


def _candidates(directory: str) -> Tuple[str, ...]:
    """Every pyproject.toml that config.find_config may read from ``directory`` up, nearest first."""
    found: List[str] = []
    while True:
        found.append(os.path.join(directory, "pyproject.toml"))
        parent = os.path.dirname(directory)
        if parent == directory:
            return tuple(found)
        directory = parent


def _folder_of(directory: str, folders: Sequence[str]) -> Optional[str]:
    """The innermost workspace folder that holds ``directory``."""
    holding = [f for f in folders if directory == f or directory.startswith(os.path.join(f, ""))]
    return max(holding, key=len) if holding else None
