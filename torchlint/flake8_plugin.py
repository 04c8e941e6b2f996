"""flake8 adapter: the same engine, findings reported with flake8's 0-based columns.

flake8 owns ``exclude`` and ``# noqa``, and its own ``--select``/``--ignore``
filter what it shows.  What torchlint reports to it comes from
``[tool.torchlint]`` in the pyproject.toml nearest to each linted file, read
by ``config.resolve`` as the CLI reads it: eps, target-torch-version, the
confidence floor (``confidence-level``), the rules ``select``,
``extend-select`` and ``ignore`` leave on, and ``per-file-ignores`` for the
file at hand (``Settings.codes_for``, the engine's own choice when it is given
no codes).  So one configuration gives one result through either door.  With
no ``[tool.torchlint]`` table every rule runs and flake8 alone selects.  A
broken table is reported as ``TL000`` on line 1 of every file it governs
(flake8 has no other channel for it) and every rule runs with the defaults
meanwhile.
"""
from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Iterator, List, Optional, Tuple

from torchlint import collection, config, engine
from torchlint.version import __version__
from torchlint.analysis.model import project_index

RUN_ERROR_CODE = "TL000"


# Without a configuration the plugin runs every rule: flake8's own --select/--ignore decide what is shown.
_EVERY_RULE = config.Overrides(select=["ALL"])


@lru_cache(maxsize=64)
def _settings_for_directory(directory: str) -> Tuple[config.Settings, Optional[str]]:
    """The settings for files in ``directory`` and the configuration error, if any.

    A ``[tool.torchlint]`` table is resolved exactly as the CLI resolves it (no command-line overrides),
    so its ``select``, ``extend-select``, ``ignore`` and ``per-file-ignores`` hold here too.
    """
    path = config.find_config(directory)
    if path is None:
        return config.resolve(None, _EVERY_RULE), None
    try:
        return config.resolve(path, config.Overrides()), None
    except config.ConfigError as exc:
        return config.resolve(None, _EVERY_RULE), str(exc)


@lru_cache(maxsize=8)
def _project_for_root(root: str) -> project_index.ProjectIndex:
    """One index per project root and flake8 process, walked only when a rule asks across files (TL403)."""
    return project_index.ProjectIndex(lambda: project_index.files_under(root))


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: List[str]) -> None:
        self.tree = tree if isinstance(tree, ast.Module) else None
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        if self.filename in ("-", "stdin"):
            directory = os.getcwd()
        else:
            directory = os.path.dirname(os.path.abspath(self.filename))
        settings, error = _settings_for_directory(directory)
        if error is not None:
            yield 1, 0, f"{RUN_ERROR_CODE} torchlint configuration error: {error}", type(self)
        with project_index.activated(_project_for_root(os.path.abspath(settings.root))), collection.collecting_less():
            # No ``codes``: the engine takes ``settings.codes_for(path)``, the enabled rules less the
            # per-file-ignores that match this file, as in the CLI.
            result = engine.lint_text(source, self.filename, settings, honour_noqa=False, tree=self.tree)
        for finding in result.findings:
            # flake8 adds 1 to the column a plugin reports; torchlint's columns are 1-based.
            yield finding.location.line, finding.location.column - 1, f"{finding.code} {finding.message}", type(self)
        for diagnostic in result.diagnostics:
            # Parse errors are flake8's own E999; a rule that crashed is ours to report.
            if diagnostic.kind == "internal":
                yield diagnostic.line, diagnostic.column - 1, f"{RUN_ERROR_CODE} {diagnostic.message}", type(self)
