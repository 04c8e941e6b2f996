from __future__ import annotations

import ast
from typing import Callable, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.flow.grad_order import (
    BACKWARD,
    CLIP,
    CLIP_CALL_NAMES,
    STEP,
    ZERO,
    Clip,
    GradEvent,
    acts_on_clipped,
    clip_of,
    clipped_owners,
    first_after,
    gradient_events,
    last_before,
    may_clip,
    must_follow,
    must_precede,
    unscale_calls,
)
from torchlint.analysis.flow.gradflow import FunctionFlow, contains, current_flow, read_names
from torchlint.analysis.flow.autograd_terms import BACKWARD_METHODS
from torchlint.rule import WHOLE_FILE, Applicability, Confidence, FixSpec, Replacement, Rule

_MESSAGE = (
    "gradients clipped before backward() computes them: the clip sees zeroed (or the previous step's) "
    "gradients and optimizer.step() uses the new ones unclipped"
)
_AFTER_STEP = (
    "gradients clipped after optimizer.step(): the step used unclipped gradients and no step uses the clipped ones"
)


class ClipBeforeBackward(Rule):
    """
    ## What it does
    Flags gradient clipping that runs after `zero_grad()` (or after the
    previous step) and before the `backward()` of the same step:
    `torch.nn.utils.clip_grad_norm_`, `clip_grad_value_`,
    `clip_grads_with_norm_` and the deprecated `clip_grad_norm` (through the
    file's imports), the same methods of an `accelerate.Accelerator` or an FSDP
    module the code builds, `self.clip_gradients` in a LightningModule and
    `clip_gradients` of a Lightning `Fabric` (at `medium` confidence: no
    finding of this rule has been read on users' code yet). A
    `clip_grad_norm_` / `clip_grad_value_` method of an object the code does
    not show is reported at `low` confidence.

    With a second message, it flags clipping placed after `optimizer.step()`
    when nothing uses what it clips: `zero_grad()` comes next (in the same
    pass or at the top of the next one), or it clips what `zero_grad()` has
    just cleared. The step used unclipped gradients.

    ## Why is this bad?
    Clipping rescales the `.grad` tensors as they are when it runs. After
    `zero_grad()` they are zeros (or `None`: nothing to clip); with no
    `zero_grad()` before it, they are what the previous step left. The
    `backward()` that follows adds this step's gradients afterwards, and
    `optimizer.step()` uses them unclipped. The run trains without the
    clipping it was configured with and nothing warns: a loss spike that the
    clip was meant to absorb reaches the weights (divergence, NaN losses in
    RNNs, transformers and RL, where clipping is there for a reason).

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    Clip between the backward and the step (with a GradScaler, after
    `scaler.unscale_(optimizer)`):
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix moves the clipping line to just before the step, so the
    step now uses clipped gradients. What is trained changes (that is the
    point), and a clipping result kept in a name (`norm = clip_grad_norm_(...)`)
    now holds this step's norm. Clipping lines next to it that miss the same
    step move with it, in their order, and so does a `scaler.unscale_(optimizer)`
    line right above them: an `unscale_` before the backward raises ("Attempted
    unscale_ but _scale is None" on the first step, "No inf checks were
    recorded for this optimizer" after `zero_grad()` set the gradients to
    `None`) or, on zeroed gradients, makes the step use gradients still
    multiplied by the loss scale.

    The fix is offered only when the clip, the backward and the step are
    simple statements of the same block and the step is a bare call; otherwise
    the finding has no fix and the clipping must be moved by hand: a clip
    under `if args.clip:` (the whole `if` has to move), a step under a
    condition (an accumulation branch, a finite-loss check), a backward in
    another block. It is not offered either when a comment line sits directly
    above the clip (it would stay behind), when a statement in between
    rebinds a name the clip reads or reads the name the clip binds (the
    logged norm), or when another `unscale_` of the step would run twice or
    stay before the backward.

    Silent: clipping between the backward and the step, inside an `if` or
    after a GradScaler's `unscale_`; Accelerate's clipping under
    `if accelerator.sync_gradients:`; clipping after the last backward of a
    gradient-accumulation window; Lightning's `configure_gradient_clipping` and
    `on_before_optimizer_step` hooks (the framework calls them between
    backward and step); a clip that precedes a step of the previous batch
    (clip, step, then this batch's backward); a closure passed to
    `optimizer.step(closure)`; a step fed by `torch.autograd.grad`, which
    writes no `.grad`.

    Also silent, on purpose, where what the clip sees is not known to be
    zeros or the previous step's gradients: a backward of the same pass may
    have run before the clip (two losses, one clipped before the other is
    added), or the previous pass may have ended after a backward with no
    step (an accumulation loop that clips each micro-batch before its
    backward clips part of the window's sum); a clip whose parameters the
    step's optimizer does not update (another model's, by the optimizer's
    construction or paired names); orders the branches decide (a clip,
    backward and step that only run together under one `if`, a backward in
    an inner loop or in a `try` the clip is not in); a misplaced clip left
    next to the same clip in the right place.
    """

    code = "TL306"
    name = "clip-before-backward"
    message = _MESSAGE
    fix_applicability = Applicability.UNSAFE
    confidence_levels = (
        "`medium` when the clipping call is known from the code (`torch.nn.utils` through the imports, an "
        "`Accelerator`, FSDP module or Fabric the code builds, `self.clip_gradients` in a LightningModule); "
        "`low` for a `clip_grad_norm_`/`clip_grad_value_` method of an object the code does not show. No "
        "validation draw (d1-d8) has held a finding of this rule to read blind, so neither level is a measured "
        "promise yet; the level table moves them once readings exist."
    )
    # Every clipping callee's name contains it (``clip_grad_norm_``, ``clip_grads_with_norm_``, ``clip_gradients``).
    triggers = ("clip_grad",)

    @classmethod
    def prepass(cls, scan):
        regions = scan.regions
        clipping = [i for i, region in enumerate(regions) if region.calls & CLIP_CALL_NAMES]
        if not clipping:
            return None
        backward: Callable = lambda region: bool(region.calls & BACKWARD_METHODS)  # noqa: E731
        step: Callable = lambda region: any(c == "step" or c.endswith("_step") for c in region.calls)  # noqa: E731
        if any(not isinstance(regions[i].node, (ast.FunctionDef, ast.AsyncFunctionDef)) and regions[i].enclosing_class is None for i in clipping):
            # top-level script code: its backward and step may sit in other top-level statements
            return WHOLE_FILE if any(map(backward, regions)) and any(map(step, regions)) else None
        return frozenset(i for i in clipping if backward(regions[i]) and step(regions[i])) or None

    def visit_Call(self, node: cst.Call) -> None:
        if not may_clip(self.context, node):
            return
        flow = current_flow(self.context)
        if flow is None or not flow.step_calls or not flow.backward_calls:
            return
        clip = clip_of(flow, node)
        if clip is None:
            return
        found = _misplaced(flow, clip)
        if found is None:
            return
        # one level below what the code shows: no finding of this rule has been read blind on users' code yet
        confidence = Confidence.MEDIUM if clip.resolved else Confidence.LOW
        message = _AFTER_STEP if found[0] == "after" else None
        self.report(node, message, fix=self._move(flow, clip, found), confidence=confidence)

    # -- the fix --------------------------------------------------------------------------------

    def _move(self, flow: FunctionFlow, clip: Clip, found: Tuple[str, GradEvent, GradEvent]) -> Optional[FixSpec]:
        """Move the clipping line, with the clipping lines next to it that the same step misses and a
        ``scaler.unscale_(...)`` line right above them, to just before the step."""
        _, backward, step = found
        lines = flow.lone_statements
        clip_line, back_line, step_line = lines.get(id(clip.call)), lines.get(id(backward.call)), lines.get(id(step.call))
        if clip_line is None or back_line is None or step_line is None:
            return None
        if len({clip_line[1], back_line[1], step_line[1]}) != 1 or not isinstance(step_line[0].body[0], cst.Expr):
            return None
        block = self._block_of(clip_line[0])
        if block is None:
            return None
        body = list(block.body)
        first = last = next(index for index, statement in enumerate(body) if statement is clip_line[0])
        at_step = next(index for index, statement in enumerate(body) if statement is step_line[0])

        def same_fault(index: int) -> bool:
            other = _line_call(body[index])
            other_clip = clip_of(flow, other) if other is not None else None
            return other_clip is not None and _misplaced(flow, other_clip) == found

        while first > 0 and same_fault(first - 1):
            first -= 1
        while last + 1 < len(body) and same_fault(last + 1):
            last += 1
        unscales = unscale_calls(flow)
        above = _line_call(body[first - 1]) if first > 0 else None
        moved_unscale = next((call for call, _ in unscales if call is above), None)
        if moved_unscale is not None:
            first -= 1
        moved = body[first : last + 1]
        if any(_has_comment_lines(statement) for statement in moved):
            return None  # a comment above would stay behind
        low, high = sorted((flow.sites[id(_line_call(moved[0]))].order, step.site.order))
        high = max(high, flow.sites[id(_line_call(moved[-1]))].order)
        # one unscale_ for the step, before the clip: none would run twice or stay before the backward
        for call, site in unscales:
            if call is moved_unscale:
                continue
            if low < site.order < high and site.order > step.site.order:
                return None  # between the step and a clip moved above it
            if not flow.runs_after(site, step.site):
                continue
            if moved_unscale is not None or _pass_start(flow, backward) < site.order < backward.site.order:
                return None
        # nothing between the two places changes what the moved lines read or reads what they bind
        reads = set().union(*(read_names(statement) for statement in moved))
        if any(low < binding.site.order < high and not _inside(binding.value, moved) for name in reads for binding in flow.bindings.get(name, ())):
            return None
        bound = {
            binding.name for bindings in flow.bindings.values() for binding in bindings if _inside(binding.value, moved)
        }
        between = body[last + 1 : at_step] if last < at_step else body[at_step:first]
        if bound and any(read_names(statement) & bound for statement in between):
            return None
        indents = self.context.current_indents()
        indent = "".join(indents)
        text = f"\n{indent}".join(self.context.code(s.with_changes(leading_lines=()), indents).strip() for s in moved)
        step_text = self.context.code(step.call).strip()
        return FixSpec(
            Applicability.UNSAFE,
            "Clip between backward() and the optimizer step",
            tuple(Replacement(statement, cst.RemoveFromParent()) for statement in moved)
            + (Replacement(step.call, f"{text}\n{indent}{step_text}"),),
        )

    def _block_of(self, line: cst.SimpleStatementLine) -> Optional[cst.CSTNode]:
        ancestors = self.context.ancestors
        for index in range(len(ancestors) - 1, 0, -1):
            if ancestors[index] is line:
                parent = ancestors[index - 1]
                return parent if isinstance(parent, (cst.IndentedBlock, cst.Module)) else None
        return None


# -- the two orders ---------------------------------------------------------------------------------


def _misplaced(flow: FunctionFlow, clip: Clip) -> Optional[Tuple[str, GradEvent, GradEvent]]:
    """("before" or "after", the backward, the step) when ``clip`` misses the step it is for."""
    owners = clipped_owners(flow, clip)
    relevant = lambda event: event.call is not clip.call and acts_on_clipped(flow, event, owners)  # noqa: E731
    found = _before_backward(flow, clip, owners, relevant)
    if found is not None:
        return ("before",) + found
    found = _after_step(flow, clip, relevant)
    return ("after",) + found if found is not None else None



def _before_backward(
    flow: FunctionFlow, clip: Clip, owners: FrozenSet[str], relevant: Callable[[GradEvent], bool]
) -> Optional[Tuple[GradEvent, GradEvent]]:
    """The backward and the step of the pass when ``clip`` runs before the backward that feeds the step: a
    backward always follows the clip with no step in between, a step follows that backward with no such
    clip in between (the same callee on the same parameters: the misplaced one is a leftover), and no
    backward may have filled the gradients the clip sees."""
    here = clip.site
    events = [e for e in gradient_events(flow) if relevant(e)]
    backward = None
    for event in events:
        if event.site.order <= here.order or not flow.runs_after(here, event.site):
            continue
        if event.kind == STEP:
            return None  # the clip is for a step before this backward
        if event.kind == BACKWARD and must_follow(flow, here, event.site):
            backward = event
            break
    if backward is None:
        return None
    step = None
    for event in events:
        if event.site.order <= backward.site.order or not flow.runs_after(backward.site, event.site):
            continue
        if event.kind == CLIP and _same_clip(flow, clip, owners, event.call):
            return None  # clipped where it should be as well
        if event.kind == STEP:
            step = event
            break
    if step is None or step.site.loops != here.loops:
        return None
    before = last_before(flow, here, relevant)
    if any(event is None or event.kind == BACKWARD for event in before):
        return None  # a backward may have filled the gradients (accumulation), or nothing tells
    return backward, step


def _after_step(flow: FunctionFlow, clip: Clip, relevant: Callable[[GradEvent], bool]) -> Optional[Tuple[GradEvent, GradEvent]]:
    """The backward and the step of the pass when ``clip`` runs after a step that used gradients no clip
    touched, and the clip's own work is lost: it clips what ``zero_grad()`` just cleared, or ``zero_grad()``
    clears the clipped gradients before any step or backward."""
    here = clip.site
    # the step before the clip, with nothing but zero_grad() calls between them
    steps = last_before(flow, here, lambda e: relevant(e) and e.kind != ZERO)
    if not steps or any(e is None or e.kind != STEP or e.site.order > here.order for e in steps):
        return None
    step = steps[-1]
    if not must_precede(step.site, here):
        return None
    # the backward that step used, with no clip between them
    feeding = last_before(flow, step.site, lambda e: relevant(e) and e.kind != STEP)
    if not feeding or any(e is None or e.kind != BACKWARD or e.site.order > step.site.order for e in feeding):
        return None
    backward = feeding[-1]
    if not must_precede(backward.site, step.site):
        return None
    clips_nothing = all(e is not None and e.kind == ZERO for e in last_before(flow, here, relevant))
    after = first_after(flow, here, relevant)
    cleared = bool(after) and all(e is not None and e.kind == ZERO for e in after)
    return (backward, step) if clips_nothing or cleared else None


def _same_clip(flow: FunctionFlow, clip: Clip, owners: FrozenSet[str], call: cst.Call) -> bool:
    other = clip_of(flow, call)
    if other is None or _callee(flow, other.call) != _callee(flow, clip.call):
        return False
    others = clipped_owners(flow, other)
    return not owners or not others or bool(owners & others)


def _callee(flow: FunctionFlow, call: cst.Call) -> str:
    func = call.func
    return flow.context.qualified_name(func) or (func.attr.value if isinstance(func, cst.Attribute) else "")


def _line_call(statement: cst.CSTNode) -> Optional[cst.Call]:
    """The call a simple statement line is (``f(x)``, ``y = f(x)``), or None."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        small = statement.body[0]
        if isinstance(small, (cst.Expr, cst.Assign)) and isinstance(small.value, cst.Call):
            return small.value
    return None


def _inside(node: cst.CSTNode, statements: List[cst.CSTNode]) -> bool:
    return any(contains(statement, node) for statement in statements)


def _pass_start(flow: FunctionFlow, backward: GradEvent) -> float:
    """The order from which statements run in the same pass as ``backward``: its loop's header, else the start."""
    if backward.site.loops:
        return flow.loop_sites[id(backward.site.loops[-1])].order
    return 0


def _has_comment_lines(statement: cst.CSTNode) -> bool:
    return any(line.comment is not None for line in getattr(statement, "leading_lines", ()))
