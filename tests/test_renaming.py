"""No finding rests on a name alone: renaming every identifier a fixture binds moves a finding by at most one
level, and never makes one appear or vanish (DESIGN.md; analysis/model/conventions.py).

Each checker fixture is linted as written and with every name it binds replaced by ``v1``, ``v2``, ...
(tests/renaming.py; framework hooks, ``self``, imported names and torch's own attributes stay), in a file
called ``m.py``. Findings are matched by line and code. The differences still known are listed, with why,
in ``tests/data/renaming_known_differences.tsv``: reviewed data, not output recorded from the tool. A new
difference fails the test, and so does a listed one that is gone (take it off the list).
"""
from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from fixture_support import FIXTURES, all_rules_settings, checker_files, checker_target, python_parses
from renaming import rename_identifiers, renamed_path
from torchlint import engine

# What users are shown: the measured level table on (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("measured_levels")

ROOT = Path(__file__).resolve().parent.parent
KNOWN = Path(__file__).resolve().parent / "data" / "renaming_known_differences.tsv"

Key = Tuple[str, int, str]  # (fixture path under fixtures/, line, code)


def _levels(findings) -> Dict[Tuple[int, str], List[int]]:
    found: Dict[Tuple[int, str], List[int]] = defaultdict(list)
    for finding in findings:
        found[(finding.location.line, finding.code)].append(finding.confidence.rank)
    return {key: sorted(ranks) for key, ranks in found.items()}


def differences(text: str, path: str) -> Set[Tuple[int, str]]:
    """(line, code) of the findings that appear, vanish or move more than one level when ``text`` is renamed."""
    settings = all_rules_settings(checker_target(text))
    before = _levels(engine.lint_text(text, path, settings).findings)
    after = _levels(engine.lint_text(rename_identifiers(text), renamed_path(path), settings).findings)
    changed = set()
    for key in set(before) | set(after):
        first, second = before.get(key, []), after.get(key, [])
        if len(first) != len(second) or any(abs(a - b) > 1 for a, b in zip(first, second)):
            changed.add(key)
    return changed


def known_differences() -> Dict[Key, str]:
    with KNOWN.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return {(row["fixture"], int(row["line"]), row["code"]): row["why"] for row in rows}


@pytest.fixture(scope="module")
def known() -> Dict[Key, str]:
    return known_differences()


# The renaming tool parses with ``ast``: a fixture Python cannot parse (``async=``) cannot be renamed.
@pytest.mark.parametrize("path", list(filter(python_parses, checker_files())), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_renamed_fixture_keeps_its_findings(path, known):
    relative = str(path.relative_to(FIXTURES))
    found = {(relative, line, code) for line, code in differences(path.read_text(encoding="utf-8"), str(path))}
    expected = {key for key in known if key[0] == relative}
    assert found - expected == set(), f"findings that a name alone moves: {sorted(found - expected)}"
    assert expected - found == set(), f"listed in {KNOWN.name} but no longer different: {sorted(expected - found)}"


def test_every_known_difference_says_why(known):
    assert all(why.strip() for why in known.values())


def test_the_renaming_is_consistent():
    source = (
        "import torch\nimport torch.nn.functional as F\n\n\nclass Net(torch.nn.Module):\n    eps = 1e-6\n\n"
        "    def helper(self, x, scale=1.0):\n        return torch.load(x) * scale / self.eps\n\n"
        "    def forward(self, x):\n        return F.softmax(self.helper(x, scale=2.0), -1)\n"
    )
    renamed = rename_identifiers(source)
    assert "torch.load(" in renamed  # an imported module's attribute is the library's
    assert "import torch.nn.functional as v" in renamed  # an alias is the file's own name
    assert "def forward(self" in renamed  # a framework hook keeps its name
    assert "helper" not in renamed and "eps" not in renamed and "scale" not in renamed
    compile(renamed, "m.py", "exec")
    namespace: dict = {}
    exec(compile(renamed, "m.py", "exec"), namespace)  # the renamed module still defines a working class
    assert any(isinstance(value, type) for name, value in namespace.items() if name.startswith("v"))
