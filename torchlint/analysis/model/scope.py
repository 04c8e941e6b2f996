"""Cheap, on-demand facts about enclosing scopes: names bound in a function, ``self.x = ...`` in a class.

Walked only when a rule asks (usually while building a fix), never for every file.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional

import libcst as cst


def statements(body) -> Iterator[cst.CSTNode]:
    """Every statement of a block, descending into if/for/while/with/try but not into nested defs or classes."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine)):
            continue
        for block in _child_blocks(stmt):
            yield from statements(block)


def _child_blocks(stmt: cst.CSTNode) -> Iterator[list]:
    body = getattr(stmt, "body", None)
    if isinstance(body, cst.IndentedBlock):
        yield body.body
    elif isinstance(body, cst.SimpleStatementSuite):
        yield [body]
    for handler in getattr(stmt, "handlers", ()) or ():
        yield from _child_blocks(handler)
    orelse = getattr(stmt, "orelse", None)
    if isinstance(orelse, cst.If):
        yield [orelse]
    elif isinstance(orelse, cst.Else):
        yield from _child_blocks(orelse)
    final = getattr(stmt, "finalbody", None)
    if isinstance(final, cst.Finally):
        yield from _child_blocks(final)


def assignments(body) -> Iterator[tuple]:
    """(target, value) for every plain or annotated assignment in a block."""
    for stmt in statements(body):
        if not isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    yield target.target, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                yield small.target, small.value


def is_self_attribute(node: cst.CSTNode) -> bool:
    """``self.x``."""
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def self_attributes(class_def: cst.ClassDef) -> Dict[str, cst.BaseExpression]:
    """``attr -> value`` for ``self.attr = value`` in the class's methods (the last plain one wins)."""
    found: Dict[str, cst.BaseExpression] = {}
    for attr, values in self_attribute_assignments(class_def).items():
        plain = [value for value in values if value is not None]
        if plain:
            found[attr] = plain[-1]
    return found


def self_attribute_assignments(class_def: cst.ClassDef) -> Dict[str, List[Optional[cst.BaseExpression]]]:
    """``attr -> values`` for every binding of ``self.attr`` in the class's methods, in source order: the value of
    a plain or annotated assignment, None for any other binding (``self.x += y``, ``self.x, self.y = f()``, a
    ``for``/``with`` target), whose value the model does not give."""
    found: Dict[str, List[Optional[cst.BaseExpression]]] = {}
    for stmt in class_def.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        for inner in statements(stmt.body.body):
            for target, value in _bound_targets(inner):
                if is_self_attribute(target):
                    found.setdefault(target.attr.value, []).append(value)
                elif isinstance(target, (cst.Tuple, cst.List)):
                    for element in target.elements:
                        if is_self_attribute(element.value):
                            found.setdefault(element.value.attr.value, []).append(None)
    return found


def _bound_targets(stmt: cst.CSTNode) -> Iterator[tuple]:
    """(target, value or None) for each target a statement binds."""
    if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    yield target.target, small.value if not isinstance(target.target, (cst.Tuple, cst.List)) else None
            elif isinstance(small, cst.AnnAssign):
                yield small.target, small.value
            elif isinstance(small, cst.AugAssign):
                yield small.target, None
    elif isinstance(stmt, cst.For):
        yield stmt.target, None
    elif isinstance(stmt, cst.With):
        for item in stmt.items:
            if item.asname is not None:
                yield item.asname.name, None


def binds_name(function: Optional[cst.FunctionDef], module: cst.Module, name: str) -> bool:
    """Whether ``name`` is a parameter of ``function``, assigned in it, or assigned at module level."""
    if function is not None:
        params = function.params
        every = list(params.params) + list(params.kwonly_params) + list(params.posonly_params)
        if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) and isinstance(params.star_arg, cst.Param):
            every.append(params.star_arg)
        if any(p.name.value == name for p in every):
            return True
        if any(isinstance(t, cst.Name) and t.value == name for t, _ in assignments(function.body.body)):
            return True
    return any(isinstance(t, cst.Name) and t.value == name for t, _ in assignments(module.body))
