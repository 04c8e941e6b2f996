"""Checker fixtures (`# expect:` annotations) and codemod fixtures (in -> out, fixpoint)."""
from __future__ import annotations

import pytest

from fixture_support import (
    FIXTURES,
    all_rules_settings,
    checker_files,
    checker_target,
    codemod_options,
    codemod_pairs,
    expected_findings,
    run_codemod,
    settings_for,
    unmatched,
)
from torchlint import engine, registry

# What users are shown: the measured level table on (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("measured_levels")


@pytest.mark.parametrize("path", checker_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_checker_fixture(path):
    text = path.read_text(encoding="utf-8")
    result = engine.lint_text(text, str(path), all_rules_settings(checker_target(text)))
    assert result.diagnostics == []
    expected = expected_findings(text)
    if path.name.startswith("good_"):
        assert not expected, "good_ fixtures carry no expectations"
    missing, unexpected = unmatched(expected, result.findings)
    assert not missing and not unexpected, f"missing: {missing}; unexpected: {unexpected}"


@pytest.mark.parametrize("pair", codemod_pairs(), ids=lambda p: str(p[0].relative_to(FIXTURES)))
def test_codemod_fixture(pair):
    source_path, expected_path = pair
    result = run_codemod(source_path)
    assert result.result.diagnostics == []
    assert result.applied > 0, "a codemod fixture must exercise at least one fix"
    assert result.text == expected_path.read_text(encoding="utf-8")

    # The output is a fixpoint: running the same codemod on it changes nothing.
    options = codemod_options(source_path, source_path.read_text(encoding="utf-8"))
    settings = settings_for(registry.expand_selectors(options["select"]), options["target"], options["level"])
    again = engine.fix_text(result.text, str(expected_path), settings, unsafe=bool(options["unsafe"]))
    assert again.applied == 0
    assert again.text == result.text


def test_every_rule_has_fixtures():
    for code, rule in registry.all_rules().items():
        folder = FIXTURES / code
        checker = list((folder / "checker").glob("*.py"))
        assert any(p.name.startswith("good_") for p in checker), f"{code} needs good-code traps"
        assert any(not p.name.startswith("good_") for p in checker), f"{code} needs bad-code cases"
        if rule.fix_applicability is not None:
            assert list((folder / "fix").glob("*.in.py")), f"{code} has a fix but no codemod fixture"
