"""Which rule owns an op, so that one bug gives one finding.

``where_owner(context, op, ancestors)``: the ``torch.where(cond, ..., ...)`` whose branch holds
``op`` and whose ``cond`` tests the operand (TL106's finding).  ``filter_owner``: the
``nan_to_num`` / ``where(isnan(...))`` / ``masked_fill(isinf(...))`` call wrapping ``op``, or the
later statement that filters the name its result was assigned to (TL107's finding);
:func:`is_nan_filter` tells whether one node is such a filter and of what.  ``fused_log_owner``:
the TL2xx code owning a log (TL201 log(softmax), TL202 log(sigmoid) and log(1 - sigmoid), TL203
log(sum(exp)) and log(1 + exp), TL204 x * log(x), TL205 log(1 + x)).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, FrozenSet, Optional, Sequence, Set

import libcst as cst

from torchlint.analysis.values import fused

from torchlint.analysis.project import module_outputs
from torchlint.analysis.model.calls import argument, has_star_args, positional_args
from torchlint.analysis.values.conditions import named_test, read_names
from torchlint.analysis.model.dataflow import Site, bindings, later_statements, site_of
from torchlint.analysis.values.domain import LOG, DomainOp, structurally_equal
from torchlint.analysis.model.ops import is_value_receiver, strip_clamp_min, strip_eps
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


# -- ownership ----------------------------------------------------------------------


WHERE_FUNCTIONS: FrozenSet[str] = frozenset({"torch.where"})
NAN_FILTER_FUNCTIONS: FrozenSet[str] = frozenset({"torch.nan_to_num", "torch.nan_to_num_"})
NAN_TESTS: FrozenSet[str] = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})
# Reductions that drop NaN terms: ``torch.nansum(p * torch.log(p / q))`` filters after the fact too.
NAN_SKIPPING_REDUCTIONS: FrozenSet[str] = frozenset({"torch.nansum", "torch.nanmean"})


def _operand_names(context: "FileContext", operand: cst.BaseExpression) -> Set[str]:
    return {name for name in read_names(operand) if context.qualified_name(cst.parse_expression(name)) is None and name != "self"}


def where_owner(
    context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None
) -> Optional[cst.Call]:
    """The ``torch.where`` whose branch holds ``op`` and whose condition tests its operand (TL106's finding)."""
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    operand_names = _operand_names(context, op.operand)
    path = ancestors + [op.node]
    for position in range(len(path) - 2, -1, -1):
        node = path[position]
        if isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return None
        if not isinstance(node, cst.Call) or context.qualified_name(node.func) not in WHERE_FUNCTIONS:
            continue
        args = positional_args(node)
        if len(args) != 3:
            continue
        child = path[position + 1]
        if child is not args[1] and child is not args[2]:
            continue
        condition = args[0].value
        tested = read_names(condition)
        named = named_test(condition, site_of(path[: position + 1]))
        if named is not None:  # ok = d > eps; torch.where(ok, x / d, 0)
            tested |= read_names(named[0])
        if _contains(condition, op.operand) or operand_names & tested:
            return node
    return None


def _contains(haystack: cst.CSTNode, needle: cst.BaseExpression) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if found:
                return False
            if isinstance(node, cst.BaseExpression) and structurally_equal(node, needle):
                found.append(node)
                return False
            return True

    visit(haystack, _Find())
    return bool(found)


def is_nan_filter(context: "FileContext", node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """The expression a NaN/Inf filter cleans, if ``node`` is one.

    ``torch.nan_to_num(y)`` / ``y.nan_to_num()`` -> y;
    ``torch.where(torch.isnan(y), v, y)`` -> y; ``y.masked_fill(torch.isinf(y), v)`` -> y.
    """
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    qualified = context.qualified_name(node.func)
    if qualified in NAN_FILTER_FUNCTIONS or qualified in NAN_SKIPPING_REDUCTIONS:
        first = argument(node, 0, "input")
        return first.value if first is not None else None
    if qualified is None and isinstance(node.func, cst.Attribute) and is_value_receiver(context, node.func.value):
        method = node.func.attr.value
        if method in ("nan_to_num", "nan_to_num_", "nansum", "nanmean"):
            return node.func.value
        if method in ("masked_fill", "masked_fill_"):
            mask = argument(node, 0, "mask")
            if mask is not None and _is_nan_test(context, mask.value):
                return node.func.value
    if qualified in WHERE_FUNCTIONS:
        args = positional_args(node)
        if len(args) == 3 and _is_nan_test(context, args[0].value):
            return args[2].value
    return None


def _is_nan_test(context: "FileContext", node: cst.CSTNode) -> bool:
    """Whether ``node`` contains isnan/isinf/isfinite, a comparison with inf, or ``y != y``."""
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            qualified = context.qualified_name(call.func) or ""
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
            if qualified.rsplit(".", 1)[-1] in NAN_TESTS or method in NAN_TESTS:
                found.append(call)

        def visit_Comparison(self, comparison: cst.Comparison) -> None:
            for part in [comparison.left] + [c.comparator for c in comparison.comparisons]:
                if _is_infinity(context, part):
                    found.append(comparison)
            # ``y != y``: only NaN differs from itself
            if (
                len(comparison.comparisons) == 1
                and isinstance(comparison.comparisons[0].operator, cst.NotEqual)
                and structurally_equal(comparison.left, comparison.comparisons[0].comparator)
            ):
                found.append(comparison)

    visit(node, _Find())
    return bool(found)


def _is_infinity(context, node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    qualified = context.qualified_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
    if qualified in ("math.inf", "numpy.inf", "torch.inf"):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "float" and node.args:
        text = node.args[0].value
        return isinstance(text, cst.SimpleString) and "inf" in text.value.lower()
    return False


def filter_owner(
    context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None
) -> Optional[cst.CSTNode]:
    """The NaN/Inf filter applied to ``op``'s result (TL107's finding), or None."""
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    path = ancestors + [op.node]
    statement_index = None
    for position in range(len(path) - 2, -1, -1):
        node = path[position]
        if isinstance(node, (cst.BaseSmallStatement, cst.BaseStatement)):
            statement_index = position
            break
        if isinstance(node, cst.Lambda):
            return None
        cleaned = is_nan_filter(context, node)
        if cleaned is not None and _within(path, position, cleaned):
            return node
    if statement_index is None:
        return None
    statement = path[statement_index]
    target = None
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
    elif isinstance(statement, (cst.AugAssign, cst.AnnAssign)):
        target = statement.target
    if not isinstance(target, cst.Name):
        return None
    name = target.value
    for later, _ in later_statements(site_of(path[: statement_index + 1])):
        if _filters_name(context, later, name):
            return later
        if _rebinds(later, name):
            return None
    return None


def _within(path: Sequence[cst.CSTNode], position: int, cleaned: cst.BaseExpression) -> bool:
    """Whether the path below ``path[position]`` goes through ``cleaned``."""
    return any(node is cleaned for node in path[position + 1 :])


def _filters_name(context: "FileContext", statement: cst.CSTNode, name: str) -> bool:
    return name in context.memoized("owners.filtered-names", statement, lambda node: _filtered_names(context, node))


def _filtered_names(context: "FileContext", statement: cst.CSTNode) -> FrozenSet[str]:
    """The names ``statement`` cleans of NaN/Inf: read by a filter call (``torch.nan_to_num(x)``), or assigned
    through a NaN test as their index (``x[torch.isnan(x)] = 0``)."""
    found: Set[str] = set()

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            cleaned = is_nan_filter(context, call)
            if cleaned is not None:
                found.update(read_names(cleaned))

        def visit_Assign(self, assign: cst.Assign) -> None:
            for target in assign.targets:
                subscript = target.target
                if isinstance(subscript, cst.Subscript) and isinstance(subscript.value, cst.Name) and _is_nan_test(context, subscript):
                    found.add(subscript.value.value)

    visit(statement, _Find())
    return frozenset(found)


def _rebinds(statement: cst.CSTNode, name: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(
            isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
        ):
            return True
    return False


def fused_log_owner(
    context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None
) -> Optional[str]:
    """The TL2xx rule that owns this log (module docs), or None.

    Uses the TL2xx rules' own matchers (``analysis/fused``), and also leaves
    to them the near relatives they deliberately do not rewrite
    (``log(2 * sigmoid(x))``, ``log((exp(s) * mask).sum())``, a local
    function or method named ``softmax``/``sigmoid``): one family, one owner.
    """
    if op.kind != LOG:
        return None
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    inner = strip_clamp_min(context, strip_eps(op.operand, context))
    activation = fused.activation_of(context, inner)
    if activation is not None:
        return "TL201" if activation.kind == "softmax" else "TL202"
    complement = fused.one_minus(inner)
    if complement is not None and fused.activation_of(context, complement, kinds=("sigmoid",)) is not None:
        return "TL202"
    for operand, kinds in ((inner, ("softmax", "sigmoid")), (complement, ("sigmoid",))):
        found = module_outputs.called_module_activation(context, operand, kinds) if operand is not None else None
        if found is not None:
            return "TL201" if found.traced.kind == "softmax" else "TL202"
    if fused.match_sum_of_exp(context, inner) is not None or _sum_of_exp_family(context, inner, site):
        return "TL203"
    one_plus = fused.one_plus(inner)
    if one_plus is not None:
        return "TL203" if fused.match_exp(context, one_plus) is not None else "TL205"
    parent = ancestors[-1] if ancestors else None
    if parent is not None and fused.match_x_log_x(context, parent) is not None:
        return "TL204"
    if _activation_family(context, inner):
        return "TL202" if "sigmoid" in _activation_family(context, inner) else "TL201"
    return None


_ACTIVATION_NAMES = ("softmax", "sigmoid", "Softmax", "Sigmoid", "expit")


def _activation_family(context: "FileContext", node: cst.BaseExpression) -> Optional[str]:
    """``2 * sigmoid(x)``, ``softmax(x)`` / ``self.softmax(x)`` defined in the file: the name of the activation."""
    node = fused.peel_shape_ops(context, node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _activation_family(context, node.left) or _activation_family(context, node.right)
    if isinstance(node, cst.Call):
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if name in _ACTIVATION_NAMES:
            return name.lower()
    return None


def _sum_of_exp_family(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """A sum whose terms contain an ``exp`` (``(exp(s) * mask).sum()``), names followed."""
    summed = fused.match_sum(context, node)
    if summed is None:
        if isinstance(node, cst.Name) and site is not None and depth < 3:
            reaching = bindings(site, node.value)
            if len(reaching) == 1 and reaching[0].value is not None and reaching[0].kind == "assign":
                return _sum_of_exp_family(context, reaching[0].value, reaching[0].site, depth + 1)
        return False
    return _mentions_exp(context, summed.operand, site, depth)


def _mentions_exp(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if fused.match_exp(context, call) is not None:
                found.append(call)

        def visit_Name(self, name: cst.Name) -> None:
            if site is not None and depth < 3 and not found:
                for binding in bindings(site, name.value):
                    if binding.kind in ("assign", "update") and binding.value is not None:
                        if _mentions_exp(context, binding.value, binding.site, depth + 1):
                            found.append(name)
                            return

    visit(node, _Find())
    return bool(found)
