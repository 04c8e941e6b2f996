from __future__ import annotations

import re
from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.calls import add_keyword, has_star_args, keyword_arg
from torchlint.analysis.flow.callers import CallSite, argument_for
from torchlint.analysis.flow.gradflow import FunctionFlow, built_flows, current_flow, differentiates
from torchlint.analysis.flow.autograd_terms import BACKWARD_METHODS
from torchlint.analysis.flow.flow_events import BackwardCall
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

_SECOND_TIME = "raises \"Trying to backward through the graph a second time\""


class BackwardTwice(Rule):
    """
    ## What it does
    Flags a `.backward()` (also `scaler.scale(loss).backward()`,
    `torch.autograd.backward(loss)` and `torch.autograd.grad(loss, ...)`)
    that runs through a graph an earlier `.backward()` or `autograd.grad`
    without `retain_graph=True` has already freed:

    - two losses computed from one forward pass, each `.backward()`-ed
      (pairwise ranking losses, multi-task heads on one trunk, a GAN whose
      discriminator loss back-propagates through the generator's output
      and whose generator loss then reuses it); the same value
      `.backward()`-ed twice, whether computed in the function or passed in;
    - `.backward()` inside a loop on a value whose forward pass ran once,
      before the loop (`scores = model(x)`, then a `MarginRankingLoss` per
      pair inside the loop);
    - `.backward()` in every iteration of a loop that hands a value with
      history to the next one: a recurrent state (`out, h = rnn(x, h)`)
      never detached, a previous output reused as an input;
    - `.backward()` in a function on what a caller of the same file passed
      it, after the caller freed that value's graph.

    ## Why is this bad?
    `backward()` frees the intermediate values the graph saved, as soon as it
    has used them. The second backward through any part of that graph raises
    "Trying to backward through the graph a second time (or directly access
    saved tensors after they have already been freed)".

    ## Example
    ```python
    out = model(x)
    loss_a = criterion_a(out, y_a)
    loss_b = criterion_b(out, y_b)
    loss_a.backward()
    loss_b.backward()

    for x, y in batches:  # truncated back-propagation through time
        out, h = rnn(x, h)
        criterion(out, y).backward()
    ```

    ## Use instead
    ```python
    (loss_a + loss_b).backward()

    for x, y in batches:
        out, h = rnn(x, h)
        criterion(out, y).backward()
        h = h.detach()
    ```
    or keep the graph for the later call:
    ```python
    loss_a.backward(retain_graph=True)
    loss_b.backward()
    ```

    ## Fix safety
    Unsafe. When both calls are plain `loss.backward()` (or
    `scaler.scale(loss).backward()`) lines of one block and the earlier loss
    is a name not rebound in between, the fix deletes the earlier line and
    back-propagates the sum at the later one: `(loss_a + loss_b).backward()`.
    Otherwise it adds `retain_graph=True` to the earlier call (for a loop: to
    the call in the loop), which gives the same gradients as summing the
    losses, at the price of keeping the graph in memory until the last call.
    Both change when the first gradients exist: code between the two calls
    that reads `.grad` (clipping, logging) now sees them later or summed.
    No fix is offered when an
    optimizer `step()` runs between the two calls (the second backward would
    then meet parameters modified in place: `backward-after-optimizer-step`),
    for the same value backward()-ed twice (most likely a duplicated line;
    doubling its gradient is rarely what was meant), for a state carried
    across iterations (where to cut it, every iteration or every k steps, is
    the truncation length, and the state may be a tensor or an LSTM's
    `(h, c)` tuple), nor when the graph was freed in a caller.

    Silent: `retain_graph=True` (or `create_graph=True`) on the earlier calls,
    a fresh forward pass in each iteration, a carried state cut with
    `h = h.detach()`, `h.detach_()` or `h = h.data`, gradient accumulation
    that recomputes the loss each step, a loop that `break`s or `return`s
    after the backward, calls in different branches of an `if` or with a
    `continue`/`break`/`return` between them. Not seen: graphs built in
    another function and returned, values kept on `self` between calls.
    """

    code = "TL303"
    name = "backward-twice"
    message = (
        "backward() through a graph that an earlier backward() already freed raises "
        "\"Trying to backward through the graph a second time\""
    )
    fix_applicability = Applicability.UNSAFE
    confidence_levels = (
        "`high` when both calls are in one function, or a loop frees a graph built before it by a module call "
        "(`scores = model(x)`, `self.encoder(x)`, or a module whose construction the file shows): the graph "
        "is freed by construction. `medium` when the graph before the loop comes from a method of an object "
        "handed in (a rollout buffer's sampler may hand back data with no graph), or the earlier call is in a "
        "caller of the same file (the function may also be called elsewhere, its `backward()` behind a flag)."
    )
    triggers = ("backward", "grad")

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling(BACKWARD_METHODS | {"grad"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        if not differentiates(self.context, node):
            return
        flow = current_flow(self.context)
        if flow is None:
            return
        current = next((call for call in flow.backward_calls if call.call is node), None)
        if current is None:
            return
        verb = "backward()" if current.kind == "backward" else "autograd.grad"
        carries = flow.carries_grad(current.tensor, at=current.site)
        earlier = self._earlier_freeing_call(flow, current) if carries else None
        if earlier is None:
            earlier = self._same_value_again(flow, current)
        if earlier is not None:
            same = (
                isinstance(earlier.tensor, cst.Name)
                and isinstance(current.tensor, cst.Name)
                and earlier.tensor.value == current.tensor.value
            )
            message = (
                f"the same value is differentiated twice: the first call freed its graph; this {verb} {_SECOND_TIME}"
                if same
                else f"this loss shares a forward pass with one differentiated earlier without retain_graph=True: "
                f"the graph is freed; this {verb} {_SECOND_TIME}"
            )
            fix = None
            # the same value twice is most likely a duplicated line; ``autograd.grad`` then ``backward`` is not
            if (not same or earlier.kind != current.kind) and not self._step_between(flow, earlier.site.order, current.site.order):
                fix = self._sum(flow, earlier, current) or self._retain(earlier)
            self.report(node, message, fix)
            return
        loop = self._loop_over_one_forward(flow, current) if carries else None
        if loop is None:
            loop = self._loop_over_one_value(flow, current)
        if loop is not None:
            message = (
                f"{verb} in a loop through a graph built once before the loop: the first iteration frees it; "
                f"the second {_SECOND_TIME}"
            )
            steps_in_loop = any(loop in site.loops for site in flow.step_sites)
            fix = None if steps_in_loop or not current.frees_graph else self._retain(current)
            self.report(node, message, fix, confidence=self._loop_confidence(flow, current, loop))
            return
        if carries and self._carried_across_iterations(flow, current) is not None:
            self.report(
                node,
                f"this loop hands a value with history to the next iteration (a recurrent state, a previous output) "
                f"and {verb} frees that history each time: the next iteration {_SECOND_TIME}; "
                "detach the carried value once it has been used",
            )
            return
        self._note_parameters(node, flow, current)

    # -- within one function ------------------------------------------------------------------

    @staticmethod
    def _earlier_freeing_call(flow: FunctionFlow, current: BackwardCall) -> Optional[BackwardCall]:
        """The latest earlier backward that freed a forward pass ``current`` also goes through."""
        mine = {id(call) for call, _ in flow.graph_roots(current.tensor, current.site)}
        return flow.freeing_call(mine, current.site) if mine else None

    @classmethod
    def _same_value_again(cls, flow: FunctionFlow, current: BackwardCall) -> Optional[BackwardCall]:
        """An earlier call that freed the graph of the very value ``current`` differentiates: the same
        name, not bound again in between (a parameter too: what was passed in)."""
        if not isinstance(current.tensor, cst.Name):
            return None
        name = current.tensor.value
        bindings = flow.bindings.get(name, ())
        for earlier in sorted(flow.backward_calls, key=lambda c: -c.site.order):
            if not (isinstance(earlier.tensor, cst.Name) and earlier.tensor.value == name):
                continue
            if not earlier.frees_graph or not flow.runs_after(earlier.site, current.site):
                continue
            inner_loops = earlier.site.loops[len(current.site.loops):]
            if any(
                earlier.site.order < b.site.order < current.site.order or any(loop in b.site.loops for loop in inner_loops)
                for b in bindings
            ):
                continue  # bound again on the way
            return earlier
        return None

    @staticmethod
    def _leaves(flow: FunctionFlow, loop: cst.CSTNode) -> bool:
        """A ``break`` of ``loop`` or a ``return`` inside it: the backward may run once."""
        return any(
            loop in site.loops and (kind in ("return", "raise") or (kind == "break" and site.loops[-1] is loop))
            for kind, site in flow.jumps
        )

    @classmethod
    def _loop_over_one_forward(cls, flow: FunctionFlow, current: BackwardCall) -> Optional[cst.CSTNode]:
        """The loop around ``current`` outside which a forward pass it goes through was run: the
        first iteration frees that pass's graph (``shared = encoder(x)``, then a head per task)."""
        if not current.frees_graph or not current.site.loops:
            return None
        roots = flow.graph_roots(current.tensor, current.site)
        for loop in current.site.loops:
            if any(loop not in site.loops for _, site in roots) and not cls._leaves(flow, loop):
                return loop
        return None

    @classmethod
    def _loop_over_one_value(cls, flow: FunctionFlow, current: BackwardCall) -> Optional[cst.CSTNode]:
        """The loop in every iteration of which ``current`` differentiates one name the loop never binds
        (computed before the loop, or passed in)."""
        if not current.frees_graph or not current.site.loops or not isinstance(current.tensor, cst.Name):
            return None
        bindings = flow.bindings.get(current.tensor.value, ())
        loop = current.site.loops[-1]
        header = flow.loop_sites.get(id(loop))
        if header is None or current.site.branches != header.branches:
            return None  # a call some iterations skip may run once
        if any(loop in b.site.loops for b in bindings) or cls._leaves(flow, loop):
            return None
        return loop

    @classmethod
    def _carried_across_iterations(cls, flow: FunctionFlow, current: BackwardCall) -> Optional[cst.CSTNode]:
        """The loop whose previous iteration built part of the graph ``current`` frees."""
        if not current.frees_graph:
            return None
        for loop in reversed(current.site.loops):
            if cls._leaves(flow, loop):
                continue
            if flow.carries_from_previous_iteration(current.tensor, current.site, loop):
                return loop
        return None

    @staticmethod
    def _loop_confidence(flow: FunctionFlow, current: BackwardCall, loop: cst.CSTNode) -> Confidence:
        """``high`` when the graph built before the loop is proven: every forward pass it comes from calls a
        module (``model(x)``, ``self.encoder(x)``) or one whose construction the file shows.  A method of an
        object handed in (``rollouts.feed_forward_generator(...)``, a replay buffer's sampler) may hand back
        data that carries no graph at all: ``medium``."""
        roots = [call for call, site in flow.graph_roots(current.tensor, current.site) if loop not in site.loops]
        if isinstance(current.tensor, cst.Name) and not roots:
            reaching = flow.bindings.get(current.tensor.value, ())
            if not reaching or any(binding.value is None for binding in reaching):
                return Confidence.MEDIUM  # a parameter, or a name bound by a loop or an unpacking
        proven = all(flow.module_constructor(call) is not None or (_calls_a_held_module(call) and flow.is_module_call(call)) for call in roots)
        return Confidence.HIGH if proven else Confidence.MEDIUM

    @staticmethod
    def _step_between(flow: FunctionFlow, start: int, end: int) -> bool:
        return any(start < site.order < end for site in flow.step_sites)

    # -- across a same-file call --------------------------------------------------------------------

    def __init__(self, context) -> None:
        super().__init__(context)
        # backward calls on what a parameter holds, judged once every function with a backward
        # call has its flow: (call, flow, the call, the parameters it reaches, its ancestors)
        self._on_parameters: List[Tuple[cst.Call, FunctionFlow, BackwardCall, List[str], List[cst.CSTNode]]] = []

    def _note_parameters(self, node: cst.Call, flow: FunctionFlow, current: BackwardCall) -> None:
        function = flow.function
        if not isinstance(function, cst.FunctionDef) or not self._called_in_file(function.name.value):
            return
        params = function.params
        names = [p.name.value for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params)]
        reaching = [
            name
            for name in names
            if name not in ("self", "cls") and flow.carries_from_parameters(current.tensor, current.site, frozenset({name}))
        ]
        if reaching:
            self._on_parameters.append((node, flow, current, reaching, list(self.context.ancestors)))

    def leave_Module(self, node: cst.Module) -> None:
        for call, flow, current, params, ancestors in self._on_parameters:
            caller = self._freed_by_caller(flow, params)
            if caller is None:
                continue
            visiting, self.context.ancestors = self.context.ancestors, ancestors
            try:
                self.report(
                    call,
                    f"a caller, {caller}, backward()-ed the graph of what it passes here without retain_graph=True: "
                    f"this {'backward()' if current.kind == 'backward' else 'autograd.grad'} {_SECOND_TIME}",
                    confidence=Confidence.MEDIUM,
                )
            finally:
                self.context.ancestors = visiting

    def _freed_by_caller(self, flow: FunctionFlow, params: List[str]) -> Optional[str]:
        """The caller (its name) that passes for one of ``params`` a value whose graph it freed before
        the call.  Callers are the functions of the file with a backward call (their flows are built)."""
        function = flow.function
        name = function.name.value
        for caller in built_flows(self.context):
            if caller is flow or not any(c.frees_graph for c in caller.backward_calls):
                continue
            for call in caller.calls:
                through_self = _calls_by_name(call, name, caller, flow)
                if through_self is None:
                    continue
                call_site = caller.sites.get(id(call))
                if call_site is None or call_site.no_grad:
                    continue
                for param in params:
                    passed = argument_for(function, param, CallSite(call, (), through_self))
                    mine = {id(root) for root, _ in caller.graph_roots(passed, call_site)} if passed is not None else ()
                    if mine and caller.freeing_call(mine, call_site) is not None:
                        return f"{caller.name}()" if caller.name else "the script"
        return None

    def _called_in_file(self, name: str) -> bool:
        """A cheap necessary condition of a caller's call, read from the text: the function is called
        by its name or as ``self.name(...)`` (the name, not after another dot, followed by ``(`` more
        than once: the ``def`` and a call)."""
        table = self.context.memoized("tl303.called-names", self.context.module, lambda _: {})
        if name not in table:
            pattern = rf"(?:(?<![\w.])|(?<![\w.])self\.){re.escape(name)}\s*\("
            table[name] = len(re.findall(pattern, self.context.source)) > 1
        return table[name]

    # -- fixes -----------------------------------------------------------------------------------------

    def _sum(self, flow: FunctionFlow, earlier: BackwardCall, current: BackwardCall) -> Optional[FixSpec]:
        """Delete the earlier call's line and back-propagate the sum at the later call.

        Only when both are plain ``x.backward()`` / ``scaler.scale(x).backward()``
        lines of one block, in the same form, and the earlier loss is a name not
        rebound in between (so that it still means the same at the later call).
        """
        if earlier.kind != "backward" or current.kind != "backward":
            return None
        first = flow.lone_statements.get(id(earlier.call))
        second = flow.lone_statements.get(id(current.call))
        if first is None or second is None or first[1] != second[1]:
            return None
        if earlier.call.args or current.call.args or earlier.site.branches != current.site.branches:
            return None
        names = _summed_names(earlier.tensor)
        if not names:
            return None
        for name in names:
            if any(earlier.site.order < b.site.order < current.site.order for b in flow.bindings.get(name, ())):
                return None
        name = " + ".join(names)
        first_receiver = earlier.call.func.value if isinstance(earlier.call.func, cst.Attribute) else None
        second_receiver = current.call.func.value if isinstance(current.call.func, cst.Attribute) else None
        if first_receiver is None or second_receiver is None:
            return None
        scaled = first_receiver is not earlier.tensor
        if scaled != (second_receiver is not current.tensor):
            return None
        if scaled and self.context.code(first_receiver.func) != self.context.code(second_receiver.func):
            return None  # two different scalers
        later = self.context.code(current.tensor).strip()
        if isinstance(current.tensor, (cst.BinaryOperation, cst.UnaryOperation, cst.IfExp)) and not current.tensor.lpar:
            later = f"({later})"
        total = f"{name} + {later}"
        new_tensor = total if scaled else f"({total})"
        return FixSpec(
            Applicability.UNSAFE,
            f"Back-propagate the sum once: `({total}).backward()`",
            (Replacement(first[0], cst.RemoveFromParent()), Replacement(current.tensor, new_tensor)),
        )

    @staticmethod
    def _retain(call: BackwardCall) -> Optional[FixSpec]:
        node = call.call
        if has_star_args(node) or keyword_arg(node, "retain_graph") is not None:
            return None
        if call.kind == "grad":
            if len(node.args) > 3:
                return None
        elif not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward") and len(node.args) > 2:
            return None
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward" and len(node.args) > 1:
            return None
        return FixSpec(
            Applicability.UNSAFE,
            "Keep the graph for the later backward with `retain_graph=True`",
            (Replacement(node, add_keyword(node, "retain_graph", cst.Name("True"))),),
        )


def _calls_by_name(call: cst.Call, name: str, caller: FunctionFlow, callee: FunctionFlow) -> Optional[bool]:
    """Whether ``call`` (in ``caller``) runs ``callee`` (named ``name``): False for ``name(...)`` with
    the name not bound in the caller, True for ``self.name(...)`` between methods of one class; None
    when it does not."""
    func = call.func
    if isinstance(func, cst.Name) and func.value == name and name not in caller.bindings:
        return False if callee.class_def is None else None
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value == name
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and callee.class_def is not None
        and caller.class_def is callee.class_def
    ):
        return True
    return None


def _calls_a_held_module(call: cst.Call) -> bool:
    """``model(x)``, ``self.encoder(x)``, ``self.blocks[i](x)``: the callee is a name or an attribute of ``self``
    itself, not a method of some object (``rollouts.feed_forward_generator(...)``)."""
    func = call.func.value if isinstance(call.func, cst.Subscript) else call.func
    return isinstance(func, cst.Name) or (
        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
    )


def _summed_names(node: cst.BaseExpression) -> list:
    """``["a", "b", "c"]`` for ``a``, ``a + b``, ``(a + b) + c``; empty for anything else."""
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        left, right = _summed_names(node.left), _summed_names(node.right)
        if left and right:
            return left + right
    return []
