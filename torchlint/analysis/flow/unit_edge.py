"""The edge of ``acos``/``asin``/``atanh``: a value that reaches ±1 by its own construction.

``acos(x)`` and ``asin(x)`` are NaN for ``|x| > 1`` and their derivative ``∓1 / sqrt(1 - x²)`` is
infinite at ``x = ±1``; ``atanh`` is infinite there.  :func:`unit_edge` says why an operand reaches ±1,
or None when nothing shows it does (an unknown value, or one kept inside: ``clamp(-1 + eps, 1 - eps)``,
``x * 0.999``).  What reaches ±1 is data, :data:`EDGE_OF_CALL` by short call name, plus three forms:

- a cosine: ``F.cosine_similarity``, ``nn.CosineSimilarity`` (called directly, bound to a name or to
  ``self.attr``), a product of two normalized tensors summed (``(a * b).sum(-1)``) or matrix-multiplied
  (``a @ b.T``, ``mm``, ``bmm``, ``einsum``), and ``(a * b).sum(d) / (a.norm(d) * b.norm(d))``: ±1 for
  parallel vectors, and rounding takes it past 1 (a NaN in the forward pass);
- the same cosine of a tensor with itself (``cosine_similarity(a, a)``, ``a @ a.T`` with ``a``
  normalized): 1 by construction on its diagonal, :data:`EDGE_SELF_COSINE`;
- a clamp to exactly ``[-1, 1]`` (``clamp``, ``clip``, ``hardtanh``): it passes ±1 through, and where it
  cut the value its zero gradient times the infinite one is NaN, :data:`EDGE_CLAMPED_TO_ONE`.

Names are followed to every binding that reaches the use (:mod:`torchlint.analysis.model.dataflow`); an
in-place clamp inside the edge (``c.clamp_(-1 + eps, 1 - eps)``) guards, like any binding that is not an
edge.  Shape steps, selections and negation keep an edge.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.analysis.flow.callers import passed_by_every_call_site
from torchlint.analysis.flow.signs import is_continuous_draw
from torchlint.analysis.model.calls import argument, has_star_args, positional_args
from torchlint.analysis.model.dataflow import Site, bindings
from torchlint.analysis.model.ops import call_parts, is_eps_like, without_shape_steps
from torchlint.analysis.values.domain import constant_value, structurally_equal
from torchlint.analysis.values.precision import clamp_lower_bound, clamp_upper_bound
from torchlint.analysis.values.kinds import MAX_DEPTH

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

EDGE_COSINE = "a cosine similarity: ±1 for parallel vectors, past 1 by rounding"
EDGE_SELF_COSINE = "the cosine of a tensor with itself: 1 by construction, past 1 by rounding"
EDGE_CLAMPED_TO_ONE = "a clamp to [-1, 1], which passes ±1 through and cuts past them to a NaN gradient"
EDGE_SATURATED = "a tanh, cos or sin output: exactly ±1 where it saturates (tanh beyond |x| = 9 in float32)"

# Short call names whose output reaches ±1 by construction.
EDGE_OF_CALL = {
    "cosine_similarity": EDGE_COSINE,
    "CosineSimilarity": EDGE_COSINE,
    "tanh": EDGE_SATURATED,
    "Tanh": EDGE_SATURATED,
    "cos": EDGE_SATURATED,
    "sin": EDGE_SATURATED,
}

_CLAMPS = frozenset({"clamp", "clip", "clamp_", "clip_", "hardtanh"})
_SELECTIONS = frozenset({"diag", "diagonal", "gather", "index_select", "masked_select", "squeeze", "flatten"})
_MATRIX_PRODUCTS = frozenset({"matmul", "mm", "bmm", "einsum", "dot", "inner", "mv"})
_NORMS = frozenset({"norm", "vector_norm"})
_FOLLOWED_BINDINGS = frozenset({"assign", "update", "inplace", "module"})


def unit_edge(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> Optional[str]:
    """Why ``node`` reaches ±1 by its own construction (an ``EDGE_*`` text), or None."""
    if depth > MAX_DEPTH:
        return None
    node = without_shape_steps(context, node)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return unit_edge(context, node.expression, site, depth + 1)
    if isinstance(node, cst.Subscript):
        return unit_edge(context, node.value, site, depth + 1)
    if isinstance(node, cst.Name):
        return _name_edge(context, node.value, site, depth)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.MatrixMultiply):
            return _product_edge(context, node.left, node.right, site, depth)
        if isinstance(node.operator, cst.Divide):
            return EDGE_COSINE if _is_manual_cosine(context, node, site, depth) else None
        return None
    if isinstance(node, cst.Call) and not has_star_args(node):
        return _call_edge(context, node, site, depth)
    return None


def _name_edge(context: "FileContext", name: str, site: Optional[Site], depth: int) -> Optional[str]:
    if site is None:
        return None
    edges = []
    for binding in bindings(site, name):
        if binding.kind in ("masked", "conditional"):
            return None  # patched on some paths or elements: not shown either way
        if binding.kind not in _FOLLOWED_BINDINGS or binding.value is None:
            return None
        edge = unit_edge(context, binding.value, binding.site, depth + 1)
        if edge is None:
            return None
        edges.append(edge)
    return edges[0] if edges else None


def _call_edge(context: "FileContext", call: cst.Call, site: Optional[Site], depth: int) -> Optional[str]:
    module = _cosine_module(context, call.func, site)
    if module:
        return _cosine(call, positional_args(call))
    name, source, is_method = call_parts(context, call)
    if name is None:
        return None
    if name in _CLAMPS:
        return _clamp_edge(context, call, name, source, site, depth)
    if name == "cosine_similarity":
        arguments = positional_args(call)
        return _cosine(call, arguments[1:] if is_method else arguments, source if is_method else None)
    if name in EDGE_OF_CALL:
        return EDGE_OF_CALL[name]
    if name in _SELECTIONS and source is not None:
        return unit_edge(context, source, site, depth + 1)
    if name == "sum" and source is not None:
        inner = without_shape_steps(context, source)
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Multiply):
            return _product_edge(context, inner.left, inner.right, site, depth)
        return None
    if name in _MATRIX_PRODUCTS:
        tensors = [arg.value for arg in positional_args(call)]
        if name == "einsum":
            tensors = tensors[1:]
        elif is_method and source is not None:
            tensors = [source] + tensors
        if len(tensors) == 2:
            return _product_edge(context, tensors[0], tensors[1], site, depth)
    return None


def _cosine(call: cst.Call, arguments, first: Optional[cst.BaseExpression] = None) -> str:
    values = ([first] if first is not None else []) + [arg.value for arg in arguments]
    if len(values) >= 2 and structurally_equal(values[0], values[1]):
        return EDGE_SELF_COSINE
    return EDGE_COSINE


def _cosine_module(context: "FileContext", func: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``func`` is an ``nn.CosineSimilarity`` module: made in place, or bound to a name or ``self.attr``."""
    if depth > 3:
        return False
    if isinstance(func, cst.Call):
        return context.qualified_name(func.func) == "torch.nn.CosineSimilarity"
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        value = context.self_attribute_value(func.attr.value)
        return value is not None and _cosine_module(context, value, None, depth + 1)
    if isinstance(func, cst.Name) and site is not None:
        found = bindings(site, func.value)
        return bool(found) and all(
            binding.kind == "assign" and binding.value is not None and _cosine_module(context, binding.value, binding.site, depth + 1)
            for binding in found
        )
    return False


def _clamp_edge(context, call: cst.Call, name: str, source, site, depth: int) -> Optional[str]:
    """A clamp with a bound of exactly ±1 is an edge; one kept inside (``-1 + eps``, ``0.999``) a guard;
    another is what its input is."""
    bounds = unit_bounds(context, call, name)
    if bounds is None:
        return None  # a bound held in a name: not shown either way
    low_value, high_value = (constant_value(bound) if bound is not None else None for bound in bounds)
    if name == "hardtanh":  # F.hardtanh(x, min_val=-1.0, max_val=1.0)
        low_value = -1.0 if bounds[0] is None else low_value
        high_value = 1.0 if bounds[1] is None else high_value
    if low_value in (-1, 1) or high_value in (-1, 1):
        return EDGE_CLAMPED_TO_ONE
    if low_value is not None and high_value is not None and -1 < low_value and high_value < 1:
        return None  # kept inside the edge
    return unit_edge(context, source, site, depth + 1) if source is not None else None


def unit_bounds(context: "FileContext", call: cst.Call, name: str):
    """(lower, upper) bound expressions of a clamp (either None when not given), read by
    :func:`~torchlint.analysis.values.precision.clamp_lower_bound` and its twin (``hardtanh``'s ``min_val`` and
    ``max_val`` here); None when a bound given is not a literal."""
    if name == "hardtanh":
        given = (argument(call, 1, "min_val"), argument(call, 2, "max_val"))
        bounds = tuple(arg.value if arg is not None else None for arg in given)
    else:
        lower, upper = clamp_lower_bound(context, call), clamp_upper_bound(context, call)
        bounds = (lower[1] if lower else None, upper[1] if upper else None)
    if any(bound is not None and constant_value(bound) is None for bound in bounds):
        return None
    return bounds


def _is_normalized(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int) -> bool:
    """A tensor divided by its own norm: ``F.normalize(x)`` or ``x / x.norm(dim, keepdim=True)``."""
    if depth > MAX_DEPTH:
        return False
    node = _untransposed(context, node)
    if isinstance(node, cst.Subscript):
        return _is_normalized(context, node.value, site, depth + 1)
    if isinstance(node, cst.Name) and site is not None:
        found = bindings(site, node.value)
        return bool(found) and all(
            binding.kind in ("assign", "update") and binding.value is not None
            and _is_normalized(context, binding.value, binding.site, depth + 1)
            for binding in found
        )
    if isinstance(node, cst.Call):
        if context.qualified_name(node.func) in ("torch.nn.functional.normalize",):
            return True
        name, source, _ = call_parts(context, node)
        return name in _SELECTIONS and source is not None and _is_normalized(context, source, site, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return structurally_equal(_norm_of(context, _without_floor(context, node.right)), node.left)
    return False


def _without_floor(context: "FileContext", divisor: cst.BaseExpression) -> cst.BaseExpression:
    """``n + eps`` or ``n.clamp(min=eps)`` -> ``n``: a norm kept off 0 still normalizes."""
    divisor = without_shape_steps(context, divisor)
    if isinstance(divisor, cst.BinaryOperation) and isinstance(divisor.operator, cst.Add):
        for term, other in ((divisor.left, divisor.right), (divisor.right, divisor.left)):
            if is_eps_like(other, context) or constant_value(other) is not None:
                return term
    if isinstance(divisor, cst.Call) and not has_star_args(divisor):
        name, source, is_method = call_parts(context, divisor)
        if name in ("clamp", "clamp_min", "clip") and is_method and source is not None:
            return source
    return divisor


def _norm_of(context: "FileContext", node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The tensor whose norm ``node`` is (``x.norm(...)``, ``torch.norm(x)``, ``linalg.vector_norm(x)``)."""
    node = without_shape_steps(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    name, source, _ = call_parts(context, node)
    return source if name in _NORMS else None


def _product_edge(context, left, right, site, depth: int) -> Optional[str]:
    if not (_is_normalized(context, left, site, depth + 1) and _is_normalized(context, right, site, depth + 1)):
        return None
    if structurally_equal(_untransposed(context, left), _untransposed(context, right)):
        return EDGE_SELF_COSINE
    return None if _random_pair(context, left, right, site) else EDGE_COSINE


def _random_pair(context: "FileContext", left, right, site: Optional[Site]) -> bool:
    """One of two distinct directions is a draw of a continuous distribution (``torch.randn``, also through
    every caller of a parameter): the pair is parallel with probability 0 (spherical interpolation of latents)."""
    return any(_random_direction(context, side, site) for side in (left, right))


def _random_direction(context: "FileContext", node: cst.BaseExpression, site: Optional[Site]) -> bool:
    node = _untransposed(context, node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        node = node.left  # x / x.norm(): the direction of x
    elif isinstance(node, cst.Call) and context.qualified_name(node.func) == "torch.nn.functional.normalize" and node.args:
        node = node.args[0].value
    if isinstance(node, cst.Name) and site is not None:
        if is_continuous_draw(context, node, site):
            return True
        found = bindings(site, node.value)
        if len(found) != 1:
            return False
        if found[0].kind in ("assign", "update") and found[0].value is not None:
            return _random_direction(context, found[0].value, found[0].site)  # a = a / a.norm(...)
        return found[0].kind == "param" and passed_by_every_call_site(
            context, node.value, lambda value, at: is_continuous_draw(context, value, at)
        )
    return is_continuous_draw(context, node, site)


def _untransposed(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT"):
        return without_shape_steps(context, node.value)
    return without_shape_steps(context, node)


def _is_manual_cosine(context: "FileContext", node: cst.BinaryOperation, site, depth: int) -> bool:
    """``(a * b).sum(d) / (a.norm(d) * b.norm(d))``: a dot product over the product of the same two norms,
    with nothing added to the divisor."""
    dividend = without_shape_steps(context, node.left)
    divisor = without_shape_steps(context, node.right)
    if not (isinstance(divisor, cst.BinaryOperation) and isinstance(divisor.operator, cst.Multiply)):
        return False
    first, second = _norm_of(context, divisor.left), _norm_of(context, divisor.right)
    if first is None or second is None:
        return False
    factors = None
    if isinstance(dividend, cst.Call) and not has_star_args(dividend):
        name, source, is_method = call_parts(context, dividend)
        inner = without_shape_steps(context, source) if name == "sum" and source is not None else None
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Multiply):
            factors = (inner.left, inner.right)
        elif name in ("dot", "inner") and source is not None:
            values = [arg.value for arg in positional_args(dividend)]
            values = [source] + values if is_method else values
            factors = (values[0], values[1]) if len(values) == 2 else None
    if factors is None:
        return False
    same = structurally_equal
    if not ((same(factors[0], first) and same(factors[1], second)) or (same(factors[0], second) and same(factors[1], first))):
        return False
    return same(first, second) or not _random_pair(context, first, second, site)
