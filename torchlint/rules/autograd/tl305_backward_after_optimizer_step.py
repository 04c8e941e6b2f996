from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.flow.gradflow import FunctionFlow, contains, current_flow, differentiates, read_names
from torchlint.analysis.flow.autograd_terms import BACKWARD_METHODS
from torchlint.analysis.flow.flow_events import BackwardCall, Place, StepCall
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

_MESSAGE = (
    "backward() through a forward pass whose parameters an optimizer step() has since changed in place raises "
    "\"one of the variables needed for gradient computation has been modified by an inplace operation\""
)


class BackwardAfterOptimizerStep(Rule):
    """
    ## What it does
    Flags a `.backward()` (or `torch.autograd.grad`) whose graph goes
    through a forward pass that ran before an optimizer `step()` updating
    that module's parameters: typically `loss_a.backward(retain_graph=True)`,
    `optimizer.step()`, then a second loss computed from the same forward
    pass. Classic in GAN code (the discriminator steps, then the generator
    loss reuses the discriminator's output computed before the step; an
    InfoGAN's information loss after the generator step) and in loops that
    back-propagate through a value built once before the loop while stepping
    inside it.

    ## Why is this bad?
    Autograd saves the weights a layer used in its forward pass, to compute
    the gradient of its input. `optimizer.step()` updates those weights in
    place, which bumps their version counter; the later backward finds the
    saved weight changed and raises "one of the variables needed for gradient
    computation has been modified by an inplace operation ... is at version
    2; expected version 1" (since torch 1.5; before it silently computed a
    wrong gradient).

    ## Example
    ```python
    fake = netG(z)
    fake_out = netD(fake).mean()
    d_loss = 1 - netD(real).mean() + fake_out
    d_loss.backward(retain_graph=True)
    optimizerD.step()
    g_loss = -fake_out
    g_loss.backward()
    ```

    ## Use instead
    Run the forward pass again after the step (the generator is then judged
    by the updated discriminator, as GAN training intends):
    ```python
    optimizerD.step()
    fake_out = netD(fake).mean()
    g_loss = -fake_out
    g_loss.backward()
    ```
    or do both backward calls before either step.

    ## Fix safety
    Unsafe: the fix copies the line that ran the stale forward pass
    (`fake_out = netD(fake).mean()`) to just after the step, so the later
    loss uses a fresh pass through the updated module. Values change (the
    module was updated), the extra forward costs time, and any randomness in
    it (dropout) draws again. Offered only when that line is a plain
    assignment whose inputs are not rebound before the step, the later loss
    reaches the stale pass only through that name, read after the step, and
    the step is a whole line of the same block as the backward call.
    Reordering the steps is not done automatically: it changes which
    gradients each optimizer sees (the later loss would add its gradient to
    the first module's before that module steps).

    Silent: a fresh forward pass after the step, a later loss that does not
    reach the stepped module (the generator's graph after the
    discriminator's step), `detach()` of the shared part, a graph freed by
    the earlier backward (that is `backward-twice`).
    """

    code = "TL305"
    name = "backward-after-optimizer-step"
    message = _MESSAGE
    fix_applicability = Applicability.UNSAFE
    confidence_levels = (
        "`high` when the optimizer's construction in the file names the module's `parameters()` (or one "
        "optimizer steps everything: `optimizer.step()`); `medium` when only the names pair the optimizer "
        "and the module (`optimizer_D` and `netD`, `opt_g` and `generator`)."
    )
    triggers = ("step",)

    @classmethod
    def prepass(cls, scan):
        return (
            scan.regions_where(
                lambda region: bool(region.calls & (BACKWARD_METHODS | {"grad"}))
                and any(call == "step" or call.endswith("_step") for call in region.calls)
            )
            or None
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not differentiates(self.context, node):
            return
        flow = current_flow(self.context)
        if flow is None or not flow.step_calls:
            return
        current = next((call for call in flow.backward_calls if call.call is node), None)
        if current is None:
            return
        found = self._stale_forward_pass(flow, current)
        if found is None:
            return
        forward, forward_site, step, how = found
        confidence = Confidence.HIGH if how == "built" else Confidence.MEDIUM
        self.report(node, fix=self._recompute(flow, current, forward, forward_site, step), confidence=confidence)

    def _stale_forward_pass(
        self, flow: FunctionFlow, current: BackwardCall
    ) -> Optional[Tuple[cst.Call, Place, StepCall, str]]:
        """A forward pass ``current`` goes through, with a step of its module's optimizer after it."""
        best = None
        for forward, forward_site in flow.graph_roots(current.tensor, current.site):
            if flow.freeing_call({id(forward)}, current.site) is not None:
                continue  # backward-twice's case: the graph is gone before it is stale
            module = flow.module_of(forward)
            for step in flow.step_calls:
                if not self._between(flow, forward_site, step.site, current):
                    continue
                how = flow.step_updates(step, module)
                if how is not None and (best is None or (how == "built" and best[3] != "built")):
                    best = (forward, forward_site, step, how)
        return best

    @staticmethod
    def _between(flow: FunctionFlow, forward: Place, step: Place, current: BackwardCall) -> bool:
        """Whether ``step`` runs after the forward pass and before ``current`` in one pass, or in a loop
        around ``current`` that the forward pass ran before (the next iteration meets the step)."""
        here = current.site
        if step.exclusive_with(here) or step.exclusive_with(forward):
            return False
        if forward.order < step.order < here.order:
            return not flow.leaves_after(step, here) and not flow.leaves_after(forward, step)
        for loop in here.loops:
            if loop in step.loops and loop not in forward.loops and forward.order < step.order:
                return not current.frees_graph  # a freed graph fails first: backward-twice
        return False

    def _recompute(
        self, flow: FunctionFlow, current: BackwardCall, forward: cst.Call, forward_site: Place, step: StepCall
    ) -> Optional[FixSpec]:
        """Copy the stale pass's line ``v = <forward pass ...>`` to just after the step."""
        step_line = flow.lone_statements.get(id(step.call))
        backward_line = flow.lone_statements.get(id(current.call))
        if step_line is None or backward_line is None or step_line[1] != backward_line[1]:
            return None  # the step is not a whole line of the backward's block
        if step_line[0].trailing_whitespace.comment is not None or step.site.order > current.site.order:
            return None
        binding = next(
            (
                b
                for bindings in flow.bindings.values()
                for b in bindings
                if not b.element and b.site is forward_site and contains(b.value, forward)
            ),
            None,
        )
        if binding is None or flow.lone_statements.get(id(binding.value)) is None:
            return None
        assign_line = flow.lone_statements[id(binding.value)][0]
        assign = assign_line.body[0]
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name)):
            return None
        name = binding.name
        # its inputs still mean the same after the step; the name itself is not bound again before it
        for read in read_names(binding.value) | {name}:
            if any(forward_site.order < b.site.order < step.site.order for b in flow.bindings.get(read, ())):
                return None
        # every way from the backward to the stale pass goes through ``name`` read after the step
        fresh = lambda node, where: node.value == name and where.order > step.site.order  # noqa: E731
        if any(call is forward for call, _ in flow.graph_roots(current.tensor, current.site, fresh=fresh)):
            return None
        indent = "".join(self.context.current_indents())
        step_text = self.context.code(step.call).strip()
        line = self.context.code(assign).strip()
        return FixSpec(
            Applicability.UNSAFE,
            f"Run the forward pass again after the step: `{line}`",
            (Replacement(step.call, f"{step_text}\n{indent}{line}"),),
        )

