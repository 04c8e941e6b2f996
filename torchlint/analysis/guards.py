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

import ast

import enum
import re
from typing import TYPE_CHECKING, FrozenSet, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis import fused
from torchlint.analysis.callers import argument_for, call_sites, defined_function_names, enclosing_function
from torchlint.analysis.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.dataflow import (
    Site,
    bindings,
    earlier_statements,
    later_statements,
    site_of,
    sole_assignment,
    unpack_position,
    unpacked_element,
)
from torchlint.analysis.domain import (
    DIV,
    LOG,
    POW,
    RSQRT,
    SQRT,
    DomainOp,
    constant_value,
    is_mask_like,
    structurally_equal,
)
from torchlint.analysis.grad_need import carries_no_gradient, gradient_unlikely
from torchlint.analysis.names import dotted_name
from torchlint.analysis.returns import called_function, returned_values
from torchlint.analysis.ops import is_eps_like, is_value_receiver, strip_clamp_min, strip_eps
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext

_MAX_DEPTH = 8


class Sign(enum.IntEnum):
    UNKNOWN = 0
    NONNEGATIVE = 1
    POSITIVE = 2


# -- the rule's question -------------------------------------------------------------


def needs_guard(context: "FileContext", op: DomainOp, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether ``op`` can reach its domain edge unguarded and no other rule owns it (see module docs)."""
    ancestors = list(context.ancestors if ancestors is None else ancestors)
    site = site_of(ancestors)
    kind = _operand_kind(context, op, site)
    if kind is None:
        return False
    if op.kind in GRADIENT_ONLY_KINDS and not _may_be_negative(op.operand):
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
    roots = {dotted.split(".", 1)[0] for dotted in _names(operand)}  # fg_mask.sum -> fg_mask
    parameters = {name for name in roots if [b.kind for b in bindings(site, name)] == ["param"]}
    if not parameters:
        return False

    def guarded_there(function: cst.FunctionDef, call_site) -> bool:
        arguments = {name: argument_for(function, name, call_site) for name in parameters}
        if any(value is None for value in arguments.values()):
            return False
        at_call = operand.visit(_Substitute(arguments))
        return guarded_by_condition(context, at_call, call_site.ancestors, division=division, node=call_site.call)

    return _judged_at_every_call(context, site, guarded_there)


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
_RELU_CALLS = frozenset({"relu", "relu6", "ReLU", "ReLU6", "relu_"})
_ZERO_ONLY_WHERE_ALL_ARE = frozenset({
    "sum", "nansum", "mean", "nanmean", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
})


def _relu_masked(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """Whether ``node`` is 0 only where a ReLU output is: ``F.relu(x)``, ``x.relu()``, ``nn.ReLU()(x)``, through
    casts and reshapes, sums, means and average pools of them, sums of two of them, their powers with a
    positive constant exponent, and local names bound once to one."""
    if depth > _MAX_DEPTH:
        return False
    node = _without_sign_preserving_calls(context, node)
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
        name, source, is_method = _call_parts(context, node)
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


# -- where gradients flow --------------------------------------------------------------


# sqrt(0) = 0 and 0 ** (1/3) = 0 are fine values: only their derivative is infinite.
GRADIENT_ONLY_KINDS = frozenset({SQRT, POW})
NO_GRAD_CONTEXTS: FrozenSet[str] = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
# Consumers after which no gradient is wanted.  Some leave autograd (``detach``, ``long``, comparisons);
# the piecewise-constant ones (``floor``, ``round``, ``sign``) pass back a zero gradient, which still
# meets sqrt's infinite one as NaN when the operand needs a gradient.  Code that rounds a root computes
# sizes and counts from data that does not: reporting them gave 4 false alarms (kornia's crop-size
# sampling) and no real finding on the 15-package corpus (bench/results/precision_tl1.md, read 9).
_NON_DIFFERENTIABLE = frozenset({
    "detach", "item", "tolist", "numpy", "round", "floor", "ceil", "trunc", "long", "int", "bool", "sign",
    "argmax", "argmin", "argsort", "nonzero", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
})
# Ground truth by name: ``target``, ``bbox_reg_targets``, ``gt_boxes``, ``y_true`` (not ``target_logit``,
# the model's logit of the target class).
_GROUND_TRUTH_NAME = re.compile(r"(^|_)targets?$|^gt(_|$)|(^|_)gt$|^y_true$")
# Sources that carry no gradient: constants and random draws.
_NO_GRADIENT_SOURCES = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal", "bernoulli",
    "multinomial", "arange", "linspace", "logspace", "ones", "zeros", "full", "ones_like", "zeros_like",
    "full_like", "eye", "tensor", "as_tensor", "empty", "poisson",
})


def gradient_cannot_flow(
    context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode], site: Optional[Site] = None
) -> bool:
    """Whether autograd can never differentiate ``op``: inside ``no_grad``/``inference_mode``
    (decorator or ``with``), optimizer code (a file defining a ``torch.optim.Optimizer``
    subclass), the ``forward`` of a ``torch.autograd.Function`` (a hand-written backward),
    a result that only feeds ``detach``/``round``/``long``/comparisons, or an operand made
    of constants, random draws and counts of comparisons or boolean masks."""
    if in_no_grad_code(context, ancestors) or _in_custom_autograd_function(context, ancestors):
        return True  # the forward of a torch.autograd.Function: its backward is written by hand
    path = list(ancestors) + [op.node]
    if _leaves_autograd(context, path):
        return True
    site = site or site_of(list(ancestors))
    return _without_gradient(context, op.operand, site, 0) or _assigned_to_gradient_free_uses(context, path, site)


def _leaves_autograd(context: "FileContext", path: Sequence[cst.CSTNode]) -> bool:
    """Whether the value at the end of ``path`` (outermost first) only feeds, within its statement, a
    comparison or a :data:`_NON_DIFFERENTIABLE` call."""
    for position in range(len(path) - 2, -1, -1):
        node = path[position]
        if isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return False
        if isinstance(node, cst.Comparison):
            return True
        if isinstance(node, cst.Call):
            name, _, _ = _call_parts(context, node)
            if name in _NON_DIFFERENTIABLE:
                return True
    return False


def _assigned_to_gradient_free_uses(
    context: "FileContext", path: Sequence[cst.CSTNode], site: Site, followed: FrozenSet[str] = frozenset()
) -> bool:
    """``w_norm = w.pow(2).sum(0).sqrt()`` whose every read in the function leaves autograd
    (``assert torch.all((w_norm - 1).abs() < tol)``), itself or through names assigned from it that do
    (``top = energy.max()``, then only ``energy - top > t``): nothing differentiates it.  Reads anywhere
    in the function count, before the assignment too (a loop may carry the value round)."""
    function = site.function
    assign = next((node for node in reversed(path) if isinstance(node, (cst.Assign, cst.BaseStatement))), None)
    if function is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name) or target.value in followed or len(followed) > 3:
        return False
    reads = _reads_of(context, function).get(target.value, ())
    followed = followed | {target.value}
    # A value never read is left to be reported: that is how snippets and unfinished code look.
    return bool(reads) and all(
        _leaves_autograd(context, read) or _assigned_to_gradient_free_uses(context, read, site, followed)
        for read in reads
    )


def _reads_of(context: "FileContext", function: cst.FunctionDef):
    """Every read of each local name in ``function`` (nested functions and lambdas included), as the
    path from the function's body down to the ``Name``; stores (assignment targets) are not reads."""

    def compute(node: cst.FunctionDef):
        reads = {}
        stack: list = []
        stores: Set[int] = set()

        class _Reads(cst.CSTVisitor):
            def on_visit(self, visited: cst.CSTNode) -> bool:
                if isinstance(visited, cst.AssignTarget) and isinstance(visited.target, cst.Name):
                    stores.add(id(visited.target))
                if isinstance(visited, cst.Name) and id(visited) not in stores:
                    reads.setdefault(visited.value, []).append(tuple(stack) + (visited,))
                stack.append(visited)
                return True

            def on_leave(self, original_node: cst.CSTNode) -> None:
                stack.pop()

        visit(node.body, _Reads())
        return reads

    return context.memoized("guards.reads", function, compute)


def backward_never_reaches(context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Where no NaN gradient of ``op`` can happen, for the rules whose hazard is only a gradient (TL106's
    unselected ``where`` branch, TL107's filtered result): :func:`gradient_cannot_flow`, code where no
    backward pass is expected (:func:`torchlint.analysis.grad_need.gradient_unlikely`), and ratios of
    counts of comparisons."""
    if gradient_unlikely(context) or gradient_cannot_flow(context, op, ancestors):
        return True
    parts = [op.operand] + ([op.numerator] if op.numerator is not None else [])
    return all(carries_no_gradient(context, part, ancestors) for part in parts)


_INITIALISATION = re.compile(r"(^|_)(init|initialize|initialise|reset_parameters)(_|$)|^__init__$", re.IGNORECASE)


# Named for a loss, but not a test of one (``test_focal_loss``, ``TestDiceLoss``).
_DIFFERENTIATED_FUNCTION = re.compile(r"^(forward|__call__|training_step|compute_loss)$|^(?!test).*loss", re.IGNORECASE)


def in_differentiated_code(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Code whose result autograd differentiates: a ``forward``/``__call__``/``training_step``,
    a function or class named for a loss, or a file under a ``loss``/``losses`` module.

    Helpers, metrics, statistics and solvers outside these are not assumed to be
    differentiated: gradient-only hazards (a root of 0) are not reported there.
    """
    if any(isinstance(node, cst.FunctionDef) and _INITIALISATION.search(node.name.value) for node in ancestors):
        return False  # __init__ of a loss: buffers and constants, never differentiated
    if _in_preprocessing(context, ancestors):
        return False  # feature extractors prepare inputs, schedulers step noise levels: nothing there has a gradient
    if in_no_grad_code(context, ancestors):
        return False  # a pipeline's @torch.no_grad() __call__
    for node in ancestors:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)) and _DIFFERENTIATED_FUNCTION.search(node.name.value):
            return True
    return _differentiated_path(context.path)


def differentiated_regions(scan, regions: FrozenSet[int]) -> FrozenSet[int]:
    """The ``ast`` pre-pass's counterpart of :func:`in_differentiated_code`: of ``regions`` (of a
    torchlint.prepass.Scan), those that may hold differentiated code (a necessary condition): not a
    function that initialises or runs under ``@torch.no_grad()``, not a preprocessing file."""
    if _GRADIENT_FREE_FILE.search(scan.path.replace("\\", "/")):
        return frozenset()
    regions = frozenset(i for i in regions if not _never_differentiated(scan, scan.regions[i].node))
    return scan.differentiated(regions, _DIFFERENTIATED_FUNCTION, _differentiated_path(scan.path))


def _never_differentiated(scan, node: ast.stmt) -> bool:
    """A function named for initialisation, or decorated with a no-grad context whatever import its name comes from."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if _INITIALISATION.search(node.name):
        return True
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call):
            if _all_in(scan.qualified(decorator.func), {"torch.set_grad_enabled"}):
                first = decorator.args[0] if decorator.args else None
                if isinstance(first, ast.Constant) and first.value is False:
                    return True
                continue
            decorator = decorator.func
        if _all_in(scan.qualified(decorator), NO_GRAD_CONTEXTS):
            return True
    return False


def _all_in(candidates, names) -> bool:
    return bool(candidates) and all(candidate in names for candidate in candidates)


def _differentiated_path(path: str) -> bool:
    path = path.replace("\\", "/").lower()
    return "loss" in path.rsplit("/", 2)[-1] or "/loss" in path


_AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# Input preparation, run before the model (transformers-style feature extractors and processors).
_PREPROCESSING_BASE = re.compile(
    r"(FeatureExtractor|SequenceFeatureExtractor|ImageProcessor|VideoProcessor|ProcessorMixin|Tokenizer)(Mixin|Base|Fast)?$"
)
# A class of no base named for a data transform (``class AmplitudeRescaleTransform:``); modules such as
# kornia's differentiable augmentations derive from ``nn.Module`` and are not matched.
_DATA_TRANSFORM_CLASS = re.compile(r"Transform$")
_PREPROCESSING_FILE = re.compile(r"(^|/)(feature_extraction|image_processing|video_processing|processing|tokenization)_[^/]*\.py$")
# Code no backward pass runs through, by where it lives: input preparation (above), noise and learning-rate
# schedules, visualisation.  Directory names a project's own root could carry (``data/``, ``pipelines/``)
# are left out: a user's whole tree would go silent.
_GRADIENT_FREE_FILE = re.compile(
    _PREPROCESSING_FILE.pattern + r"|(^|/)scheduling_[^/]*\.py$|(^|/)(schedulers|visuali[sz]e|visuali[sz]ation)/[^/]*\.py$"
)


def _in_custom_autograd_function(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside the ``forward`` of a ``torch.autograd.Function`` subclass (a hand-written backward)."""
    for position, node in enumerate(ancestors):
        if isinstance(node, cst.ClassDef) and any(
            context.qualified_name(base.value) in _AUTOGRAD_FUNCTION_BASES for base in node.bases
        ):
            inner = ancestors[position + 1 :]
            return any(isinstance(n, cst.FunctionDef) and n.name.value == "forward" for n in inner)
    return False


def _in_preprocessing(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Input preparation, schedules and visualisation: code no backward pass runs through."""
    if _GRADIENT_FREE_FILE.search(context.path.replace("\\", "/")):
        return True
    for node in ancestors:
        if isinstance(node, cst.ClassDef):
            if not node.bases and _DATA_TRANSFORM_CLASS.search(node.name.value):
                return True  # a plain class named as a data transform: it runs in data loading
            for base in node.bases:
                name = dotted_name(base.value) or ""
                if _PREPROCESSING_BASE.search(name.rsplit(".", 1)[-1]):
                    return True
    return False


def in_no_grad_code(context: "FileContext", ancestors: Sequence[cst.CSTNode], _callers: bool = True) -> bool:
    """``no_grad``/``inference_mode``, optimizer files, and initialisation code (``__init__``,
    ``reset_parameters``, ``*_init``): what they compute becomes a leaf, never differentiated through.
    So is a function every same-file call of which stands in such code (one level of callers)."""
    for node in ancestors:
        if isinstance(node, cst.FunctionDef) and any(_is_no_grad(context, d.decorator) for d in node.decorators):
            return True
        if isinstance(node, cst.FunctionDef) and _INITIALISATION.search(node.name.value):
            return True
        if isinstance(node, cst.With) and any(_is_no_grad(context, item.item) for item in node.items):
            return True
    # A file that defines an optimizer: its update maths, not the loss functions it may define too
    # (accelerate's megatron_lm.py wraps an optimizer and computes masked losses).
    if defines_optimizer(context) and not any(
        isinstance(node, (cst.FunctionDef, cst.ClassDef)) and _DIFFERENTIATED_FUNCTION.search(node.name.value)
        for node in ancestors
    ):
        return True
    # A helper the file only calls with gradients off (``with torch.no_grad(): self._project(w)``).
    return _only_called_from(context, ancestors, lambda site: in_no_grad_code(context, site.ancestors, _callers=False), _callers)


def _only_called_from(context: "FileContext", ancestors: Sequence[cst.CSTNode], accepts, enabled: bool = True) -> bool:
    """Whether the function around ``ancestors`` has same-file calls and ``accepts`` every one of them
    (:func:`torchlint.analysis.callers.call_sites`)."""
    if not enabled:
        return False
    function = enclosing_function(ancestors)
    sites = call_sites(context, function) if function is not None else None
    return bool(sites) and all(accepts(site) for site in sites)


def _every_caller_passes(context: "FileContext", name: str, site: Optional[Site], accepts) -> bool:
    """Whether ``name`` is a parameter of the function holding the op being judged and every same-file
    call of it passes a value ``accepts(value, site)`` (``reduce_loss(loss, mask)`` called with length
    masks only)."""

    def passes(function: cst.FunctionDef, call_site) -> bool:
        value = argument_for(function, name, call_site)
        return value is not None and accepts(value, site_of(list(call_site.ancestors) + [call_site.call]))

    return _judged_at_every_call(context, site, passes)


def _judged_at_every_call(context: "FileContext", site: Optional[Site], judge) -> bool:
    """Whether the function holding the op being judged has same-file calls and ``judge(function, call_site)``
    holds at each, judged where the call stands (``self.eps`` there is the calling class's: the engine's
    ancestors are swapped for the call's).  One level: the callers' own callers are not read."""
    if context.reading_callers or site is None or site.function is None:
        return False
    function = site.function
    if function is not enclosing_function(context.ancestors):
        return False
    sites = call_sites(context, function)
    if not sites:
        return False
    visiting = context.ancestors
    context.reading_callers = True
    try:
        for call_site in sites:
            context.ancestors = list(call_site.ancestors)
            if not judge(function, call_site):
                return False
        return True
    finally:
        context.ancestors = visiting
        context.reading_callers = False


def _is_no_grad(context: "FileContext", node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call):
        qualified = context.qualified_name(node.func)
        if qualified == "torch.set_grad_enabled" and node.args:
            value = node.args[0].value
            return isinstance(value, cst.Name) and value.value == "False"
        node = node.func
    return context.qualified_name(node) in NO_GRAD_CONTEXTS


def defines_optimizer(context: "FileContext") -> bool:
    """A file that defines an optimizer: its update maths is never differentiated."""
    cached = getattr(context, "_tl1_defines_optimizer", None)
    if cached is None:
        cached = False
        for statement in context.module.body:
            if isinstance(statement, cst.ClassDef):
                for base in statement.bases:
                    qualified = context.qualified_name(base.value) or dotted_name(base.value) or ""
                    if qualified.rsplit(".", 1)[-1].endswith("Optimizer"):
                        cached = True
        context._tl1_defines_optimizer = cached
    return cached


def _may_be_negative(operand: cst.BaseExpression) -> bool:
    """``E[x^2] - E[x]^2`` style operands: rounding can make them negative, NaN in the forward pass."""
    return (isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, cst.Subtract)) or (
        isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Minus)
    )


def _without_gradient(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int) -> bool:
    """Built only from literals, Python numbers, constants and random draws (no parameter or input)."""
    if depth > 3 * _MAX_DEPTH:
        return False
    if constant_value(node) is not None or value_kind(context, node, site) == "number":
        return True
    if carries_no_gradient(context, node):
        return True  # comparisons, bool/integer casts and counts of them
    if isinstance(node, cst.Name):
        if _GROUND_TRUTH_NAME.search(node.value):
            return True  # ``bbox_reg_targets``, ``gt_boxes``: ground truth is never differentiated
        if site is None:
            return False
        reaching = bindings(site, node.value)
        if len(reaching) == 1 and reaching[0].kind == "param":
            # ``hz_to_mel(torch.tensor([f_min, f_max]))``: every caller hands in a constant
            return _every_caller_passes(
                context, node.value, site, lambda value, at: _without_gradient(context, value, at, depth + 1)
            )
        # ``mask = zeros_like(x, dtype=bool); mask[idx] = True``: masked writes of constants add no gradient.
        return bool(reaching) and all(
            b.kind in ("assign", "update", "module", "unpack", "masked", "each") and b.value is not None
            and _without_gradient(context, b.value, b.site, depth + 1)
            for b in reaching
        )
    if isinstance(node, cst.BinaryOperation):
        return _without_gradient(context, node.left, site, depth + 1) and _without_gradient(context, node.right, site, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return _without_gradient(context, node.expression, site, depth + 1)
    if isinstance(node, cst.Call):
        name, source, is_method = _call_parts(context, node)
        if name in _NO_GRADIENT_SOURCES and not is_method:
            return True
        if name in ("detach",):
            return True
        if name is None or has_star_args(node):
            return False
        # A torch function or tensor method of gradient-free values is gradient-free.
        inputs = ([source] if is_method and source is not None else []) + [arg.value for arg in node.args]
        return bool(inputs) and all(_without_gradient(context, value, site, depth + 1) for value in inputs)
    if isinstance(node, cst.Subscript):
        return _without_gradient(context, node.value, site, depth + 1)
    return False


# -- what a value is --------------------------------------------------------------


_NUMBER_BUILTINS = frozenset({"len", "int", "float", "round", "range", "pow"})
_NUMBER_METHODS = frozenset({"size", "numel", "nelement", "dim", "ndimension", "item", "tolist", "element_size", "get_device", "count", "index"})
_NUMBER_ATTRIBUTES = frozenset({"ndim", "shape", "itemsize", "real_size"})
_FINFO_ATTRIBUTES = frozenset({"eps", "tiny", "max", "min", "smallest_normal", "resolution"})
_NOT_TENSOR_TORCH = frozenset({
    "torch.numel", "torch.is_tensor", "torch.finfo", "torch.iinfo", "torch.Size", "torch.get_default_dtype",
    "torch.device", "torch.is_floating_point", "torch.is_grad_enabled",
})
_TENSOR_METHODS = frozenset({
    "sum", "mean", "norm", "std", "var", "pow", "sqrt", "rsqrt", "exp", "log", "abs", "clamp", "clamp_min", "clip",
    "float", "double", "half", "bfloat16", "to", "type_as", "detach", "view", "reshape", "unsqueeze", "squeeze",
    "expand", "expand_as", "permute", "transpose", "matmul", "softmax", "sigmoid", "masked_fill", "cumsum",
    "amax", "amin", "square", "contiguous", "flatten", "count_nonzero", "nansum", "mul", "add", "sub", "div",
    "relu", "exp2", "logsumexp", "prod", "gather", "index_select", "new_zeros", "new_ones", "new_full",
})
_TENSOR_ANNOTATIONS = re.compile(r"\bTensor\b|\bFloatTensor\b|\bLongTensor\b|\bBoolTensor\b")
_NUMBER_ANNOTATIONS = re.compile(r"^(int|float|Optional\[(int|float)\]|Union\[int, float\])$")


def value_kind(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], _depth: int = 0) -> str:
    """"tensor", "number", "array" (NumPy) or "unknown" (see module docs)."""
    if _depth > _MAX_DEPTH:
        return "unknown"
    again = _depth + 1
    if constant_value(node) is not None or isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return "number"
    if isinstance(node, cst.Name):
        if node.value in ("True", "False", "None"):
            return "number"
        if site is None:
            return "unknown"
        kinds = set()
        for binding in bindings(site, node.value):
            if binding.kind == "param":
                kinds.add(_parameter_kind(binding.node, site))
            elif binding.value is not None and binding.kind in ("assign", "update", "inplace", "module", "conditional", "each"):
                kinds.add(value_kind(context, binding.value, binding.site, again))
            elif binding.kind == "unpack" and binding.value is not None:
                # B, N, C = x.shape: numbers; q, k = x.chunk(2): tensors.
                whole = value_kind(context, binding.value, binding.site, again)
                shape = isinstance(binding.value, cst.Attribute) and binding.value.attr.value == "shape"
                kinds.add("number" if shape or whole == "number" else "tensor" if whole == "tensor" else "unknown")
            elif binding.kind == "opaque":
                kinds.add("unknown")
        if len(kinds) == 1:
            return kinds.pop()
        return "tensor" if "tensor" in kinds else "unknown"
    if isinstance(node, cst.Attribute):
        if node.attr.value in _NUMBER_ATTRIBUTES:
            return "number"
        if node.attr.value in _FINFO_ATTRIBUTES and isinstance(node.value, cst.Call):
            if context.qualified_name(node.value.func) in ("torch.finfo", "torch.iinfo", "numpy.finfo", "numpy.iinfo"):
                return "number"
        qualified = context.qualified_name(node)
        if qualified is not None:
            if qualified.startswith(("math.", "numpy.")):
                return "number"
            return "unknown"
        if node.attr.value in ("data", "grad", "weight", "bias", "T", "mT", "values"):
            inner = value_kind(context, node.value, site, again)
            return "tensor" if inner == "tensor" or node.attr.value in ("grad",) else "unknown"
        if _is_config(node.value):
            return "number"  # config.sigma_data: a hyperparameter
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            value = context.self_attribute_value(node.attr.value)
            if isinstance(value, cst.Attribute) and _is_config(value.value):
                return "number"  # self.sigma_data = config.sigma_data
        return "unknown"
    if isinstance(node, cst.Subscript):
        inner = node.value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "shape":
            return "number"
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "size":
            return "number"
        kind = value_kind(context, inner, site, again)
        return kind if kind in ("tensor", "array") else "unknown"
    if isinstance(node, cst.Call):
        func = node.func
        qualified = context.qualified_name(func)
        if qualified is not None:
            if qualified in _NOT_TENSOR_TORCH:
                return "number"
            if qualified.startswith("torch."):
                return "tensor"
            if qualified.startswith("math."):
                return "number"
            if qualified.startswith("numpy."):
                return "array"
            return "unknown"
        if isinstance(func, cst.Name):
            if func.value in _NUMBER_BUILTINS:
                return "number"
            if func.value in ("abs", "max", "min", "sum") and node.args:
                kinds = {value_kind(context, arg.value, site, again) for arg in node.args if arg.keyword is None}
                return kinds.pop() if len(kinds) == 1 else "unknown"
            return "unknown"
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _NUMBER_METHODS:
                return "number"
            receiver = value_kind(context, func.value, site, again)
            if receiver in ("number", "array"):
                return receiver
            if receiver == "tensor" or method in _TENSOR_METHODS:
                return "tensor"
        return "unknown"
    if isinstance(node, cst.BinaryOperation):
        left = value_kind(context, node.left, site, again)
        right = value_kind(context, node.right, site, again)
        if "tensor" in (left, right):
            return "tensor"
        if "array" in (left, right):
            return "array"
        if left == right == "number":
            return "number"
        return "unknown"
    if isinstance(node, cst.UnaryOperation):
        return value_kind(context, node.expression, site, again)
    if isinstance(node, cst.IfExp):
        body = value_kind(context, node.body, site, again)
        return body if body == value_kind(context, node.orelse, site, again) else "unknown"
    return "unknown"


def _parameter_kind(param: cst.Param, site: Site) -> str:
    if param.annotation is not None:
        text = cst.Module(body=[]).code_for_node(param.annotation.annotation)
        if _TENSOR_ANNOTATIONS.search(text):
            return "tensor"
        if _NUMBER_ANNOTATIONS.match(text.replace(" ", "").replace(",", ", ")):
            return "number"
    if param.default is not None and constant_value(param.default) is not None:
        return "number"
    function = site.function
    if function is not None and function.name.value == "forward" and param.name.value not in ("self", "cls"):
        return "tensor"
    return "unknown"


_CONFIG_WORD = re.compile(r"(^|_)(config|cfg)$", re.IGNORECASE)


def _is_config(node: cst.BaseExpression) -> bool:
    """``config``, ``self.config``, ``diffusion_config``: a model's configuration object."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return bool(_CONFIG_WORD.search(word))


def is_not_tensor(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None) -> bool:
    """Python numbers and NumPy values: never flagged."""
    return value_kind(context, node, site) in ("number", "array")


_CONSTANT_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor", "torch.Tensor", "torch.FloatTensor"})


def is_constant_tensor(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None, depth: int = 0) -> bool:
    """``torch.tensor(d)`` built from a Python value: a constant with no gradient, sized by the author; also
    arithmetic of such tensors and Python numbers, and names bound once to either (``alpha_t =
    torch.tensor(alpha)``, then ``log(1 - alpha_t)``): a configuration value, judged as the number it holds."""
    if depth > _MAX_DEPTH:
        return False
    node = _without_sign_preserving_calls(context, node)  # torch.FloatTensor([0.5]).to(x.device)
    if isinstance(node, cst.Name):
        assignment = sole_assignment(site, node.value)
        return assignment is not None and is_constant_tensor(context, assignment.value, assignment.site, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)):
        sides = (node.left, node.right)
        tensors = [is_constant_tensor(context, side, site, depth + 1) for side in sides]  # each side judged once
        return any(tensors) and all(
            tensor or value_kind(context, side, site) == "number" for tensor, side in zip(tensors, sides)
        )
    if not isinstance(node, cst.Call):
        return False
    if context.qualified_name(node.func) not in _CONSTANT_CONSTRUCTORS:
        return False
    data = argument(node, 0, "data")
    return data is not None and value_kind(context, data.value, site) != "tensor"


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
# Casts and reshapes: every element keeps its value's sign (sign_of looks through them at no depth).
_SHAPE_AND_CAST_CALLS = frozenset({
    "float", "double", "half", "bfloat16", "to", "type", "type_as", "detach", "clone", "contiguous", "view",
    "view_as", "reshape", "reshape_as", "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten",
    "permute", "transpose", "t", "movedim", "swapaxes", "broadcast_to",
})
# Calls whose result is as signed as their input: the casts and reshapes, selections, sums, means, pools.
_PRESERVING_CALLS = _SHAPE_AND_CAST_CALLS | frozenset({
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
    if _depth > _MAX_DEPTH:
        return Sign.UNKNOWN
    node = _without_sign_preserving_calls(context, node)

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
            if condition_implies_positive(context, index, node.value, division, site):
                return Sign.POSITIVE  # depth[depth > 0], target[valid] with valid = target > eps
        return again(node.value)
    if isinstance(node, cst.BinaryOperation):
        return _binary_sign(context, node, again, site)
    if isinstance(node, cst.IfExp):
        body = Sign.POSITIVE if condition_implies_positive(context, node.test, node.body, division, site) else again(node.body)
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
    node = _without_sign_preserving_calls(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, is_method = _call_parts(context, node)
    if name != "expm1" or source is None:
        return False
    bound = upper_bound(context, source, site)
    return bound is not None and (bound[0] < 0 or (bound[0] == 0 and bound[1]))


def _without_sign_preserving_calls(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """``x.view(b, n, 1).to(dtype).transpose(1, 2)`` -> ``x``: casts and reshapes keep every element's
    sign and cost no depth (a mask reshaped and cast on its way to a matmul)."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not has_star_args(node):
        name, source, is_method = _call_parts(context, node)
        if not is_method or source is None or name not in _SHAPE_AND_CAST_CALLS:
            break
        node = source
    return node


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
            if _every_caller_passes(
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
    if node.attr.value in _FINFO_ATTRIBUTES and isinstance(node.value, cst.Call):
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
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, cst.Name) and site is not None:
        reaching = bindings(site, node.value)
        if len(reaching) == 1 and reaching[0].kind in ("assign", "inplace") and reaching[0].value is not None:
            return _literal_bound(context, reaching[0].value, reaching[0].site, depth + 1, upper)
        return None
    squared = None
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, source, is_method = _call_parts(context, node)
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


def _call_parts(context: "FileContext", call: cst.Call):
    """(short name, source tensor or None, is_method) for a torch function or a tensor method."""
    func = call.func
    qualified = context.qualified_name(func)
    if qualified is not None:
        if not qualified.startswith("torch."):
            return None, None, False
        first = positional_args(call)
        return qualified.rsplit(".", 1)[-1], (first[0].value if first else None), False
    if isinstance(func, cst.Attribute) and is_value_receiver(context, func.value):
        return func.attr.value, func.value, True
    if isinstance(func, cst.Call):  # nn.Sigmoid()(x), nn.Softmax(1)(x)
        name = context.qualified_name(func.func)
        if name is not None and name.startswith("torch.nn."):
            return name.rsplit(".", 1)[-1], (call.args[0].value if call.args else None), False
    return None, None, False


def _is_softmax_weights(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``scores.softmax(-1)`` / ``F.softmax(scores, dim=-1)``, through casts and a local name bound once:
    rows of non-negative weights that sum to 1 (the largest at least 1/n, whatever underflows)."""
    node = _without_sign_preserving_calls(context, node)
    if isinstance(node, cst.Name) and depth < _MAX_DEPTH:
        bound = sole_assignment(site, node.value)
        return bound is not None and _is_softmax_weights(context, bound.value, bound.site, depth + 1)
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, _, _ = _call_parts(context, node)
        return name in ("softmax", "Softmax")
    return False


def _call_sign(context, call: cst.Call, site, division, again) -> Sign:
    if has_star_args(call):
        return Sign.UNKNOWN
    if isinstance(call.func, cst.Name) and call.func.value in ("max",) and len(call.args) >= 2:
        return max(again(arg.value) for arg in call.args)
    if isinstance(call.func, cst.Name) and call.func.value in _NUMBER_BUILTINS | {"abs"}:
        return Sign.POSITIVE if value_kind(context, call, site) == "number" and call.func.value == "len" else Sign.UNKNOWN
    helper = called_function(context, call, site)
    if helper is not None:
        return _return_sign(context, helper, division)
    name, source, is_method = _call_parts(context, call)
    if name is None:
        return Sign.UNKNOWN
    if value_kind(context, call, site) == "number" and name in _NUMBER_METHODS:
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
            if condition_implies_positive(context, cond, first, division, site):
                first_sign = Sign.POSITIVE
            if condition_implies_zero(context, cond, second, site):
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
            if source_sign is not Sign.UNKNOWN or (mask is not None and condition_implies_zero(context, mask.value, source)):
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
        if name == "abs" and source is not None and _selected_off_zero(context, source, site):
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
    if depth > _MAX_DEPTH:
        return False
    again = depth + 1
    if isinstance(node, (cst.Name, cst.Attribute)):
        word = node.value if isinstance(node, cst.Name) else node.attr.value
        if _PADDING_MASK_NAME.search(word):
            return True
        if isinstance(node, cst.Name) and site is not None:
            reaching = bindings(site, node.value)
            if len(reaching) == 1 and reaching[0].kind == "param":
                return _every_caller_passes(
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
        name, source, is_method = _call_parts(context, node)
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
    node = _without_sign_preserving_calls(context, node)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    name, source, _ = _call_parts(context, node)
    return name in _COUNTS and source is not None and _is_pad_mask(_without_sign_preserving_calls(context, source))


def _inverted_mask(node: cst.BaseExpression, site: Optional[Site]):
    """``(m, site)`` when ``node`` is ``~m`` / ``not m``, or a name bound only to one, else None."""
    named = _named_test(node, site)
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
    for _ in range(_MAX_DEPTH):
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
        name, source, is_method = _call_parts(context, node)
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


# -- conditions ---------------------------------------------------------------------


def _matches(context, expression: cst.BaseExpression, operand: cst.BaseExpression) -> bool:
    """``expression`` stands for ``operand`` or its minimum (``d``, ``d.min()``, ``torch.min(d)``, ``d.abs()``)."""
    if structurally_equal(expression, operand):
        return True
    if isinstance(expression, cst.Call) and not has_star_args(expression):
        name, source, is_method = _call_parts(context, expression)
        if name in ("min", "amin", "abs", "float", "double", "detach", "item", "all", "squeeze") and source is not None:
            if name in ("min", "amin") and len(positional_args(expression)) > (0 if is_method else 1):
                return False
            return _matches(context, source, operand)
    return False


def _count_source(context, operand: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``m`` for a count of ``m``: ``m.sum()``, ``m.float().sum()``, ``torch.count_nonzero(m)``."""
    if not isinstance(operand, cst.Call):
        return None
    name, source, _ = _call_parts(context, operand)
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
    named = _named_test(test, site)
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
        name, source, is_method = _call_parts(context, test)
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
    named = _named_test(test, site)
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
        return False
    if isinstance(test, cst.Call) and not has_star_args(test):
        name, source, is_method = _call_parts(context, test)
        if name in ("any", "item", "bool") and source is not None:
            return condition_implies_zero(context, source, operand, site)
        if isinstance(test.func, cst.Name) and test.func.value in ("any", "bool") and test.args:
            return condition_implies_zero(context, test.args[0].value, operand, site)
        if name in ("eq", "le", "lt", "isclose") and source is not None and _matches(context, source, operand):
            return True
    return False


def _implies_nonzero(
    context: "FileContext", test: cst.BaseExpression, operand: cst.BaseExpression, site: Optional[Site] = None
) -> bool:
    """Whether ``test`` being true means ``operand`` != 0, on either side of it: ``w != 0``, ``w > 0``,
    ``w < 0``, ``~(w >= 0)``, ``~(w == 0)``.  Off zero is all a division needs; for roots and logs a
    negative value is no better, so they ask :func:`condition_implies_positive` instead."""
    named = _named_test(test, site)
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
    named = _named_test(test, site)
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


def _selected_off_zero(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int = 0) -> bool:
    """``w[w < 0]``, or a name every binding of which is one (a ``None`` placeholder aside: the op cannot
    run on it): the entries the author selected are off zero."""
    if depth > _MAX_DEPTH:
        return False
    node = _without_sign_preserving_calls(context, node)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return _implies_nonzero(context, node.slice[0].slice.value, node.value, site)
    if isinstance(node, cst.Name) and site is not None:
        reaching = [
            b for b in bindings(site, node.value)
            if not (b.kind == "assign" and isinstance(b.value, cst.Name) and b.value.value == "None")
        ]
        return bool(reaching) and all(
            b.kind in ("assign", "conditional") and b.value is not None
            and _selected_off_zero(context, b.value, b.site, depth + 1)
            for b in reaching
        )
    return False


def _named_test(test: cst.BaseExpression, site: Optional[Site]):
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


def _factors_guarded(context, operand, ancestors, site, division, node) -> bool:
    """``preds / targets`` after ``if (preds <= 0).any() or (targets <= 0).any(): raise``: each factor is guarded."""
    if not (isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, (cst.Multiply, cst.Divide))):
        return False
    return all(
        sign_of(context, factor, site, division=division) is Sign.POSITIVE
        or guarded_by_condition(context, factor, ancestors, division=division, node=node)
        for factor in (operand.left, operand.right)
    )


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
    uncast = _without_sign_preserving_calls(context, operand)  # log(n.float()) under a test of n
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
    for name in sorted(_names(test)):
        if "." in name:
            continue
        assignment = sole_assignment(site, name)
        if assignment is None or not any(structurally_equal(assignment.value, each) for each in operands):
            continue
        if not _same_bindings(bindings(test_site, name), [assignment]):
            continue  # the name was bound again between the test and the op
        inputs = {dotted.split(".", 1)[0] for dotted in _names(assignment.value)}
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


# -- ownership ----------------------------------------------------------------------


WHERE_FUNCTIONS: FrozenSet[str] = frozenset({"torch.where"})
NAN_FILTER_FUNCTIONS: FrozenSet[str] = frozenset({"torch.nan_to_num", "torch.nan_to_num_"})
NAN_TESTS: FrozenSet[str] = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})
# Reductions that drop NaN terms: ``torch.nansum(p * torch.log(p / q))`` filters after the fact too.
NAN_SKIPPING_REDUCTIONS: FrozenSet[str] = frozenset({"torch.nansum", "torch.nanmean"})


def _names(node: cst.CSTNode) -> Set[str]:
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


def _operand_names(context: "FileContext", operand: cst.BaseExpression) -> Set[str]:
    return {name for name in _names(operand) if context.qualified_name(cst.parse_expression(name)) is None and name != "self"}


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
        tested = _names(condition)
        named = _named_test(condition, site_of(path[: position + 1]))
        if named is not None:  # ok = d > eps; torch.where(ok, x / d, 0)
            tested |= _names(named[0])
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
    """Whether ``node`` contains isnan/isinf/isfinite or a comparison with inf."""
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
    found = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            cleaned = is_nan_filter(context, call)
            if cleaned is not None and name in _names(cleaned):
                found.append(call)

        def visit_Assign(self, assign: cst.Assign) -> None:
            for target in assign.targets:
                subscript = target.target
                if (
                    isinstance(subscript, cst.Subscript)
                    and isinstance(subscript.value, cst.Name)
                    and subscript.value.value == name
                    and _is_nan_test(context, subscript)
                ):
                    found.append(assign)

    visit(statement, _Find())
    return bool(found)


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
    inner = strip_clamp_min(context, strip_eps(op.operand))
    activation = fused.activation_of(context, inner)
    if activation is not None:
        return "TL201" if activation.kind == "softmax" else "TL202"
    complement = fused.one_minus(inner)
    if complement is not None and fused.activation_of(context, complement, kinds=("sigmoid",)) is not None:
        return "TL202"
    if fused.match_sum_of_exp(context, inner) is not None or _sum_of_exp_family(context, inner, site):
        return "TL203"
    if fused.one_plus(inner) is not None:
        return "TL205"
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
