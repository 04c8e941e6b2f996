"""Positions computed statement by statement (engine._StatementPositions) are LibCST's
whole-module PositionProvider positions, node for node."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from fixture_support import FIXTURES, all_rules_settings, checker_target, python_parses
from torchlint import engine
from torchlint.rule import PendingReport

# LibCST alone cannot parse a fixture of torch 0.3 days (``async=``): the engine reads those with a stand-in.
ALL_FIXTURES = [path for path in sorted(FIXTURES.glob("*/*/*.py")) if python_parses(path)]


def _whole(module: cst.Module):
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


def _nodes(root: cst.CSTNode) -> List[cst.CSTNode]:
    found, pending = [], [root]
    while pending:
        node = pending.pop()
        found.append(node)
        pending.extend(node.children)
    return found


def _statement_reports(module: cst.Module) -> List[PendingReport]:
    """One report per top-level statement and per member of a top-level class, holding it as
    ``Rule.report`` records it (the nodes enclosing the reported one below the module)."""
    reports = []
    for statement in module.body:
        reports.append(PendingReport(None, statement, "", enclosing=(statement,)))
        if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for member in statement.body.body:
                reports.append(PendingReport(None, member, "", enclosing=(statement, statement.body, member)))
    return reports


def _agreement(source: str) -> Dict[str, int]:
    """Check every node of every statement a report can sit in; count how the statements were resolved."""
    module = cst.parse_module(source)
    whole = _whole(module)
    counts = {"by statement": 0, "whole module": 0}
    for report in _statement_reports(module):
        positions = engine._StatementPositions(module, source, [report])
        for node in _nodes(report.node):
            assert positions.get(node) == whole[node], (report.node, node)
            assert positions[node] == whole[node]
        counts["whole module" if positions._whole is not None else "by statement"] += 1
    return counts


def test_every_statement_of_every_fixture_agrees_with_the_whole_module():
    totals = {"by statement": 0, "whole module": 0}
    for path in ALL_FIXTURES:
        counts = _agreement(path.read_text(encoding="utf-8"))
        for key in totals:
            totals[key] += counts[key]
    # The fast path is what is checked: almost every statement is placed by its own text.
    assert totals["by statement"] > 10 * totals["whole module"] > 0, totals


EDGE_CASES = {
    "crlf": "import torch\r\n\r\nclass A:\r\n    def f(self, x):\r\n        return (x +\r\n                1)\r\n",
    "cr": "import torch\r\rclass A:\r    def f(self, x):\r        return torch.log(x)\r",
    "no final newline": "import torch\n\ndef f(x):\n    return torch.log(\n        x)",
    "no final newline, comment last": "def f(x):\n    return x\n# the end",
    "tabs": "class A:\n\tdef f(self):\n\t\treturn [\n  1,\n\t]\n",
    "semicolons": "import torch; import os\nx = 1; y = torch.log(x)\n",
    "decorators and comments": "# head\n\n@decorate  # why\n# between\n@other(\n    1)\ndef f():\n    pass\n",
    "form feed": "x = 1\n\x0c\ndef f():\n    return 1\n",
    "backslash": "x = \\\n    1\nif x:\\\n    pass\n",
    "unicode": "s = 'añ€𝔘'; t = s + 'x'\nclass A:\n    z = '𝔘𝔘'  # é\n    w = z\n",
    "repeated statements": "x = 1\nx = 1\nclass A:\n    def f(self):\n        return 1\nclass B:\n    def f(self):\n        return 1\n",
    "a member's text deeper in": (
        "class A:\n    class B:\n        def f(self):\n            return 1\n    def f(self):\n            return 1\n"
    ),
    "docstring repeating code": 'doc = """\nimport os\n"""\nimport os\nclass A:\n    pass\n',
    "empty class body lines": "class A:\n\n    x = 1\n\n\n    # trailing\n\ny = 2\n",
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_agree_with_the_whole_module(name: str):
    _agreement(EDGE_CASES[name])


def test_a_repeated_member_falls_back_to_its_class_and_a_repeated_statement_to_the_module():
    source = EDGE_CASES["repeated statements"]
    module = cst.parse_module(source)
    member = module.body[2].body.body[0]
    report = PendingReport(None, member, "", enclosing=(module.body[2], module.body[2].body, member))
    positions = engine._StatementPositions(module, source, [report])
    assert positions[member] == _whole(module)[member]
    assert positions._whole is None  # placed by the class, whose text is unique
    positions = engine._StatementPositions(module, source, [])
    assert positions[module.body[0]] == _whole(module)[module.body[0]]
    assert positions._whole is not None  # ``x = 1`` starts two lines: the whole module decides


def _signature(result: engine.LintResult):
    findings = [(f.code, f.location, f.message, f.fix, f.fix_edit_locations) for f in result.findings]
    return findings, [(d.kind, d.line, d.column, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_reported_and_replaced_nodes_have_the_whole_module_positions(path: Path, monkeypatch):
    """Every node a rule reports and every node a fix replaces, in the text LibCST parsed (reduced
    by the pre-pass or not); and the findings equal those built from whole-module positions."""
    text = path.read_text(encoding="utf-8")
    settings = all_rules_settings(checker_target(text) if path.parent.name == "checker" else None)
    materialize = engine._materialize
    checked = []

    def checking(pending, context, diagnostics, parsed_text=None):
        whole = _whole(context.module)
        positions = engine._StatementPositions(context.module, parsed_text, pending)
        for report in pending:
            nodes = [report.node] + [r.old for r in (report.fix.replacements if report.fix else ())]
            for node in nodes:
                assert positions.get(node) == whole.get(node)
                checked.append(node)
        return materialize(pending, context, diagnostics, parsed_text)

    monkeypatch.setattr(engine, "_materialize", checking)
    for use_prepass in (True, False):
        fast = engine.lint_text(text, str(path), settings, use_prepass=use_prepass)
        with monkeypatch.context() as whole_only:
            whole_only.setattr(engine, "_StatementPositions", lambda module, text, pending: _whole(module))
            slow = engine.lint_text(text, str(path), settings, use_prepass=use_prepass)
        assert _signature(fast) == _signature(slow)
    if path.parent.name == "checker" and path.name.startswith("bad_"):
        assert checked
