"""What a statement binds and touches, read from its syntax alone: the vocabulary of the dataflow engine.

``analysis/model/dataflow.py`` walks a function's statements to answer which
bindings reach a use; it asks this module what one statement does to a name:

- :func:`bound_names`: every name a statement binds, in any way (assignment,
  for/with/except targets, walrus, ``del``, ``global``, import, ``def``,
  ``class``), nested scopes excluded;
- :func:`names_in_target`: the names an assignment target binds
  (``a, (b, *c) = ...``);
- :func:`touches`: whether a statement rebinds, assigns through
  (``logits[m] = 0``, ``out.logits = ...``) or mutates in place by a method
  (``logits.div_(t)``) one of some names; calls that mutate an argument
  (``fill(logits)``) are not seen;
- :func:`root_names`: the plain names an expression reads;
- :func:`all_params`: every parameter of a ``def`` or ``lambda``.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Iterator, List, Set, Tuple

import libcst as cst

from torchlint.walk_order import visit


def all_params(params: cst.Parameters) -> List[cst.Param]:
    """Every parameter of a def or lambda: positional-only, ordinary, keyword-only, ``*args``, ``**kwargs``."""
    every = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return every


class _Binders(cst.CSTVisitor):
    """Every name a statement binds, in any way, without entering nested scopes' bodies."""

    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    def _targets(self, node: cst.CSTNode) -> None:
        self.names |= names_in_target(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._targets(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._targets(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._targets(node.name.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._targets(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        self.names |= {item.name.value for item in node.names}

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.names |= {item.name.value for item in node.names}

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name
            self.names.add(local.split(".", 1)[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                self.names.add(alias.evaluated_alias or alias.evaluated_name)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def bound_names(node: cst.CSTNode) -> FrozenSet[str]:
    """Every name ``node`` binds (assignment, for/with/except targets, walrus, del, import, def, class), nested scopes excluded."""
    found = _BOUND.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    visitor = _Binders()
    visit(node, visitor)
    names = frozenset(visitor.names)
    if len(_BOUND) >= _BOUND_KEPT:
        _BOUND.clear()
    _BOUND[id(node)] = (node, names)  # the entry holds the node: its id names no other node while kept
    return names


# Nodes are immutable, and the same statements are asked again by every query that crosses them (the statements
# between a definition and its use, a function's body): the latest answers, dropped together when many.
_BOUND: Dict[int, Tuple[cst.CSTNode, FrozenSet[str]]] = {}
_BOUND_KEPT = 4096


def root_names(expression: cst.CSTNode) -> Iterator[str]:
    """The plain names an expression reads (``logits`` and ``out`` in ``out.logits[:, 0] / logits``)."""
    collector = _NameReads()
    visit(expression, collector)
    return iter(collector.names)


class _NameReads(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        visit(node.value, self)  # the attribute's own name is not a variable
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        visit(node.value, self)  # nor is a keyword
        return False


class _Touches(cst.CSTVisitor):
    """Whether a statement rebinds, assigns through, or mutates in place one of ``roots``."""

    def __init__(self, roots: Set[str]) -> None:
        super().__init__()
        self.roots = roots
        self.found = False

    def _check_target(self, target: cst.CSTNode) -> None:
        base = target
        while isinstance(base, (cst.Attribute, cst.Subscript)):
            base = base.value
        if isinstance(base, cst.Name) and base.value in self.roots:
            self.found = True
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._check_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._check_target(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_target(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._check_target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check_target(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.endswith("__"):
            self._check_target(func.value)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found:
            return False
        return super().on_visit(node)


def touches(statement: cst.CSTNode, roots: Set[str]) -> bool:
    """Whether ``statement`` rebinds, assigns through, or mutates in place by a method one of ``roots``."""
    if bound_names(statement) & roots:
        return True
    visitor = _Touches(roots)
    visit(statement, visitor)
    return visitor.found


def names_in_target(target: cst.CSTNode) -> Set[str]:
    """The names an assignment target binds: ``a`` and ``b`` in ``a, (b, *_) = ...``; none for ``x[i]``/``x.y``."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: Set[str] = set()
        for element in target.elements:
            found |= names_in_target(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return names_in_target(target.value)
    return set()
