"""What happens to the parameters' ``.grad`` in one function, and in what order.

Four kinds of calls act on gradients, and their order decides what an
optimizer step uses:

- a backward call adds to ``.grad`` (:class:`~torchlint.analysis.flow.flow_events.BackwardCall`
  of kind "backward"; ``torch.autograd.grad`` returns its gradients and adds
  nothing, so it is no event here);
- ``zero_grad()`` (an optimizer's or a module's, ``set_to_none`` or not)
  clears it;
- an optimizer step reads it (:class:`~torchlint.analysis.flow.flow_events.StepCall`);
- clipping rescales it in place: ``torch.nn.utils.clip_grad_norm_`` /
  ``clip_grad_value_`` / ``clip_grads_with_norm_`` and the deprecated
  ``clip_grad_norm`` (through the file's imports), the same methods of an
  object (Accelerate's ``accelerator.clip_grad_norm_(params, max_norm)``, FSDP's
  ``model.clip_grad_norm_(max_norm)``, fairseq's ``optimizer.clip_grad_norm``),
  ``self.clip_gradients(optimizer, ...)`` in a LightningModule and
  ``fabric.clip_gradients(module, optimizer, ...)`` on a Fabric the code builds.

A GradScaler's ``scaler.unscale_(optimizer)`` divides the gradients in place
too; it is kept apart (:func:`unscale_calls`): it is no event of the order
below, but a fix that moves a clip must move it along.

:func:`gradient_events` lists the events of a ``FunctionFlow`` in order;
:func:`last_before` and :func:`first_after` answer which events may come last
before, or first after, a statement in one pass: within the iteration of the
innermost loop around it, then round the loop's back edge (the previous
iteration's last events, the next iteration's first), or round the function
itself (its previous or next call), since a training-step function runs once
per step.  Top-level script code without a loop does not wrap.  A ``None``
among the answers stands for "nothing the function shows": the walk reached
the entry (or the exit) of the scope without meeting an event that always
runs.  Events in branches are possible, not certain: the walk goes on past
them and stops at the first event that runs on every path (the same or an
enclosing branch, the same loop level, no jump in between).

The clipped parameters' owners (``{"model"}`` for
``clip_grad_norm_(model.parameters(), 1.0)``, names bound to such followed)
decide which zero_grad and step calls act on them (:func:`acts_on_clipped`):
a step of an optimizer built over other modules, ``netD.zero_grad()`` for
``netG``'s parameters, are not events for that clip.  Unknown owners relate
to everything.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, FrozenSet, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.flow.gradflow import FunctionFlow
from torchlint.analysis.flow.flow_events import Place, StepCall
from torchlint.analysis.model.calls import argument, positional_args

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# -- vocabulary ----------------------------------------------------------------------

# Functions that rescale ``.grad`` in place, as the file's imports resolve them.
CLIP_FUNCTIONS = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm",
        "torch.nn.utils.clip_grads_with_norm_", "torch.nn.utils.clip_grad.clip_grad_norm_",
        "torch.nn.utils.clip_grad.clip_grad_value_", "torch.nn.utils.clip_grad.clip_grad_norm",
        "torch.nn.utils.clip_grad.clip_grads_with_norm_",
    }
)
# Methods of that name clip the gradients of what their object holds (Accelerate, FSDP, fairseq's optimizers).
CLIP_METHODS = frozenset({"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"})
# ``clip_gradients`` clips only on these objects: a LightningModule's ``self``, a Fabric the code builds.
LIGHTNING_MODULES = frozenset(
    {
        "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule", "lightning.LightningModule",
        "lightning.pytorch.LightningModule", "lightning.pytorch.core.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)
FABRIC_CLASSES = frozenset({"lightning.Fabric", "lightning.fabric.Fabric", "lightning.fabric.fabric.Fabric", "lightning_fabric.Fabric"})
ACCELERATOR_CLASSES = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})
FSDP_CLASSES = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
# Last names of every clipping callee above, for text pre-filters (an import alias resolves to one of them).
CLIP_CALL_NAMES = frozenset({name.rsplit(".", 1)[-1] for name in CLIP_FUNCTIONS} | CLIP_METHODS | {"clip_gradients"})

BACKWARD, ZERO, STEP, CLIP = "backward", "zero", "step", "clip"


@dataclass(frozen=True)
class Clip:
    """A call that clips gradients in place."""

    call: cst.Call
    site: Place
    # What holds the clipped parameters: the ``parameters`` argument, the FSDP module, the optimizer of
    # ``self.clip_gradients(optimizer, ...)``; None when the call does not say.
    parameters: Optional[cst.BaseExpression]
    # Whether the callee is known from the code (an import, a construction in the file, the class's
    # base), not only from its method name on an object the analysis cannot see.
    resolved: bool
    via_optimizer: bool = False  # ``parameters`` is an optimizer (Lightning's and Fabric's forms)


@dataclass(frozen=True)
class GradEvent:
    kind: str  # BACKWARD, ZERO, STEP or CLIP
    call: cst.Call
    site: Place
    # The optimizer of a step, the receiver of ``zero_grad()``; None for backward calls and clips.
    holder: Optional[cst.BaseExpression] = None


# -- recognising the calls --------------------------------------------------------------------


def may_clip(context: "FileContext", call: cst.Call) -> bool:
    """Whether ``call`` has the callee of a clip (what :func:`clip_of` then confirms), from the imports alone."""
    qualified = context.qualified_name(call.func)
    if qualified is not None:
        return qualified in CLIP_FUNCTIONS
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in (CLIP_METHODS | {"clip_gradients"})


def clip_of(flow: FunctionFlow, call: cst.Call) -> Optional[Clip]:
    """The clip ``call`` is, or None."""
    site = flow.sites.get(id(call))
    if site is None or not may_clip(flow.context, call):
        return None
    context = flow.context
    func = call.func
    qualified = context.qualified_name(func)
    if qualified in CLIP_FUNCTIONS:
        arg = argument(call, 0, "parameters")
        return Clip(call, site, arg.value if arg is not None else None, True)
    if qualified is not None or not isinstance(func, cst.Attribute):
        return None
    method, receiver = func.attr.value, func.value
    if method in CLIP_METHODS:
        made = _constructed(flow, receiver, site)
        if made in FSDP_CLASSES:
            return Clip(call, site, receiver, True)  # ``model.clip_grad_norm_(max_norm)``
        first = argument(call, 0, "parameters")
        parameters = first.value if first is not None and flow.parameter_owners(first.value, site) else None
        return Clip(call, site, parameters, made in ACCELERATOR_CLASSES)
    if method == "clip_gradients":
        if isinstance(receiver, cst.Name) and receiver.value == "self" and _is_lightning_module(flow):
            arg = argument(call, 0, "optimizer")
            return Clip(call, site, arg.value if arg is not None else None, True, via_optimizer=True)
        if _constructed(flow, receiver, site) in FABRIC_CLASSES:
            arg = argument(call, 0, "module")
            return Clip(call, site, arg.value if arg is not None else None, True)
    return None


def _is_lightning_module(flow: FunctionFlow) -> bool:
    class_def = flow.class_def
    return class_def is not None and any(flow.context.qualified_name(base.value) in LIGHTNING_MODULES for base in class_def.bases)


def _constructed(flow: FunctionFlow, receiver: cst.BaseExpression, at: Place) -> Optional[str]:
    """The qualified class of the construction ``receiver`` holds (``Accelerator()`` bound to the name, at
    module level, or to ``self.x`` in the class; ``FSDP(model)``), when every binding the code shows is one."""
    values = flow.bound_values(receiver, at)
    classes = {flow.context.qualified_name(v.func) if isinstance(v, cst.Call) else None for v in values}
    return next(iter(classes)) if len(classes) == 1 else None


def _zero_grad_receiver(flow: FunctionFlow, call: cst.Call) -> Optional[cst.BaseExpression]:
    """``optimizer`` for ``optimizer.zero_grad()`` / ``model.zero_grad(set_to_none=True)``."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "zero_grad" and flow.context.qualified_name(func) is None:
        if len(positional_args(call)) <= 1:
            return func.value
    return None


def unscale_calls(flow: FunctionFlow) -> List[Tuple[cst.Call, Place]]:
    """``scaler.unscale_(optimizer)`` calls, in order."""
    found = []
    for call in flow.calls:
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "unscale_"
            and len(call.args) == 1
            and flow.context.qualified_name(func) is None
        ):
            found.append((call, flow.sites[id(call)]))
    return found


_events_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def gradient_events(flow: FunctionFlow) -> Tuple[GradEvent, ...]:
    """The backward, zero_grad, step and clip calls of ``flow``, in order."""
    known = _events_cache.get(flow)
    if known is not None:
        return known
    events: List[GradEvent] = [GradEvent(BACKWARD, b.call, b.site) for b in flow.backward_calls if b.kind == "backward"]
    events += [GradEvent(STEP, s.call, s.site, s.optimizer) for s in flow.step_calls]
    for call in flow.calls:
        receiver = _zero_grad_receiver(flow, call)
        if receiver is not None:
            events.append(GradEvent(ZERO, call, flow.sites[id(call)], receiver))
        elif clip_of(flow, call) is not None:
            events.append(GradEvent(CLIP, call, flow.sites[id(call)]))
    # one statement may hold several (``scaler.step(opt); opt.zero_grad()`` on one line): the call order
    position = {id(call): index for index, call in enumerate(flow.calls)}
    found = tuple(sorted(events, key=lambda e: (e.site.order, position.get(id(e.call), 0))))
    _events_cache[flow] = found
    return found


def clipped_owners(flow: FunctionFlow, clip: Clip) -> FrozenSet[str]:
    """The modules (as written) whose parameters ``clip`` clips; empty when the code does not say."""
    if clip.parameters is None:
        return frozenset()
    if clip.via_optimizer:
        return flow.optimizer_modules(clip.parameters, clip.site) or frozenset()
    if isinstance(clip.parameters, (cst.Name, cst.Attribute)) and flow.is_module_object(clip.parameters):
        owners = flow.parameter_owners(clip.parameters, clip.site)
        return frozenset(owners or {flow.context.code(clip.parameters).strip()})
    return frozenset(flow.parameter_owners(clip.parameters, clip.site))


def acts_on_clipped(flow: FunctionFlow, event: GradEvent, owners: FrozenSet[str]) -> bool:
    """Whether ``event`` touches the gradients of parameters ``owners`` hold (always, for a backward call,
    a clip, or unknown owners)."""
    if event.kind in (BACKWARD, CLIP) or not owners or event.holder is None:
        return True
    if event.kind == STEP:
        step = StepCall(event.call, event.holder, event.site)
        return any(flow.step_updates(step, owner) is not None for owner in owners)
    return any(flow.zeroes(event.holder, event.site, owner) is not None for owner in owners)


# -- order ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """What one pass repeats: the innermost loop around a statement, or the function's body."""

    loops: Tuple[cst.CSTNode, ...]
    branches: Tuple[Tuple[int, str], ...]  # what every statement of the body sits in
    start: int  # the order of the header (0 for a function)
    end: float  # past the last statement of the body
    wraps: bool  # a pass comes round again (a loop, a function called once per step)

    def holds(self, site: Place) -> bool:
        return site.loops[: len(self.loops)] == self.loops and self.start < site.order < self.end


def _scope(flow: FunctionFlow, site: Place) -> _Scope:
    if site.loops:
        loop = site.loops[-1]
        header = flow.loop_sites[id(loop)]
        inside = [e.site.order for e in gradient_events(flow) if loop in e.site.loops]
        inside += [s.order for _, s in flow.jumps if loop in s.loops]
        return _Scope(site.loops, header.branches, header.order, max(inside, default=site.order) + 0.5, True)
    return _Scope((), (), 0, float("inf"), isinstance(flow.function, cst.FunctionDef))


def _unconditional(here: Place, then: Place) -> bool:
    """``then`` runs whenever ``here`` does, as far as branches and loops go: at the same loop level, in
    the same or an enclosing branch."""
    return then.loops == here.loops and here.branches[: len(then.branches)] == then.branches


def _jumps_between(
    flow: FunctionFlow, first: float, then: float, loops: Tuple[cst.CSTNode, ...], restarts: Optional[_Scope] = None
) -> bool:
    """A ``break``/``continue`` of a loop in ``loops`` (or of none nested deeper), a ``return`` or a
    ``raise`` strictly between two orders: what may skip the later statement.  With ``restarts``, the
    jumps that only start that scope's pass again (a ``continue`` of its loop, a ``return`` of the
    function) do not count: the pass after them meets the same statements first."""
    for kind, site in flow.jumps:
        if not first < site.order < then:
            continue
        if restarts is not None and restarts.wraps:
            if kind == "continue" and restarts.loops and site.loops and site.loops[-1] is restarts.loops[-1]:
                continue
            if kind == "return" and not restarts.loops:
                continue
        if kind in ("return", "raise") or not site.loops or site.loops[-1] in loops:
            return True
    return False


Relevant = Callable[[GradEvent], bool]


def _walk_back(
    flow: FunctionFlow, events: Sequence[GradEvent], point: Place, scope: _Scope, relevant: Relevant
) -> Tuple[List[GradEvent], bool]:
    """The events that may come last before ``point`` in its pass, latest first, and whether one of them
    always runs before it (the walk stopped)."""
    found: List[GradEvent] = []
    for event in reversed(events):
        if event.site.order >= point.order or not scope.holds(event.site) or not relevant(event):
            continue
        if not flow.runs_after(event.site, point):
            continue
        found.append(event)
        if _unconditional(point, event.site):
            return found, True
    return found, False


def _walk_forward(
    flow: FunctionFlow,
    events: Sequence[GradEvent],
    point: Place,
    scope: _Scope,
    relevant: Relevant,
    until: float,
    from_start: bool = False,
) -> Tuple[List[GradEvent], bool]:
    """The events that may come first after ``point`` (before the order ``until``), earliest first, and
    whether one of them always runs after it.  ``from_start``: ``point`` starts a pass, and a jump that
    starts the next one is no way round an event (it meets the same ones again)."""
    found: List[GradEvent] = []
    for event in events:
        if event.site.order <= point.order or event.site.order >= until:
            continue
        if not scope.holds(event.site) or not relevant(event) or not flow.runs_after(point, event.site):
            continue
        found.append(event)
        restarts = scope if from_start else None
        if _unconditional(point, event.site) and not _jumps_between(flow, point.order, event.site.order, scope.loops, restarts):
            return found, True
    return found, False


def last_before(flow: FunctionFlow, site: Place, relevant: Relevant = lambda e: True) -> List[Optional[GradEvent]]:
    """The relevant events that may be the last to run before ``site`` in one pass, latest first: first in
    the same pass, then, when nothing before ``site`` always runs, at each end of the previous pass (the
    end of the body, a ``continue``, a ``return`` of the function); an end with no event since the start of
    its pass leaves what the pass before it left, which the other ends answer.  ``None``: no end of a pass
    follows an event that always runs (what came before the loop, or the caller, decides).  Top-level
    script code outside loops does not wrap: it starts with no gradients."""
    events = gradient_events(flow)
    scope = _scope(flow, site)
    found, stopped = _walk_back(flow, events, site, scope, relevant)
    if stopped:
        return list(found)
    answer: List[Optional[GradEvent]] = list(found)
    if not scope.wraps:
        return answer  # a script's top level starts with no gradients
    exits = [Place(scope.end, scope.loops, scope.branches, site.no_grad)]  # type: ignore[arg-type]
    for kind, jump in flow.jumps:
        if not scope.holds(jump):
            continue
        if (kind == "continue" and scope.loops and jump.loops[-1] is scope.loops[-1]) or (kind == "return" and not scope.loops):
            exits.append(jump)
    ends_known = False
    for end in exits:
        more, stopped = _walk_back(flow, events, end, scope, relevant)
        answer += [e for e in more if e not in answer]
        ends_known = ends_known or stopped
    # A pass that ends with no event since its start (``continue`` at the top) leaves what the pass before
    # it left: the other ends' answers.  Only when no end follows an event that always runs is it unknown.
    return answer if ends_known else answer + [None]


def first_after(flow: FunctionFlow, site: Place, relevant: Relevant = lambda e: True) -> List[Optional[GradEvent]]:
    """The relevant events that may be the first to run after ``site`` in one pass (``None``: the scope's
    exit, reached with nothing that always runs): later in the same pass, then, when nothing after
    ``site`` always runs, from the start of the next pass up to ``site``."""
    events = gradient_events(flow)
    scope = _scope(flow, site)
    found, stopped = _walk_forward(flow, events, site, scope, relevant, scope.end)
    if stopped:
        return list(found)
    answer: List[Optional[GradEvent]] = list(found)
    if not scope.wraps:
        return answer + [None]
    start = Place(scope.start, scope.loops, scope.branches, site.no_grad)
    more, stopped = _walk_forward(flow, events, start, scope, relevant, site.order, from_start=True)
    answer += [e for e in more if e not in answer]
    if not stopped:
        answer.append(None)
    return answer


def must_follow(flow: FunctionFlow, first: Place, then: Place) -> bool:
    """Whether ``then`` runs after ``first`` whenever ``first`` runs, in the same pass (same loop level,
    the same or an enclosing branch, no jump in between that could skip it)."""
    return (
        first.order < then.order
        and _unconditional(first, then)
        and not _jumps_between(flow, first.order, then.order, then.loops)
    )


def must_precede(first: Place, then: Place) -> bool:
    """Whether ``first`` has run, in the same pass, whenever ``then`` runs."""
    return first.order < then.order and _unconditional(then, first)
