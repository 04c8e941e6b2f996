import os
import sys
from pathlib import Path

import pytest

# tests/ holds shared helpers (fixture_support) imported by test modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The measured level table (torchlint/data/level_calibration.json) is data every calibration draw rewrites.
# Tests of the product's mechanics see findings at the level the analysis finds them; the tests about what
# users are shown turn the table on with the ``measured_levels`` fixture (or ``measured_levels=True`` for
# the console script).
LEVEL_TABLE_VARIABLE = "TORCHLINT_LEVEL_TABLE"
os.environ[LEVEL_TABLE_VARIABLE] = "off"


def _with_measured_levels():
    from torchlint.rule import measured_level_moves

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(LEVEL_TABLE_VARIABLE)
        measured_level_moves.cache_clear()
        yield
    measured_level_moves.cache_clear()


@pytest.fixture
def measured_levels():
    yield from _with_measured_levels()


@pytest.fixture(scope="module")
def measured_levels_for_module():
    yield from _with_measured_levels()


# Modules that run torchlint end to end in subprocesses (the language server, traced programs, pre-commit,
# flake8) or over generated programs and whole corpora, and test_bad_input (unreadable trees, a timeout): most of
# the suite's time on 2 cores. Their tests are marked `slow`; `python -m pytest -m "not slow"` runs the rest
# (rules, fixtures, analyses, runtime proofs, the command line run in process by tests/cli_support.py) in under
# two minutes. CI runs everything.
END_TO_END_MODULES = frozenset({
    "test_bad_input", "test_flake8", "test_generated", "test_modes", "test_precommit", "test_prepass", "test_renaming",
    "test_server", "test_server_neovim", "test_server_notebooks", "test_statement_positions", "test_trace",
    "test_trace_first_hour", "test_walk_order",
})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in END_TO_END_MODULES:
            item.add_marker(pytest.mark.slow)
