"""The confidence floor: findings below it are not reported, by the engine, the CLI, JSON, SARIF and the cache.

A test rule of this module reports ``low(x)``, ``medium(x)`` and ``high(x)`` at those levels.
"""
from __future__ import annotations

import json
from typing import Dict

import libcst as cst
import pytest

from torchlint import cli, config, engine, registry
from torchlint.docs import page
from torchlint.rule import Confidence, Rule

TEXT = "low(x)\nmedium(x)\nhigh(x)\n"


class LevelNamed(Rule):
    """
    ## What it does
    A test double: reports a call at the confidence its function is named for.

    ## Why is this bad?
    It is not.

    ## Example
    ```python
    medium(x)
    ```

    ## Use instead
    ```python
    x
    ```

    ## Fix safety
    No fix.
    """

    code = "TL995"
    name = "level-named"
    message = "test double"
    triggers = ("(",)
    confidence_levels = "`low`, `medium` or `high`, as the called function is named."

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value in ("low", "medium", "high"):
            self.report(node, confidence=Confidence(node.func.value))


@pytest.fixture
def levels(monkeypatch):
    rules: Dict = dict(registry.all_rules())
    rules[LevelNamed.code] = LevelNamed
    monkeypatch.setattr(registry, "all_rules", lambda: dict(sorted(rules.items())))


def _lines(floor: Confidence):
    settings = config.Settings(enabled=frozenset({LevelNamed.code}), confidence_floor=floor)
    return [(f.location.line, f.confidence.value) for f in engine.lint_text(TEXT, "m.py", settings).findings]


def test_the_floor_keeps_findings_at_or_above_it(levels):
    assert _lines(Confidence.LOW) == [(1, "low"), (2, "medium"), (3, "high")]
    assert _lines(Confidence.MEDIUM) == [(2, "medium"), (3, "high")]
    assert _lines(Confidence.HIGH) == [(3, "high")]


def test_the_default_floor_is_high():
    # The default shows only the level whose promise (9 in 10 findings real) held on users' code.
    assert config.resolve(None, config.Overrides()).confidence_floor is Confidence.HIGH


def test_config_key_and_command_line(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchlint]\nconfidence-level = "HIGH"\n', encoding="utf-8")
    assert config.resolve(str(pyproject), config.Overrides()).confidence_floor is Confidence.HIGH
    # The command line wins over the file; `all` is `low`, as in bandit.
    assert config.resolve(str(pyproject), config.Overrides(confidence_level="all")).confidence_floor is Confidence.LOW


def test_a_bad_level_names_the_key_and_the_file(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.torchlint]\nconfidence-level = "sure"\n', encoding="utf-8")
    with pytest.raises(config.ConfigError) as error:
        config.resolve(str(pyproject), config.Overrides())
    assert str(pyproject) in str(error.value) and "confidence-level" in str(error.value) and "'sure'" in str(error.value)


def test_the_floor_changes_the_settings_fingerprint():
    low = config.Settings(enabled=frozenset(), confidence_floor=Confidence.LOW)
    high = config.Settings(enabled=frozenset(), confidence_floor=Confidence.HIGH)
    assert low.fingerprint() != high.fingerprint()


def test_cli_json_and_sarif_carry_the_level(levels, tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    path = tmp_path / "m.py"
    path.write_text(TEXT, encoding="utf-8")
    args = ["check", "--select", "TL995", "--no-cache", "--exit-zero", str(path)]
    assert cli.main(args + ["--output-format", "json", "--confidence-level", "low"]) == 0
    assert [item["confidence"] for item in json.loads(capsys.readouterr().out)] == ["low", "medium", "high"]
    assert cli.main(args + ["--output-format", "sarif"]) == 0
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert [(r["properties"]["confidence"], r["rank"]) for r in results] == [("high", 90.0)]
    assert cli.main(args + ["--output-format", "sarif", "--confidence-level", "medium"]) == 0
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert [(r["properties"]["confidence"], r["rank"]) for r in results] == [("medium", 60.0), ("high", 90.0)]


def test_cached_findings_keep_their_level(levels, tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nconfidence-level = "low"\n', encoding="utf-8")
    path = tmp_path / "m.py"
    path.write_text(TEXT, encoding="utf-8")
    args = ["check", "--select", "TL995", "--exit-zero", "--output-format", "json", str(path)]
    runs = []
    for _ in range(2):  # cold, then warm from the cache
        assert cli.main(args) == 0
        runs.append([item["confidence"] for item in json.loads(capsys.readouterr().out)])
    assert runs == [["low", "medium", "high"]] * 2


def test_the_docs_page_explains_the_levels(levels):
    text = page(LevelNamed)
    assert "## Confidence" in text and "as the called function is named" in text and "--confidence-level" in text
    assert "This rule's findings are `high` confidence." in page(registry.rule_by_code_or_name("TL404"))
    # Each page says what a level promises and what users' code showed of it (bench/precision_user.py --write).
    tl401 = page(registry.rule_by_code_or_name("TL401"))
    assert "at least 9 in 10" in tl401 and "Measured on" in tl401 and "this rule `high`" in tl401


def test_a_numerics_fix_below_the_default_level_is_unsafe():
    # The same clamp is applied by --fix on a `high` finding (a sum of ReLU outputs under a division) and offered
    # as unsafe on a `medium` one (a log of a value of unknown sign in a loss): --fix changes values only where
    # the level promises.
    text = (
        "import torch\n\n\n"
        "def loss(x, w, y):\n"
        "    return (x / torch.relu(w).sum()).sum() + torch.log(y).mean()\n"
    )
    settings = config.Settings(enabled=frozenset({"TL102", "TL104"}), confidence_floor=Confidence.LOW)
    found = {f.code: f for f in engine.lint_text(text, "m.py", settings).findings}
    assert found["TL104"].confidence is Confidence.HIGH and found["TL104"].fix.applicability.value == "numerics"
    assert found["TL102"].confidence is Confidence.MEDIUM and found["TL102"].fix.applicability.value == "unsafe"
    fixed = engine.fix_text(text, "m.py", settings).text
    assert "torch.relu(w).sum().clamp_min(" in fixed and "torch.log(y)" in fixed


def test_a_form_the_level_table_moves_below_high_loses_its_numerics_fix(monkeypatch):
    # The decision rule's table (torchlint/data/level_calibration.json) moves a form's findings; one shown below
    # `high` offers its numerics fix as unsafe, as any finding below the default level does.
    from torchlint import rule as rule_module

    text = "import torch\n\nw = torch.tensor(0.0, requires_grad=True)\nroot = torch.sqrt(w)\n"
    settings = config.Settings(enabled=frozenset({"TL101"}), confidence_floor=Confidence.LOW)
    (found,) = engine.lint_text(text, "m.py", settings).findings
    assert found.confidence is Confidence.HIGH and found.fix.applicability.value == "numerics"
    monkeypatch.setattr(rule_module, "measured_level_moves", lambda: {"TL101:high": "medium"})
    (shown,) = engine.lint_text(text, "m.py", settings).findings
    assert shown.confidence is Confidence.MEDIUM and shown.fix.applicability.value == "unsafe"
    assert shown.fix.edits == found.fix.edits
    assert engine.fix_text(text, "m.py", settings).applied == 0
