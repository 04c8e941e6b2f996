"""``[tool.torchlint]`` in pyproject.toml, merged with the command line.

The nearest pyproject.toml with a ``[tool.torchlint]`` table, searched from
the directory of the linted paths upwards, is the configuration (or the
file given with ``--config``).  Every key is checked: an unknown key or a
value of the wrong type is an error that names the key and the file.
"""
from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from torchlint import confirmations, registry
from torchlint.cache_dir import default_dir as default_cache_dir
from torchlint.confirmations import Confirmation
from torchlint.rule import DEFAULT_CONFIDENCE_FLOOR, Confidence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11
    import tomli as tomllib

DEFAULT_EPS = 1e-6
DEFAULT_EXCLUDE: Tuple[str, ...] = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "*.egg",
    "__pycache__", "__pypackages__", "build", "dist", "node_modules", "site-packages",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".torchlint_cache", ".ipynb_checkpoints",
)
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    enabled: FrozenSet[str]
    per_file_ignores: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    exclude: Tuple[str, ...] = DEFAULT_EXCLUDE
    eps: float = DEFAULT_EPS
    # None means "the newest torch": rules take today's defaults.
    target_torch_version: Optional[Tuple[int, int]] = None
    unsafe_fixes: bool = False
    root: str = "."
    config_path: Optional[str] = None
    # Findings below this confidence are not reported (``confidence-level``).
    confidence_floor: Confidence = DEFAULT_CONFIDENCE_FLOOR
    # Codes whose findings are reported without their fix (``fixable``/``unfixable``, as in ruff).
    unfixable: FrozenSet[str] = frozenset()
    # What runs confirmed (``torchlint trace``): such findings are reported at high (confirmations.py).
    confirmed: Tuple[Confirmation, ...] = ()

    def codes_for(self, path: str) -> FrozenSet[str]:
        """The enabled codes minus those that per-file-ignores removes for ``path``."""
        codes = self.enabled
        if self.per_file_ignores:
            for pattern, ignored in self.per_file_ignores:
                if path_matches(path, pattern, self.root):
                    codes = codes - ignored
        return codes

    def is_excluded(self, path: str) -> bool:
        return any(path_matches(path, pattern, self.root) for pattern in self.exclude)

    def fingerprint(self) -> str:
        """Everything that changes findings or fixes, for caches."""
        return repr(
            (sorted(self.enabled), self.per_file_ignores, self.eps, self.target_torch_version, self.confidence_floor.value,
             sorted(self.unfixable), self.confirmed)
        )

    def confirmed_in(self, path: str) -> List[Confirmation]:
        """The confirmations of the file ``path``."""
        return confirmations.for_file(self.confirmed, path, self.root)


@dataclass
class Overrides:
    """What the command line says; None leaves the config's value."""

    select: Optional[List[str]] = None
    extend_select: List[str] = field(default_factory=list)
    ignore: List[str] = field(default_factory=list)
    unsafe_fixes: Optional[bool] = None
    confidence_level: Optional[str] = None
    target_torch_version: Optional[str] = None  # "2.4"
    fixable: Optional[List[str]] = None
    unfixable: List[str] = field(default_factory=list)


CONFIDENCE_LEVELS = ("low", "medium", "high")


def parse_confidence(value: object, where: str) -> Confidence:
    """``low``/``medium``/``high`` (any case; ``all`` is ``low``, as in bandit), else a ConfigError naming ``where``."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text == "all":
        text = "low"
    if text not in CONFIDENCE_LEVELS:
        raise ConfigError(f"{where} must be one of {', '.join(CONFIDENCE_LEVELS)}, got {value!r}")
    return Confidence(text)


def path_matches(path: str, pattern: str, root: str) -> bool:
    """ruff/flake8-style: a pattern matches a file's name, any directory name on its path, or its path from the root."""
    pattern = pattern.rstrip("/")
    absolute = os.path.abspath(path)
    relative = os.path.relpath(absolute, os.path.abspath(root)).replace(os.sep, "/")
    if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(absolute.replace(os.sep, "/"), pattern):
        return True
    if "/" in pattern:
        return fnmatch.fnmatchcase(relative, pattern + "/*")
    parts = relative.split("/") if not relative.startswith("..") else absolute.replace(os.sep, "/").split("/")
    return any(fnmatch.fnmatchcase(part, pattern) for part in parts)


def find_config(start: str) -> Optional[str]:
    """The nearest pyproject.toml with a [tool.torchlint] table, from ``start`` upwards."""
    directory = os.path.abspath(start)
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)
    while True:
        candidate = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                with open(candidate, "rb") as handle:
                    data = tomllib.load(handle)
            except (OSError, tomllib.TOMLDecodeError):
                # A broken pyproject.toml without our table is not ours to judge;
                # one that mentions it is reported when loaded.
                if _mentions_torchlint(candidate):
                    return candidate
            else:
                if "torchlint" in data.get("tool", {}):
                    return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _mentions_torchlint(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"[tool.torchlint" in handle.read()
    except OSError:
        return False


def load_table(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if os.path.basename(path) == "pyproject.toml" or "tool" in data:
        table = data.get("tool", {}).get("torchlint", {})
    else:  # a dedicated file given with --config: the table may be at the top level
        table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.torchlint] must be a table")
    return table


_KEYS = (
    "select", "ignore", "extend-select", "per-file-ignores", "exclude", "extend-exclude", "eps",
    "target-torch-version", "unsafe-fixes", "confidence-level", "fixable", "unfixable",
)


def _string_list(table: Dict[str, Any], key: str, path: str) -> Optional[List[str]]:
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: [tool.torchlint] {key} must be a list of strings, got {value!r}")
    return list(value)


def _selectors(values: Iterable[str], where: str) -> FrozenSet[str]:
    try:
        return registry.expand_selectors(values)
    except registry.UnknownSelector as exc:
        raise ConfigError(f"{where}: {exc}") from None


def resolve(config_path: Optional[str], overrides: Overrides, cwd: Optional[str] = None) -> Settings:
    table: Dict[str, Any] = {}
    root = cwd or os.getcwd()
    if config_path is not None:
        table = load_table(config_path)
        root = os.path.dirname(os.path.abspath(config_path))
        unknown = sorted(set(table) - set(_KEYS))
        if unknown:
            close = difflib.get_close_matches(unknown[0].replace("_", "-"), _KEYS, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ConfigError(
                f"{config_path}: unknown key {unknown[0]!r} in [tool.torchlint]{hint} (known keys: {', '.join(_KEYS)})"
            )
    where = f"{config_path}: [tool.torchlint]" if config_path else "configuration"

    select = _string_list(table, "select", config_path or "")
    enabled = _selectors(select, f"{where} select") if select is not None else registry.default_codes()
    enabled |= _selectors(_string_list(table, "extend-select", config_path or "") or [], f"{where} extend-select")
    enabled -= _selectors(_string_list(table, "ignore", config_path or "") or [], f"{where} ignore")
    # The command line refines the configuration, as in ruff.
    if overrides.select is not None:
        enabled = _selectors(overrides.select, "--select")
    enabled |= _selectors(overrides.extend_select, "--extend-select")
    enabled -= _selectors(overrides.ignore, "--ignore")

    per_file: List[Tuple[str, FrozenSet[str]]] = []
    raw_per_file = table.get("per-file-ignores", {})
    if not isinstance(raw_per_file, dict):
        raise ConfigError(f"{config_path}: [tool.torchlint] per-file-ignores must be a table of glob = [codes], got {raw_per_file!r}")
    for pattern, codes in raw_per_file.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f"{config_path}: [tool.torchlint] per-file-ignores {pattern!r} must be a list of strings, got {codes!r}")
        per_file.append((pattern, _selectors(codes, f"{where} per-file-ignores {pattern!r}")))

    exclude = _string_list(table, "exclude", config_path or "")
    excludes = tuple(exclude) if exclude is not None else DEFAULT_EXCLUDE
    excludes += tuple(_string_list(table, "extend-exclude", config_path or "") or [])

    eps = table.get("eps", DEFAULT_EPS)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (0 < eps < 1):
        raise ConfigError(f"{config_path}: [tool.torchlint] eps must be a number between 0 and 1, got {eps!r}")

    version = None
    if "target-torch-version" in table:
        raw = table["target-torch-version"]
        where_version = f"{config_path}: [tool.torchlint] target-torch-version"
        match = _VERSION.match(raw) if isinstance(raw, str) else None
        if match is None:
            raise ConfigError(f"{where_version} must be a string such as \"2.4\", got {raw!r}{_newest_known_note()}")
        version = _known_version(match, where_version, repr(raw))
    if overrides.target_torch_version is not None:
        raw = overrides.target_torch_version
        match = _VERSION.match(raw.strip())
        if match is None:
            raise ConfigError(f"--target-torch-version must be a version such as 2.4, got {raw!r}{_newest_known_note()}")
        version = _known_version(match, "--target-torch-version", raw.strip())

    unsafe = table.get("unsafe-fixes", False)
    if not isinstance(unsafe, bool):
        raise ConfigError(f"{config_path}: [tool.torchlint] unsafe-fixes must be true or false, got {unsafe!r}")
    if overrides.unsafe_fixes is not None:
        unsafe = overrides.unsafe_fixes

    floor = DEFAULT_CONFIDENCE_FLOOR
    if "confidence-level" in table:
        floor = parse_confidence(table["confidence-level"], f"{config_path}: [tool.torchlint] confidence-level")
    if overrides.confidence_level is not None:
        floor = parse_confidence(overrides.confidence_level, "--confidence-level")

    # Every code is fixable unless ``fixable`` narrows it; ``unfixable`` takes codes out (the command line's
    # --fixable replaces the configured list, --unfixable adds to it).
    fixable_list = _string_list(table, "fixable", config_path or "")
    if overrides.fixable is not None:
        fixable_list, where_fixable = overrides.fixable, "--fixable"
    else:
        where_fixable = f"{where} fixable"
    fixable = _selectors(fixable_list, where_fixable) if fixable_list is not None else registry.expand_selectors(["ALL"])
    fixable -= _selectors(_string_list(table, "unfixable", config_path or "") or [], f"{where} unfixable")
    fixable -= _selectors(overrides.unfixable, "--unfixable")
    unfixable = registry.expand_selectors(["ALL"]) - fixable

    return Settings(
        enabled=frozenset(enabled),
        per_file_ignores=tuple(per_file),
        exclude=excludes,
        eps=float(eps),
        target_torch_version=version,
        unsafe_fixes=unsafe,
        root=root,
        config_path=config_path,
        confidence_floor=floor,
        unfixable=frozenset(unfixable),
        confirmed=confirmations.load(default_cache_dir(config_path, root)),
    )


@lru_cache(maxsize=1)
def newest_known_torch() -> Tuple[int, int]:
    """The newest torch release torchlint's API tables describe: the last of ``versions`` in torch_api.json.

    Loading that table (api_table.VERSIONS) costs about 40 ms, which a warm cached run never pays otherwise;
    the list sits in the first few hundred bytes of the file, before ``apis``, so those are all that is read.
    A file laid out otherwise is loaded whole.
    """
    from importlib import resources

    with resources.files("torchlint").joinpath("data/torch_api.json").open("rb") as handle:
        newest = newest_in_table_head(handle.read(16384).decode("utf-8", "replace"))
    if newest is not None:
        return newest
    from torchlint.analysis.api import api_table

    return tuple(api_table.VERSIONS[-1])  # type: ignore[return-value]


def newest_in_table_head(head: str) -> Optional[Tuple[int, int]]:
    """The last release of the top-level ``versions`` list in the start of torch_api.json; None if it is not
    there, before ``apis``, whole."""
    start = head.find('"versions":')
    if not 0 <= start < head.find('"apis":'):
        return None
    try:
        versions, _ = json.JSONDecoder().raw_decode(head, head.index("[", start))
        major, minor = str(versions[-1]).split(".")
        return int(major), int(minor)
    except (ValueError, IndexError, TypeError):
        return None


def _newest_known_note() -> str:
    major, minor = newest_known_torch()
    return f" (the newest torch release torchlint knows is {major}.{minor})"


def _known_version(match: "re.Match[str]", where: str, shown: str) -> Tuple[int, int]:
    """The (major, minor) of a matched version; a ConfigError naming ``where`` when it is newer than the tables.

    Older releases than the tables' first are fine: the rules' own records reach back further.
    """
    version = (int(match.group(1)), int(match.group(2)))
    newest = newest_known_torch()
    if version > newest:
        newest_text = f"{newest[0]}.{newest[1]}"
        raise ConfigError(
            f"{where} {shown} is newer than torch {newest_text}, the newest release torchlint's API tables know; "
            f"give {newest_text} or older, or leave it out to check for {newest_text}"
        )
    return version


def locate(paths: Sequence[str], config_file: Optional[str] = None) -> Optional[str]:
    """The configuration file of a run over ``paths``: ``config_file``, else the nearest one (None: defaults)."""
    if config_file is None:
        # A path that does not exist (a --stdin-filename, a typo reported later) still
        # says where to look: its nearest existing folder.
        existing = [nearest_existing(p) for p in paths if p != "-"]
        start = os.path.commonpath(existing) if existing else os.getcwd()
        config_file = find_config(start)
    return config_file


def discover_and_resolve(paths: Sequence[str], overrides: Overrides, config_file: Optional[str] = None) -> Settings:
    return resolve(locate(paths, config_file), overrides)


def nearest_existing(path: str) -> str:
    """``path``, or the nearest folder above it that exists (a file not yet saved, a typo)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path
