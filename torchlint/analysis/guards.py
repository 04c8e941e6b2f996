"""The guard analysis: can this operand reach the edge of the op's domain, or has the author guarded it?

Asked by every TL1xx rule about a :class:`~torchlint.analysis.domain.DomainOp`.
The single entry point for a rule is :func:`needs_guard`; the pieces it is
made of are public because TL105-TL107 ask the mirror-image questions.

API
---
``needs_guard(context, op, ancestors=None) -> bool``
    True when ``op`` should be reported: its operand is a tensor, is not
    provably off the edge (:func:`sign_of`), no enclosing condition or
    earlier early exit / assert guards it (:func:`guarded_by_condition`),
    and no other rule owns the finding (:func:`where_owner`,
    :func:`filter_owner`, and for logs :func:`fused_log_owner`).
    ``ancestors`` are the nodes enclosing ``op.node``, outermost first; by
    default the engine's ``context.ancestors`` (right for a rule visiting
    ``op.node`` itself).

``reaches_edge(context, op, ancestors=None) -> bool``
    The guard half of :func:`needs_guard` alone (a tensor operand, not
    provably off the edge, not guarded by a condition): what TL106 and TL107
    ask about the ops whose finding they own.

``in_differentiated_code(context, ancestors)`` / ``gradient_cannot_flow(context, op, ancestors)``
    Where TL101-TL104 look: a ``forward``/``__call__``/``training_step``, a
    function or class named for a loss, a ``loss``/``losses`` module, but not
    their initialisation code (``__init__``, ``reset_parameters``, ``*_init``),
    nor feature extractors and processors (input preparation), nor tests named
    for a loss (``test_focal_loss``), nor plain classes named ``*Transform``
    (data transforms). Gradient-only hazards (a root of 0) are skipped under
    ``no_grad``/``inference_mode``, in initialisation code, in optimizer files,
    on constants/random draws, on ground truth named as such (``bbox_targets``)
    and on results that only feed ``detach``, ``round``, ``long`` or a
    comparison, directly or through a name every read of which does.

``sign_of(context, expr, site, division=False) -> Sign``
    POSITIVE (provably > 0, bounded away from 0 by the author), NONNEGATIVE
    (>= 0 but may be 0: abs, squares, relu, norms, ``clamp(min=0)``) or
    UNKNOWN.  Positive: positive literals and constants, ``+ eps`` with any
    positive literal or eps-like name (also ``1 + x``; ``x + mask * 1e-16``),
    ``clamp(min=c)`` / ``clamp_min(c)`` / ``clip(min=c)`` / ``torch.maximum(x, c)``
    / ``masked_fill(x == 0, c)`` with c > 0, ``exp``, ``ones``, sums/means/pools
    of positives, ``torch.where(d > 0, d, 1)``, calls of a helper defined in
    the same file whose every return is positive (``def stft(...)`` that
    clamps, ``self._norm(x)`` that adds eps: :mod:`torchlint.analysis.returns`),
    and a name unpacked from the tuples it returns (``mag, phase = self.stft(x)``);
    with ``division=True`` also
    ``sigmoid`` and ``softmax``.  Names are followed to their bindings in the
    same function (:mod:`torchlint.analysis.dataflow`: assignments, ``+= eps``,
    in-place ``clamp_``/``add_``, ``d[d == 0] = 1``); a binding made only on
    some paths counts when it is a guard (the author meant to guard), and one
    that is not a guard is ignored (a known looseness:
    bench/results/precision_tl1.md, "Tried and not kept").  Also positive:
    products (``matmul``, ``@``) of positive factors, ``x ** 2 + delta ** 2``
    with ``delta`` a Python number (a smoothing term), ``T - padding_mask.sum(1)``,
    ``c + eps - x`` and ``c - x`` when ``x`` is bounded by ``c`` or ``c - eps``
    (``1 - p.clamp(eps, 1 - eps)``, ``1 - cos.clamp(-1 + eps, 1 - eps) ** 2``:
    :func:`upper_bound`), ``torch.add`` / ``mul`` as the operators, calls named
    for a small value (``c_f.small_val(dtype)``), squares of positive values
    (``mu * mu``), ``-expm1(x)`` of an ``x`` bounded strictly below 0 (``log(-expm1(log_s.clamp(max=-1e-7)))``,
    the stable ``log(1 - exp(x))``), a positive value plus a masked sum of non-negative ones (``exp(s) +
    (mask * exp(n)).sum(1)``: a 0/1 mask, or ``1 - mask``, is a non-negative factor of a product),
    norms of random draws (``randn``), attention averages of positive
    values (``softmax(s) @ v``, ``scaled_dot_product_attention``), the magnitude of entries selected off zero
    (``w[w < 0].abs()``, ``w[~(w >= 0)].abs()``: :func:`_implies_nonzero`),
    a lambda's parameter in ``map(lambda t: ..., (a, b))`` when ``a`` and
    ``b`` are, and a parameter every same-file call
    passes a positive value (:mod:`torchlint.analysis.callers`; one level of
    callers, judged where each call stands).

``value_kind(context, expr, site) -> "tensor" | "number" | "array" | "unknown"``
    What an expression holds: Python numbers (literals, ``math.*``, ``len``,
    ``.size(i)``, ``.shape[i]``, ``numel()``, ``.item()``), NumPy values
    (``np.*``), tensors (``torch.*`` calls, tensor methods, parameters
    annotated ``Tensor``, ``forward`` arguments).  :func:`is_not_tensor`
    is the "never flag" test; operator forms (``x ** 0.5``) are reported
    only when the operand is known to be a tensor.  Constant tensors
    (:func:`is_constant_tensor`: ``torch.tensor(alpha)``, ``torch.FloatTensor([0.5]).to(device)``, names bound to
    them and arithmetic of them with Python numbers) hold configuration values and are never reported either.

``guarded_by_condition(context, operand, ancestors, division=False) -> bool``
    An enclosing ``if d > 0:`` / ``if d != 0:`` / ``if (d > 0).all():`` /
    ``if d.min() > 0:`` / ``if mask.any():`` (for a count of ``mask``), the
    ``else`` of ``if d == 0:``, ``d > 0 and ...``, ``... if d > 0 else ...``,
    an earlier ``assert (d > 0).all()`` / ``assert (d == 0).sum() == 0`` or
    ``if d == 0: return``; the test may name the expression a local name holds
    (``denom = s.sum()``; ``if s.sum() > 0:``), or name a local that holds the operand recomputed from
    the same inputs (``n = mask.sum()``; ``if n == 0: return``; ``x / mask.sum()``), and a test around every same-file call guards a
    parameter, read with the call's arguments (``if fg_mask.sum(): self.seg_loss(fg_mask)``).
    :func:`condition_implies_positive` / :func:`condition_implies_zero`
    answer it for one test expression (TL106 reads ``where`` conditions with them).

Ownership (who reports what, so one bug gives one finding):
``where_owner(context, op, ancestors)``
    The ``torch.where(cond, ..., ...)`` call whose branch holds ``op`` and
    whose ``cond`` tests the operand (TL106's finding), else None.
``filter_owner(context, op, ancestors)``
    The ``nan_to_num`` / ``where(isnan(...))`` / ``masked_fill(isinf(...))``
    call wrapping ``op``, or the later statement that filters the name
    ``op``'s result was assigned to (``y[torch.isnan(y)] = 0``) (TL107's
    finding), else None.  :func:`is_nan_filter` tells whether one node is
    such a filter and of what.
``fused_log_owner(context, op, ancestors)``
    The TL2xx code owning a log: TL201 log(softmax), TL202 log(sigmoid) and
    log(1 - sigmoid), TL203 log(sum(exp)), TL204 x * log(x), TL205 log(1 + x).

Not guards (on purpose): ``torch.sqrt(d) + EPS`` (eps after the op),
``clamp_min(torch.log(p), -100)`` (clamps the result), ``torch.where(p > 0,
p * torch.log(p), 0)`` (the unselected branch still back-propagates NaN),
``clamp(min=0)`` / ``abs`` for sqrt and roots (sqrt(0) has an infinite
gradient, which clamp passes through at 0 and abs turns into NaN).  ``relu``
is one for roots with a constant exponent (:func:`_relu_masked`): its backward
zeroes the gradient wherever its output is 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from torchlint.analysis.callers import argument_for, call_sites, defined_function_names, judged_at_every_call
from torchlint.analysis.conditions import _factors_guarded, guarded_by_condition, read_names
from torchlint.analysis.dataflow import Site, bindings, site_of
from torchlint.analysis.domain import DIV, LOG, POW, RSQRT, SQRT, DomainOp
from torchlint.analysis.grad_need import (
    GRADIENT_ONLY_KINDS,
    defines_optimizer,
    gradient_cannot_flow,
    in_differentiated_code,
    may_be_negative,
)
from torchlint.analysis.kinds import is_constant_tensor, value_kind
from torchlint.analysis.owners import filter_owner, fused_log_owner, where_owner
from torchlint.analysis.signs import Sign, _exponent_needs_no_gradient, _relu_masked, sign_of

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext


# -- the rule's question -------------------------------------------------------------


def needs_guard(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether ``op`` can reach its domain edge unguarded and no other rule owns it (see module docs)."""
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    kind = _operand_kind(context, op, site)
    if kind is None:
        return False
    if op.kind in GRADIENT_ONLY_KINDS and not may_be_negative(op.operand):
        # sqrt(0) and 0 ** (1/3) are fine values: report only where a gradient is taken.
        if gradient_cannot_flow(context, op, ancestors, site):
            return False
    if not in_differentiated_code(context, ancestors):
        # Outside training code (metrics of counts, geometric solvers normalising null vectors,
        # statistics, initialisation) the operands are positive by constructions the linter
        # cannot see far more often than not (measured: bench/results/precision_tl1.md).
        return False
    if op.kind in (SQRT, RSQRT, POW) and defines_optimizer(context):
        # Optimizer states are running means of squares plus eps, built across calls.
        return False
    if not _unguarded(context, op, ancestors, site):
        return False
    if where_owner(context, op, ancestors) is not None or filter_owner(context, op, ancestors) is not None:
        return False
    if op.kind == LOG and fused_log_owner(context, op, ancestors) is not None:
        return False
    return True


def reaches_edge(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether ``op``'s operand is a tensor that may reach the edge: :func:`needs_guard` without the
    where-it-runs and who-owns-it steps.  The owners of an op (TL106 for a ``where`` branch, TL107 for
    a NaN filter) ask this, so that one op is judged by one guard analysis whichever rule reports it."""
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    return _operand_kind(context, op, site) is not None and _unguarded(context, op, ancestors, site)


def _operand_kind(context: "FileContext", op: DomainOp, site: Site) -> Optional[str]:
    """The operand's :func:`value_kind`, or None when it is never reported: Python numbers, NumPy
    values, constant tensors, operators on values not known to be tensors, a file's own ``log``."""
    operand = op.operand
    kind = value_kind(context, operand, site)
    if kind in ("number", "array") or is_constant_tensor(context, operand, site):
        return None
    if op.is_operator and op.kind != DIV and kind != "tensor":
        return None
    if op.form == "method" and op.name in defined_function_names(context) and kind != "tensor":
        return None  # ``self.so3.log()``: the file defines its own ``log``
    return kind


def _unguarded(context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode], site: Site) -> bool:
    """Not provably off the edge (:func:`sign_of`), nor kept off it by a condition, nor made of guarded factors,
    nor a root whose zeros ReLU masks in the backward pass (:func:`_relu_masked`)."""
    operand = op.operand
    if op.kind in GRADIENT_ONLY_KINDS and _exponent_needs_no_gradient(context, op, site) and _relu_masked(context, operand, site):
        return False
    division = op.kind == DIV
    if sign_of(context, operand, site, division=division) is Sign.POSITIVE:
        return False
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