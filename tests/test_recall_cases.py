"""Real bug reports the product is recorded as catching stay caught, and recorded safe look-alikes stay silent.

The labelled code lives outside the repository (../shared/bugs: other people's code, read from there);
``bench/results/recall_cases.tsv`` records, per labelled site, whether the build found it when it was
last recorded (``python bench/recall.py --record``).  Sites added to ../shared/bugs later are not
judged here until they are recorded.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUGS = ROOT.parent / "shared" / "bugs"

# What users are shown: the measured level table on (tests/conftest.py).
pytestmark = [
    pytest.mark.usefixtures("measured_levels_for_module"),
    pytest.mark.skipif(not (BUGS / "score.py").is_file(), reason="../shared/bugs is not beside the project"),
]


@pytest.fixture(scope="module")
def recall():
    spec = importlib.util.spec_from_file_location("recall_bench", ROOT / "bench" / "recall.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


@pytest.fixture(scope="module")
def current(recall):
    return {(row["file"], row["line"], row["family"], row["kind"]): row for row in recall.bug_records(BUGS)}


def _recorded(recall, found: str, kind: str):
    return [row for row in recall.read_record() if row["found"] == found and row["kind"] == kind]


def test_the_record_is_not_empty(recall):
    assert _recorded(recall, "yes", "expect"), "no bug-report site is recorded as found"


def test_recorded_bugs_are_still_found(recall, current):
    lost = []
    for row in _recorded(recall, "yes", "expect"):
        now = current.get((row["file"], row["line"], row["family"], row["kind"]))
        if now is None or now["text"] != row["text"]:
            lost.append(f"{row['file']}:{row['line']} changed in ../shared/bugs: record again")
        elif now["found"] != "yes":
            lost.append(f"{row['file']}:{row['line']} {row['family']} is no longer found: {row['text']}")
    assert not lost, "\n".join(lost)


def test_recorded_safe_lookalikes_stay_silent(recall, current):
    loud = []
    for row in _recorded(recall, "no", "safe"):
        now = current.get((row["file"], row["line"], row["family"], row["kind"]))
        if now is not None and now["text"] == row["text"] and now["found"] == "yes":
            loud.append(f"{row['file']}:{row['line']} {row['family']} is now reported: {row['text']}")
    assert not loud, "\n".join(loud)
