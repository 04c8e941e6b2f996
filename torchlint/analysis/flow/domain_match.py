"""Finding the domain-edge ops of :mod:`torchlint.analysis.values.domain` in code, divisors classified by the sign domain.

:func:`match_domain_op` matches one node (a Call, BinaryOperation or AugAssign); :func:`find_domain_ops`
finds every op inside an expression (TL106/TL107 use it on the branches of a ``where`` or the argument of
a ``nan_to_num``).  A division is an op only when :func:`classify_divisor` finds its divisor a reduction
that can be 0; its kind and edge come from :func:`torchlint.analysis.flow.signs.evaluate`, which is why this
module sits above the sign domain while :mod:`~torchlint.analysis.values.domain` (the op kinds, literal values,
masks) sits below it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import libcst as cst

from torchlint.analysis.flow import signs
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.model.dataflow import Site, bindings
from torchlint.analysis.values.domain import (
    DIV,
    LOG,
    NORM_FUNCTIONS,
    POW,
    REDUCTIONS,
    RSQRT,
    SQRT,
    Divisor,
    DomainOp,
    call_kind,
    constant_value,
    exponent_class,
    integer_exponent,
    structurally_equal,
)
from torchlint.analysis.model.ops import call_parts, is_value_receiver, without_shape_steps
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


def match_domain_op(context: "FileContext", node: cst.CSTNode, site: Optional[Site] = None) -> Optional[DomainOp]:
    """The domain-edge op ``node`` is, if any (``site`` lets divisors and exponents be followed through names)."""
    op = _match(context, node, site)
    if op is not None and op.kind == POW and integer_exponent(context, op.exponent, site):
        return None  # x ** p with p: int = 3
    return op


def _match(context: "FileContext", node: cst.CSTNode, site: Optional[Site]) -> Optional[DomainOp]:
    if isinstance(node, cst.Call):
        return _match_call(context, node, site)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power):
            return _pow_op(node, node.left, node.right, "operator", "**", False)
        if isinstance(node.operator, cst.Divide):
            return _div_op(context, node, node.left, node.right, "operator", "/", site)
        return None
    if isinstance(node, cst.AugAssign):
        if isinstance(node.operator, cst.DivideAssign):
            return _div_op(context, node, node.target, node.value, "operator", "/=", site)
        if isinstance(node.operator, cst.PowerAssign):
            return _pow_op(node, node.target, node.value, "operator", "**=", False)
    return None


def find_domain_ops(context: "FileContext", expression: cst.CSTNode, site: Optional[Site] = None) -> List[DomainOp]:
    """Every domain-edge op inside ``expression`` (itself included), outermost first; lambdas excluded."""
    found: List[DomainOp] = []

    class _Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Lambda):
                return False
            op = match_domain_op(context, node, site)
            if op is not None:
                found.append(op)
            return True

    visit(expression, _Finder())
    return found


def _match_call(context: "FileContext", call: cst.Call, site: Optional[Site]) -> Optional[DomainOp]:
    if has_star_args(call):
        return None
    func = call.func
    qualified = context.qualified_name(func)
    kind = call_kind(qualified, func)
    if kind is None:
        return None
    if qualified is not None:
        if kind in (SQRT, RSQRT, LOG):
            operand = argument(call, 0, "input")
            if operand is None:
                return None
            return DomainOp(kind, call, operand.value, "function", qualified, extra_args=len(call.args) > 1)
        if kind == POW:
            base = argument(call, 0, "input")
            exponent = argument(call, 1, "exponent")
            if base is None or exponent is None:
                return None
            return _pow_op(call, base.value, exponent.value, "function", qualified, len(call.args) > 2)
        numerator = argument(call, 0, "input")
        divisor = argument(call, 1, "other")
        if numerator is None or divisor is None or len(call.args) > 2:
            return None
        return _div_op(context, call, numerator.value, divisor.value, "function", qualified, site)
    if not is_value_receiver(context, func.value):
        return None
    method = func.attr.value
    receiver = func.value
    if kind in (SQRT, RSQRT, LOG):
        if call.args:
            return None
        return DomainOp(kind, call, receiver, "method", method)
    if kind == POW:
        exponent = argument(call, 0, "exponent")
        if exponent is None:
            return None
        return _pow_op(call, receiver, exponent.value, "method", method, len(call.args) > 1)
    divisor = argument(call, 0, "other")
    if divisor is None or len(call.args) > 1:
        return None
    return _div_op(context, call, receiver, divisor.value, "method", method, site)


def _pow_op(node, base, exponent, form, name, extra_args) -> Optional[DomainOp]:
    kind = exponent_class(exponent)
    if kind is None:
        return None
    return DomainOp(kind, node, base, form, name, exponent=exponent, extra_args=extra_args)


def _div_op(context, node, numerator, divisor_node, form, name, site) -> Optional[DomainOp]:
    divisor = classify_divisor(context, divisor_node, numerator, site)
    if divisor is None:
        return None
    return DomainOp(DIV, node, divisor_node, form, name, numerator=numerator, divisor=divisor)


def classify_divisor(
    context: "FileContext",
    divisor: cst.BaseExpression,
    numerator: Optional[cst.BaseExpression] = None,
    site: Optional[Site] = None,
) -> Optional[Divisor]:
    """What kind of reduction ``divisor`` is, or None when it is none that can be 0 (see the module docs).

    A divisor is a candidate when it is a reduction (a sum, mean, norm, std, var, count or extremum,
    through reshapes and ``[:, None]``), a product of reductions, or a difference; its kind and edge
    come from the sign domain (:mod:`torchlint.analysis.flow.signs`)."""
    node = _divisor_core(context, divisor)
    if isinstance(node, cst.Name) and site is not None:
        reaching = bindings(site, node.value)
        # The value comes from one assignment, perhaps repaired afterwards (``n[n == 0] = 1``, an
        # ``if`` that adds eps): the guard analysis judges the repairs.
        if (
            reaching
            and reaching[-1].kind == "assign"
            and reaching[-1].value is not None
            and all(b.kind in ("masked", "conditional") for b in reaching[:-1])
        ):
            found = classify_divisor(context, reaching[-1].value, numerator, reaching[-1].site)
            if found is not None and found.kind in ("normalize", "cosine"):
                # ``n = x.norm(dim=1, keepdim=True); x / n``: the same magnitude, though not the
                # one-expression form that F.normalize / F.cosine_similarity rewrite
                found = classify_divisor(context, reaching[-1].value, None, reaching[-1].site)
            if found is not None:
                return Divisor(found.kind, found.reduction, through_name=True, edge=found.edge)
        return None
    root = _match(context, node, site)
    if root is not None and root.kind in (SQRT, POW) and root.operand is not node:
        # ``x.pow(2).sum(1).pow(1 / 2)``, ``torch.sqrt((d ** 2).sum(-1))``: a root of a magnitude is 0 where it is.
        inner = classify_divisor(context, root.operand, None, site)
        if inner is None or inner.kind not in ("magnitude", "count") or inner.edge is None:
            return None
        return Divisor("root", node, through_name=inner.through_name, edge=inner.edge)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left = classify_divisor(context, node.left, None, site)
        right = classify_divisor(context, node.right, None, site)
        if left is None or right is None:
            return None
        norms = _norm_parts(context, node.left), _norm_parts(context, node.right)
        if numerator is not None and all(part is not None for part in norms):
            cosine = _cosine(context, numerator, norms[0], norms[1])
            if cosine is not None:
                return Divisor("cosine", node, dim=cosine.dim, cosine_operands=cosine.cosine_operands, edge=signs.EDGE_NORM)
        value = signs.evaluate(context, node, site, division=True)
        return Divisor("product", node, edge=value.edge if value.sign is not signs.Sign.UNKNOWN else None)
    difference = isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract)
    summed = _reduced(context, node)
    if summed is None and not difference:
        return None
    value = signs.evaluate(context, node, site, division=True)
    edge = value.edge if value.sign is not signs.Sign.UNKNOWN else None
    if edge is None and summed is not None and numerator is not None and _averages_with(context, numerator, summed):
        edge = signs.EDGE_WEIGHTS  # mm(w, x) / w.sum(1): a weighted mean, 0 / 0 when every weight is
    if edge == signs.EDGE_COUNT:
        kind = "count"
    elif edge is not None or value.sign is signs.Sign.POSITIVE:
        kind = "magnitude"
    elif summed is not None and _reduction_name(context, node) in _SUMS:
        kind = "sum"  # a sum of unknown sign: it can cancel to 0, and no clamp is a correct fix
    else:
        return None  # a mean, extremum or difference of unknown sign: nothing says it reaches 0
    if kind == "magnitude" and numerator is not None:
        parts = _norm_parts(context, node)
        if parts is not None:
            tensor, dim, keepdim, order = parts
            if keepdim and dim is not None and structurally_equal(tensor, numerator):
                return Divisor("normalize", node, normalized=tensor, dim=dim, norm_order=order, edge=edge)
    return Divisor(kind, node, edge=edge)


_SUMS = frozenset({"sum", "nansum"})


def _divisor_core(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """``d`` for ``d[:, None]``, ``d.unsqueeze(1).expand(-1, n)``, ``d.view(b, 1, 1)``: reshapes keep its values."""
    for _ in range(8):
        node = without_shape_steps(context, node)
        if isinstance(node, cst.Subscript) and all(_is_reshaping_index(element) for element in node.slice):
            node = node.value
            continue
        return node
    return node


def _is_reshaping_index(element: cst.SubscriptElement) -> bool:
    """``None``, ``:`` or ``...`` in ``d[:, None]``: a new axis or a whole one, no selection."""
    index = element.slice
    if isinstance(index, cst.Slice):
        return index.lower is None and index.upper is None and index.step is None
    value = index.value
    return isinstance(value, cst.Ellipsis) or (isinstance(value, cst.Name) and value.value == "None")


def _reduction_name(context: "FileContext", node: cst.BaseExpression) -> Optional[str]:
    return call_parts(context, node)[0] if isinstance(node, cst.Call) else None


def _reduced(context: "FileContext", node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What ``node`` reduces, when it is a reduction (``x.sum(1)``, ``torch.norm(x)``, ``x.max(1)[0]``)."""
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        node = node.value  # x.max(dim)[0]
    elif isinstance(node, cst.Attribute) and node.attr.value == "values":
        node = node.value
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    name, source, _ = call_parts(context, node)
    return source if name in REDUCTIONS else None


def _averages_with(context: "FileContext", numerator: cst.BaseExpression, weights: cst.BaseExpression) -> bool:
    """Whether ``numerator`` sums products with ``weights``: ``mm(w, x)``, ``w @ x``, ``(w * x).sum(d)``."""
    weights = without_shape_steps(context, weights)

    def is_weights(factor: cst.BaseExpression) -> bool:
        return structurally_equal(without_shape_steps(context, factor), weights)

    node = without_shape_steps(context, numerator)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return is_weights(node.left) or is_weights(node.right)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, is_method = call_parts(context, node)
    if name in ("mm", "matmul", "bmm", "einsum"):
        factors = ([source] if is_method and source is not None else []) + [arg.value for arg in positional_args(node)]
        return any(is_weights(factor) for factor in factors if not isinstance(factor, cst.SimpleString))
    if name in ("sum", "nansum") and source is not None:
        product = without_shape_steps(context, source)
        return (
            isinstance(product, cst.BinaryOperation)
            and isinstance(product.operator, cst.Multiply)
            and (is_weights(product.left) or is_weights(product.right))
        )
    return False


def _norm_parts(context: "FileContext", node: cst.BaseExpression):
    """(tensor, dim, keepdim, order) for an L2-style norm call, else None."""
    node = node
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    qualified = context.qualified_name(node.func)
    if qualified in NORM_FUNCTIONS:
        tensor = argument(node, 0, "input") or argument(node, 0, "x") or argument(node, 0, "A")
        if tensor is None:
            return None
        if qualified == "torch.linalg.vector_norm" or qualified == "torch.linalg.norm":
            order = argument(node, 1, "ord")
            dim = argument(node, 2, "dim")
            keepdim = argument(node, 3, "keepdim")
        else:
            order = argument(node, 1, "p")
            dim = argument(node, 2, "dim")
            keepdim = argument(node, 3, "keepdim")
        return tensor.value, dim.value if dim else None, _is_true(keepdim), order.value if order else None
    if qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value == "norm":
        if not is_value_receiver(context, node.func.value):
            return None
        order = argument(node, 0, "p")
        dim = argument(node, 1, "dim")
        keepdim = argument(node, 2, "keepdim")
        if keyword_arg(node, "dtype") is not None or len(positional_args(node)) > 3:
            return None
        return node.func.value, dim.value if dim else None, _is_true(keepdim), order.value if order else None
    return None


def _is_true(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def _cosine(context, numerator, left_norm, right_norm) -> Optional[Divisor]:
    """``(a * b).sum(d)`` / ``torch.sum(a * b, d)`` over ``a.norm(dim=d) * b.norm(dim=d)``."""
    (a, dim_a, keep_a, order_a), (b, dim_b, keep_b, order_b) = left_norm, right_norm
    if keep_a or keep_b or dim_a is None or dim_b is None:
        return None
    if not structurally_equal(dim_a, dim_b):
        return None
    for order in (order_a, order_b):
        if order is not None and constant_value(order) != 2:
            return None
    node = numerator
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    qualified = context.qualified_name(node.func)
    if qualified == "torch.sum":
        product = argument(node, 0, "input")
        dim = argument(node, 1, "dim")
        keepdim = argument(node, 2, "keepdim")
    elif qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value == "sum":
        product = cst.Arg(node.func.value)
        dim = argument(node, 0, "dim")
        keepdim = argument(node, 1, "keepdim")
    else:
        return None
    if product is None or dim is None or keepdim is not None or len(node.args) > (2 if qualified else 1):
        return None
    if not structurally_equal(dim.value, dim_a):
        return None
    factors = product.value
    if not isinstance(factors, cst.BinaryOperation) or not isinstance(factors.operator, cst.Multiply):
        return None
    pairs = ((factors.left, factors.right), (factors.right, factors.left))
    for first, second in pairs:
        if structurally_equal(first, a) and structurally_equal(second, b):
            return Divisor("cosine", None, dim=dim_a, cosine_operands=(a, b))
    return None
