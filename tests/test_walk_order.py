"""The engine's own tree walk calls handlers exactly as LibCST's ``module.visit`` does."""
from __future__ import annotations

import glob
import os

import libcst as cst
import pytest

from torchlint import engine, walk_order
from torchlint.config import Settings
from torchlint.context import FileContext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = sorted(glob.glob(os.path.join(ROOT, "fixtures", "**", "*.py"), recursive=True)) + sorted(
    glob.glob(os.path.join(ROOT, "torchlint", "**", "*.py"), recursive=True)
)


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
    walked = _Recording(FileContext(path, source, module, Settings(enabled=frozenset())))
    walked.walk(module)
    visited = _Recording(FileContext(path, source, module, Settings(enabled=frozenset())))
    module.visit(visited)
    assert walked.events == visited.events
    assert walked.events  # the file has nodes: the comparison is not vacuous
