"""Which files a run looks at."""
from __future__ import annotations

import os
from typing import Iterator, List, Sequence, Tuple

from torchlint.config import Settings
from torchlint.rule import Diagnostic

PYTHON_SUFFIXES = (".py", ".pyi")


def discover(paths: Sequence[str], settings: Settings, force_exclude: bool = False) -> Tuple[List[str], List[Diagnostic]]:
    """Python files under ``paths``, in a stable order, and a diagnostic for each path that does not exist.

    Files named on the command line are linted even when excluded, unless
    ``force_exclude`` (what pre-commit, which passes every staged file, wants).
    Directories are walked without following symlinks, so a link loop cannot
    hang the run.
    """
    files: List[str] = []
    problems: List[Diagnostic] = []
    seen = set()
    for path in paths:
        if not os.path.lexists(path):
            problems.append(Diagnostic(path, f"no such file or directory: {path}", kind="io"))
            continue
        if os.path.isdir(path):
            found = iter(()) if force_exclude and settings.is_excluded(path) else _walk(path, settings)
        elif force_exclude and settings.is_excluded(path):
            found = iter(())
        else:
            found = iter((path,))
        for file in found:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files, problems


def _walk(root: str, settings: Settings) -> Iterator[str]:
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not settings.is_excluded(os.path.join(directory, d)))
        for name in sorted(names):
            if name.endswith(PYTHON_SUFFIXES):
                path = os.path.join(directory, name)
                if not settings.is_excluded(path):
                    yield path
