from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.calls import add_keyword, has_star_args, keyword_arg
from torchlint.analysis.gradflow import BackwardCall, FunctionFlow, current_flow
from torchlint.rule import Applicability, FixSpec, Replacement, Rule


class BackwardTwice(Rule):
    """
    ## What it does
    Flags a `.backward()` (also `scaler.scale(loss).backward()` and
    `torch.autograd.backward(loss)`) that runs through a graph an earlier
    `.backward()` has already freed:

    - two losses computed from one forward pass, each `.backward()`-ed, the
      earlier one without `retain_graph=True` (pairwise ranking losses,
      multi-task heads on one trunk); the same loss `.backward()`-ed twice;
    - `.backward()` inside a loop on a value whose forward pass ran once,
      before the loop (`scores = model(x)`, then a `MarginRankingLoss` per
      pair inside the loop).

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
    ```

    ## Use instead
    ```python
    (loss_a + loss_b).backward()
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
    then meet parameters modified in place), nor for the same loss
    backward()-ed twice (most likely a duplicated line; doubling its gradient
    is rarely what was meant).

    Silent: `retain_graph=True` (or `create_graph=True`) on the earlier calls,
    a fresh forward pass in each iteration, gradient accumulation that
    recomputes the loss each step, a loop that `break`s or `return`s after the
    backward, calls in different branches of an `if`. Not seen:
    `torch.autograd.grad` calls, graphs built in another function.
    """

    code = "TL303"
    name = "backward-twice"
    message = (
        "backward() through a graph that an earlier backward() already freed raises "
        "\"Trying to backward through the graph a second time\""
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("backward",)

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"backward"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward") and self.context.qualified_name(
            func
        ) != "torch.autograd.backward":
            return
        flow = current_flow(self.context)
        if flow is None:
            return
        current = next((call for call in flow.backward_calls if call.call is node), None)
        if current is None or not flow.carries_grad(current.tensor, at=current.site):
            return
        earlier = self._earlier_freeing_call(flow, current)
        if earlier is not None:
            same = self.context.code(earlier.tensor) == self.context.code(current.tensor)
            message = (
                "the same loss is backward()-ed twice: the first call freed its graph; "
                "the second raises \"Trying to backward through the graph a second time\""
                if same
                else "this loss shares a forward pass with one backward()-ed earlier without retain_graph=True: "
                "the graph is freed; this raises \"Trying to backward through the graph a second time\""
            )
            fix = None
            if not same and not self._step_between(flow, earlier.site.order, current.site.order):
                fix = self._sum(flow, earlier, current) or self._retain(earlier)
            self.report(node, message, fix)
            return
        loop = self._loop_over_one_forward(flow, current)
        if loop is not None:
            message = (
                "backward() in a loop through a graph built once before the loop: the first iteration frees it; "
                "the second raises \"Trying to backward through the graph a second time\""
            )
            steps_in_loop = any(loop in site.loops for site in flow.step_sites)
            self.report(node, message, None if steps_in_loop or not current.frees_graph else self._retain(current))

    @staticmethod
    def _earlier_freeing_call(flow: FunctionFlow, current: BackwardCall) -> Optional[BackwardCall]:
        """The latest earlier backward that freed a forward pass ``current`` also goes through."""
        mine = {id(call): site for call, site in flow.graph_roots(current.tensor, current.site)}
        if not mine:
            return None
        for earlier in sorted(flow.backward_calls, key=lambda c: -c.site.order):
            if earlier.site.order >= current.site.order or not earlier.frees_graph:
                continue
            if earlier.site.loops != current.site.loops or earlier.site.exclusive_with(current.site):
                continue
            theirs = flow.graph_roots(earlier.tensor, earlier.site)
            if any(id(call) in mine and site.order < earlier.site.order for call, site in theirs):
                return earlier
        return None

    @staticmethod
    def _loop_over_one_forward(flow: FunctionFlow, current: BackwardCall) -> Optional[cst.CSTNode]:
        """The loop around ``current`` outside which every forward pass it goes through was run."""
        if not current.frees_graph or not current.site.loops:
            return None
        roots = flow.graph_roots(current.tensor, current.site)
        if not roots:
            return None
        for loop in current.site.loops:
            if any(loop in site.loops for _, site in roots):
                continue
            leaves = any(loop in site.loops for site in flow.break_sites) or any(
                loop in site.loops for _, site in flow.returns
            )
            if not leaves:
                return loop
        return None

    @staticmethod
    def _step_between(flow: FunctionFlow, start: int, end: int) -> bool:
        return any(start < site.order < end for site in flow.step_sites)

    def _sum(self, flow: FunctionFlow, earlier: BackwardCall, current: BackwardCall) -> Optional[FixSpec]:
        """Delete the earlier call's line and back-propagate the sum at the later call.

        Only when both are plain ``x.backward()`` / ``scaler.scale(x).backward()``
        lines of one block, in the same form, and the earlier loss is a name not
        rebound in between (so that it still means the same at the later call).
        """
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
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward") and len(node.args) > 2:
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward" and len(node.args) > 1:
            return None
        return FixSpec(
            Applicability.UNSAFE,
            "Keep the graph for the later backward with `retain_graph=True`",
            (Replacement(node, add_keyword(node, "retain_graph", cst.Name("True"))),),
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
