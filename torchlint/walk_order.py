"""The order in which LibCST visits a node's children, read once from LibCST's own code.

The engine walks trees itself (``engine._Traversal.walk``) instead of
``module.visit``, which rebuilds and re-validates every node it passes.
To call the rules' handlers in exactly LibCST's order, the children of a
node class are taken in the order its ``_visit_and_replace_children`` visits
them: the field names passed to LibCST's ``visit_*`` helpers, in source order.
When LibCST's source cannot be read, :func:`available` is False and the
engine falls back to ``module.visit``.  tests/test_walk_order.py checks that
both walks call the handlers identically.

:func:`visit` does the same for the analyses' own read-only visitors
(``visit(node, visitor)`` instead of ``node.visit(visitor)``).
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from functools import lru_cache
from typing import Callable, Dict, Tuple, Type

import libcst as cst

# Nodes that hold only whitespace, comments or one token: no rule looks inside them, and they
# are skipped unless a rule has a handler for their type.
TRIVIA: Tuple[type, ...] = (
    cst.BaseParenthesizableWhitespace,
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.Comment,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.AssignEqual,
    cst.Semicolon,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
)


@lru_cache(maxsize=None)
def child_fields(node_class: Type[cst.CSTNode]) -> Tuple[str, ...]:
    """The fields of ``node_class`` that LibCST visits, in its visiting order."""
    method = node_class._visit_and_replace_children
    tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("visit_")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            found.append((node.lineno, node.col_offset, node.args[1].value))
    return tuple(dict.fromkeys(name for _, _, name in sorted(found)))


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether LibCST's code can be read (it can in any normal install; not from a zip without sources)."""
    try:
        return child_fields(cst.Module) == ("header", "body", "footer") and bool(child_fields(cst.Call))
    except (OSError, TypeError, SyntaxError):
        return False


def walk(
    root: cst.CSTNode,
    on_visit: Callable[[cst.CSTNode], object],
    on_leave: Callable[[cst.CSTNode], object],
    descends: Callable[[type], bool],
) -> None:
    """Call ``on_visit``/``on_leave`` on ``root`` and its descendants in LibCST's order; a false
    answer from ``on_visit`` skips the node's children; only children whose class ``descends``."""

    def walk_node(node: cst.CSTNode) -> None:
        if on_visit(node):
            for name in child_fields(type(node)):
                value = getattr(node, name)
                kind = type(value)
                if kind is list or kind is tuple:
                    for child in value:
                        if descends(type(child)):
                            walk_node(child)
                elif descends(kind):
                    walk_node(value)
        on_leave(node)

    walk_node(root)


def descender(handled: Callable[[str], bool]) -> Callable[[type], bool]:
    """Which child classes a walk enters: nodes, but not whitespace and punctuation unless
    ``handled(class name)`` (a handler asks for them). Answers are cached per walk."""
    answers: Dict[type, bool] = {}

    def descends(kind: type) -> bool:
        answer = answers.get(kind)
        if answer is None:
            answer = answers[kind] = issubclass(kind, cst.CSTNode) and not (issubclass(kind, TRIVIA) and not handled(kind.__name__))
        return answer

    return descends


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads: the same ``on_visit``/``on_leave`` calls
    in the same order, without LibCST re-creating and re-validating every node it passes (a
    quarter of a cold run went there), and without entering whitespace and punctuation the
    visitor has no ``visit_``/``leave_`` method for."""
    if not available():
        node.visit(visitor)
        return
    walk(
        node,
        visitor.on_visit,
        visitor.on_leave,
        descender(lambda name: hasattr(visitor, "visit_" + name) or hasattr(visitor, "leave_" + name)),
    )
