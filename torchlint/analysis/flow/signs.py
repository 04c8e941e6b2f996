"""The abstract domain of the numerics rules: the sign of a tensor expression, and why it can reach 0.

Every TL1xx rule asks one question of an operand: can it reach the edge of the op's domain (0 for a
root, a log or a divisor; below 0 for a root or a log)?  :func:`evaluate` answers with a
:class:`Value`:

- ``sign``: :attr:`Sign.POSITIVE` (provably > 0: the author kept it off zero), :attr:`Sign.NONNEGATIVE`
  (>= 0 but may be 0) or :attr:`Sign.UNKNOWN`;
- ``edge``: why the value reaches 0 (or below) by its own construction, one of the ``EDGE_*``
  names (a norm, a count of a mask, a softmax output, ``1 - p``, a difference under a root, a constant
  0, ...), or None when nothing says it does.  A finding's confidence is read off it: an edge is
  ``high``, an unknown sign ``medium`` or ``low`` (torchlint/analysis/project/guards.py);
- ``unit``: bounded above by 1 (a probability, a 0/1 mask), so ``1 - it`` is non-negative.

How an op turns its operands' values into its result's is data: :data:`TRANSFER` maps a torch
function or tensor method (by its short name, any spelling: ``torch.sqrt(x)``, ``x.sqrt()``,
``nn.ReLU()(x)``) to a transfer function, and the operators (``+ - * / ** @``, unary minus) have
theirs below.  Adding an op is adding a row.  Among the rows:

- positive whatever the input: ``exp``, ``ones``, ``logspace``, ...;
- zero-capable by construction: ``abs``/``square`` (``EDGE_MAGNITUDE``), norms, distances and sums of
  squares (``EDGE_NORM``), ``std``/``var``
  (``EDGE_SPREAD``), ``relu`` (``EDGE_RELU``), ``count_nonzero`` and sums of 0/1 masks (``EDGE_COUNT``),
  ``softmax``/``sigmoid`` (``EDGE_PROBABILITY``; positive for a divisor), ``zeros``;
- as signed as their input: casts and reshapes (at no depth), selections, sums, means, pools, ``max``;
- ``clamp(min=c)``: positive for c > 0, ``EDGE_CLAMPED`` for c = 0 (``clamp`` passes 0 through);
- ``a + eps`` / ``a + c`` (c > 0) positive; ``1 - p`` of a probability or mask ``EDGE_COMPLEMENT``;
  ``x.max() - x.min()`` ``EDGE_RANGE``; another difference ``EDGE_DIFFERENCE`` (it can cancel, and
  rounding makes ``E[x^2] - E[x]^2`` negative); ``x ** p`` of an unknown ``p`` ``EDGE_POWER``.

Names are followed to their bindings in the same function (:mod:`torchlint.analysis.model.dataflow`:
assignments, ``+= eps``, in-place ``clamp_``/``add_``, ``d[d == 0] = 1``); a binding made on some
paths only counts when it is a guard (the author meant to guard), and one that is not is ignored.
Helpers the file defines are followed through their ``return`` (:mod:`torchlint.analysis.model.returns`),
names unpacked from the tuples they return too, and a parameter every same-file call passes a
positive value is positive (:mod:`torchlint.analysis.flow.callers`).

Also positive, because the author wrote it so: positive literals and eps-like names
(:func:`torchlint.analysis.values.domain.is_guard_constant`: ``eps``, ``self.eps``, ``EPS``, ``smooth``, ``tiny``,
``c_f.small_val(dtype)``), names that say safe (``safe_norm``), ``torch.where(d > 0, d, 1)`` (the
double where), ``masked_fill(d == 0, 1)``, ``T - padding_mask.sum(1)`` and counts of padding masks
(every sequence has a token: :func:`is_padding_mask`), ``c + eps - x`` and ``c - x`` for an ``x``
bounded by ``c`` (:func:`upper_bound`), ``-expm1(x)`` of an ``x`` bounded below 0, squares of
positive values, the norm of random draws or of ``eye``, attention averages of positive values
(``softmax(s) @ v``), a positive value plus a masked sum of non-negative ones, and
``x ** 2 + delta ** 2`` with ``delta`` a Python number (a smoothing term).

Tests that guard a value on a path (``if d > 0:``) are :mod:`torchlint.analysis.values.conditions`'s.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Optional, Tuple

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.values import conditions
from torchlint.analysis.flow.callers import every_caller_passes
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.model.dataflow import Site, bindings, sole_assignment, unpack_position, unpacked_element
from torchlint.analysis.model.literals import init_default
from torchlint.analysis.values.domain import POW, DomainOp, constant_value, is_guard_constant, is_mask_like, structurally_equal
from torchlint.analysis.values.kinds import FINFO_ATTRIBUTES, MAX_DEPTH, NUMBER_BUILTINS, NUMBER_METHODS, value_kind
from torchlint.analysis.model.ops import SHAPE_AND_CAST_CALLS, call_parts, is_eps_like, without_shape_steps
from torchlint.analysis.model.returns import called_function, returned_values

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


class Sign(enum.IntEnum):
    UNKNOWN = 0
    NONNEGATIVE = 1
    POSITIVE = 2


# Why a value reaches 0 (or below) by its own construction: the words a finding's message uses.
EDGE_ZERO = "a constant 0"
EDGE_NEGATIVE = "a negative constant"
EDGE_MAGNITUDE = "an absolute value or square: 0 wherever an entry is"
EDGE_NORM = "a norm or sum of squares: 0 for an all-zero vector or identical points"
EDGE_SPREAD = "a standard deviation or variance: 0 for a constant input"
EDGE_COUNT = "a count of a mask: 0 when the mask is empty"
EDGE_RELU = "a ReLU output: 0 wherever its input is negative"
EDGE_PROBABILITY = "a softmax or sigmoid output: 0 once it underflows"
EDGE_SELECTED_PROBABILITY = "the probability of one chosen entry (a label, a sampled action): 0 only if that entry underflows"
EDGE_COMPLEMENT = "1 minus a probability: 0 once it saturates"
EDGE_RANGE = "max minus min: 0 for a constant input"
EDGE_DIFFERENCE = "a difference: 0 or negative when its terms cancel"
EDGE_CLAMPED = "clamped at 0, which clamp passes through"
EDGE_WEIGHTS = "the sum of the averaging weights: 0 when every weight is"
EDGE_POWER = "a power x ** p of unknown p: 0 where x is, negative for odd p"


@dataclass(frozen=True)
class Value:
    """The abstract value of a tensor expression (see the module docs)."""

    sign: Sign
    edge: Optional[str] = None
    unit: bool = False


UNKNOWN = Value(Sign.UNKNOWN)
POSITIVE = Value(Sign.POSITIVE)
NONNEGATIVE = Value(Sign.NONNEGATIVE)


def _nonnegative(edge: Optional[str], unit: bool = False) -> Value:
    return Value(Sign.NONNEGATIVE, edge, unit)


def _weakest(values: Iterable[Value]) -> Value:
    """The meet: the least sign, with the edge of a value that has it."""
    values = list(values)
    if not values:
        return UNKNOWN
    least = min(value.sign for value in values)
    edge = next((value.edge for value in values if value.sign == least and value.edge), None)
    return Value(least, edge, all(value.unit for value in values))


def _strongest(values: Iterable[Value]) -> Value:
    """The join of alternatives that all hold (``max(a, b)``): the greatest sign."""
    values = list(values)
    best = max(values, key=lambda value: value.sign)
    return best if best.sign is not Sign.UNKNOWN else _weakest(values)


# -- the evaluator -----------------------------------------------------------------------


def sign_of(
    context: "FileContext", node: cst.BaseExpression, site: Optional[Site], division: bool = False
) -> Sign:
    """How far from 0 ``node`` provably is: :func:`evaluate`'s sign."""
    return evaluate(context, node, site, division).sign


# Edges a probability reaches only by rounding: its legitimate values come arbitrarily close to them.
ROUNDING_EDGES = frozenset({EDGE_PROBABILITY, EDGE_SELECTED_PROBABILITY, EDGE_COMPLEMENT})


def reaches_edge_only_by_rounding(context: "FileContext", node: cst.BaseExpression, site: Optional[Site]) -> bool:
    """``node`` is a softmax or sigmoid probability (or 1 minus one): 0 only once it underflows or saturates.  A
    clamp at eps would flatten its legitimate small values and their gradient; the exact form works from the
    logits (``log_softmax``, ``logsigmoid``)."""
    return evaluate(context, node, site).edge in ROUNDING_EDGES


def evaluate(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], division: bool = False) -> Value:
    """The abstract value of ``node`` read at ``site`` (see the module docs).  ``division``: the value
    divides, where only 0 matters, so a softmax or sigmoid output (0 only on underflow) is positive."""
    return _Evaluator(context, division).of(node, site, 0, frozenset())


class _Evaluator:
    def __init__(self, context: "FileContext", division: bool) -> None:
        self.context = context
        self.division = division

    def of(self, node: cst.BaseExpression, site: Optional[Site], depth: int, seen: frozenset) -> Value:
        if depth > MAX_DEPTH:
            return UNKNOWN
        context = self.context
        node = without_shape_steps(context, node)
        value = constant_value(node)
        if value is not None:
            return POSITIVE if value > 0 else _nonnegative(EDGE_ZERO) if value == 0 else Value(Sign.UNKNOWN, EDGE_NEGATIVE)
        if is_guard_constant(node) or _says_safe(node):
            return POSITIVE
        step = _Step(self, site, depth + 1, seen)
        if isinstance(node, cst.Name):
            return self._name(node, site, depth, seen)
        if isinstance(node, cst.Attribute):
            return self._attribute(node, step)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, step)
        if isinstance(node, cst.BinaryOperation):
            transfer = _OPERATORS.get(type(node.operator))
            return transfer(step, node) if transfer is not None else UNKNOWN
        if isinstance(node, cst.IfExp):
            body = POSITIVE if conditions.condition_implies_positive(context, node.test, node.body, self.division, site) else step(node.body)
            return _weakest((body, step(node.orelse)))
        if isinstance(node, cst.Call):
            return self._call(node, step)
        if isinstance(node, (cst.List, cst.Tuple)) and node.elements and all(isinstance(e, cst.Element) for e in node.elements):
            return _weakest(step(element.value) for element in node.elements)  # torch.tensor([1.0]): its data
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return POSITIVE if _is_expm1_of_negative(context, node.expression, site) else UNKNOWN
        return UNKNOWN

    # -- names and attributes ------------------------------------------------------------

    def _name(self, node: cst.Name, site: Optional[Site], depth: int, seen: frozenset) -> Value:
        if site is None:
            return UNKNOWN
        context = self.context
        best = UNKNOWN  # positive values bound on some paths: the author's guards
        unconditional = UNKNOWN
        each: Optional[Value] = None
        for binding in bindings(site, node.value):
            if binding.kind == "param":
                if every_caller_passes(
                    context, node.value, site, lambda value, at: evaluate(context, value, at, self.division).sign is Sign.POSITIVE
                ):
                    unconditional = POSITIVE  # every same-file caller hands in a positive value
                elif binding.value is not None and constant_value(binding.value) is not None:
                    unconditional = POSITIVE if constant_value(binding.value) > 0 else UNKNOWN
                continue
            value = unpacked_element(binding, node.value) if binding.kind == "unpack" else binding.value
            if value is None:
                if binding.kind == "unpack":  # mag, phase = self.stft(x): the helper's returned tuples
                    unconditional = self._unpacked_return(binding, node.value, depth)
                continue
            key = id(binding.node)
            if key in seen:
                continue
            found = self.of(value, binding.site, depth + 1, seen | {key})
            if binding.kind == "each":  # map(lambda t: ..., (a, b)): t is each of them in turn
                each = found if each is None else _weakest((each, found))
                unconditional = each
            elif binding.kind in ("assign", "update", "inplace", "module", "unpack"):
                unconditional = found
            elif found.sign is Sign.POSITIVE:
                # d[d == 0] = 1, or a guard on some path: the author patches the zeros with a positive value.
                best = POSITIVE
        return best if best.sign > unconditional.sign else unconditional

    def _unpacked_return(self, binding, name: str, depth: int) -> Value:
        """The weakest value of the element ``name`` takes from every tuple a same-file helper returns."""
        position = unpack_position(binding, name)
        call = binding.node.value if isinstance(binding.node, cst.Assign) else None
        if position is None or not isinstance(call, cst.Call):
            return UNKNOWN
        helper = called_function(self.context, call, binding.site)
        returned = returned_values(self.context, helper) if helper is not None else None
        if not returned:
            return UNKNOWN
        index, length = position
        values = []
        for value, at in returned:
            if not isinstance(value, cst.Tuple) or len(value.elements) != length:
                return UNKNOWN
            if any(isinstance(element, cst.StarredElement) for element in value.elements):
                return UNKNOWN
            values.append(self.of(value.elements[index].value, at, depth + 1, frozenset()))
        return _weakest(values)

    def _attribute(self, node: cst.Attribute, step: "_Step") -> Value:
        context = self.context
        if node.attr.value in FINFO_ATTRIBUTES and isinstance(node.value, cst.Call):
            if context.qualified_name(node.value.func) in ("torch.finfo", "numpy.finfo"):
                return POSITIVE if node.attr.value in ("eps", "tiny", "max", "smallest_normal", "resolution") else UNKNOWN
        qualified = context.qualified_name(node)
        if qualified in ("math.pi", "math.e", "math.inf", "numpy.pi", "numpy.e", "numpy.inf", "torch.pi", "torch.e", "torch.inf"):
            return POSITIVE
        if node.attr.value in ("data", "values", "T", "mT"):
            return step(_values_of(context, node.value) if node.attr.value == "values" else node.value)
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            value = context.self_attribute_value(node.attr.value)
            if value is not None and constant_value(value) is not None:
                return POSITIVE if constant_value(value) > 0 else UNKNOWN
            if isinstance(value, cst.Name):
                default = init_default(context, value.value)
                if default is not None and constant_value(default) > 0:
                    return POSITIVE  # self.clip_val = clip_val, with ``clip_val=1e-5`` in __init__
        return UNKNOWN

    def _subscript(self, node: cst.Subscript, step: "_Step") -> Value:
        context = self.context
        if value_kind(context, node, step.site) == "number":
            return POSITIVE  # a size
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if conditions.condition_implies_positive(context, index, node.value, self.division, step.site):
                return POSITIVE  # depth[depth > 0], target[valid] with valid = target > eps
            if constant_value(index) == 0 and _is_reduction_pair(context, node.value):
                return step(_values_of(context, node.value))  # x.max(dim)[0]: the values
        return step(node.value)

    # -- calls ---------------------------------------------------------------------------

    def _call(self, call: cst.Call, step: "_Step") -> Value:
        context = self.context
        if has_star_args(call):
            return UNKNOWN
        func = call.func
        if isinstance(func, cst.Name) and func.value == "max" and len(call.args) >= 2:
            return _strongest(step(arg.value) for arg in call.args)
        if isinstance(func, cst.Name) and func.value in NUMBER_BUILTINS | {"abs"}:
            return POSITIVE if func.value == "len" and value_kind(context, call, step.site) == "number" else UNKNOWN
        helper = called_function(context, call, step.site)
        if helper is not None:
            return _return_value(context, helper, self.division)
        name, source, is_method = call_parts(context, call)
        if name is None:
            return UNKNOWN
        if name in NUMBER_METHODS and value_kind(context, call, step.site) == "number":
            return POSITIVE  # sizes and counts of dimensions
        transfer = TRANSFER.get(name)
        if transfer is None:
            return UNKNOWN
        return transfer(step, _Call(call, name, source, is_method))


@dataclass(frozen=True)
class _Call:
    """A torch function or tensor method call: its short name and its first tensor operand."""

    node: cst.Call
    name: str
    source: Optional[cst.BaseExpression]
    is_method: bool

    def arg(self, position: int, keyword: str) -> Optional[cst.Arg]:
        """The argument after the source: ``position`` counts from it (``x.clamp(lo)`` and ``torch.clamp(x, lo)``)."""
        return argument(self.node, position if self.is_method else position + 1, keyword)


class _Step:
    """Evaluation one level down, at a site: ``step(child)``."""

    def __init__(self, evaluator: _Evaluator, site: Optional[Site], depth: int, seen: frozenset) -> None:
        self.evaluator = evaluator
        self.site = site
        self.depth = depth
        self.seen = seen

    @property
    def context(self) -> "FileContext":
        return self.evaluator.context

    @property
    def division(self) -> bool:
        return self.evaluator.division

    def __call__(self, node: Optional[cst.BaseExpression], site: Optional[Site] = None) -> Value:
        if node is None:
            return UNKNOWN
        return self.evaluator.of(node, self.site if site is None else site, self.depth, self.seen)


def _return_value(context: "FileContext", function: cst.FunctionDef, division: bool) -> Value:
    """The weakest value a same-file helper returns (``def stft(...)`` that clamps), once per file."""
    in_progress = context.memoized("signs.return-value.in-progress", context.module, lambda _: set())
    key = (id(function), division)
    if key in in_progress:
        return UNKNOWN  # recursion: nothing proven

    def compute(_: cst.CSTNode) -> Value:
        in_progress.add(key)
        try:
            values = returned_values(context, function)
            if not values:
                return UNKNOWN
            return _weakest(evaluate(context, value, value_site, division) for value, value_site in values)
        finally:
            in_progress.discard(key)

    return context.memoized("signs.return-value" + (".division" if division else ""), function, compute)


# -- transfer functions of calls ------------------------------------------------------------

TRANSFER: Dict[str, Callable[[_Step, _Call], Value]] = {}


def _rows(names: Iterable[str], transfer: Callable[[_Step, _Call], Value]) -> None:
    for name in names:
        TRANSFER[name] = transfer


def _constant(value: Value) -> Callable[[_Step, _Call], Value]:
    return lambda step, call: value


def _preserving(step: _Step, call: _Call) -> Value:
    """As signed as the source: selections, reductions, pools, moves."""
    if call.source is None:
        return UNKNOWN
    if call.name in ("max", "min", "median", "quantile", "nanmedian") and _is_dim_argument(call.node, call.is_method):
        return UNKNOWN  # a (values, indices) tuple: its [0] and .values are read where they are taken
    return step(call.source)


def _summing(step: _Step, call: _Call) -> Value:
    """A sum or mean: of a padding mask at least 1 per sequence, of a 0/1 mask a count, else as signed as its terms."""
    source = call.source
    if source is None:
        return UNKNOWN
    if call.name in ("sum", "nansum", "count_nonzero") and is_padding_mask(step.context, source, step.site):
        return POSITIVE  # tokens per sequence, sequences per position
    found = step(source)
    if found.sign is Sign.UNKNOWN and is_mask_like(step.context, source, step.site):
        return _nonnegative(EDGE_COUNT)
    if found.sign is Sign.NONNEGATIVE and found.unit and is_mask_like(step.context, source, step.site):
        return _nonnegative(EDGE_COUNT)
    if found.edge == EDGE_MAGNITUDE:
        found = replace(found, edge=EDGE_NORM)  # summed entries are all 0 only for an all-zero vector
    return replace(found, unit=found.unit and call.name in ("mean", "nanmean"))


# Reductions to a vector's length: 0 only when every entry is.
_NORMS = frozenset({"norm", "vector_norm", "matrix_norm", "cdist", "pairwise_distance", "dist"})


def _magnitude(step: _Step, call: _Call) -> Value:
    context, source, site = step.context, call.source, step.site
    name = call.name
    edge = EDGE_NORM if name in _NORMS else EDGE_MAGNITUDE
    if source is None:
        return _nonnegative(edge)
    if name == "abs" and conditions.selected_off_zero(context, source, site):
        return POSITIVE  # w[~(w >= 0)].abs(): the entries the author selected off zero
    if name in ("norm", "vector_norm", "matrix_norm"):
        if _is_made_by(context, source, site, "eye") or is_continuous_draw(context, source, site):
            return POSITIVE  # the identity; random directions: continuous draws are never all zero
    if step(source).sign is Sign.POSITIVE and name in ("norm", "vector_norm", "abs", "absolute"):
        return POSITIVE
    return _nonnegative(edge)


def _spread(step: _Step, call: _Call) -> Value:
    return _nonnegative(EDGE_SPREAD)


def _relu(step: _Step, call: _Call) -> Value:
    return _nonnegative(EDGE_RELU)


def _count(step: _Step, call: _Call) -> Value:
    return _nonnegative(EDGE_COUNT)


def _probability(step: _Step, call: _Call) -> Value:
    # p > 0 in exact arithmetic: a divisor of one is 0 only on underflow, which the division ignores
    # (but 1 - p is 0 once p rounds to 1: ``unit`` keeps that known).
    return Value(Sign.POSITIVE, None, True) if step.division else _nonnegative(EDGE_PROBABILITY, unit=True)


def _selected(step: _Step, call: _Call) -> Value:
    """``p.gather(1, idx)``, ``p.index_select(...)``: the chosen entries.  A whole probability vector holds its
    smallest entries, which underflow in ordinary use; the entry of a label or of an action drawn from it is
    0 only when the model is confidently wrong."""
    found = _preserving(step, call)
    return _nonnegative(EDGE_SELECTED_PROBABILITY, unit=True) if found.edge == EDGE_PROBABILITY else found


def _root(step: _Step, call: _Call) -> Value:
    found = step(call.source)
    return POSITIVE if found.sign is Sign.POSITIVE else _nonnegative(found.edge)


def _clamp(step: _Step, call: _Call) -> Value:
    source = call.source
    low = call.arg(0, "min")
    if low is None or (isinstance(low.value, cst.Name) and low.value.value == "None"):
        return step(source)  # clamp(max=...) keeps the lower side
    bound = step(low.value)
    if bound.sign is Sign.POSITIVE:
        return POSITIVE
    if source is not None and bound.sign is Sign.NONNEGATIVE:
        found = step(source)
        return found if found.sign is Sign.POSITIVE else _nonnegative(EDGE_CLAMPED, found.unit)
    return UNKNOWN


def _maximum(step: _Step, call: _Call) -> Value:
    if call.name == "max" and (len(call.node.args) != (1 if call.is_method else 2) or _is_dim_argument(call.node, call.is_method)):
        return _preserving(step, call)
    values = ([call.source] if call.is_method else []) + [arg.value for arg in call.node.args if arg.keyword is None]
    return _strongest(step(value) for value in values) if values else UNKNOWN


def _where(step: _Step, call: _Call) -> Value:
    args = positional_args(call.node)
    if len(args) != 3 or call.is_method:
        return UNKNOWN
    context, site = step.context, step.site
    cond, first, second = (arg.value for arg in args)
    first_value, second_value = step(first), step(second)
    if conditions.condition_implies_positive(context, cond, first, step.division, site):
        first_value = POSITIVE
    if conditions.condition_implies_zero(context, cond, second, site):
        second_value = POSITIVE
    # torch.where(ok, x, 1): the author swapped a safe value in where x is not ok (the double where);
    # the mask is trusted even when the linter cannot read it.
    if Sign.POSITIVE in (first_value.sign, second_value.sign):
        return POSITIVE
    return _weakest((first_value, second_value))


def _masked_fill(step: _Step, call: _Call) -> Value:
    if not call.is_method:
        return UNKNOWN
    value = argument(call.node, 1, "value")
    if value is not None and step(value.value).sign is Sign.POSITIVE:
        mask = argument(call.node, 0, "mask")
        if step(call.source).sign is not Sign.UNKNOWN or (
            mask is not None and conditions.condition_implies_zero(step.context, mask.value, call.source)
        ):
            return POSITIVE
    return UNKNOWN


def _filled(step: _Step, call: _Call) -> Value:
    """``full(size, c)``, ``x.new_full(size, c)``, ``torch.Tensor(n, m).fill_(c)``: the value of ``c``."""
    if call.name in ("fill_", "fill"):
        fill = argument(call.node, 0 if call.is_method else 1, "value")
    else:
        fill = argument(call.node, 1, "fill_value")
    return step(fill.value) if fill is not None else UNKNOWN


def _constructed(step: _Step, call: _Call) -> Value:
    """``torch.tensor(data)``: the value of its data."""
    return step(call.source)


def _ranged(step: _Step, call: _Call) -> Value:
    args = positional_args(call.node)
    if call.name == "logspace":
        return POSITIVE
    if call.name == "arange" and len(args) == 1:
        return _nonnegative(EDGE_ZERO)  # starts at 0
    return step(args[0].value) if args else UNKNOWN


def _spelled_operator(step: _Step, call: _Call) -> Value:
    """``torch.add(a, b)``, ``a.mul(b)``: judged as the operator they spell."""
    if keyword_arg(call.node, "alpha") is not None:
        return UNKNOWN
    first = call.source if call.is_method else (argument(call.node, 0, "input").value if argument(call.node, 0, "input") else None)
    other = call.arg(0, "other")
    if first is None or other is None:
        return UNKNOWN
    spelled = cst.BinaryOperation(left=first, operator=_ARITHMETIC_CALLS[call.name](), right=other.value)
    return _OPERATORS[type(spelled.operator)](step, spelled)


def _power_call(step: _Step, call: _Call) -> Value:
    exponent = call.arg(0, "exponent")
    if exponent is None or call.source is None:
        return UNKNOWN
    return _power(step, call.source, exponent.value)


def _product(step: _Step, call: _Call) -> Value:
    """Sums of products over a non-empty inner dim: as signed as the least signed factor."""
    factors = ([call.source] if call.is_method and call.source is not None else []) + [
        arg.value for arg in positional_args(call.node) if not isinstance(arg.value, cst.SimpleString)
    ]
    if len(factors) == 2 and _is_softmax_weights(step.context, factors[0], step.site) and step(factors[1]).sign is Sign.POSITIVE:
        return POSITIVE  # softmax(scores) @ v: a weighted average of positive rows
    values = [step(factor) for factor in factors]
    if len(values) < 2 or any(value.sign is Sign.UNKNOWN for value in values):
        return UNKNOWN
    return _weakest(values)


def _attention(step: _Step, call: _Call) -> Value:
    if call.is_method:
        return UNKNOWN
    value = argument(call.node, 2, "value")
    dropout = argument(call.node, 4, "dropout_p")
    # Attention averages the value rows with softmax weights: positive values give a positive average.
    if value is not None and (dropout is None or constant_value(dropout.value) == 0):
        return POSITIVE if step(value.value).sign is Sign.POSITIVE else UNKNOWN
    return UNKNOWN


def _joined(step: _Step, call: _Call) -> Value:
    source = call.source
    if isinstance(source, (cst.List, cst.Tuple)) and source.elements:
        return _weakest(step(element.value) for element in source.elements)
    return UNKNOWN


_CONTINUOUS_DRAWS = ("randn", "rand", "normal", "randn_like", "rand_like")
_ARITHMETIC_CALLS = {"add": cst.Add, "add_": cst.Add, "mul": cst.Multiply, "mul_": cst.Multiply, "multiply": cst.Multiply}

_rows(("exp", "exp2", "cosh", "ones", "ones_like", "new_ones"), _constant(POSITIVE))
_rows(("abs", "absolute", "square", "norm", "vector_norm", "matrix_norm", "cdist", "pairwise_distance", "dist"), _magnitude)
_rows(("std", "var"), _spread)
_rows(("relu", "relu6", "ReLU", "ReLU6", "relu_", "hardsigmoid", "Hardsigmoid"), _relu)
_rows(("count_nonzero", "bincount", "histc"), _count)
_rows(("softmax", "sigmoid", "expit", "Softmax", "Sigmoid"), _probability)
_rows(("softplus", "Softplus"), _constant(NONNEGATIVE))  # 0 only on underflow
_rows(("rand", "rand_like"), _constant(_nonnegative(None, unit=True)))
_rows(("zeros", "zeros_like", "new_zeros"), _constant(_nonnegative(EDGE_ZERO)))
_rows(("sqrt",), _root)
_rows(("sum", "nansum", "mean", "nanmean"), _summing)
_rows(tuple(SHAPE_AND_CAST_CALLS) + (
    "repeat", "tile", "flip", "roll", "masked_select", "narrow", "select", "amax", "amin",
    "cumsum", "prod", "cumprod", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "interpolate", "requires_grad_", "cpu", "cuda", "diagonal", "diag", "trace",
    "repeat_interleave", "min", "median", "quantile", "nanmedian", "logical_not",
), _preserving)
_rows(("gather", "index_select", "take_along_dim"), _selected)
_rows(("max", "maximum", "fmax"), _maximum)
_rows(("clamp", "clip", "clamp_min", "clamp_min_", "clamp_", "clip_"), _clamp)
_rows(("where",), _where)
_rows(("masked_fill", "masked_fill_"), _masked_fill)
_rows(("full", "full_like", "new_full", "fill_", "fill"), _filled)
_rows(("tensor", "as_tensor", "scalar_tensor", "Tensor", "FloatTensor"), _constructed)
_rows(("arange", "linspace", "logspace"), _ranged)
_rows(tuple(_ARITHMETIC_CALLS), _spelled_operator)
_rows(("pow", "float_power"), _power_call)
_rows(("matmul", "mm", "bmm", "einsum", "mv", "inner"), _product)
_rows(("scaled_dot_product_attention",), _attention)
_rows(("cat", "stack", "concat", "concatenate", "hstack", "vstack"), _joined)


# -- transfer functions of operators ----------------------------------------------------------


def _add(step: _Step, node: cst.BinaryOperation) -> Value:
    if _is_eps_term(node.left) or _is_eps_term(node.right):
        return POSITIVE
    if _fills_its_zeros(step, node.right, node.left) or _fills_its_zeros(step, node.left, node.right):
        return POSITIVE  # p + (p == 0) * 1e-8: the author replaced exactly the zeros
    left, right = step(node.left), step(node.right)
    if Sign.UNKNOWN in (left.sign, right.sign):
        return UNKNOWN
    if _is_smoothing_number(step.context, node.left, step.site) or _is_smoothing_number(step.context, node.right, step.site):
        return POSITIVE  # sqrt(x ** 2 + delta ** 2): the author's smoothing term
    if Sign.POSITIVE in (left.sign, right.sign):
        return POSITIVE
    return _nonnegative(left.edge or right.edge)


def _subtract(step: _Step, node: cst.BinaryOperation) -> Value:
    context, site = step.context, step.site
    right_value = constant_value(node.right)
    if right_value is not None and right_value < 0:
        return POSITIVE
    if _counts_padding(context, node.right) and value_kind(context, node.left, site) == "number":
        return POSITIVE  # T - padding_mask.sum(1): the real positions, >= 1 per sequence
    if _above(lower_bound(context, node.left, site), upper_bound(context, node.right, site)):
        return POSITIVE  # 1 - p.clamp(eps, 1 - eps), 2 + eps - cos.clamp(max=2)
    if constant_value(node.left) == 1 and step(node.right).unit:
        return _nonnegative(EDGE_COMPLEMENT, unit=True)  # 1 - p: 0 once p saturates at 1
    if _is_range(context, node, site):
        return _nonnegative(EDGE_RANGE)
    if any(constant_value(side) is not None or value_kind(context, side, site) == "number" for side in (node.left, node.right)):
        return UNKNOWN  # 1 - f(x), exp(2h) - 1: 0 only where f(x) meets that number, which nothing here says it does
    return Value(Sign.UNKNOWN, EDGE_DIFFERENCE)  # a - b, E[x^2] - E[x]^2: the terms cancel, rounding goes below 0


def _multiply(step: _Step, node: cst.BinaryOperation) -> Value:
    context, site = step.context, step.site
    if isinstance(node.operator, cst.MatrixMultiply) and _is_softmax_weights(context, node.left, site):
        if step(node.right).sign is Sign.POSITIVE:
            return POSITIVE  # attn @ v: a softmax-weighted average of positive rows
    if isinstance(node.operator, cst.Multiply) and structurally_equal(node.left, node.right):
        return POSITIVE if step(node.left).sign is Sign.POSITIVE else _nonnegative(EDGE_MAGNITUDE)  # mu * mu
    left, right = step(node.left), step(node.right)
    if isinstance(node.operator, cst.Multiply):
        # A factor that says mask, in a product, is a 0/1 multiplicative mask (additive masks are added).
        if left.sign is Sign.UNKNOWN and is_mask_like(context, node.left, site):
            left = _nonnegative(None, unit=True)
        if right.sign is Sign.UNKNOWN and is_mask_like(context, node.right, site):
            right = _nonnegative(None, unit=True)
    if Sign.UNKNOWN in (left.sign, right.sign):
        return UNKNOWN
    found = _weakest((left, right))
    # A product of values in [0, 1] stays in it; a quotient does not.
    return replace(found, unit=left.unit and right.unit and isinstance(node.operator, cst.Multiply))


def _power_operator(step: _Step, node: cst.BinaryOperation) -> Value:
    return _power(step, node.left, node.right)


def _power(step: _Step, base: cst.BaseExpression, exponent: cst.BaseExpression) -> Value:
    found = step(base)
    if found.sign is Sign.POSITIVE:
        return POSITIVE
    value = constant_value(exponent)
    if value is not None and value > 0 and value % 2 == 0:
        return _nonnegative(found.edge or EDGE_MAGNITUDE)
    if found.sign is Sign.NONNEGATIVE and (value is None or value > 0):
        return _nonnegative(found.edge, found.unit)
    if value is None:
        return Value(Sign.UNKNOWN, EDGE_POWER)
    return UNKNOWN


_OPERATORS: Dict[type, Callable[[_Step, cst.BinaryOperation], Value]] = {
    cst.Add: _add,
    cst.Subtract: _subtract,
    cst.Multiply: _multiply,
    cst.Divide: _multiply,
    cst.FloorDivide: _multiply,
    cst.MatrixMultiply: _multiply,
    cst.Power: _power_operator,
}


# -- structures the transfer functions recognise ---------------------------------------------


_EXTREMA = {"max": "max", "amax": "max", "min": "min", "amin": "min"}


def _is_reduction_pair(context: "FileContext", node: cst.BaseExpression) -> bool:
    """``x.max(dim)`` / ``torch.min(x, dim=1)``: a (values, indices) pair."""
    node = without_shape_steps(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, is_method = call_parts(context, node)
    return name in ("max", "min", "median", "mode", "kthvalue", "sort", "topk") and source is not None and (
        name not in ("max", "min") or _is_dim_argument(node, is_method)
    )


def _values_of(context: "FileContext", pair: cst.BaseExpression) -> cst.BaseExpression:
    """``x`` for ``x.max(dim)`` (its values are as signed as ``x``), else ``pair``."""
    node = without_shape_steps(context, pair)
    if isinstance(node, cst.Call) and _is_reduction_pair(context, node):
        _, source, _ = call_parts(context, node)
        return source
    return pair


def _extremum(context: "FileContext", node: cst.BaseExpression, site: Optional[Site]):
    """("max" or "min", the reduced tensor) for ``x.max()``, ``torch.amin(x)``, ``x.max(dim)[0]``, or a name
    bound to one (also by ``lo, hi = x.min(), x.max()``)."""
    for _ in range(MAX_DEPTH):
        node = without_shape_steps(context, node)
        if isinstance(node, cst.Name) and site is not None:
            reaching = bindings(site, node.value)
            if len(reaching) != 1 or reaching[0].kind not in ("assign", "unpack"):
                return None
            value = unpacked_element(reaching[0], node.value) if reaching[0].kind == "unpack" else reaching[0].value
            if value is None:
                return None
            node, site = value, reaching[0].site
            continue
        if isinstance(node, cst.Subscript):
            node = node.value
            continue
        if isinstance(node, cst.Attribute) and node.attr.value == "values":
            node = node.value
            continue
        if isinstance(node, cst.Call) and not has_star_args(node):
            name, source, _ = call_parts(context, node)
            if name in _EXTREMA and source is not None:
                return _EXTREMA[name], source
        return None
    return None


def _is_range(context: "FileContext", node: cst.BinaryOperation, site: Optional[Site]) -> bool:
    """``x.max() - x.min()``: the extremes of one tensor."""
    high, low = _extremum(context, node.left, site), _extremum(context, node.right, site)
    return high is not None and low is not None and high[0] == "max" and low[0] == "min" and structurally_equal(high[1], low[1])


# -- guard constants ------------------------------------------------------------------


_SAFE_WORDS = re.compile(r"^_*safe|_safe|nonzero|non_zero|nozero|no_zero", re.IGNORECASE)


def _says_safe(node: cst.BaseExpression) -> bool:
    """``safe_theta``, ``self.safe_norm``, ``_nonzero(d)``: the author named the guard."""
    if isinstance(node, cst.Call) and not isinstance(node.func, cst.Call):
        node = node.func
        if isinstance(node, cst.Attribute) and node.attr.value in ("count_nonzero", "nonzero"):
            return False
    name = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
    return conventions.says(bool(name and _SAFE_WORDS.search(name)) and name not in ("count_nonzero", "nonzero"))


_INDICATOR_CASTS = frozenset({"float", "double", "half", "type_as", "to", "type"})


def _fills_its_zeros(step: _Step, term: cst.BaseExpression, other: cst.BaseExpression, depth: int = 0) -> bool:
    """``term`` is ``(other == 0) * c`` with ``c`` > 0 (through casts and local names: ``z = p == 0``,
    ``z = z.float() * 1e-8``): added to ``other``, it lifts exactly the entries that were 0."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(term, cst.Name):
        bound = sole_assignment(step.site, term.value)
        if bound is None:
            bound = next(iter(bindings(step.site, term.value)), None) if step.site is not None else None
            if bound is None or bound.kind != "assign" or bound.value is None:
                return False
        return _fills_its_zeros(_Step(step.evaluator, bound.site, step.depth, step.seen), bound.value, other, depth + 1)
    if not (isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Multiply)):
        return False
    for indicator, scale in ((term.left, term.right), (term.right, term.left)):
        value = constant_value(scale)
        if (value is not None and value > 0) or is_guard_constant(scale):
            if _zero_indicator_of(step, indicator, other, depth + 1):
                return True
    return False


def _zero_indicator_of(step: _Step, node: cst.BaseExpression, other: cst.BaseExpression, depth: int) -> bool:
    """``other == 0`` (``0 == other``, ``other.eq(0)``), through casts and local names."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, cst.Name) and step.site is not None:
        found = bindings(step.site, node.value)
        bound = found[0] if found else None
        if bound is None or bound.kind != "assign" or bound.value is None:
            return False
        return _zero_indicator_of(_Step(step.evaluator, bound.site, step.depth, step.seen), bound.value, other, depth + 1)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in _INDICATOR_CASTS:
            return _zero_indicator_of(step, node.func.value, other, depth + 1)
        if node.func.attr.value == "eq" and len(node.args) == 1 and constant_value(node.args[0].value) == 0:
            return structurally_equal(node.func.value, other)
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, cst.Equal):
        left, right = node.left, node.comparisons[0].comparator
        return (constant_value(right) == 0 and structurally_equal(left, other)) or (
            constant_value(left) == 0 and structurally_equal(right, other)
        )
    return False


def _is_eps_term(node: cst.BaseExpression) -> bool:
    """``eps``, ``1e-6``, or ``mask * 1e-16``: a term added to stay off zero."""
    if is_guard_constant(node):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return is_eps_like(node.left) or is_eps_like(node.right)
    return False


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


def _is_smoothing_number(context: "FileContext", term: cst.BaseExpression, site: Optional[Site]) -> bool:
    """A Python number (a hyperparameter, not a literal) added to a non-negative tensor: ``delta ** 2`` in
    pseudo-Huber's ``sqrt(x ** 2 + delta ** 2)``, ``sigma_data ** 2`` in EDM's preconditioning.  The
    linter never flags numbers, and a zero there is a configuration that breaks the model as a whole,
    not a value that data can reach."""
    return constant_value(term) is None and value_kind(context, term, site) == "number"


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



# -- roots of ReLU outputs -------------------------------------------------------------------


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
        if conventions.says(bool(_PADDING_MASK_NAME.search(word))):
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
    named = conditions.named_test(node, site)
    if named is not None:
        node, site = named
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.BitInvert, cst.Not)):
        return node.expression, site
    return None


def _is_pad_mask(node: cst.BaseExpression) -> bool:
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return conventions.says(bool(_PAD_MASK_NAME.search(word)))


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


# torch.distributions families whose samples have a density: a vector of them is all zero with probability 0.
CONTINUOUS_DISTRIBUTIONS = frozenset({
    "Normal", "MultivariateNormal", "LowRankMultivariateNormal", "Cauchy", "Laplace", "StudentT", "Uniform",
    "Gumbel", "LogNormal", "Exponential", "Gamma", "Chi2", "Beta", "Dirichlet", "HalfNormal", "HalfCauchy",
    "Pareto", "Weibull", "Kumaraswamy", "LogisticNormal", "VonMises", "FisherSnedecor",
})
_DRAW_METHODS = frozenset({"sample", "rsample"})


def is_continuous_draw(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``node`` holds draws of a continuous distribution on every path that binds it: ``torch.randn(n, d)``,
    ``dist.Cauchy(loc, scale).sample((n, d)).squeeze()``, a name set to one of these in each branch."""
    if depth > MAX_DEPTH:
        return False
    while isinstance(node, cst.Subscript):
        node = node.value
    if isinstance(node, cst.Name):
        if site is None:
            return False
        found = bindings(site, node.value)
        return bool(found) and all(
            binding.kind in ("assign", "conditional", "unpack") and binding.value is not None
            and is_continuous_draw(context, _split_source(context, binding) or binding.value, binding.site, depth + 1)
            and (binding.kind != "unpack" or _split_source(context, binding) is not None)
            for binding in found
        )
    if not isinstance(node, cst.Call):
        return False
    name, source, is_method = call_parts(context, node)
    if name in _CONTINUOUS_DRAWS and not is_method:
        return True
    if is_method and source is not None and name in _MASK_PRESERVING:
        return is_continuous_draw(context, source, site, depth + 1)
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in _DRAW_METHODS and isinstance(func.value, cst.Call):
        family = context.qualified_name(func.value.func) or ""
        return family.startswith("torch.distributions.") and family.rsplit(".", 1)[-1] in CONTINUOUS_DISTRIBUTIONS
    return False


# Methods that cut a tensor into parts, each holding some of its elements.
_SPLITS = frozenset({"chunk", "split", "unbind", "tensor_split"})


def _split_source(context: "FileContext", binding) -> Optional[cst.BaseExpression]:
    """``z0, z1 = x.chunk(2)``: the tensor ``x`` that an unpacking of its parts reads, else None."""
    value = binding.value
    if binding.kind != "unpack" or not isinstance(value, cst.Call):
        return None
    name, source, _ = call_parts(context, value)
    return source if name in _SPLITS else None


def _is_dim_argument(call: cst.Call, is_method: bool) -> bool:
    """``x.max(1)`` / ``torch.max(x, dim=1)``: the reduction form that returns (values, indices)."""
    if keyword_arg(call, "dim") is not None:
        return True
    args = positional_args(call)
    candidate = args[0] if is_method and args else (args[1] if len(args) > 1 else None)
    return candidate is not None and isinstance(candidate.value, (cst.Integer, cst.UnaryOperation))


