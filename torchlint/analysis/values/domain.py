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

This module holds what the ops are (their kinds, names, literal exponents, masks) and sits below the
sign domain; :mod:`torchlint.analysis.flow.domain_match` finds them in code (``match_domain_op``,
``find_domain_ops``, ``classify_divisor``).  Whether an operand is guarded is
:mod:`torchlint.analysis.project.guards`'s question.

A divisor is a candidate when it is a reduction (a sum, mean, norm, std, var, count or extremum,
seen through reshapes such as ``[:, None]``, ``unsqueeze_``, ``expand``), a product of candidates, or
a difference; what it is comes from the sign domain (:func:`torchlint.analysis.flow.signs.evaluate`), and
``Divisor.edge`` records why it reaches 0 (None: its sign is unknown).  The kinds, and the fix each
calls for:

    "count":     count_nonzero(m), m.sum() over a mask (a comparison, a bool
                 cast, a name that says mask/valid) -> clamp to 1
    "magnitude": a norm, std or var, a sum of non-negative terms (abs, squares,
                 ReLU outputs), max - min, the weights of a weighted mean
                 (``mm(w, x) / w.sum(1)``) -> clamp to eps
    "normalize": ``x / x.norm(dim=d, keepdim=True)`` -> F.normalize
    "cosine":    ``(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`` -> F.cosine_similarity
    "root":      a square or fractional root of a magnitude (``x.pow(2).sum(1).pow(1 / 2)``) -> no fix here:
                 a clamp after the root keeps the root's infinite gradient at 0; the root's own finding
                 (TL101, TL103) clamps its base
    "product":   a product of candidates otherwise -> clamp to eps
    "sum":       a sum of values of unknown sign: it can cancel to 0, but no clamp is
                 a correct fix (it may be negative) -> no fix

A mean, an extremum or a difference of unknown sign is not a candidate: nothing says it
reaches 0.  A divisor given by name (``n = mask.sum(); x / n``) is followed through
:mod:`torchlint.analysis.model.dataflow` when the caller passes a site.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.model.dataflow import Site, bindings, sole_assignment
from torchlint.analysis.model.literals import number_value
from torchlint.analysis.model.ops import is_eps_like, is_value_receiver

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

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
    kind: str  # "count", "magnitude", "root", "normalize", "cosine", "product", "sum"
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


def possible_kind(context: "FileContext", node: cst.CSTNode) -> Optional[str]:
    """The kind ``node`` has if it is a domain-edge op at all, read from its form alone (cheap: no names
    followed); None when :func:`match_domain_op` is None for it whatever the site."""
    if isinstance(node, cst.BinaryOperation):
        return POW if isinstance(node.operator, cst.Power) else DIV if isinstance(node.operator, cst.Divide) else None
    if isinstance(node, cst.AugAssign):
        return DIV if isinstance(node.operator, cst.DivideAssign) else POW if isinstance(node.operator, cst.PowerAssign) else None
    if isinstance(node, cst.Call):
        return call_kind(context.qualified_name(node.func), node.func)
    return None


_DIV_METHODS = frozenset({"div", "divide", "true_divide"})


def call_kind(qualified: Optional[str], func: cst.BaseExpression) -> Optional[str]:
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


# -- pow ------------------------------------------------------------------------------


def integer_exponent(context: "FileContext", exponent: Optional[cst.BaseExpression], site: Optional[Site]) -> bool:
    """An exponent held in a name that is an integer: a parameter annotated ``int`` or defaulting to an
    integer literal, a name or ``self.p`` bound to one (``x ** p`` with ``p: int = 3`` has no root)."""
    if isinstance(exponent, cst.Attribute) and isinstance(exponent.value, cst.Name) and exponent.value.value == "self":
        value = context.self_attribute_value(exponent.attr.value)
        return _integral(value)
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
        return isinstance(binding.value, cst.Integer)  # a float default (gamma: float = 2.0) may be passed 0.5
    return binding.kind in ("assign", "module") and _integral(binding.value)


def _integral(node: Optional[cst.BaseExpression]) -> bool:
    """An integer literal, or a float literal with an integral value (``2``, ``2.0``): no root in that power."""
    value = number_value(node) if node is not None else None
    return value is not None and float(value).is_integer()


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


# Smoothing terms (``smooth``, ``self.smooth_dr``, ``SMOOTH_NR``), ``tiny`` and ``small_val``: positive constants by convention.
# ``self.minimum_scale`` / ``min_std`` (a floor added to a variance) and ``log_domain_offset`` (an offset
# added before a log) say the same.
_EXTRA_GUARD_WORDS = re.compile(
    r"^_*(smooth(ing)?(_[a-z0-9]+)?|tiny|TINY|SMOOTH(_[A-Z0-9]+)?"
    r"|(min|minimum)_(scale|std|sigma|var|variance|denom|denominator|norm)|log_(domain_)?offset"
    r"|small_?val(ue)?|SMALL_?VAL(UE)?)$"
)
_EPS_KEY = re.compile(r"^['\"](eps|EPS|epsilon|smooth[a-z_]*)['\"]$")


def is_guard_constant(node: cst.BaseExpression, context: Optional["FileContext"] = None) -> bool:
    """A positive literal, a name the code shows holds a small positive literal (with ``context``), or (naming
    conventions) a name that says eps (``eps``, ``self.eps``, ``EPS``, ``smooth``, ``tiny``)."""
    if is_eps_like(node, context):
        return True
    value = constant_value(node)
    if value is not None:
        return value > 0
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:  # coeffs["EPS"]
        key = node.slice[0].slice
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
            return conventions.says(bool(_EPS_KEY.match(key.value.value)))
    if isinstance(node, cst.Call):  # c_f.small_val(x.dtype), get_eps(dtype): named for its small positive result
        node = node.func
        if isinstance(node, (cst.Name, cst.Attribute)) and is_eps_like(node):
            return True
    name = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
    return conventions.says(bool(name and _EXTRA_GUARD_WORDS.match(name)))



# -- division -------------------------------------------------------------------------


# Reductions a divisor can be: what they reduce may make them 0.
REDUCTIONS = frozenset({
    "sum", "nansum", "mean", "nanmean", "norm", "vector_norm", "matrix_norm", "std", "var", "count_nonzero",
    "max", "amax", "min", "amin", "logsumexp", "prod",
})


_ROOTS: FrozenSet[str] = frozenset({"sqrt", "pow"})


def may_be_divisor(node: ast.expr, assigned: Optional[Dict[str, List[ast.expr]]], callee_names, depth: int = 0) -> bool:
    """The pre-pass's necessary condition for :func:`classify_divisor` on the ``ast`` of a divisor: a
    reduction (through reshapes, casts and indexing), a difference, a product of such, or a name that
    ``assigned`` (the ``name = value`` statements of the function holding it; None outside a function,
    where every name is kept) binds to one.  ``callee_names(func)``: the names a callee may stand for."""
    from torchlint.analysis.model.ops import SHAPE_AND_CAST_CALLS

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
        names = callee_names(node.func)
        if not _ROOTS.isdisjoint(names) and depth < 4:
            # A root of a reduction (``x.pow(2).sum(1).pow(0.5)``, ``torch.sqrt(v.sum())``) is 0 where it is:
            # its base is the receiver of the method or the first argument of the function.
            bases = ([node.func.value] if isinstance(node.func, ast.Attribute) else []) + node.args[:1]
            if any(may_be_divisor(base, assigned, callee_names, depth + 1) for base in bases):
                return True
        return not REDUCTIONS.isdisjoint(names)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Sub):
            return True
        if isinstance(node.op, ast.Pow) and depth < 4:
            return may_be_divisor(node.left, assigned, callee_names, depth + 1)
        return isinstance(node.op, ast.Mult) and all(
            may_be_divisor(side, assigned, callee_names, depth) for side in (node.left, node.right)
        )
    if isinstance(node, ast.Name):
        if assigned is None:
            return True
        return depth < 4 and any(may_be_divisor(value, assigned, callee_names, depth + 1) for value in assigned.get(node.id, ()))
    return False


def is_mask_like(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None) -> bool:
    """A 0/1 tensor: a comparison, a bool cast of one, ``~m``, ``1 - m``, ``m1 & m2``, or a name that says mask.

    With a ``site``, a local name is judged by the value it was bound to
    (``g_masks = torch.stack(gaussians)`` is not a mask; ``valid = x != pad`` is).
    """
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
        return conventions.says(lowered.endswith("mask") or lowered.startswith(MASK_PREFIXES))
    return False


_ELEMENTWISE_COMPARISONS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


# -- helpers --------------------------------------------------------------------------


def structurally_equal(a: Optional[cst.CSTNode], b: Optional[cst.CSTNode]) -> bool:
    """Same code, ignoring whitespace, comments and parentheses."""
    if a is None or b is None:
        return False
    return _canonical(a) == _canonical(b)


def _canonical(node: cst.CSTNode) -> str:
    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=[], rpar=[])
    return "".join(cst.Module(body=[]).code_for_node(node).split())
