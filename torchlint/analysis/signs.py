"""The sign of a tensor expression: how far from 0 it provably is (see :func:`sign_of`)."""
from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Optional, Set, Tuple

import libcst as cst

from torchlint.analysis.callers import every_caller_passes
from torchlint.analysis.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.dataflow import Site, bindings, sole_assignment, unpack_position, unpacked_element
from torchlint.analysis.domain import POW, DomainOp, constant_value, is_mask_like, structurally_equal
from torchlint.analysis.kinds import FINFO_ATTRIBUTES, MAX_DEPTH, NUMBER_BUILTINS, NUMBER_METHODS, value_kind
from torchlint.analysis.ops import SHAPE_AND_CAST_CALLS, call_parts, is_eps_like, without_shape_steps
from torchlint.analysis.returns import called_function, returned_values

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext


def _conditions():
    """The tests module (it asks this one for signs in turn)."""
    from torchlint.analysis import conditions

    return conditions




class Sign(enum.IntEnum):
    UNKNOWN = 0
    NONNEGATIVE = 1
    POSITIVE = 2



_RELU_CALLS = frozenset({"relu", "relu6", "ReLU", "ReLU6", "relu_"})
_ZERO_ONLY_WHERE_ALL_ARE = frozenset({
    "sum", "nansum", "mean", "nanmean", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
})


def _relu_masked(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """Whether ``node`` is 0 only where a ReLU output is: ``F.relu(x)``, ``x.relu()``, ``nn.ReLU()(x)``, through
    casts and reshapes, sums, means and average pools of them, sums of two of them, their powers with a
    positive constant exponent, and local names bound once to one."""
    if depth > MAX_DEPTH:
        return False
    node = without_shape_steps(context, node)
    again = depth + 1
    if isinstance(node, cst.Name):
        bound = sole_assignment(site, node.value)
        return bound is not None and _relu_masked(context, bound.value, bound.site, again)
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Add):
            return _relu_masked(context, node.left, site, again) and _relu_masked(context, node.right, site, again)
        if isinstance(node.operator, cst.Power):
            exponent = constant_value(node.right)
            return exponent is not None and exponent > 0 and _relu_masked(context, node.left, site, again)
        return False
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, source, is_method = call_parts(context, node)
        if name in _RELU_CALLS:
            return True
        if source is None:
            return False
        if name in _ZERO_ONLY_WHERE_ALL_ARE:
            return _relu_masked(context, source, site, again)
        if name in ("pow", "square"):
            exponent = argument(node, 0 if is_method else 1, "exponent") if name == "pow" else None
            value = constant_value(exponent.value) if exponent is not None else (2 if name == "square" else None)
            return value is not None and value > 0 and _relu_masked(context, source, site, again)
    return False


def _exponent_needs_no_gradient(context: "FileContext", op: DomainOp, site: Optional[Site]) -> bool:
    """A root, or a power whose exponent is a number: a learnable exponent's own gradient,
    ``x ** (1 / p) * log(x)``, is NaN at x = 0 whatever masks the base."""
    return op.kind != POW or (op.exponent is not None and value_kind(context, op.exponent, site) == "number")



# -- signs ----------------------------------------------------------------------------


# Smoothing terms (``smooth``, ``self.smooth_dr``, ``SMOOTH_NR``), ``tiny`` and ``small_val``: positive constants by convention.
# ``self.minimum_scale`` / ``min_std`` (a floor added to a variance) and ``log_domain_offset`` (an offset
# added before a log) say the same.
_EXTRA_GUARD_WORDS = re.compile(
    r"^_*(smooth(ing)?(_[a-z0-9]+)?|tiny|TINY|SMOOTH(_[A-Z0-9]+)?"
    r"|(min|minimum)_(scale|std|sigma|var|variance|denom|denominator|norm)|log_(domain_)?offset"
    r"|small_?val(ue)?|SMALL_?VAL(UE)?)$"
)
_EPS_KEY = re.compile(r"^['\"](eps|EPS|epsilon|smooth[a-z_]*)['\"]$")
_POSITIVE_CALLS = frozenset({"exp", "exp2", "cosh", "ones", "ones_like", "new_ones"})
_DIVISION_POSITIVE_CALLS = frozenset({"sigmoid", "expit", "softmax", "Sigmoid", "Softmax"})
_NONNEGATIVE_CALLS = frozenset({
    "abs", "absolute", "relu", "relu6", "softplus", "square", "norm", "vector_norm", "matrix_norm", "std", "var",
    "count_nonzero", "sigmoid", "expit", "softmax", "rand", "rand_like", "cdist", "pairwise_distance", "sqrt",
    "hardsigmoid", "zeros", "zeros_like", "new_zeros", "bincount", "histc",
})
# Calls whose result is as signed as their input: the casts and reshapes, selections, sums, means, pools.
_PRESERVING_CALLS = SHAPE_AND_CAST_CALLS | frozenset({
    "repeat", "tile", "flip", "roll", "index_select", "gather", "masked_select",
    "narrow", "select", "sum", "nansum", "mean", "nanmean", "amax", "amin", "cumsum", "prod", "cumprod",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate",
    "requires_grad_", "cpu", "cuda", "squeeze_", "unsqueeze_", "diagonal", "diag", "trace",
    "repeat_interleave", "max", "min", "median", "quantile", "nanmedian", "logical_not",
})
_CONTINUOUS_DRAWS = ("randn", "rand", "normal", "randn_like", "rand_like")
_ARITHMETIC_CALLS = {
    "add": cst.Add, "add_": cst.Add, "mul": cst.Multiply, "mul_": cst.Multiply, "multiply": cst.Multiply,
}
_CLAMP_CALLS = frozenset({"clamp", "clip", "clamp_min", "clamp_min_", "clamp_", "clip_"})
_PRODUCTS = frozenset({"matmul", "mm", "bmm", "einsum", "mv", "inner"})


def sign_of(
    context: "FileContext",
    node: cst.BaseExpression,
    site: Optional[Site],
    division: bool = False,
    _depth: int = 0,
    _seen: Optional[Set[int]] = None,
) -> Sign:
    """How far from 0 ``node`` provably is (see module docs)."""
    if _depth > MAX_DEPTH:
        return Sign.UNKNOWN
    node = without_shape_steps(context, node)

    def again(child: cst.BaseExpression, child_site: Optional[Site] = site) -> Sign:
        return sign_of(context, child, child_site, division, _depth + 1, _seen)

    value = constant_value(node)
    if value is not None:
        return Sign.POSITIVE if value > 0 else Sign.NONNEGATIVE if value == 0 else Sign.UNKNOWN
    if is_guard_constant(node) or _says_safe(node):
        return Sign.POSITIVE
    if isinstance(node, cst.Name):
        return _name_sign(context, node, site, division, _depth, _seen)
    if isinstance(node, cst.Attribute):
        return _attribute_sign(context, node, site, division, _depth)
    if isinstance(node, cst.Subscript):
        if value_kind(context, node, site) == "number":
            return Sign.POSITIVE  # a size
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if _conditions().condition_implies_positive(context, index, node.value, division, site):
                return Sign.POSITIVE  # depth[depth > 0], target[valid] with valid = target > eps
        return again(node.value)
    if isinstance(node, cst.BinaryOperation):
        return _binary_sign(context, node, again, site)
    if isinstance(node, cst.IfExp):
        body = Sign.POSITIVE if _conditions().condition_implies_positive(context, node.test, node.body, division, site) else again(node.body)
        orelse = again(node.orelse)
        return min(body, orelse)
    if isinstance(node, cst.Call):
        return _call_sign(context, node, site, division, again)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return Sign.POSITIVE if _is_expm1_of_negative(context, node.expression, site) else Sign.UNKNOWN
    return Sign.UNKNOWN


def _is_expm1_of_negative(context: "FileContext", node: cst.BaseExpression, site: Optional[Site]) -> bool:
    """``expm1(x)`` of an ``x`` bounded strictly below 0 (``log_s.clamp(max=-1e-7)``): negative, so
    ``-expm1(x)``, the stable ``1 - exp(x)`` of ``log(1 - exp(x))``, is positive."""
    node = without_shape_steps(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, is_method = call_parts(context, node)
    if name != "expm1" or source is None:
        return False
    bound = upper_bound(context, source, site)
    return bound is not None and (bound[0] < 0 or (bound[0] == 0 and bound[1]))


def is_guard_constant(node: cst.BaseExpression) -> bool:
    """A positive literal or a name that says eps (``eps``, ``self.eps``, ``EPS``, ``smooth``, ``tiny``)."""
    if is_eps_like(node):
        return True
    value = constant_value(node)
    if value is not None:
        return value > 0
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:  # coeffs["EPS"]
        key = node.slice[0].slice
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString):
            return bool(_EPS_KEY.match(key.value.value))
    if isinstance(node, cst.Call):  # c_f.small_val(x.dtype), get_eps(dtype): named for its small positive result
        node = node.func
        if isinstance(node, (cst.Name, cst.Attribute)) and is_eps_like(node):
            return True
    name = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
    return bool(name and _EXTRA_GUARD_WORDS.match(name))


_SAFE_WORDS = re.compile(r"^_*safe|_safe|nonzero|non_zero|nozero|no_zero", re.IGNORECASE)


def _says_safe(node: cst.BaseExpression) -> bool:
    """``safe_theta``, ``self.safe_norm``, ``_nonzero(d)``: the author named the guard."""
    if isinstance(node, cst.Call) and not isinstance(node.func, cst.Call):
        node = node.func
        if isinstance(node, cst.Attribute) and node.attr.value in ("count_nonzero", "nonzero"):
            return False
    name = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
    return bool(name and _SAFE_WORDS.search(name)) and name not in ("count_nonzero", "nonzero")


def _is_eps_term(node: cst.BaseExpression) -> bool:
    """``eps``, ``1e-6``, or ``mask * 1e-16``: a term added to stay off zero."""
    if is_guard_constant(node):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return is_eps_like(node.left) or is_eps_like(node.right)
    return False


def _name_sign(context, node: cst.Name, site, division, depth, seen) -> Sign:
    if site is None:
        return Sign.UNKNOWN
    best = Sign.UNKNOWN
    unconditional = Sign.UNKNOWN
    each: Optional[Sign] = None
    for binding in bindings(site, node.value):
        if binding.kind == "param":
            if every_caller_passes(
                context, node.value, site,
                lambda value, at: sign_of(context, value, at, division, depth + 1) is Sign.POSITIVE,
            ):
                unconditional = Sign.POSITIVE  # every same-file caller hands in a positive value
            elif binding.value is not None and constant_value(binding.value) is not None:
                unconditional = Sign.POSITIVE if constant_value(binding.value) > 0 else Sign.UNKNOWN
            continue
        value = unpacked_element(binding, node.value) if binding.kind == "unpack" else binding.value
        if value is None:
            if binding.kind == "unpack":  # mag, phase = self.stft(x): the helper's returned tuples
                unconditional = _unpacked_return_sign(context, binding, node.value, division, depth)
            continue
        key = id(binding.node)
        seen = set(seen or ())
        if key in seen:
            continue
        seen.add(key)
        sign = sign_of(context, value, binding.site, division, depth + 1, seen)
        if binding.kind == "each":  # map(lambda t: ..., (a, b)): t is each of them in turn
            each = sign if each is None else min(each, sign)
            unconditional = each
        elif binding.kind in ("assign", "update", "inplace", "module", "unpack"):
            unconditional = sign
        elif binding.kind == "masked":
            # d[d == 0] = 1 / counts[0] = 1: the author patches the zeros with a positive value.
            if sign is Sign.POSITIVE:
                best = max(best, Sign.POSITIVE)
        else:
            best = max(best, sign) if sign is Sign.POSITIVE else best
    return max(best, unconditional)


def _unpacked_return_sign(context, binding, name: str, division: bool, depth: int) -> Sign:
    """The least sign of the element ``name`` takes from every tuple a same-file helper returns."""
    position = unpack_position(binding, name)
    call = binding.node.value if isinstance(binding.node, cst.Assign) else None
    if position is None or not isinstance(call, cst.Call):
        return Sign.UNKNOWN
    helper = called_function(context, call, binding.site)
    returned = returned_values(context, helper) if helper is not None else None
    if not returned:
        return Sign.UNKNOWN
    index, length = position
    signs = []
    for value, at in returned:
        if not isinstance(value, cst.Tuple) or len(value.elements) != length:
            return Sign.UNKNOWN
        if any(isinstance(element, cst.StarredElement) for element in value.elements):
            return Sign.UNKNOWN
        signs.append(sign_of(context, value.elements[index].value, at, division, depth + 1))
    return min(signs)


def _attribute_sign(context, node: cst.Attribute, site, division, depth) -> Sign:
    if node.attr.value in FINFO_ATTRIBUTES and isinstance(node.value, cst.Call):
        if context.qualified_name(node.value.func) in ("torch.finfo", "numpy.finfo"):
            return Sign.POSITIVE if node.attr.value in ("eps", "tiny", "max", "smallest_normal", "resolution") else Sign.UNKNOWN
    qualified = context.qualified_name(node)
    if qualified in ("math.pi", "math.e", "math.inf", "numpy.pi", "numpy.e", "numpy.inf", "torch.pi", "torch.e", "torch.inf"):
        return Sign.POSITIVE
    if node.attr.value in ("data", "values", "T", "mT"):
        return sign_of(context, node.value, site, division, depth + 1)
    if isinstance(node.value, cst.Name) and node.value.value == "self":
        value = context.self_attribute_value(node.attr.value)
        if value is not None and constant_value(value) is not None:
            return Sign.POSITIVE if constant_value(value) > 0 else Sign.UNKNOWN
        if isinstance(value, cst.Name):
            default = _init_default(context, value.value)
            if default is not None and default > 0:
                return Sign.POSITIVE  # self.clip_val = clip_val, with ``clip_val=1e-5`` in __init__
    return Sign.UNKNOWN


def _init_default(context: "FileContext", parameter: str) -> Optional[float]:
    """The literal default of ``parameter`` in the enclosing class's ``__init__``."""
    class_def = context.enclosing(cst.ClassDef)
    if class_def is None:
        return None
    for statement in class_def.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            params = statement.params
            for param in list(params.params) + list(params.kwonly_params):
                if param.name.value == parameter and param.default is not None:
                    return constant_value(param.default)
    return None


# A bound and whether the value stays strictly beyond it (``clamp(p, eps, 1 - eps)``: below 1, strictly).
Bound = Tuple[float, bool]


def upper_bound(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> Optional[Bound]:
    """An upper bound of ``node``: ``clamp(lo, hi)``, ``clamp(max=hi)``, ``clamp_max(hi)``, the square
    of a value clamped on both sides (``cos.clamp(-1 + eps, 1 - eps) ** 2``), names followed.  A bound
    written ``c - eps`` is ``c``, strictly."""
    return _literal_bound(context, node, site, depth, upper=True)


def lower_bound(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> Optional[Bound]:
    """The mirror of :func:`upper_bound`: ``clamp(min=lo)``, ``c + eps`` (``c``, strictly), names followed."""
    return _literal_bound(context, node, site, depth, upper=False)


def _literal_bound(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int, upper: bool) -> Optional[Bound]:
    value = constant_value(node)
    if value is not None:
        return value, False
    if depth > MAX_DEPTH:
        return None
    if isinstance(node, cst.Name) and site is not None:
        reaching = bindings(site, node.value)
        if len(reaching) == 1 and reaching[0].kind in ("assign", "inplace") and reaching[0].value is not None:
            return _literal_bound(context, reaching[0].value, reaching[0].site, depth + 1, upper)
        return None
    squared = None
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, source, is_method = call_parts(context, node)
        bound = None
        if name in ("clamp", "clip"):
            bound = argument(node, (1 if upper else 0) + (0 if is_method else 1), "max" if upper else "min")
        elif name == ("clamp_max" if upper else "clamp_min"):
            bound = argument(node, 0 if is_method else 1, "max" if upper else "min")
        if bound is not None:
            return _literal_bound(context, bound.value, site, depth + 1, upper)
        if name == "square" or (name == "pow" and _exponent_is_two(argument(node, 0 if is_method else 1, "exponent"))):
            squared = source
    elif isinstance(node, cst.BinaryOperation):
        operator = node.operator
        # ``1 - eps`` bounds from above, ``2 + eps`` from below, strictly.
        if upper and isinstance(operator, cst.Subtract) and _is_eps_term(node.right):
            base = _literal_bound(context, node.left, site, depth + 1, upper)
            return (base[0], True) if base is not None else None
        if not upper and isinstance(operator, cst.Add):
            for term, other in ((node.right, node.left), (node.left, node.right)):
                if _is_eps_term(term):
                    base = _literal_bound(context, other, site, depth + 1, upper)
                    return (base[0], True) if base is not None else None
        if isinstance(operator, cst.Power) and constant_value(node.right) == 2:
            squared = node.left
        elif isinstance(operator, cst.Multiply) and structurally_equal(node.left, node.right):
            squared = node.left
    if squared is not None and upper:
        high = _literal_bound(context, squared, site, depth + 1, True)
        low = _literal_bound(context, squared, site, depth + 1, False)
        if high is not None and low is not None:
            # x in [low, high] gives x ** 2 <= max(low ** 2, high ** 2), strictly when that side's bound is.
            top, bottom = (high[0] * high[0], high[1]), (low[0] * low[0], low[1])
            if top[0] != bottom[0]:
                return max(top, bottom)
            return top[0], top[1] and bottom[1]
    return None


def _above(low: Optional[Bound], high: Optional[Bound]) -> bool:
    """Whether a value bounded below by ``low`` is strictly above one bounded above by ``high``."""
    if low is None or high is None:
        return False
    return low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1]))


def _exponent_is_two(exponent: Optional[cst.Arg]) -> bool:
    return exponent is not None and constant_value(exponent.value) == 2


def _binary_sign(context, node: cst.BinaryOperation, again, site: Optional[Site] = None) -> Sign:
    operator = node.operator
    if isinstance(operator, cst.Add):
        if _is_eps_term(node.left) or _is_eps_term(node.right):
            return Sign.POSITIVE
        left, right = again(node.left), again(node.right)
        if Sign.UNKNOWN in (left, right):
            return Sign.UNKNOWN
        if _is_smoothing_number(context, node.left, site) or _is_smoothing_number(context, node.right, site):
            return Sign.POSITIVE  # sqrt(x ** 2 + delta ** 2): the author's smoothing term
        return max(left, right)
    if isinstance(operator, cst.Subtract):
        right_value = constant_value(node.right)
        if right_value is not None and right_value < 0:
            return Sign.POSITIVE
        if _counts_padding(context, node.right) and value_kind(context, node.left, site) == "number":
            return Sign.POSITIVE  # T - padding_mask.sum(1): the real positions, >= 1 per sequence
        if _above(lower_bound(context, node.left, site), upper_bound(context, node.right, site)):
            return Sign.POSITIVE  # 1 - p.clamp(eps, 1 - eps), 2 + eps - cos.clamp(max=2)
        return Sign.UNKNOWN
    if isinstance(operator, (cst.Multiply, cst.Divide, cst.FloorDivide, cst.MatrixMultiply)):
        if isinstance(operator, cst.MatrixMultiply) and _is_softmax_weights(context, node.left, site):
            if again(node.right) is Sign.POSITIVE:
                return Sign.POSITIVE  # attn @ v: a softmax-weighted average of positive rows
        if isinstance(operator, cst.Multiply) and structurally_equal(node.left, node.right):
            return Sign.POSITIVE if again(node.left) is Sign.POSITIVE else Sign.NONNEGATIVE  # mu * mu
        left, right = again(node.left), again(node.right)
        if isinstance(operator, cst.Multiply):
            # A factor that says mask, in a product, is a 0/1 multiplicative mask (additive masks are added).
            left = Sign.NONNEGATIVE if left is Sign.UNKNOWN and is_mask_like(context, node.left, site) else left
            right = Sign.NONNEGATIVE if right is Sign.UNKNOWN and is_mask_like(context, node.right, site) else right
        if Sign.UNKNOWN in (left, right):
            return Sign.UNKNOWN
        return min(left, right)
    if isinstance(operator, cst.Power):
        return _power_sign(node.right, again(node.left))
    return Sign.UNKNOWN


def _is_smoothing_number(context: "FileContext", term: cst.BaseExpression, site: Optional[Site]) -> bool:
    """A Python number (a hyperparameter, not a literal) added to a non-negative tensor: ``delta ** 2`` in
    pseudo-Huber's ``sqrt(x ** 2 + delta ** 2)``, ``sigma_data ** 2`` in EDM's preconditioning.  The
    linter never flags numbers, and a zero there is a configuration that breaks the model as a whole,
    not a value that data can reach."""
    return constant_value(term) is None and value_kind(context, term, site) == "number"


def _power_sign(exponent: cst.BaseExpression, base: Sign) -> Sign:
    if base is Sign.POSITIVE:
        return Sign.POSITIVE
    value = constant_value(exponent)
    if value is not None and value > 0 and value % 2 == 0:
        return Sign.NONNEGATIVE
    if base is Sign.NONNEGATIVE and value is not None and value > 0:
        return Sign.NONNEGATIVE
    return Sign.UNKNOWN


def _is_softmax_weights(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``scores.softmax(-1)`` / ``F.softmax(scores, dim=-1)``, through casts and a local name bound once:
    rows of non-negative weights that sum to 1 (the largest at least 1/n, whatever underflows)."""
    node = without_shape_steps(context, node)
    if isinstance(node, cst.Name) and depth < MAX_DEPTH:
        bound = sole_assignment(site, node.value)
        return bound is not None and _is_softmax_weights(context, bound.value, bound.site, depth + 1)
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, _, _ = call_parts(context, node)
        return name in ("softmax", "Softmax")
    return False


def _call_sign(context, call: cst.Call, site, division, again) -> Sign:
    if has_star_args(call):
        return Sign.UNKNOWN
    if isinstance(call.func, cst.Name) and call.func.value in ("max",) and len(call.args) >= 2:
        return max(again(arg.value) for arg in call.args)
    if isinstance(call.func, cst.Name) and call.func.value in NUMBER_BUILTINS | {"abs"}:
        return Sign.POSITIVE if value_kind(context, call, site) == "number" and call.func.value == "len" else Sign.UNKNOWN
    helper = called_function(context, call, site)
    if helper is not None:
        return _return_sign(context, helper, division)
    name, source, is_method = call_parts(context, call)
    if name is None:
        return Sign.UNKNOWN
    if value_kind(context, call, site) == "number" and name in NUMBER_METHODS:
        return Sign.POSITIVE  # sizes and counts of dimensions
    if name in _CLAMP_CALLS:
        low = argument(call, 0 if is_method else 1, "min")
        if name in ("clamp_min", "clamp_min_"):
            low = argument(call, 0 if is_method else 1, "min")
        if low is None or (isinstance(low.value, cst.Name) and low.value.value == "None"):
            return again(source) if source is not None else Sign.UNKNOWN
        low_sign = again(low.value)
        if low_sign is Sign.POSITIVE:
            return Sign.POSITIVE
        if source is not None and low_sign is Sign.NONNEGATIVE:
            return max(Sign.NONNEGATIVE, again(source))
        return Sign.UNKNOWN
    if name in ("maximum", "fmax") or (name == "max" and len(call.args) == (1 if is_method else 2) and not _is_dim_argument(call, is_method)):
        others = [arg.value for arg in call.args if arg.keyword is None]
        values = ([source] if is_method else []) + others
        if values:
            return max(again(value) for value in values)
        return Sign.UNKNOWN
    if name == "where":
        args = positional_args(call)
        if len(args) == 3 and not is_method:
            cond, first, second = (arg.value for arg in args)
            first_sign, second_sign = again(first), again(second)
            if _conditions().condition_implies_positive(context, cond, first, division, site):
                first_sign = Sign.POSITIVE
            if _conditions().condition_implies_zero(context, cond, second, site):
                second_sign = Sign.POSITIVE
            # torch.where(ok, x, 1): the author swapped a safe value in where x is not ok (the
            # double-where idiom); the mask is trusted even when the linter cannot read it.
            if Sign.POSITIVE in (first_sign, second_sign):
                return Sign.POSITIVE
            return min(first_sign, second_sign)
        return Sign.UNKNOWN
    if name in ("masked_fill", "masked_fill_") and is_method:
        value = argument(call, 1, "value")
        if value is not None and again(value.value) is Sign.POSITIVE:
            mask = argument(call, 0, "mask")
            source_sign = again(source)
            if source_sign is not Sign.UNKNOWN or (mask is not None and _conditions().condition_implies_zero(context, mask.value, source)):
                return Sign.POSITIVE
        return Sign.UNKNOWN
    if name in ("full", "full_like", "new_full"):
        fill = argument(call, 1 if name != "new_full" else 1, "fill_value")
        return again(fill.value) if fill is not None else Sign.UNKNOWN
    if name in ("tensor", "as_tensor", "scalar_tensor"):
        return again(source) if source is not None else Sign.UNKNOWN
    if name in ("arange", "linspace", "logspace"):
        args = positional_args(call)
        if name == "logspace":
            return Sign.POSITIVE
        if name == "arange" and len(args) == 1:
            return Sign.NONNEGATIVE
        start = again(args[0].value) if args else Sign.UNKNOWN
        return start
    if name in _ARITHMETIC_CALLS and keyword_arg(call, "alpha") is None:
        # torch.add(a, b), a.mul(b): judged as the operator they spell
        first = source if is_method else argument(call, 0, "input")
        other = argument(call, 0 if is_method else 1, "other")
        if first is None or other is None:
            return Sign.UNKNOWN
        left = first if is_method else first.value
        spelled = cst.BinaryOperation(left=left, operator=_ARITHMETIC_CALLS[name](), right=other.value)
        return _binary_sign(context, spelled, again, site)
    if name in ("pow", "float_power"):
        exponent = argument(call, 0 if is_method else 1, "exponent")
        if exponent is None or source is None:
            return Sign.UNKNOWN
        return _power_sign(exponent.value, again(source))
    if name in _COUNTS and source is not None and is_padding_mask(context, source, site):
        return Sign.POSITIVE  # tokens per sequence, sequences per position
    if name in _POSITIVE_CALLS:
        return Sign.POSITIVE
    if division and name in _DIVISION_POSITIVE_CALLS:
        return Sign.POSITIVE
    if name in _NONNEGATIVE_CALLS:
        if name in ("sqrt",) and source is not None and again(source) is Sign.POSITIVE:
            return Sign.POSITIVE
        if name == "abs" and source is not None and _conditions().selected_off_zero(context, source, site):
            return Sign.POSITIVE  # w[~(w >= 0)].abs(): the entries the author selected off zero
        if name in ("norm", "vector_norm", "matrix_norm") and source is not None and _is_made_by(context, source, site, "eye"):
            return Sign.POSITIVE  # torch.eye(C).type_as(x) / its norm
        if name in ("norm", "vector_norm") and source is not None and any(
            _is_made_by(context, source, site, draw) for draw in _CONTINUOUS_DRAWS
        ):
            return Sign.POSITIVE  # random directions: a vector of continuous draws is never all zero
        if name in ("norm", "vector_norm", "abs", "std", "var") and source is not None and again(source) is Sign.POSITIVE:
            return Sign.POSITIVE if name != "std" and name != "var" else Sign.NONNEGATIVE
        return Sign.NONNEGATIVE
    if name in _PRESERVING_CALLS and source is not None:
        if name in ("max", "min", "median", "quantile", "nanmedian") and _is_dim_argument(call, is_method):
            return Sign.UNKNOWN  # a (values, indices) tuple
        return again(source)
    if name in _PRODUCTS:
        # Sums of products over a non-empty inner dim: as signed as the least signed factor.
        factors = ([source] if is_method and source is not None else []) + [
            arg.value for arg in positional_args(call) if not isinstance(arg.value, cst.SimpleString)
        ]
        if len(factors) == 2 and _is_softmax_weights(context, factors[0], site) and again(factors[1]) is Sign.POSITIVE:
            return Sign.POSITIVE  # softmax(scores) @ v: a weighted average of positive rows
        signs = [again(factor) for factor in factors]
        return Sign.UNKNOWN if len(signs) < 2 or Sign.UNKNOWN in signs else min(signs)
    if name == "scaled_dot_product_attention" and not is_method:
        value = argument(call, 2, "value")
        dropout = argument(call, 4, "dropout_p")
        # Attention averages the value rows with softmax weights: positive values give a positive average.
        if value is not None and (dropout is None or constant_value(dropout.value) == 0):
            return Sign.POSITIVE if again(value.value) is Sign.POSITIVE else Sign.UNKNOWN
        return Sign.UNKNOWN
    if name in ("cat", "stack", "concat", "concatenate", "hstack", "vstack") and source is not None:
        if isinstance(source, (cst.List, cst.Tuple)) and source.elements:
            return min(again(element.value) for element in source.elements)
    return Sign.UNKNOWN


def _return_sign(context: "FileContext", function: cst.FunctionDef, division: bool) -> Sign:
    """The least sign of every value a same-file helper returns (``def stft(...)`` that clamps), once per file."""
    in_progress = context.memoized("guards.return-sign.in-progress", context.module, lambda _: set())
    key = (id(function), division)
    if key in in_progress:
        return Sign.UNKNOWN  # recursion: nothing proven

    def compute(_: cst.CSTNode) -> Sign:
        in_progress.add(key)
        try:
            values = returned_values(context, function)
            if not values:
                return Sign.UNKNOWN
            return min(sign_of(context, value, value_site, division) for value, value_site in values)
        finally:
            in_progress.discard(key)

    return context.memoized("guards.return-sign" + (".division" if division else ""), function, compute)


# A padding mask marks the real positions of sequences padded to the longest one: every sequence
# has a position, and the longest covers every position, so its counts along any dim are >= 1.
_PADDING_MASK_NAME = re.compile(
    r"(^|_)attention_mask$|(^|_)(non_?pad(ding)?|not_pad)(_mask)?$|(^|_)(length|lengths|seq_len)_mask$"
    r"|^(caption|text|prompt|token|tokens)_mask$"
)
_PAD_MASK_NAME = re.compile(r"(^|_)(key_)?(padding|pad)_mask$")  # True on the padding: its complement counts
_LENGTH_MASK_FUNCTIONS = frozenset({"length_to_mask", "lengths_to_mask", "sequence_mask", "make_non_pad_mask"})
_MASK_PRESERVING = frozenset({
    "float", "double", "half", "bfloat16", "long", "int", "bool", "to", "type", "type_as", "unsqueeze", "squeeze",
    "view", "view_as", "reshape", "expand", "expand_as", "flatten", "detach", "contiguous", "repeat", "transpose",
    "permute",
})
_COUNTS = frozenset({"sum", "count_nonzero", "nansum"})


def is_padding_mask(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``attention_mask``, ``tokens.ne(self.pad)``, ``~padding_mask``, ``arange(T)[None] < lengths[:, None]``,
    ``length_to_mask(lengths)``, through casts, reshapes, subscripts, local names, same-file helpers that
    return one, and parameters every same-file caller hands one."""
    if depth > MAX_DEPTH:
        return False
    again = depth + 1
    if isinstance(node, (cst.Name, cst.Attribute)):
        word = node.value if isinstance(node, cst.Name) else node.attr.value
        if _PADDING_MASK_NAME.search(word):
            return True
        if isinstance(node, cst.Name) and site is not None:
            reaching = bindings(site, node.value)
            if len(reaching) == 1 and reaching[0].kind == "param":
                return every_caller_passes(
                    context, node.value, site, lambda value, at: is_padding_mask(context, value, at, again)
                )
            values = [unpacked_element(b, node.value) if b.kind == "unpack" else b.value for b in reaching]
            return bool(reaching) and all(
                b.kind in ("assign", "update", "unpack", "each", "conditional") and value is not None
                and is_padding_mask(context, value, b.site, again)
                for b, value in zip(reaching, values)
            )
        return False
    if isinstance(node, cst.Subscript):
        return is_padding_mask(context, node.value, site, again)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Multiply, cst.BitAnd)):
        # Two padding masks (prefixes of each sequence) share its first position.
        return is_padding_mask(context, node.left, site, again) and is_padding_mask(context, node.right, site, again)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.BitInvert, cst.Not)):
        inverted = _inverted_mask(node.expression, site)
        if inverted is not None:  # ~m with m = ~attention_mask.bool()
            return is_padding_mask(context, inverted[0], inverted[1], again)
        return _is_pad_mask(node.expression)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        operator, right = node.comparisons[0].operator, node.comparisons[0].comparator
        if isinstance(operator, cst.NotEqual):
            return _names_padding(node.left) or _names_padding(right)
        if isinstance(operator, cst.LessThan):
            return _is_made_by(context, node.left, site, "arange")
        if isinstance(operator, cst.GreaterThan):
            return _is_made_by(context, right, site, "arange")
        return False
    if isinstance(node, cst.Call) and not has_star_args(node):
        func = node.func
        word = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if word in _LENGTH_MASK_FUNCTIONS:
            return True
        name, source, is_method = call_parts(context, node)
        if name in ("ones", "ones_like", "new_ones"):
            return True  # every position real
        if name in ("ne", "not_equal") and source is not None:
            other = argument(node, 0 if is_method else 1, "other")
            return other is not None and _names_padding(other.value)
        if name in ("logical_not", "bitwise_not") and source is not None:
            return _is_pad_mask(source)
        if name in _MASK_PRESERVING and source is not None:
            return is_padding_mask(context, source, site, again)
        function = called_function(context, node, site)
        if function is not None:  # a same-file helper that builds the mask (``def length_mask(x, lengths)``)
            returned = returned_values(context, function)
            return bool(returned) and all(is_padding_mask(context, value, at, again) for value, at in returned)
    return False


def _counts_padding(context: "FileContext", node: cst.BaseExpression) -> bool:
    """``padding_mask.sum(dim=1)`` (through casts): how many positions of each sequence are padding."""
    node = without_shape_steps(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, _ = call_parts(context, node)
    return name in _COUNTS and source is not None and _is_pad_mask(without_shape_steps(context, source))


def _inverted_mask(node: cst.BaseExpression, site: Optional[Site]):
    """``(m, site)`` when ``node`` is ``~m`` / ``not m``, or a name bound only to one, else None."""
    named = _conditions().named_test(node, site)
    if named is not None:
        node, site = named
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.BitInvert, cst.Not)):
        return node.expression, site
    return None


def _is_pad_mask(node: cst.BaseExpression) -> bool:
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return bool(_PAD_MASK_NAME.search(word))


def _names_padding(node: cst.BaseExpression) -> bool:
    """``self.pad``, ``pad_idx``, ``self.padding_idx``, ``config.pad_token_id``."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return bool(re.search(r"(^|_)pad(ding)?(_|$)", word))


def _is_made_by(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], factory: str) -> bool:
    """``node`` is ``torch.<factory>(...)`` seen through subscripts, casts/reshapes and local names:
    ``steps[None, :]`` with ``steps = torch.arange(T)``, ``torch.eye(C).type_as(x)``."""
    for _ in range(MAX_DEPTH):
        if isinstance(node, cst.Subscript):
            node = node.value
            continue
        if isinstance(node, cst.Name) and site is not None:
            bound = sole_assignment(site, node.value)
            if bound is None:
                return False
            node, site = bound.value, bound.site
            continue
        if not isinstance(node, cst.Call):
            return False
        name, source, is_method = call_parts(context, node)
        if name == factory and not is_method:
            return True
        if not (is_method and source is not None and name in _MASK_PRESERVING):
            return False
        node = source
    return False


def _is_dim_argument(call: cst.Call, is_method: bool) -> bool:
    """``x.max(1)`` / ``torch.max(x, dim=1)``: the reduction form that returns (values, indices)."""
    if keyword_arg(call, "dim") is not None:
        return True
    args = positional_args(call)
    candidate = args[0] if is_method and args else (args[1] if len(args) > 1 else None)
    return candidate is not None and isinstance(candidate.value, (cst.Integer, cst.UnaryOperation))


