"""Which assignment gives a local name its value at a given use: reaching definitions in straight-line code.

Rules ask "``probs`` in ``F.cross_entropy(probs, y)``: was it assigned a
softmax a few lines earlier?" and "``d`` in ``torch.sqrt(d)``: was it
bound to ``x.clamp_min(eps)``?".  :func:`reaching_definition` answers from
the traversal's ancestor chain (``context.ancestors``), without scope
metadata: it walks back through the statements before the use, in the same
block and then in the enclosing blocks, up to the enclosing function (or the
module, for scripts).

The answer is a :class:`Definition` only when exactly one simple assignment
``name = value`` (or ``name: T = value``; ``a = name = value`` too) must
have produced the value seen at the use:

- a binding of the name by anything else on the way back (augmented
  assignment, tuple unpacking, ``for`` target, ``with ... as``, walrus,
  import, ``del``, ``global``) gives None: the value is not known;
- a compound statement (``if``/``for``/``while``/``with``/``try``) passed on
  the way back that binds the name anywhere inside gives None: the
  binding is conditional;
- leaving a loop body that binds the name anywhere gives None (a later
  statement of the previous iteration may reach the use);
- a name bound by a comprehension or lambda around the use gives None;
- reaching the top of the function gives None (a parameter or a closure).

:meth:`Definition.unchanged_at_use` tells whether an expression read at the
definition (say ``logits`` in ``probs = F.softmax(logits, -1)``) still means
the same at the use, so that a fix may write it there instead: none of its
names is rebound on the way (the definition itself included, as in
``x = x.softmax(-1)``), assigned through (``logits[m] = 0``,
``out.logits = ...``) or changed by an in-place method (``logits.div_(t)``).
Calls that mutate an argument (``fill(logits)``) are not seen.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

_LOOPS = (cst.For, cst.While)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


@dataclass(frozen=True)
class Definition:
    """``name = value`` found by :func:`reaching_definition`."""

    name: str
    value: cst.BaseExpression
    # The statement line holding the assignment.
    statement: cst.SimpleStatementLine
    # Statements executed between the assignment and the use (the assignment's own line first).
    between: Tuple[cst.CSTNode, ...]

    def unchanged_at_use(self, expression: cst.BaseExpression) -> bool:
        """Whether ``expression``, read at the definition, still has the same value at the use."""
        roots = set(_root_names(expression))
        if not roots:
            return True
        return not any(_touches(node, roots) for node in self.between)


def reaching_definition(ancestors: Sequence[cst.CSTNode], name: str) -> Optional[Definition]:
    """The simple assignment that gives ``name`` its value at a use below ``ancestors``.

    ``ancestors`` are the nodes enclosing the use, outermost first (the
    engine's ``context.ancestors`` while a rule visits the use or a node
    that contains it). See the module docstring for when the answer is None.
    """
    if _bound_around_use(ancestors, name):
        return None
    between: List[cst.CSTNode] = []
    index = len(ancestors) - 1
    # Find the innermost statement and, when it is a statement line, the small statement holding the use.
    small: Optional[cst.CSTNode] = None
    while index >= 0 and not isinstance(ancestors[index], (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        if isinstance(ancestors[index], cst.BaseSmallStatement):
            small = ancestors[index]
        index -= 1
    if index < 0:
        return None
    statement = ancestors[index]
    if isinstance(statement, cst.SimpleStatementLine) and small is not None:
        earlier = list(statement.body[: _index_of(statement.body, small)])
        found = _scan_small(reversed(earlier), name, statement)
        if found is not None:
            return _finish(found, name, between)
    # Walk back block by block.
    while index >= 1:
        block_owner = ancestors[index - 1]
        if isinstance(block_owner, cst.Module):
            body = block_owner.body
        elif isinstance(block_owner, cst.IndentedBlock):
            body = block_owner.body
        else:  # SimpleStatementSuite (``if c: a = 1``) or an unexpected shape: stop
            return None
        position = _index_of(body, ancestors[index])
        if position is None:
            return None
        for earlier in reversed(body[:position]):
            if isinstance(earlier, cst.SimpleStatementLine):
                found = _scan_small(reversed(earlier.body), name, earlier)
                if found is not None:
                    return _finish(found, name, between)
                between.append(earlier)
            else:
                if name in bound_names(earlier):
                    return None
                between.append(earlier)
        if isinstance(block_owner, cst.Module):
            return None
        # Climb to the compound statement owning this block.
        index -= 2
        while index >= 0 and not isinstance(ancestors[index], cst.BaseCompoundStatement):
            index -= 1
        if index < 0:
            return None
        compound = ancestors[index]
        if isinstance(compound, (cst.FunctionDef, cst.ClassDef)):
            return None
        # An elif/else branch is owned by the outermost If of its chain.
        while index >= 1 and isinstance(compound, cst.If) and isinstance(ancestors[index - 1], (cst.If, cst.Else)):
            index -= 1
            if isinstance(ancestors[index], cst.Else):
                index -= 1
            compound = ancestors[index]
        if name in bound_names(compound):
            return None
        between.append(compound)
    return None


# -- helpers ---------------------------------------------------------------------------


_Found = Tuple[cst.BaseExpression, cst.SimpleStatementLine, Optional[str]]


def _finish(found, name: str, between: List[cst.CSTNode]) -> Optional[Definition]:
    value, line, problem = found
    if problem is not None:
        return None
    return Definition(name, value, line, tuple([line] + list(reversed(between))))


def _scan_small(smalls: Iterable[cst.CSTNode], name: str, line: cst.SimpleStatementLine):
    """(value, line, None) for the latest simple assignment of ``name``; (.., .., reason) if bound otherwise."""
    for small in smalls:
        if isinstance(small, cst.Assign):
            names = [_target_name(t.target) for t in small.targets]
            if name in names:
                return small.value, line, None
            if any(name in _names_in_target(t.target) for t in small.targets):
                return small.value, line, "unpacked"
        elif isinstance(small, cst.AnnAssign):
            if _target_name(small.target) == name:
                return (small.value, line, None) if small.value is not None else (small.target, line, "annotation")
        if name in bound_names(small):
            return small, line, "bound"
    return None


def _target_name(target: cst.BaseExpression) -> Optional[str]:
    return target.value if isinstance(target, cst.Name) else None


def _names_in_target(target: cst.CSTNode) -> Set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: Set[str] = set()
        for element in target.elements:
            found |= _names_in_target(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return _names_in_target(target.value)
    return set()


def _index_of(sequence: Sequence[cst.CSTNode], node: cst.CSTNode) -> Optional[int]:
    for position, item in enumerate(sequence):
        if item is node:
            return position
    return None


def _bound_around_use(ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    """A comprehension variable or lambda parameter of that name between the statement and the use."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(node, cst.Lambda):
            if any(p.name.value == name for p in all_params(node.params)):
                return True
        elif isinstance(node, _COMPREHENSIONS):
            comp = node.for_in
            while comp is not None:
                if name in _names_in_target(comp.target):
                    return True
                comp = comp.inner_for_in
    return False


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
        self.names |= _names_in_target(node)

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


def bound_names(node: cst.CSTNode) -> Set[str]:
    """Every name ``node`` binds (assignment, for/with/except targets, walrus, del, import, def, class), nested scopes excluded."""
    visitor = _Binders()
    visit(node, visitor)
    return visitor.names


def _root_names(expression: cst.CSTNode) -> Iterator[str]:
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


def _touches(statement: cst.CSTNode, roots: Set[str]) -> bool:
    if bound_names(statement) & roots:
        return True
    visitor = _Touches(roots)
    visit(statement, visitor)
    return visitor.found


# -- the call a name holds (``sm = nn.Softmax(1)``, ``crit = nn.BCELoss()``) -----------------------


def named_call(context: "FileContext", name: str) -> Optional[Tuple[cst.Call, str]]:
    """(the call, "local" or "module") that ``name`` holds where the engine stands: the one assignment
    that reaches it in the function or script (:func:`reaching_definition`), else, inside a function
    that does not bind the name, the module's only top-level ``name = Call(...)``."""
    definition = reaching_definition(context.ancestors, name)
    if definition is not None:
        return (definition.value, "local") if isinstance(definition.value, cst.Call) else None
    if context.enclosing(cst.FunctionDef) is not None and not _bound_in_function(context, name):
        value = _module_level_value(context, name)
        if value is not None:
            return value, "module"
    return None


def _bound_in_function(context: "FileContext", name: str) -> bool:
    function = context.enclosing(cst.FunctionDef)
    params = function.params
    every = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    if any(p.name.value == name for p in every):
        return True
    return name in context.memoized("names bound in body", function, _names_bound_in_body)


def _names_bound_in_body(function: cst.FunctionDef) -> FrozenSet[str]:
    return frozenset(name for stmt in function.body.body for name in bound_names(stmt))


def _module_level_value(context: "FileContext", name: str) -> Optional[cst.Call]:
    """The value of the only top-level ``name = Call(...)`` of the module, if there is exactly one binding."""
    found = None
    for stmt in context.memoized("top-level binders", context.module, _top_level_binders).get(name, ()):
        if found is not None or not isinstance(stmt, cst.SimpleStatementLine):
            return None
        small = stmt.body[0] if len(stmt.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            return None
        found = small.value
    return found if isinstance(found, cst.Call) else None


def _top_level_binders(module: cst.Module) -> Dict[str, Tuple[cst.CSTNode, ...]]:
    """name -> the top-level statements that bind it, in order."""
    binders: Dict[str, List[cst.CSTNode]] = {}
    for stmt in module.body:
        for name in bound_names(stmt):
            binders.setdefault(name, []).append(stmt)
    return {name: tuple(stmts) for name, stmts in binders.items()}
