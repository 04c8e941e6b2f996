"""flake8 adapter: the same engine, findings reported with flake8's 0-based columns.

flake8 owns selection (``--select TL``) and ``# noqa``; options such as eps
and target-torch-version come from ``[tool.torchlint]`` in the nearest
pyproject.toml.
"""
from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Iterator, List, Tuple

from torchlint import __version__, config, engine, registry


@lru_cache(maxsize=64)
def _settings_for_directory(directory: str) -> config.Settings:
    path = config.find_config(directory)
    try:
        base = config.resolve(path, config.Overrides())
    except config.ConfigError:
        # flake8 has no channel for configuration errors; the CLI reports them.
        base = config.resolve(None, config.Overrides())
    # Every rule runs; flake8's own --select/--ignore decide what is shown.
    return config.Settings(
        enabled=frozenset(registry.all_rules()),
        eps=base.eps,
        target_torch_version=base.target_torch_version,
        root=base.root,
        config_path=base.config_path,
    )


class TorchlintChecker:
    name = "torchlint"
    version = __version__

    def __init__(self, tree: ast.AST, filename: str, lines: List[str]) -> None:
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        directory = os.path.dirname(os.path.abspath(self.filename)) if self.filename not in ("-", "stdin") else os.getcwd()
        settings = _settings_for_directory(directory)
        result = engine.lint_text(source, self.filename, settings, codes=settings.enabled, honour_noqa=False)
        for finding in result.findings:
            # flake8 adds 1 to the column a plugin reports.
            yield finding.location.line, finding.location.column - 1, f"{finding.code} {finding.message}", type(self)
        for diagnostic in result.diagnostics:
            if diagnostic.kind == "internal":
                yield diagnostic.line, diagnostic.column - 1, f"TL000 {diagnostic.message}", type(self)
