"""Guards written as tests: an enclosing ``if d > 0:``, an ``assert``, an early exit when ``d == 0``.

:func:`guarded_by_condition` answers for one operand at one op; :func:`condition_implies_positive`
and :func:`condition_implies_zero` answer for one test expression (TL106 reads ``where`` conditions
with them).  A test may name the expression a local name holds, or a local that holds the operand
recomputed from the same inputs (see :func:`guarded_by_condition`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Set

import libcst as cst

from torchlint.analysis.model.calls import argument, has_star_args, positional_args
from torchlint.analysis.model.dataflow import Site, bindings, earlier_statements, site_of, sole_assignment
from torchlint.analysis.values.domain import constant_value, is_guard_constant, structurally_equal
from torchlint.analysis.values.kinds import MAX_DEPTH
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.ops import call_parts, without_shape_steps
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


# -- conditions ---------------------------------------------------------------------


def _matches(context, expression: cst.BaseExpression, operand: cst.BaseExpression) -> bool:
    """``expression`` stands for ``operand`` or its minimum (``d``, ``d.min()``, ``torch.min(d)``, ``d.abs()``)."""
    if structurally_equal(expression, operand):
        return True
    if isinstance(expression, cst.Call) and not has_star_args(expression):
        name, source, is_method = call_parts(context, expression)
        if name in ("min", "amin", "abs", "float", "double", "detach", "item", "all", "squeeze") and source is not None:
            if name in ("min", "amin") and len(positional_args(expression)) > (0 if is_method else 1):
                return False
            return _matches(context, source, operand)
    return False


def _count_source(context, operand: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``m`` for a count of ``m``: ``m.sum()``, ``m.float().sum()``, ``torch.count_nonzero(m)``."""
    if not isinstance(operand, cst.Call):
        return None
    name, source, _ = call_parts(context, operand)
    if name in ("sum", "count_nonzero", "float", "long", "int", "double", "item") and source is not None:
        inner = _count_source(context, source)
        return inner if inner is not None else source
    return None


def condition_implies_positive(
    context: "FileContext",
    test: cst.BaseExpression,
    operand: cst.BaseExpression,
    division: bool = False,
    site: Optional[Site] = None,
) -> bool:
    """Whether ``test`` being true means ``operand`` > 0 (for ``division``: != 0).

    A test held in a name (``ok = d > 0; if ok.all():``) is read through its binding when ``site`` is given.
    """
    named = named_test(test, site)
    if named is not None:
        return condition_implies_positive(context, named[0], operand, division, named[1])
    if isinstance(test, cst.BooleanOperation):
        if isinstance(test.operator, cst.And):
            return condition_implies_positive(context, test.left, operand, division, site) or condition_implies_positive(
                context, test.right, operand, division, site
            )
        return condition_implies_positive(context, test.left, operand, division, site) and condition_implies_positive(
            context, test.right, operand, division, site
        )
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return condition_implies_zero(context, test.expression, operand, site)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        left, right, operator = test.left, target.comparator, target.operator
        if isinstance(operator, cst.Equal):
            # ``(n == 0).sum().item() == 0``: no element meets the test, as ``not (n == 0).any()``
            for subject, bound in ((left, right), (right, left)):
                counted = _count_source(context, subject) if constant_value(bound) == 0 else None
                if counted is not None and condition_implies_zero(context, counted, operand, site):
                    return True
        for subject, bound, op in ((left, right, operator), (right, left, _flip(operator))):
            if not _matches(context, subject, operand):
                continue
            value = constant_value(bound)
            positive_bound = value is not None and value > 0 or is_guard_constant(bound)
            if isinstance(op, cst.GreaterThan) and (positive_bound or value == 0):
                return True
            if isinstance(op, cst.GreaterThanEqual) and positive_bound:
                return True
            if isinstance(op, cst.NotEqual) and value == 0:
                return True
        return False
    if isinstance(test, cst.Call) and not has_star_args(test):
        name, source, is_method = call_parts(context, test)
        if name in ("all", "item", "bool", "detach") and source is not None:
            return condition_implies_positive(context, source, operand, division, site)
        if isinstance(test.func, cst.Name) and test.func.value in ("bool", "all") and test.args:
            return condition_implies_positive(context, test.args[0].value, operand, division, site)
        if name in ("gt", "ne", "greater", "not_equal") and source is not None:
            bound = argument(test, 0 if is_method else 1, "other")
            value = constant_value(bound.value) if bound is not None else None
            if _matches(context, source, operand) and value is not None and (value >= 0 if name in ("gt", "greater") else value == 0):
                return True
        if name == "any" and source is not None:
            counted = _count_source(context, operand)
            if counted is not None and structurally_equal(source, counted):
                return True
    # ``if d:`` / ``if mask.sum():``: truthiness is d != 0.
    if division and structurally_equal(test, operand):
        return True
    counted = _count_source(context, operand)
    return counted is not None and division and structurally_equal(test, counted)


def condition_implies_zero(
    context: "FileContext", test: cst.BaseExpression, operand: cst.BaseExpression, site: Optional[Site] = None
) -> bool:
    """Whether ``test`` being false means ``operand`` is off zero (``d == 0``, ``d <= eps``, ``not mask.any()``)."""
    named = named_test(test, site)
    if named is not None:
        return condition_implies_zero(context, named[0], operand, named[1])
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return condition_implies_zero(context, test.left, operand, site) or condition_implies_zero(context, test.right, operand, site)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return condition_implies_positive(context, test.expression, operand, True, site)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        for subject, bound, op in (
            (test.left, target.comparator, target.operator),
            (target.comparator, test.left, _flip(target.operator)),
        ):
            if not _matches(context, subject, operand):
                continue
            value = constant_value(bound)
            small_bound = value is not None and value >= 0 or is_guard_constant(bound)
            if isinstance(op, cst.Equal) and value == 0:
                return True
            if isinstance(op, (cst.LessThanEqual, cst.LessThan)) and small_bound and not (
                isinstance(op, cst.LessThan) and value == 0
            ):
                return True
        # ``if x.max() == x.min(): continue`` before dividing by ``x.max() - x.min()``: equal terms are what
        # makes their difference 0.
        if isinstance(target.operator, cst.Equal) and _is_difference_of(context, operand, test.left, target.comparator):
            return True
        return False
    if isinstance(test, cst.Call) and not has_star_args(test):
        name, source, is_method = call_parts(context, test)
        if name in ("any", "item", "bool") and source is not None:
            return condition_implies_zero(context, source, operand, site)
        if isinstance(test.func, cst.Name) and test.func.value in ("any", "bool") and test.args:
            return condition_implies_zero(context, test.args[0].value, operand, site)
        if name in ("eq", "le", "lt", "isclose") and source is not None and _matches(context, source, operand):
            return True
    return False


def _is_difference_of(context: "FileContext", operand: cst.BaseExpression, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """``operand`` is ``a - b`` or ``b - a`` (through reshapes)."""
    operand = without_shape_steps(context, operand)
    if not (isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, cst.Subtract)):
        return False
    return (_matches(context, operand.left, a) and _matches(context, operand.right, b)) or (
        _matches(context, operand.left, b) and _matches(context, operand.right, a)
    )


def _implies_nonzero(
    context: "FileContext", test: cst.BaseExpression, operand: cst.BaseExpression, site: Optional[Site] = None
) -> bool:
    """Whether ``test`` being true means ``operand`` != 0, on either side of it: ``w != 0``, ``w > 0``,
    ``w < 0``, ``~(w >= 0)``, ``~(w == 0)``.  Off zero is all a division needs; for roots and logs a
    negative value is no better, so they ask :func:`condition_implies_positive` instead."""
    named = named_test(test, site)
    if named is not None:
        return _implies_nonzero(context, named[0], operand, named[1])
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, (cst.BitInvert, cst.Not)):
        return _falsity_implies_nonzero(context, test.expression, operand, site)
    if condition_implies_positive(context, test, operand, True, site):
        return True
    return _below_zero(context, test, operand)


def _falsity_implies_nonzero(
    context: "FileContext", test: cst.BaseExpression, operand: cst.BaseExpression, site: Optional[Site]
) -> bool:
    """Whether ``test`` being false means ``operand`` != 0: ``w == 0``, ``w <= 0`` (false: positive), ``w >= 0``
    (false: negative)."""
    named = named_test(test, site)
    if named is not None:
        return _falsity_implies_nonzero(context, named[0], operand, named[1])
    return condition_implies_zero(context, test, operand, site) or _below_zero(context, test, operand, negated=True)


_NEGATIONS = {
    cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.LessThan: cst.GreaterThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
}


def _below_zero(context: "FileContext", test: cst.BaseExpression, operand: cst.BaseExpression, negated: bool = False) -> bool:
    """``w < 0`` / ``w <= -c`` (c > 0): ``operand`` below zero; with ``negated``, the test whose falsity
    says so (``w >= 0``, ``w > -c``)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    target = test.comparisons[0]
    for subject, bound, op in (
        (test.left, target.comparator, target.operator),
        (target.comparator, test.left, _flip(target.operator)),
    ):
        value = constant_value(bound)
        if value is None or not _matches(context, subject, operand):
            continue
        kind = _NEGATIONS.get(type(op)) if negated else type(op)
        if (kind is cst.LessThan and value <= 0) or (kind is cst.LessThanEqual and value < 0):
            return True
    return False


def selected_off_zero(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``w[w < 0]``, or a name every binding of which is one (a ``None`` placeholder aside: the op cannot
    run on it): the entries the author selected are off zero."""
    if depth > MAX_DEPTH:
        return False
    node = without_shape_steps(context, node)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return _implies_nonzero(context, node.slice[0].slice.value, node.value, site)
    if isinstance(node, cst.Name) and site is not None:
        reaching = [
            b for b in bindings(site, node.value)
            if not (b.kind == "assign" and isinstance(b.value, cst.Name) and b.value.value == "None")
        ]
        return bool(reaching) and all(
            b.kind in ("assign", "conditional") and b.value is not None
            and selected_off_zero(context, b.value, b.site, depth + 1)
            for b in reaching
        )
    return False


def named_test(test: cst.BaseExpression, site: Optional[Site]):
    """(value, its site) for a test held in a local name bound once."""
    bound = sole_assignment(site, test.value) if isinstance(test, cst.Name) else None
    if bound is not None and isinstance(bound.value, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation, cst.Call)):
        return bound.value, bound.site
    return None


def _flip(operator):
    flips = {
        cst.GreaterThan: cst.LessThan,
        cst.LessThan: cst.GreaterThan,
        cst.GreaterThanEqual: cst.LessThanEqual,
        cst.LessThanEqual: cst.GreaterThanEqual,
    }
    flipped = flips.get(type(operator))
    return flipped() if flipped is not None else operator


_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


def guarded_by_condition(
    context: "FileContext",
    operand: cst.BaseExpression,
    ancestors: Sequence[cst.CSTNode],
    division: bool = False,
    node: Optional[cst.CSTNode] = None,
) -> bool:
    """An enclosing test, an earlier ``assert`` or early exit that keeps ``operand`` off zero (module docs).

    ``ancestors`` enclose the op; pass the op itself as ``node`` so that
    ``torch.sqrt(d) if d > 0 else 0`` sees which branch it is in.  A name bound once to the expression
    the test names counts as it: ``num / denom if s.sum() > 0 else 0`` with ``denom = s.sum()``.
    """
    site = site_of(list(ancestors))
    uncast = without_shape_steps(context, operand)  # log(n.float()) under a test of n
    bound = sole_assignment(site, uncast.value) if isinstance(uncast, cst.Name) else None
    operands = [operand] + ([uncast] if uncast is not operand else []) + ([bound.value] if bound else [])

    # ``test_site`` is where the test stands.
    def tested(test: cst.BaseExpression, test_site: Site) -> list:
        return operands + _names_holding(test, operands, site, test_site)

    def positive(test: cst.BaseExpression, test_site: Site) -> bool:
        return any(condition_implies_positive(context, test, each, division, site) for each in tested(test, test_site))

    def zero(test: cst.BaseExpression, test_site: Site) -> bool:
        return any(condition_implies_zero(context, test, each, site) for each in tested(test, test_site))

    path = list(ancestors) + ([node] if node is not None else [])
    for position, node in enumerate(path):
        child = path[position + 1] if position + 1 < len(path) else None
        if not isinstance(node, (cst.If, cst.While, cst.IfExp, cst.BooleanOperation)) or child is None:
            continue
        here = site_of(path[:position])
        if isinstance(node, (cst.If, cst.While)):
            if child is node.body and positive(node.test, here):
                return True
            if child is getattr(node, "orelse", None) and zero(node.test, here):
                return True
        elif isinstance(node, cst.IfExp):
            if child is node.body and positive(node.test, here):
                return True
            if child is node.orelse and zero(node.test, here):
                return True
        elif isinstance(node, cst.BooleanOperation) and child is node.right:
            if isinstance(node.operator, cst.And) and positive(node.left, here):
                return True
            if isinstance(node.operator, cst.Or) and zero(node.left, here):
                return True
    for statement, at in earlier_statements(site):
        if isinstance(statement, cst.If) and statement.orelse is None:
            if _ends_in_exit(statement.body) and zero(statement.test, at):
                return True
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assert) and positive(small.test, at):
                    return True
    return False


def _names_holding(test: cst.BaseExpression, operands: Sequence[cst.BaseExpression], site: Site, test_site: Site) -> list:
    """The names ``test`` reads that hold one of ``operands``, recomputed from the same inputs:
    ``n = mask.sum()``, ``if n == 0: return``, then ``x / mask.sum()`` divides by what was tested.  The
    test (at ``test_site``) must read the assignment that reaches the op, and the inputs (``mask``)
    must be bound by the same bindings at that assignment as at the op."""
    held = []
    for name in sorted(read_names(test)):
        if "." in name:
            continue
        assignment = sole_assignment(site, name)
        if assignment is None or not any(structurally_equal(assignment.value, each) for each in operands):
            continue
        if not _same_bindings(bindings(test_site, name), [assignment]):
            continue  # the name was bound again between the test and the op
        inputs = {dotted.split(".", 1)[0] for dotted in read_names(assignment.value)}
        if all(_same_bindings(bindings(site, each), bindings(assignment.site, each)) for each in inputs):
            held.append(cst.Name(name))
    return held


def _same_bindings(here, there) -> bool:
    return len(here) == len(there) and all(a.node is b.node for a, b in zip(here, there))


def _ends_in_exit(block: cst.BaseSuite) -> bool:
    statements = block.body
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return any(isinstance(small, _EXITS) for small in last.body)
    return isinstance(last, _EXITS)


def read_names(node: cst.CSTNode) -> Set[str]:
    """Dotted names (``p``, ``self.scale``) read inside ``node``."""
    found: Set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            dotted = dotted_name(attribute)
            if dotted is not None:
                found.add(dotted)
                return False
            return True

        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    visit(node, _Collect())
    return found
