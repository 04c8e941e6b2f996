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
