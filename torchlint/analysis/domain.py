"""Recognising the operations whose domain has an edge: sqrt, rsqrt, log, fractional pow, division.

Every form is one :class:`DomainOp`, so rules and fixes never look at call shapes:

    kind "sqrt":   torch.sqrt(x), x.sqrt()
    kind "rsqrt":  torch.rsqrt(x), x.rsqrt()
    kind "log":    torch.log/log2/log10(x), x.log()/log2()/log10()
    kind "pow":    torch.pow(x, p), x.pow(p), x ** p with p in (0, 1), 0.5 included
                   (``0.5``, ``1 / 3``), a reciprocal ``1 / p``, or an exponent held in a name,
                   attribute or tensor (``gamma``, ``self.p``: it may be below 1)
    kind "div":    a / d, a /= d, torch.div(a, d), a.div(d) where d is a tensor
                   reduction that can be 0 (see :class:`Divisor`)

``operand`` is the value that must stay off the edge (the argument, the
base, the divisor); ``form`` is "function", "method" or "operator".

:func:`match_domain_op` matches one node (a Call, BinaryOperation or
AugAssign); :func:`find_domain_ops` finds every op inside an expression
(TL106/TL107 use it on the branches of a ``where`` or the argument of a
``nan_to_num``).  Whether an operand is guarded is :mod:`torchlint.analysis.guards`'s
question, not this module's.

A divisor is a candidate when it is a reduction (a sum, mean, norm, std, var, count or extremum,
seen through reshapes such as ``[:, None]``, ``unsqueeze_``, ``expand``), a product of candidates, or
a difference; what it is comes from the sign domain (:func:`torchlint.analysis.signs.evaluate`), and
``Divisor.edge`` records why it reaches 0 (None: its sign is unknown).  The kinds, and the fix each
calls for:

    "count":     count_nonzero(m), m.sum() over a mask (a comparison, a bool
                 cast, a name that says mask/valid) -> clamp to 1
    "magnitude": a norm, std or var, a sum of non-negative terms (abs, squares,
                 ReLU outputs), max - min, the weights of a weighted mean
                 (``mm(w, x) / w.sum(1)``) -> clamp to eps
    "normalize": ``x / x.norm(dim=d, keepdim=True)`` -> F.normalize
    "cosine":    ``(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`` -> F.cosine_similarity
    "product":   a product of candidates otherwise -> clamp to eps
    "sum":       a sum of values of unknown sign: it can cancel to 0, but no clamp is
                 a correct fix (it may be negative) -> no fix

A mean, an extremum or a difference of unknown sign is not a candidate: nothing says it
reaches 0.  A divisor given by name (``n = mask.sum(); x / n``) is followed through
:mod:`torchlint.analysis.dataflow` when the caller passes a site.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional

import libcst as cst

from torchlint.analysis.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.dataflow import Site, bindings, sole_assignment
from torchlint.analysis.ops import is_value_receiver, number_value
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext

SQRT, RSQRT, LOG, POW, DIV = "sqrt", "rsqrt", "log", "pow", "div"

SQRT_FUNCTIONS: FrozenSet[str] = frozenset({"torch.sqrt", "torch.Tensor.sqrt"})
RSQRT_FUNCTIONS: FrozenSet[str] = frozenset({"torch.rsqrt", "torch.Tensor.rsqrt"})
LOG_FUNCTIONS: FrozenSet[str] = frozenset(
    {"torch.log", "torch.log2", "torch.log10", "torch.Tensor.log", "torch.Tensor.log2", "torch.Tensor.log10"}
)
LOG_METHODS: FrozenSet[str] = frozenset({"log", "log2", "log10"})
POW_FUNCTIONS: FrozenSet[str] = frozenset({"torch.pow", "torch.float_power", "torch.Tensor.pow"})
DIV_FUNCTIONS: FrozenSet[str] = frozenset({"torch.div", "torch.divide", "torch.true_divide"})

NORM_FUNCTIONS: FrozenSet[str] = frozenset(
    {"torch.norm", "torch.linalg.norm", "torch.linalg.vector_norm", "torch.functional.norm"}
)
NORM_METHODS: FrozenSet[str] = frozenset({"norm"})
SPREAD_FUNCTIONS: FrozenSet[str] = frozenset({"torch.std", "torch.var"})
SPREAD_METHODS: FrozenSet[str] = frozenset({"std", "var"})
SUM_FUNCTIONS: FrozenSet[str] = frozenset({"torch.sum"})
COUNT_FUNCTIONS: FrozenSet[str] = frozenset({"torch.count_nonzero"})
# Casts that keep a mask a mask.


def call_names(*function_sets: FrozenSet[str]) -> FrozenSet[str]:
    """The names a call of these functions is written with (``sqrt`` for ``torch.sqrt`` and
    ``x.sqrt()``), for the ast pre-pass's seeds."""
    return frozenset(name.rsplit(".", 1)[-1] for functions in function_sets for name in functions)


CAST_METHODS: FrozenSet[str] = frozenset({"float", "double", "half", "bfloat16", "long", "int", "to", "type", "type_as", "bool"})
# Names of 0/1 tensors: ``attention_mask``, ``loss_mask``, ``valid``, ``is_pad`` (``g_masks`` of Gaussians is not one).
MASK_PREFIXES = ("mask", "valid", "keep", "visible", "selected", "is_", "has_")


@dataclass(frozen=True)
class Divisor:
    kind: str  # "count", "magnitude", "normalize", "cosine", "product"
    # The reduction call (for "cosine" and "product": the product node).
    reduction: cst.BaseExpression
    # For "normalize": the tensor being normalised; for "cosine": (a, b) via cosine_operands.
    normalized: Optional[cst.BaseExpression] = None
    dim: Optional[cst.BaseExpression] = None
    norm_order: Optional[cst.BaseExpression] = None
    cosine_operands: Optional[tuple] = None
    # True when the divisor was reached through a name (``n = mask.sum(); x / n``).
    through_name: bool = False
    # Why it reaches 0 by construction (a ``signs.EDGE_*`` text), or None when its sign is unknown.
    edge: Optional[str] = None


@dataclass(frozen=True)
class DomainOp:
    kind: str
    node: cst.CSTNode  # Call, BinaryOperation or AugAssign
    operand: cst.BaseExpression
    form: str  # "function", "method" or "operator"
    name: str  # qualified function, method name, or the operator ("**", "/", "/=")
    exponent: Optional[cst.BaseExpression] = None
    numerator: Optional[cst.BaseExpression] = None
    divisor: Optional[Divisor] = None
    # Arguments beyond operand/exponent (``out=``): a fix rebuilding the call would drop them.
    extra_args: bool = False

    @property
    def is_operator(self) -> bool:
        return self.form == "operator"


# -- matching ---------------------------------------------------------------------


def match_domain_op(context: "FileContext", node: cst.CSTNode, site: Optional[Site] = None) -> Optional[DomainOp]:
    """The domain-edge op ``node`` is, if any (``site`` lets divisors and exponents be followed through names)."""
    op = _match(context, node, site)
    if op is not None and op.kind == POW and integer_exponent(context, op.exponent, site):
        return None  # x ** p with p: int = 3
    return op


def possible_kind(context: "FileContext", node: cst.CSTNode) -> Optional[str]:
    """The kind ``node`` has if it is a domain-edge op at all, read from its form alone (cheap: no names
    followed); None when :func:`match_domain_op` is None for it whatever the site."""
    if isinstance(node, cst.BinaryOperation):
        return POW if isinstance(node.operator, cst.Power) else DIV if isinstance(node.operator, cst.Divide) else None
    if isinstance(node, cst.AugAssign):
        return DIV if isinstance(node.operator, cst.DivideAssign) else POW if isinstance(node.operator, cst.PowerAssign) else None
    if isinstance(node, cst.Call):
        return _call_kind(context.qualified_name(node.func), node.func)
    return None


def _call_kind(qualified: Optional[str], func: cst.BaseExpression) -> Optional[str]:
    """The op kind a call spells: a torch function by its qualified name, else a method by its name."""
    if qualified is not None:
        if qualified in SQRT_FUNCTIONS:
            return SQRT
        if qualified in RSQRT_FUNCTIONS:
            return RSQRT
        return LOG if qualified in LOG_FUNCTIONS else POW if qualified in POW_FUNCTIONS else DIV if qualified in DIV_FUNCTIONS else None
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method in ("sqrt", "rsqrt"):
        return SQRT if method == "sqrt" else RSQRT
    return LOG if method in LOG_METHODS else POW if method == "pow" else DIV if method in _DIV_METHODS else None


_DIV_METHODS = frozenset({"div", "divide", "true_divide"})


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
    kind = _call_kind(qualified, func)
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


# -- pow ------------------------------------------------------------------------------


def integer_exponent(context: "FileContext", exponent: Optional[cst.BaseExpression], site: Optional[Site]) -> bool:
    """An exponent held in a name that is an integer: a parameter annotated ``int`` or defaulting to an
    integer literal, a name or ``self.p`` bound to one (``x ** p`` with ``p: int = 3`` has no root)."""
    if isinstance(exponent, cst.Attribute) and isinstance(exponent.value, cst.Name) and exponent.value.value == "self":
        value = context.self_attribute_value(exponent.attr.value)
        return isinstance(value, cst.Integer)
    if not isinstance(exponent, cst.Name) or site is None:
        return False
    reaching = bindings(site, exponent.value)
    if len(reaching) != 1:
        return False
    binding = reaching[0]
    if binding.kind == "param":
        annotation = binding.node.annotation
        if annotation is not None and isinstance(annotation.annotation, cst.Name) and annotation.annotation.value == "int":
            return True
        return isinstance(binding.value, cst.Integer)
    return binding.kind in ("assign", "module") and isinstance(binding.value, cst.Integer)


def exponent_class(exponent: cst.BaseExpression) -> Optional[str]:
    """"pow" for an exponent that may lie in (0, 1): a literal such as ``0.5`` or ``1 / 3``, a reciprocal
    ``1 / p``, or a value held in a name, attribute or tensor (``gamma``, ``self.p``); None for literals
    outside (0, 1).  A root spelled as a power (``x ** 0.5``, ``x.pow(.5)``) is a power: its finding
    follows the spelling (TL103), ``sqrt`` and ``rsqrt`` are TL101's."""
    value = constant_value(exponent)
    if value is not None:
        return POW if 0 < value < 1 else None
    if isinstance(exponent, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.List, cst.Tuple, cst.Dict)):
        return None
    if isinstance(exponent, cst.UnaryOperation) and isinstance(exponent.operator, cst.Minus):
        return None  # a negative power: no root at 0
    return POW


def may_be_fractional_exponent(exponent: ast.expr) -> bool:
    """The pre-pass's necessary condition for :func:`exponent_class` on the ``ast`` of an exponent: not a
    number literal outside (0, 1) (``x ** 2``), a string or display, or a negated value."""
    if isinstance(exponent, ast.Constant):
        value = exponent.value
        return type(value) in (int, float) and 0 < value < 1
    return not isinstance(exponent, (ast.JoinedStr, ast.List, ast.Tuple, ast.Dict, ast.Set)) and not (
        isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub)
    )


def is_reciprocal_exponent(exponent: Optional[cst.BaseExpression]) -> bool:
    """A literal fraction or ``1 / p``: an exponent known to lie in (0, 1) (``p > 1``, GeM pooling)."""
    if exponent is None:
        return False
    if constant_value(exponent) is not None:
        return True
    return (
        isinstance(exponent, cst.BinaryOperation)
        and isinstance(exponent.operator, cst.Divide)
        and constant_value(exponent.left) == 1
    )


def constant_value(node: cst.BaseExpression) -> Optional[float]:
    """The value of a literal arithmetic expression (``0.5``, ``1 / 3``, ``-2``), else None."""
    node = _strip_parens(node)
    value = number_value(node)
    if value is not None:
        return value
    if isinstance(node, cst.BinaryOperation):
        left, right = constant_value(node.left), constant_value(node.right)
        if left is None or right is None:
            return None
        try:
            if isinstance(node.operator, cst.Divide):
                return left / right
            if isinstance(node.operator, cst.Multiply):
                return left * right
            if isinstance(node.operator, cst.Add):
                return left + right
            if isinstance(node.operator, cst.Subtract):
                return left - right
        except (ZeroDivisionError, OverflowError):
            return None
    return None


def _pow_op(node, base, exponent, form, name, extra_args) -> Optional[DomainOp]:
    kind = exponent_class(exponent)
    if kind is None:
        return None
    return DomainOp(kind, node, base, form, name, exponent=exponent, extra_args=extra_args)


# -- division -------------------------------------------------------------------------


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
    come from the sign domain (:mod:`torchlint.analysis.signs`)."""
    from torchlint.analysis import signs

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
            if found is not None and found.kind not in ("normalize", "cosine"):
                return Divisor(found.kind, found.reduction, through_name=True, edge=found.edge)
        return None
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        left = classify_divisor(context, node.left, None, site)
        right = classify_divisor(context, node.right, None, site)
        if left is None or right is None:
            return None
        norms = _norm_parts(context, node.left), _norm_parts(context, node.right)
        if numerator is not None and all(part is not None for part in norms):
            cosine = _cosine(context, numerator, norms[0], norms[1])
            if cosine is not None:
                return Divisor("cosine", node, dim=cosine.dim, cosine_operands=cosine.cosine_operands, edge=signs.EDGE_MAGNITUDE)
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
# Reductions a divisor can be: what they reduce may make them 0.
_REDUCTIONS = frozenset({
    "sum", "nansum", "mean", "nanmean", "norm", "vector_norm", "matrix_norm", "std", "var", "count_nonzero",
    "max", "amax", "min", "amin", "logsumexp", "prod",
})


def may_be_divisor(node: ast.expr, assigned: Optional[Dict[str, List[ast.expr]]], callee_names, depth: int = 0) -> bool:
    """The pre-pass's necessary condition for :func:`classify_divisor` on the ``ast`` of a divisor: a
    reduction (through reshapes, casts and indexing), a difference, a product of such, or a name that
    ``assigned`` (the ``name = value`` statements of the function holding it; None outside a function,
    where every name is kept) binds to one.  ``callee_names(func)``: the names a callee may stand for."""
    from torchlint.analysis.ops import SHAPE_AND_CAST_CALLS

    for _ in range(16):
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr == "values":
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SHAPE_AND_CAST_CALLS:
            node = node.func.value
        else:
            break
    if isinstance(node, ast.Call):
        return not _REDUCTIONS.isdisjoint(callee_names(node.func))
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Sub):
            return True
        return isinstance(node.op, ast.Mult) and all(
            may_be_divisor(side, assigned, callee_names, depth) for side in (node.left, node.right)
        )
    if isinstance(node, ast.Name):
        if assigned is None:
            return True
        return depth < 4 and any(may_be_divisor(value, assigned, callee_names, depth + 1) for value in assigned.get(node.id, ()))
    return False


def _divisor_core(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """``d`` for ``d[:, None]``, ``d.unsqueeze(1).expand(-1, n)``, ``d.view(b, 1, 1)``: reshapes keep its values."""
    from torchlint.analysis.ops import without_shape_steps

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
    from torchlint.analysis.ops import call_parts

    return call_parts(context, node)[0] if isinstance(node, cst.Call) else None


def _reduced(context: "FileContext", node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """What ``node`` reduces, when it is a reduction (``x.sum(1)``, ``torch.norm(x)``, ``x.max(1)[0]``)."""
    from torchlint.analysis.ops import call_parts

    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        node = node.value  # x.max(dim)[0]
    elif isinstance(node, cst.Attribute) and node.attr.value == "values":
        node = node.value
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    name, source, _ = call_parts(context, node)
    return source if name in _REDUCTIONS else None


def _averages_with(context: "FileContext", numerator: cst.BaseExpression, weights: cst.BaseExpression) -> bool:
    """Whether ``numerator`` sums products with ``weights``: ``mm(w, x)``, ``w @ x``, ``(w * x).sum(d)``."""
    from torchlint.analysis.ops import call_parts, without_shape_steps

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


def is_mask_like(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None) -> bool:
    """A 0/1 tensor: a comparison, a bool cast of one, ``~m``, ``1 - m``, ``m1 & m2``, or a name that says mask.

    With a ``site``, a local name is judged by the value it was bound to
    (``g_masks = torch.stack(gaussians)`` is not a mask; ``valid = x != pad`` is).
    """
    node = _strip_parens(node)
    if isinstance(node, cst.Name) and site is not None:
        bound = sole_assignment(site, node.value)
        if bound is not None:
            return is_mask_like(context, bound.value, bound.site)
    if isinstance(node, cst.Comparison):
        return all(isinstance(c.operator, _ELEMENTWISE_COMPARISONS) for c in node.comparisons)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        return is_mask_like(context, node.expression, site)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return is_mask_like(context, node.left, site) or is_mask_like(context, node.right, site)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return is_mask_like(context, node.left, site) and is_mask_like(context, node.right, site)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract) and constant_value(node.left) == 1:
        return is_mask_like(context, node.right, site)  # 1.0 - mask_pos: the complement of a 0/1 mask
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and is_value_receiver(context, node.func.value):
        method = node.func.attr.value
        if method in CAST_METHODS or method in ("unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "flatten", "detach", "t"):
            return is_mask_like(context, node.func.value, site)
        if method in ("eq", "ne", "gt", "lt", "ge", "le", "logical_not", "logical_and", "logical_or", "isfinite", "bool"):
            return True
        return False
    if isinstance(node, cst.Call):
        qualified = context.qualified_name(node.func) or ""
        return qualified in (
            "torch.eq", "torch.ne", "torch.gt", "torch.lt", "torch.ge", "torch.le", "torch.logical_not",
            "torch.logical_and", "torch.logical_or", "torch.isfinite", "torch.ones_like",
        )
    if isinstance(node, cst.Subscript):
        return is_mask_like(context, node.value, site)
    word = None
    if isinstance(node, cst.Name):
        word = node.value
    elif isinstance(node, cst.Attribute):
        word = node.attr.value
    if word is not None:
        lowered = word.lower().lstrip("_")
        return lowered.endswith("mask") or lowered.startswith(MASK_PREFIXES)
    return False


_ELEMENTWISE_COMPARISONS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def _norm_parts(context: "FileContext", node: cst.BaseExpression):
    """(tensor, dim, keepdim, order) for an L2-style norm call, else None."""
    node = _strip_parens(node)
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
    node = _strip_parens(numerator)
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
    factors = _strip_parens(product.value)
    if not isinstance(factors, cst.BinaryOperation) or not isinstance(factors.operator, cst.Multiply):
        return None
    pairs = ((factors.left, factors.right), (factors.right, factors.left))
    for first, second in pairs:
        if structurally_equal(first, a) and structurally_equal(second, b):
            return Divisor("cosine", None, dim=dim_a, cosine_operands=(a, b))
    return None


# -- helpers --------------------------------------------------------------------------


def _strip_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    # LibCST keeps parentheses as attributes of the node: nothing to unwrap.
    return node


def structurally_equal(a: Optional[cst.CSTNode], b: Optional[cst.CSTNode]) -> bool:
    """Same code, ignoring whitespace, comments and parentheses."""
    if a is None or b is None:
        return False
    return _canonical(a) == _canonical(b)


def _canonical(node: cst.CSTNode) -> str:
    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    return "".join(cst.Module(body=[]).code_for_node(node).split())
