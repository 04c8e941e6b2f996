"""flake8 adapter: the same engine, findings reported with flake8's 0-based columns.

flake8 owns selection (``--select TL``), ``exclude`` and ``# noqa``; options
such as eps and target-torch-version come from ``[tool.torchlint]`` in the
pyproject.toml nearest to each linted file, and so does the confidence floor
(``confidence-level``). A broken ``[tool.torchlint]``
table is reported as ``TL000`` on line 1 of every file it governs (flake8 has
no other channel for it) and the defaults are used meanwhile.
"""
from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Iterator, List, Optional, Tuple

from torchlint import __version__, collection, config, engine, registry
from torchlint.analysis.model import project_index

RUN_ERROR_CODE = "TL000"


@lru_cache(maxsize=64)
def _settings_for_directory(directory: str) -> Tuple[config.Settings, Optional[str]]:
    """The settings for files in ``directory`` and the configuration error, if any."""
    path = config.find_config(directory)
    error = None
    try:
        base = config.resolve(path, config.Overrides())
    except config.ConfigError as exc:
        error = str(exc)
        base = config.resolve(None, config.Overrides())
    # Every rule runs; flake8's own --select/--ignore decide what is shown.
    settings = config.Settings(
        enabled=frozenset(registry.all_rules()),
        eps=base.eps,
        target_torch_version=base.target_torch_version,
        root=base.root,
        config_path=base.config_path,
        confidence_floor=base.confidence_floor,
    )
    return settings, error


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
            result = engine.lint_text(
                source, self.filename, settings, codes=settings.enabled, honour_noqa=False, tree=self.tree
            )
        for finding in result.findings:
            # flake8 adds 1 to the column a plugin reports; torchlint's columns are 1-based.
            yield finding.location.line, finding.location.column - 1, f"{finding.code} {finding.message}", type(self)
        for diagnostic in result.diagnostics:
            # Parse errors are flake8's own E999; a rule that crashed is ours to report.
            if diagnostic.kind == "internal":
                yield diagnostic.line, diagnostic.column - 1, f"{RUN_ERROR_CODE} {diagnostic.message}", type(self)
