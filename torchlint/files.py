"""Which files a run looks at."""
from __future__ import annotations

import fnmatch
import os
import re
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from torchlint.config import Settings
from torchlint.rule import Diagnostic
from torchlint.source import NOTEBOOK_SUFFIX

PYTHON_SUFFIXES = (".py", ".pyi")
# What a directory walk checks: Python files and Jupyter notebooks.
CHECKED_SUFFIXES = PYTHON_SUFFIXES + (NOTEBOOK_SUFFIX,)


def discover(paths: Sequence[str], settings: Settings, force_exclude: bool = False) -> Tuple[List[str], List[Diagnostic]]:
    """Python files and notebooks under ``paths``, in a stable order, and a diagnostic for each path that does not exist.

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
            found = iter(()) if force_exclude and settings.is_excluded(path) else _walk(path, settings, problems)
        elif force_exclude and settings.is_excluded(path):
            found = iter(())
        else:
            found = ((path, os.path.realpath(path)),)
        for file, key in found:
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files, problems


def project_files(files: Sequence[str], paths: Sequence[str], settings: Settings) -> Callable[[], List[str]]:
    """The files of the CLI's project index: the run's files plus the project's other modules, walked on the first lookup.

    The project is the folder of the configuration file when there is one,
    else the folder the given paths share: a run over a few changed files
    (pre-commit) still finds the dataset class in a module it was not given.
    Exclude patterns apply as for the run.
    """
    if settings.config_path:
        root = os.path.dirname(os.path.abspath(settings.config_path))
    else:
        existing = [os.path.abspath(p) for p in paths if os.path.exists(p)]
        root = os.path.commonpath(existing) if existing else os.getcwd()
        if os.path.isfile(root):
            root = os.path.dirname(root)

    # Checking the project folder itself (`torchlint check .` next to the config, or one folder without one): the
    # run's files are the project's, and a second walk of the tree would find the same ones.
    walked = len(paths) == 1 and os.path.isdir(paths[0]) and os.path.abspath(paths[0]) == root and not settings.is_excluded(paths[0])

    def every_file() -> List[str]:
        if walked:
            return list(files)
        found, _ = discover([root], settings)
        return list(files) + found

    return every_file


class _Excluder:
    """``Settings.is_excluded`` for the paths of one directory walk, without its per-path ``abspath``/``relpath``.

    Same answers (tests/test_cache_files.py compares them on awkward trees):
    a pattern matches the path from the root, the absolute path, or (without
    a ``/``) any one name on the path.  A walk only enters directories that
    are not excluded, so the names above a file were judged once, with its
    directory.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = os.path.abspath(settings.root)
        patterns = [p.rstrip("/") for p in settings.exclude]
        self.whole = _any_of(patterns)
        self.under = _any_of([p + "/*" for p in patterns if "/" in p])
        self.name = _any_of([p for p in patterns if "/" not in p])

    def directory(self, absolute: str) -> Tuple[str, str, bool, bool]:
        """(absolute prefix, relative prefix, a name on the way already matches, outside the root) for the entries of ``absolute``."""
        relative = os.path.relpath(absolute, self.root)
        if os.sep != "/":
            relative, absolute = relative.replace(os.sep, "/"), absolute.replace(os.sep, "/")
        names = relative.split("/") if not relative.startswith("..") else absolute.split("/")
        above = relative != "." and any(_matches(self.name, part) for part in names)
        absolute_prefix = absolute if absolute.endswith("/") else absolute + "/"
        return absolute_prefix, ("" if relative == "." else relative + "/"), above, relative.startswith("..")

    def excluded(self, name: str, where: Tuple[str, str, bool, bool]) -> bool:
        absolute_prefix, relative_prefix, above, outside = where
        if (outside and absolute_prefix + name == self.root) or (not relative_prefix and name.startswith("..")):
            # The root seen from above (its names are no longer on its relative path), or a name that reads as
            # a parent: the exact rule.
            return self.settings.is_excluded(absolute_prefix + name)
        if above:
            return True
        relative = relative_prefix + name
        return (
            _matches(self.name, name)
            or _matches(self.whole, relative)
            or _matches(self.whole, absolute_prefix + name)
            or _matches(self.under, relative)
        )


def _any_of(patterns: Sequence[str]) -> "Optional[re.Pattern[str]]":
    # fnmatch's own translation, so '*' crosses '/' exactly as in config.path_matches.
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None


def _matches(pattern: "Optional[re.Pattern[str]]", text: str) -> bool:
    return pattern is not None and pattern.match(text) is not None


def _walk(root: str, settings: Settings, problems: Optional[List[Diagnostic]] = None) -> Iterator[Tuple[str, str]]:
    """(path, real path) of the Python files and notebooks under ``root``: os.walk's order, one scandir per directory.

    The real path of a file that is not a symlink is its directory's plus its
    name, so only symlinks pay a ``realpath``. A directory that cannot be read is
    reported in ``problems`` (when given), and the walk goes on.
    """
    excluder = _Excluder(settings)
    pending = [(root, os.path.abspath(root), os.path.realpath(root))]
    while pending:
        directory, absolute, real = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = list(listing)
        except OSError as exc:
            if problems is not None:
                problems.append(Diagnostic(directory, f"cannot read folder: {exc.strerror or exc}", kind="io"))
            continue
        where = excluder.directory(absolute)
        subdirs, names = [], []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            (subdirs if is_dir else names).append(entry)
        real_prefix = real if real.endswith(os.sep) else real + os.sep
        for entry in sorted(names, key=lambda e: e.name):
            name = entry.name
            if name.endswith(CHECKED_SUFFIXES) and not excluder.excluded(name, where):
                path = os.path.join(directory, name)
                yield path, (os.path.realpath(path) if entry.is_symlink() else real_prefix + name)
        children = []
        for entry in sorted(subdirs, key=lambda e: e.name):
            if excluder.excluded(entry.name, where) or entry.is_symlink():
                continue  # excluded, or a link (os.walk does not follow links either)
            children.append((os.path.join(directory, entry.name), where[0] + entry.name, real_prefix + entry.name))
        pending.extend(reversed(children))
