"""The engine's own tree walk calls handlers exactly as LibCST's ``module.visit`` does."""
from __future__ import annotations

import glob
import os

import libcst as cst
import pytest

from torchlint import engine, walk_order
from torchlint.config import Settings
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.model.project_index import file_context
from fixture_support import python_parses

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = [
    path
    for path in sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.py"), recursive=True))
    + sorted(glob.glob(os.path.join(ROOT, "torchlint", "**", "*.py"), recursive=True))
    if python_parses(path)  # LibCST alone cannot parse a fixture of torch 0.3 days (``async=``)
]


class _Recording(engine._Traversal):
    def __init__(self, context: FileContext) -> None:
        super().__init__(context, [], [])
        self.events = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, walk_order.TRIVIA):
            self.events.append(("visit", id(node), len(self.context.ancestors)))
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        if not isinstance(original_node, walk_order.TRIVIA):
            self.events.append(("leave", id(original_node), len(self.context.ancestors)))


def test_walk_order_is_readable_from_libcst():
    assert walk_order.available()
    assert walk_order.child_fields(cst.FunctionDef).index("decorators") < walk_order.child_fields(cst.FunctionDef).index("body")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: os.path.relpath(p, ROOT))
def test_walk_visits_what_libcst_visits_in_the_same_order(path):
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    module = cst.parse_module(source)
    walked = _Recording(file_context(path, source, module, Settings(enabled=frozenset())))
    walked.walk(module)
    visited = _Recording(file_context(path, source, module, Settings(enabled=frozenset())))
    module.visit(visited)
    assert walked.events == visited.events
    assert walked.events  # the file has nodes: the comparison is not vacuous


class _Pruning(cst.CSTVisitor):
    """Records its calls; does not enter lambdas or nested functions; asks for commas by name."""

    def __init__(self) -> None:
        self.events = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, walk_order.TRIVIA):
            self.events.append(("visit", id(node)))
        return super().on_visit(node) and not isinstance(node, (cst.Lambda, cst.FunctionDef)) or isinstance(node, cst.Module)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if not isinstance(original_node, walk_order.TRIVIA):
            self.events.append(("leave", id(original_node)))
        super().on_leave(original_node)

    def visit_Comma(self, node: cst.Comma) -> None:
        self.events.append(("comma", id(node)))


@pytest.mark.parametrize("path", SOURCES[::7], ids=lambda p: os.path.relpath(p, ROOT))
def test_read_only_visit_calls_a_visitor_as_libcst_does(path):
    with open(path, encoding="utf-8") as handle:
        module = cst.parse_module(handle.read())
    ours, libcsts = _Pruning(), _Pruning()
    walk_order.visit(module, ours)
    module.visit(libcsts)
    assert ours.events == libcsts.events
    assert ours.events


def test_read_only_visit_enters_punctuation_a_visitor_asks_for_and_prunes_where_it_says():
    module = cst.parse_module("f(a, b)\ng = lambda x, y: x\n")
    visitor = _Pruning()
    walk_order.visit(module, visitor)
    assert sum(kind == "comma" for kind, _ in visitor.events) == 1  # the lambda's comma is pruned
