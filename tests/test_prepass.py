"""The ``ast`` pre-pass: it never changes a finding, and it really leaves code out."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from fixture_support import FIXTURES, all_rules_settings, checker_target
from torchlint import engine, prepass, registry

ALL_FIXTURES = sorted(FIXTURES.glob("*/*/*.py"))


def _signature(result: engine.LintResult):
    findings = [(f.code, f.location, f.message, f.fix.edits if f.fix else None) for f in result.findings]
    return findings, [(d.kind, d.line, d.column, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_findings_and_fix_edits_are_the_same_with_and_without_the_prepass(path: Path):
    text = path.read_text(encoding="utf-8")
    settings = all_rules_settings(checker_target(text) if path.parent.name == "checker" else None)
    fast = engine.lint_text(text, str(path), settings)
    slow = engine.lint_text(text, str(path), settings, use_prepass=False)
    assert _signature(fast) == _signature(slow)


def _plan(source: str, path: str = "model.py") -> prepass.Plan:
    source = textwrap.dedent(source)
    rules = engine.select_rules(source, registry.all_rules())
    return prepass.plan(source, path, rules)


LOSS_HELPER = """\
import torch


def positive(x):
    return x.exp()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1))

    def describe(self):
        total = 0
        for name, p in self.named_parameters():
            total += p.numel()
        return f"{total} parameters"

    def forward(self, x):
        return torch.sqrt(x) * self.scale / positive(x)


def unrelated_report(rows):
    lines = []
    for row in rows:
        lines.append(str(row))
    return "\\n".join(lines)
"""


def test_regions_no_rule_needs_are_left_out_and_lines_map_back():
    plan = _plan(LOSS_HELPER)
    assert plan is not None and plan.rules
    # forward (the seed), __init__ (what self.scale holds) and positive() (a helper it calls) stay.
    assert "torch.sqrt(x) * self.scale / positive(x)" in plan.text
    assert "self.scale = torch.nn.Parameter" in plan.text
    assert "return x.exp()" in plan.text
    # describe() and unrelated_report() do not reach LibCST.
    assert "describe" not in plan.text and "unrelated_report" not in plan.text
    assert "named_parameters" not in plan.text and "lines.append" not in plan.text
    ast.parse(plan.text)
    original = LOSS_HELPER.splitlines()
    reduced = plan.text.splitlines()
    # One entry per line, and one for the empty line after a final newline (where the module ends).
    assert len(plan.lines) == len(reduced) + 1 and len(reduced) < len(original)
    for number, line in zip(plan.lines, reduced):
        if line.strip() != "0":
            assert original[number - 1] == line


def test_positions_of_findings_after_removed_code_are_the_file_positions():
    source = LOSS_HELPER.replace("def forward", "def unused(self):\n        return 1\n\n    def forward")
    settings = all_rules_settings()
    fast = engine.lint_text(source, "model.py", settings)
    slow = engine.lint_text(source, "model.py", settings, use_prepass=False)
    assert fast.findings and _signature(fast) == _signature(slow)
    fixed = engine.fix_text(source, "model.py", settings)
    assert fixed.applied and fixed.text == engine.fix_text(source, "model.py", settings).text


def test_a_file_where_no_rule_can_report_is_not_parsed_by_libcst():
    plan = _plan(
        """\
        import torch

        def forward(x):
            # the text mentions sqrt and log, but nothing calls them
            return x.sum(dim=-1)
        """
    )
    assert plan is not None and plan.rules == []


def test_a_file_ast_cannot_read_goes_to_libcst_whole():
    assert prepass.plan("def f(:\n    torch.log(x)\n", "bad.py", list(registry.all_rules().values())) is None


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_reduction_keeps_line_endings_and_a_last_line_without_newline(newline: str):
    source = newline.join(
        [
            "import torch",
            "",
            "@decorator",
            "def helper(x):",
            "    '''docstring'''",
            "    return x + 1",
            "",
            "def one_line(x): return torch.log(x)",
            "",
            "def forward(x):",
            "    return torch.log(x)",
        ]
    )
    scan = prepass.Scan("m.py", source, ast.parse(source))
    forward = next(i for i, r in enumerate(scan.regions) if getattr(r.node, "name", "") == "forward")
    text, lines = prepass.reduce_source(source, scan, {forward})
    assert text.split(newline) == [
        "import torch",
        "",
        "0",  # helper and its decorator
        "",
        "0",
        "",
        "def forward(x):",
        "    return torch.log(x)",
    ]
    assert lines == [1, 2, 3, 7, 8, 9, 10, 11]  # no final newline: no line after the last
    compile(text, "m.py", "exec")


def test_a_statement_that_shares_its_line_is_kept():
    source = "import torch\nx = 1; y = 2\nif x: print(y)\ndef forward(a):\n    return torch.log(a)\n"
    scan = prepass.Scan("m.py", source, ast.parse(source))
    forward = next(i for i, r in enumerate(scan.regions) if getattr(r.node, "name", "") == "forward")
    text, lines = prepass.reduce_source(source, scan, {forward})
    assert text == "import torch\nx = 1; y = 2\n0\ndef forward(a):\n    return torch.log(a)\n"
    assert lines == [1, 2, 3, 4, 5, 6]


def test_the_flake8_tree_stands_in_for_the_prepass_parse():
    settings = all_rules_settings()
    given = engine.lint_text(LOSS_HELPER, "model.py", settings, tree=ast.parse(LOSS_HELPER))
    parsed = engine.lint_text(LOSS_HELPER, "model.py", settings)
    assert given.findings and _signature(given) == _signature(parsed)


def test_collecting_less_gives_the_host_its_threshold_back():
    import gc

    from torchlint import collection

    before = gc.get_threshold()
    with collection.collecting_less():
        assert gc.get_threshold()[0] == collection.GC_THRESHOLD
    assert gc.get_threshold() == before
