"""The README is the product's front page: its commands and rules table must be the real ones."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from torchlint import registry
from torchlint.docs import help_uri

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _shell_blocks(text: str):
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_readme_opens_with_the_run_and_test_commands():
    blocks = _shell_blocks(README)
    run, test = blocks[0].strip(), blocks[1].strip()
    assert "torchlint check examples/" in run and "pip install ." in run
    assert "pytest" in test and '".[test]"' in test


def test_ci_runs_exactly_the_readme_test_command():
    test_command = _shell_blocks(README)[1].strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"TEST_COMMAND='{test_command}'" in ci


def test_rules_table_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "update_readme.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_rule_has_the_anchor_its_help_uri_points_at():
    for rule in registry.all_rules().values():
        anchor = help_uri(rule).rsplit("#", 1)[1]
        assert f'<a id="{anchor}"></a>' in README, rule.code


def test_examples_show_findings():
    result = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "--output-format", "json", str(ROOT / "examples")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 1, result.stderr
    assert "TL201" in result.stdout and "TL401" in result.stdout
