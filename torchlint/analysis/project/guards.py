"""The numerics rules' question: can this op's operand reach the edge of its domain, and how sure is that?

:func:`assess` answers for one :class:`~torchlint.analysis.values.domain.DomainOp` with a
:class:`~torchlint.rule.Confidence`, or None when nothing is reported:

1. **Where gradients are never computed** nothing is reported: ``no_grad``/``inference_mode``,
   initialisation, optimizer update code, data loading, metric classes, input preparation
   (:func:`torchlint.analysis.flow.grad_need.gradient_never_computed`).  A function's or file's name alone
   never silences a finding.
2. **What the operand is** (:mod:`torchlint.analysis.values.kinds`): Python numbers and NumPy values are never
   reported; operators (``x ** 0.5``) only on values known to be tensors; a constant tensor of
   configuration values (``torch.tensor(alpha)``) only when it is 0 or negative.
3. **Its abstract value** (:mod:`torchlint.analysis.flow.signs`): a positive value is guarded; so is one kept
   off the edge by a test (:mod:`torchlint.analysis.values.conditions`: an enclosing ``if d > 0``, an
   ``assert``, an early exit), by a test around every same-file call, or made of guarded factors.  A
   root whose zeros a ReLU masks in the backward pass is not reported (ReLU's backward selects).
4. **Gradient-only hazards**: a root or fractional power of 0 is a fine value with an infinite
   gradient; it is not reported where no gradient can flow (a result that only feeds ``detach``,
   ``round`` or a comparison, operands of constants and random draws, ground truth:
   :func:`torchlint.analysis.flow.grad_need.gradient_cannot_flow`).
5. **Ownership**: an op in a ``torch.where`` branch tested on its operand is TL106's, one whose result
   is filtered for NaN is TL107's, a log a fused op replaces is the TL2xx rule's
   (:mod:`torchlint.analysis.project.owners`).
6. **Confidence**: ``high`` when the operand reaches the edge by its own construction in ordinary
   training (its value's edge is one :data:`HIGH_EDGES` lists for the op and not a :data:`DATA_EDGES` one:
   a softmax output or ``1 - p`` under a log, a ReLU output under a division, a constant 0) and, for a
   power, the exponent is a known fraction (``0.5``, ``1 / p``; ``x ** gamma`` is a hazard only for
   ``gamma < 1``).  An edge reached only on degenerate data (a norm or count under a division, a
   difference under a root: :data:`DATA_EDGES`) is one level lower, ``medium``.  A root of a value that
   reaches 0 but not below is a gradient hazard only: one level lower again in a helper that the code
   taking the gradient calls (a ``forward``, a loss, the scope that calls ``backward()``:
   :func:`~torchlint.analysis.flow.grad_need.gradient_flows_here`; the helper's result may only be logged or
   ranked).  The probability of one chosen entry (``p.gather(1, a)``) is 0
   only when the model is confidently wrong: not an edge by construction, unlike a whole softmax vector.  An operand of unknown sign is ``medium`` where the code
   shows gradients flow (:func:`torchlint.analysis.flow.grad_need.gradient_flows`: a ``forward``, a loss, a
   scope that calls ``backward()``), ``low`` elsewhere.

:func:`needs_guard` is ``assess(...) is not None``; :func:`reaches_edge` is steps 2-3 alone, for the
rules that own an op (TL106, TL107).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Optional, Sequence

import libcst as cst

from torchlint.analysis.flow import signs
from torchlint.analysis.model import conventions
from torchlint.analysis.flow.callers import (
    argument_for,
    call_sites,
    calls_named,
    defined_function_names,
    enclosing_function,
    judged_at_every_call,
)
from torchlint.analysis.values.conditions import guarded_by_condition, read_names
from torchlint.analysis.model.dataflow import Site, bindings, site_of
from torchlint.analysis.values.domain import DIV, LOG, POW, RSQRT, SQRT, DomainOp, is_reciprocal_exponent
from torchlint.analysis.flow.grad_need import (
    GRADIENT_ONLY_KINDS,
    defines_optimizer,
    gradient_cannot_flow,
    gradient_flows,
    gradient_flows_here,
    gradient_never_computed,
    may_be_negative,
)
from torchlint.analysis.values.kinds import is_constant_tensor, value_kind
from torchlint.analysis.project.owners import filter_owner, fused_log_owner, where_owner
from torchlint.analysis.flow.signs import Sign, Value, _exponent_needs_no_gradient, _relu_masked
from torchlint.findings import Confidence

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


_ROOT_EDGES: FrozenSet[str] = frozenset({
    signs.EDGE_ZERO, signs.EDGE_NEGATIVE, signs.EDGE_MAGNITUDE, signs.EDGE_NORM, signs.EDGE_SPREAD, signs.EDGE_COUNT,
    signs.EDGE_COMPLEMENT, signs.EDGE_RANGE, signs.EDGE_DIFFERENCE, signs.EDGE_CLAMPED, signs.EDGE_WEIGHTS,
    signs.EDGE_POWER,
})
# The edges that make a finding certain, per kind of op: the operand reaches the edge by its own construction.
# A ReLU output under a root is no hazard (its backward masks the root's gradient, step 3) but under an
# rsqrt it is inf already; a softmax output under a log is the TL2xx rules' case, 0 only on underflow.
HIGH_EDGES: Dict[str, FrozenSet[str]] = {
    SQRT: _ROOT_EDGES,
    # ``probs ** gamma`` of focal losses: a sigmoid output is exactly 0 or 1 for logits past +-17 in float16.
    POW: _ROOT_EDGES | {signs.EDGE_PROBABILITY},
    RSQRT: _ROOT_EDGES | {signs.EDGE_RELU, signs.EDGE_PROBABILITY},
    LOG: (_ROOT_EDGES - {signs.EDGE_DIFFERENCE}) | {signs.EDGE_RELU, signs.EDGE_PROBABILITY},
    DIV: frozenset({
        signs.EDGE_ZERO, signs.EDGE_MAGNITUDE, signs.EDGE_NORM, signs.EDGE_SPREAD, signs.EDGE_COUNT, signs.EDGE_RELU,
        signs.EDGE_RANGE, signs.EDGE_CLAMPED, signs.EDGE_WEIGHTS,
    }),
}


# Operands that go below 0 (NaN already in the forward pass of a root), not only to 0.
_NEGATIVE_EDGES = frozenset({signs.EDGE_NEGATIVE, signs.EDGE_DIFFERENCE})

# Edges a value reaches only on degenerate data: an all-zero vector, a constant feature, an empty mask, terms
# that cancel.  Constants, saturation (a probability that underflows, ``1 - p``), ReLU or clamp outputs and the
# absolute value or square of single entries meet their edge in ordinary training.  On users' code the data edges were real in 1 of 6 ``high`` findings
# (bench/results/precision_user.md): what the data holds is not in the code, so they are ``medium``.
DATA_EDGES: FrozenSet[str] = frozenset({
    signs.EDGE_NORM, signs.EDGE_SPREAD, signs.EDGE_COUNT, signs.EDGE_RANGE, signs.EDGE_DIFFERENCE,
    signs.EDGE_WEIGHTS, signs.EDGE_POWER,
})


_LEVELS = [Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH]


def assess(
    context: "FileContext",
    op: DomainOp,
    ancestors: Optional[Sequence[cst.CSTNode]] = None,
    shown: Callable[[Confidence], Confidence] = lambda level: level,
) -> Optional[Confidence]:
    """How sure a finding on ``op`` is, or None when it is not reported (see the module docs).

    ``ancestors`` are the nodes enclosing ``op.node``, outermost first; by default the engine's
    ``context.ancestors`` (right for a rule visiting ``op.node`` itself). When a naming convention decided
    anything, the facts alone decide whether the op is reported, and the names move the level by one
    (analysis/model/conventions.py). ``shown``: the level the rule shows a finding found at a level (both
    answers are mapped before a convention moves one)."""
    with conventions.recording() as used:
        by_names = _shown(_assess(context, op, ancestors), shown)
    if not used:
        return by_names
    with conventions.disabled():
        by_facts = _shown(_assess(context, op, ancestors), shown)
    return conventions.moved(by_facts, by_names, _LEVELS)


def _shown(level: Optional[Confidence], shown: Callable[[Confidence], Confidence]) -> Optional[Confidence]:
    return None if level is None else shown(level)


def _assess(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]]) -> Optional[Confidence]:
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    value = _operand_value(context, op, site)
    if value is None or not _unguarded(context, op, ancestors, site, value):
        return None
    if op.kind in GRADIENT_ONLY_KINDS and not may_be_negative(op.operand) and value.edge != signs.EDGE_NEGATIVE:
        # sqrt(0) and 0 ** (1/3) are fine values: report only where a gradient is taken.
        if gradient_cannot_flow(context, op, ancestors, site):
            return None
        if defines_optimizer(context):
            return None  # optimizer states: running means of squares plus eps, built across calls
    if where_owner(context, op, ancestors) is not None or filter_owner(context, op, ancestors) is not None:
        return None
    if op.kind == LOG and fused_log_owner(context, op, ancestors) is not None:
        return None
    # Last: where no gradient is computed may need the file's callers, the costliest question here.
    if gradient_never_computed(context, ancestors):
        return None
    return confidence_of(context, op, value, ancestors)


def confidence_of(context: "FileContext", op: DomainOp, value: Value, ancestors: Sequence[cst.CSTNode]) -> Confidence:
    """``high`` for an operand that reaches the edge by construction, else ``medium`` where gradients
    flow and ``low`` elsewhere (step 6 of the module docs)."""
    edge = op.divisor.edge if op.kind == DIV and op.divisor is not None else value.edge
    by_construction = edge in HIGH_EDGES[op.kind]
    if op.kind == POW and not is_reciprocal_exponent(op.exponent):
        # ``(1 - p) ** gamma``: a hazard only for gamma < 1, which the exponent's name does not tell; with
        # a base of unknown sign too, two unknowns must meet.
        if not by_construction:
            return Confidence.LOW
        return Confidence.MEDIUM if gradient_flows(context, ancestors) else Confidence.LOW
    if by_construction:
        # A root of 0 is a fine value; its infinite gradient is certain only where the code itself takes a
        # gradient (a forward, a loss, the scope that calls backward), not in a helper it calls, whose result
        # may only be printed or ranked: one level down.
        gradient_unseen = (
            op.kind in GRADIENT_ONLY_KINDS and edge not in _NEGATIVE_EDGES and not gradient_flows_here(context, ancestors)
        )
        if edge in DATA_EDGES:
            return Confidence.LOW if gradient_unseen and _called_only_without_gradient(context, ancestors) else Confidence.MEDIUM
        return Confidence.MEDIUM if gradient_unseen else Confidence.HIGH
    return Confidence.MEDIUM if gradient_flows(context, ancestors) else Confidence.LOW


def _called_only_without_gradient(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """The file calls the function that holds the op, and none of those calls shows a gradient (its results are
    printed or ranked); a function the file never calls is used from elsewhere, unknown."""
    function = enclosing_function(ancestors)
    return function is not None and bool(calls_named(context, function.name.value)) and not gradient_flows(context, ancestors)


def needs_guard(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether ``op`` is reported at any confidence (:func:`assess`)."""
    return assess(context, op, ancestors) is not None


def reaches_edge(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether ``op``'s operand is a tensor that may reach the edge: steps 2-3 of :func:`assess`, without
    where it runs and who owns it.  The owners of an op (TL106 for a ``where`` branch, TL107 for a NaN
    filter) ask this, so that one op is judged by one guard analysis whichever rule reports it."""
    with conventions.recording() as used:
        by_names = _reaches_edge(context, op, ancestors)
    if not used or by_names:
        return by_names
    with conventions.disabled():
        return _reaches_edge(context, op, ancestors)  # a name never hides an edge the facts show


def _reaches_edge(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]]) -> bool:
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    value = _operand_value(context, op, site)
    return value is not None and _unguarded(context, op, ancestors, site, value)


def _operand_value(context: "FileContext", op: DomainOp, site: Site) -> Optional[Value]:
    """The operand's abstract value, or None when it is never reported: Python numbers, NumPy values,
    constant tensors of configuration values (unless 0 or negative), operators on values not known to be
    tensors, a method the file defines itself (``self.so3.log()``)."""
    operand = op.operand
    kind = value_kind(context, operand, site)
    if kind in ("number", "array"):
        return None
    if op.is_operator and op.kind != DIV and kind != "tensor":
        return None
    if op.form == "method" and op.name in defined_function_names(context) and kind != "tensor":
        return None  # ``self.so3.log()``: the file defines its own ``log``
    value = signs.evaluate(context, operand, site, division=op.kind == DIV)
    if is_constant_tensor(context, operand, site) and value.edge not in (signs.EDGE_ZERO, signs.EDGE_NEGATIVE):
        return None  # ``torch.tensor(alpha)``: a configuration value, judged as the number it holds
    return value


def _unguarded(context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode], site: Site, value: Value) -> bool:
    """Not provably off the edge, nor kept off it by a condition, nor made of guarded factors, nor a root
    whose zeros ReLU masks in the backward pass (:func:`~torchlint.analysis.flow.signs._relu_masked`)."""
    operand = op.operand
    if op.kind in GRADIENT_ONLY_KINDS and _exponent_needs_no_gradient(context, op, site) and _relu_masked(context, operand, site):
        return False
    if value.sign is Sign.POSITIVE:
        return False
    division = op.kind == DIV
    if guarded_by_condition(context, operand, ancestors, division=division, node=op.node):
        return False
    if _guarded_at_every_call(context, operand, site, division):
        return False
    return not _factors_guarded(context, operand, ancestors, site, division, op.node)


def _guarded_at_every_call(context: "FileContext", operand: cst.BaseExpression, site: Site, division: bool) -> bool:
    """An operand made of the function's parameters (``fg_mask.sum()``) that every same-file call guards
    where it stands, the parameters read as the call's arguments: ``if fg_mask.sum(): self.seg_loss(fg_mask, ...)``."""
    if context.reading_callers or site.function is None or not call_sites(context, site.function):
        return False  # asked at every op left unguarded: the memoized callers answer first
    roots = {dotted.split(".", 1)[0] for dotted in read_names(operand)}  # fg_mask.sum -> fg_mask
    parameters = {name for name in roots if [b.kind for b in bindings(site, name)] == ["param"]}
    if not parameters:
        return False

    def guarded_there(function: cst.FunctionDef, call_site) -> bool:
        arguments = {name: argument_for(function, name, call_site) for name in parameters}
        if any(value is None for value in arguments.values()):
            return False
        at_call = operand.visit(_Substitute(arguments))
        return guarded_by_condition(context, at_call, call_site.ancestors, division=division, node=call_site.call)

    return judged_at_every_call(context, site, guarded_there)


def _factors_guarded(context, operand, ancestors, site, division, node) -> bool:
    """``preds / targets`` after ``if (preds <= 0).any() or (targets <= 0).any(): raise``: each factor is guarded."""
    if not (isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, (cst.Multiply, cst.Divide))):
        return False
    return all(
        signs.sign_of(context, factor, site, division=division) is Sign.POSITIVE
        or guarded_by_condition(context, factor, ancestors, division=division, node=node)
        for factor in (operand.left, operand.right)
    )


class _Substitute(cst.CSTTransformer):
    """Every ``Name`` of a parameter replaced by the expression a call passes for it."""

    def __init__(self, arguments) -> None:
        super().__init__()
        self.arguments = arguments

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return True

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)  # the method's name is no parameter

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.arguments.get(original_node.value, updated_node)


# ReLU's backward selects (``where(x > 0, grad, 0)``) rather than multiplies, so the infinite derivative
# of a root at a zero ReLU made never reaches the input: ``sqrt(relu(x))`` has gradient 0 at x <= 0
# (tests/test_runtime_numerics.py), where ``sqrt(x.clamp(min=0))`` is inf at x = 0 and
# ``sqrt(x.abs())`` NaN.  Sums, means and pools of ReLU outputs are 0 only where every one is.