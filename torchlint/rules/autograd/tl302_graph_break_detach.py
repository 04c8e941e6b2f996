from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from torchlint.analysis.gradflow import DETACHING_METHODS, REWRAP_FUNCTIONS, STOP_GRADIENT_NAME, FunctionFlow, Site, current_flow
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

# Names of the detaching steps (methods, ``.data``, ``float``, re-wrapping calls): the cheap prefilter.
_STEP_WORDS = frozenset({"detach", "item", "tolist", "numpy", "data", "float", "tensor", "Tensor", "FloatTensor", "Variable"})
# Operands that need parentheses when they replace a call or attribute access.
_LOOSE = (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda)


class GraphBreakDetach(Rule):
    """
    ## What it does
    Flags `.item()`, `.detach()`, `.tolist()`, `.numpy()`, `.data`, `float(t)`
    and re-wrapping (`torch.tensor(loss, requires_grad=True)`,
    `Variable(loss, requires_grad=True)`) applied to a tensor that carries
    gradients, when the result then flows into what a module's `forward()`
    returns or into a tensor that is `.backward()`-ed, and every path by which
    a gradient could reach it goes through such a step.

    ## Why is this bad?
    Each of these steps gives a value without autograd history. When it is
    the only way from the parameters to the loss, `loss.backward()` either
    fails ("element 0 of tensors does not require grad") or, after a
    re-wrap with `requires_grad=True`, succeeds while every parameter's
    `.grad` stays `None`: the optimizer steps on nothing and the model does
    not train. A `forward()` that returns a detached value silently freezes
    everything before it.

    ## Example
    ```python
    loss = criterion(model(x), y)
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    loss.backward()
    ```

    ## Fix safety
    Unsafe: removing the step changes what is trained (that is the point),
    and the type of the value (`.item()`, `.tolist()`, `.numpy()` gave Python
    or NumPy values; code around it may rely on that). Chains such as
    `t.detach().cpu().numpy()` lose one step per pass. A line that only
    re-wraps a name into itself (`loss = torch.tensor(loss.item(),
    requires_grad=True)`) is deleted.

    Stop-gradients that are clearly intended stay silent: a value that still
    has another path to the parameters (`x + (q - x).detach()`, a detached
    target in a loss), logging and metrics (values that reach neither a
    return of `forward` nor a backward call), and detaching a value named
    `target`, `teacher`, `ema`, `momentum`, `frozen`, `sg`. Not seen: values
    passed through other functions or stored on `self`.
    """

    code = "TL302"
    name = "graph-break-detach"
    message = (
        "this detaching step is the only path from the parameters to the value that is returned "
        "from forward() or backward()-ed: the graph is cut and no parameter gets a gradient"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("backward", "forward")

    @classmethod
    def prepass(cls, scan):
        # Sinks: a backward call, or the return of a ``forward`` whose scope names a detaching step.
        def cuts_in_forward(region) -> bool:  # a step FunctionFlow.detaching_operand recognises
            return "forward" in region.scope_names and bool(
                not region.calls.isdisjoint(DETACHING_METHODS)
                or "data" in region.attributes
                or "float" in region.plain_calls
                or "Variable" in region.calls
                or not region.qualified_calls.isdisjoint(REWRAP_FUNCTIONS)
            )

        return (scan.regions_calling({"backward"}) | scan.regions_where(cuts_in_forward)) or None

    def __init__(self, context) -> None:
        super().__init__(context)
        self._reported: Set[int] = set()
        # Scopes (functions, or None for the module) in which a detaching step has been seen so
        # far: a sink is analysed only there, since a step further down cannot reach it.
        self._scopes_with_steps: Set[Optional[int]] = set()

    def _scope(self) -> Optional[int]:
        function = self.context.enclosing(cst.FunctionDef)
        return id(function) if function is not None else None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _STEP_WORDS:
            self._scopes_with_steps.add(self._scope())

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Name) and func.value in _STEP_WORDS:
            self._scopes_with_steps.add(self._scope())

    # Sinks are checked on leaving, once the steps inside them have been seen.
    def leave_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward") and self.context.qualified_name(
            func
        ) != "torch.autograd.backward":
            return
        if self._scope() not in self._scopes_with_steps:
            return
        flow = current_flow(self.context)
        if flow is None:
            return
        for call in flow.backward_calls:
            if call.call is node:
                self._check_sink(flow, call.tensor, call.site)

    def leave_Return(self, node: cst.Return) -> None:
        if node.value is None or self._scope() not in self._scopes_with_steps:
            return
        function = self.context.enclosing(cst.FunctionDef)
        if function is None or function.name.value != "forward":
            return
        flow = current_flow(self.context)
        if flow is None or not flow.class_attributes.modules:
            return
        for value, site in flow.returns:
            if value is node.value:
                self._check_sink(flow, value, site)

    def _check_sink(self, flow: FunctionFlow, sink: cst.BaseExpression, site: Site) -> None:
        if flow.carries_grad(sink, at=site) or not flow.carries_grad(sink, through_detach=True, at=site):
            return
        steps = flow.detaching_steps(sink, site)
        if any(self._intended(flow, step) for step in steps):
            return
        for step in steps:
            if id(step) not in self._reported:
                self._reported.add(id(step))
                self.report(step, fix=self._fix(flow, step))

    def _intended(self, flow: FunctionFlow, step: cst.BaseExpression) -> bool:
        operand = flow.detaching_operand(step)
        return operand is not None and bool(STOP_GRADIENT_NAME.search(self.context.code(operand)))

    def _fix(self, flow: FunctionFlow, step: cst.BaseExpression) -> Optional[FixSpec]:
        operand = flow.detaching_operand(step)
        if operand is None:
            return None
        innermost = operand
        while flow.detaching_operand(innermost) is not None:
            innermost = flow.detaching_operand(innermost)
        line = flow.lone_statements.get(id(step))
        if line is not None and id(line[0]) in flow.removable_lines and isinstance(innermost, cst.Name):
            assign = line[0].body[0]
            targets = assign.targets if isinstance(assign, cst.Assign) else ()
            if len(targets) == 1 and isinstance(targets[0].target, cst.Name) and targets[0].target.value == innermost.value:
                # ``loss = torch.tensor(loss.item(), requires_grad=True)``: without its steps the line is ``loss = loss``
                return FixSpec(Applicability.UNSAFE, "Remove the re-wrapping line", (Replacement(line[0], cst.RemoveFromParent()),))
        whole_value = any(b.value is step for bs in flow.bindings.values() for b in bs) or any(
            value is step for value, _ in flow.returns
        )
        replacement = operand
        if isinstance(operand, _LOOSE) and not getattr(operand, "lpar", ()) and not whole_value:
            replacement = operand.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        # a node, not text: the engine renders it with the indentation of the block it stands in
        return FixSpec(
            Applicability.UNSAFE,
            "Remove the detaching step",
            (Replacement(step, replacement),),
        )
