"""Branches that literals turn off: ``if False:``, ``if 0:``, ``while False:``, the ``else`` of ``if True:``.

A test's truth is known here only when it is made of literals (``not``, ``and``, ``or`` and comparisons of them
included). A name bound to a literal is not read: readers of validation draws judged findings under a script's
switch (``is_load = False`` before ``if is_load:``, ``use_resnet = True``) real in 10 of 13 cases on d28-d53, a
setting the user edits to run that branch; the one finding under a literal ``if False:`` there was read false.
"""
from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst


# A literal's value, or _UNKNOWN.
_UNKNOWN = object()
_NAMED_CONSTANTS = {"True": True, "False": False, "None": None}


def in_branch_never_taken(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the node under ``ancestors`` (outermost first) sits in an ``if`` branch whose test a constant decides
    against it: the body of a test that is always false, or the ``else``/``elif`` of one that is always true."""
    for position in range(len(ancestors) - 1):
        node = ancestors[position]
        if not isinstance(node, (cst.If, cst.While)):
            continue
        child = ancestors[position + 1]
        if child is node.body:
            wanted = False
        elif child is node.orelse:
            wanted = True
        else:
            continue
        if isinstance(node, cst.While) and wanted:
            continue  # a loop's ``else`` runs when the test turns false, whatever it was at first
        if truth(node.test) is wanted:
            return True
    return False


def truth(test: cst.BaseExpression) -> Optional[bool]:
    """The truth of ``test`` on every run when it is made of literals alone, else None."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = truth(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left = truth(test.left)
        right = truth(test.right)
        deciding = isinstance(test.operator, cst.Or)  # ``or`` is decided by a true side, ``and`` by a false one
        if left is deciding or right is deciding:
            return deciding
        return None if left is None or right is None else left
    if isinstance(test, cst.Comparison):
        return _comparison_truth(test)
    value = _literal(test)
    return None if value is _UNKNOWN else bool(value)


def _comparison_truth(test: cst.Comparison) -> Optional[bool]:
    left = _literal(test.left)
    if left is _UNKNOWN:
        return None
    result = True
    for target in test.comparisons:
        right = _literal(target.comparator)
        if right is _UNKNOWN:
            return None
        operator = target.operator
        try:
            if isinstance(operator, cst.Equal):
                holds = left == right
            elif isinstance(operator, cst.NotEqual):
                holds = left != right
            elif isinstance(operator, (cst.Is, cst.IsNot)):
                if not (left is None or right is None or isinstance(left, bool) or isinstance(right, bool)):
                    return None  # identity of other literals is an implementation detail
                holds = (left is right) if isinstance(operator, cst.Is) else (left is not right)
            elif isinstance(operator, (cst.In, cst.NotIn)) and isinstance(right, tuple):
                holds = (left in right) if isinstance(operator, cst.In) else (left not in right)
            else:
                return None
        except TypeError:
            return None
        result = result and holds
        left = right
    return result


def _literal(node: cst.BaseExpression):
    """The value of a literal: a number, a string, ``True``/``False``/``None``, a tuple or list of them."""
    if isinstance(node, cst.Name) and node.value in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[node.value]
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return node.evaluated_value
        except (ValueError, OverflowError):
            return _UNKNOWN
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal(node.expression)
        return -inner if isinstance(inner, (int, float)) and not isinstance(inner, bool) else _UNKNOWN
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - any string LibCST cannot evaluate is no known literal
            return _UNKNOWN
        return value if isinstance(value, str) else _UNKNOWN
    if isinstance(node, (cst.Tuple, cst.List)):
        values = []
        for element in node.elements:
            if isinstance(element, cst.StarredElement):
                return _UNKNOWN
            value = _literal(element.value)
            if value is _UNKNOWN:
                return _UNKNOWN
            values.append(value)
        return tuple(values)
    return _UNKNOWN
