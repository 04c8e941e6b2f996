from __future__ import annotations

from typing import Iterator, Optional, Set

import libcst as cst

from torchlint.analysis.flow.gradflow import FunctionFlow, current_flow, differentiates, read_names
from torchlint.analysis.flow.autograd_terms import BACKWARD_METHODS, DETACHING_METHODS, REWRAP_FUNCTIONS, STOP_GRADIENT_NAME, TRAINED_BY_FRAMEWORK
from torchlint.analysis.flow.flow_events import Place
from torchlint.analysis.values.losses import is_loss_call
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# Names of the detaching steps (methods, ``.data``, ``float``, re-wrapping calls): the cheap prefilter.
_STEP_WORDS = frozenset({"detach", "item", "tolist", "numpy", "data", "float", "tensor", "Tensor", "FloatTensor", "Variable"})
# Builtins whose result is a Python list or tuple: a re-wrap of one is what makes it a tensor.
_LIST_BUILDERS = frozenset({"sorted", "list", "tuple", "reversed"})
# Operands that need parentheses when they replace a call or attribute access.
_LOOSE = (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Comparison, cst.IfExp, cst.Lambda)
_TERM_MESSAGE = (
    "this loss term reaches the backward()-ed loss only through a detaching step: it adds a constant, "
    "its gradient is lost and what it measures is not trained"
)
_ADVERSARIAL_MESSAGE = (
    "a model's output is detached before the module that judges it, in a loss that trains that model "
    "by another term: the adversarial term sends the model no gradient"
)


class GraphBreakDetach(Rule):
    """
    ## What it does
    Flags `.item()`, `.detach()`, `.tolist()`, `.numpy()`, `.data`, `float(t)`
    and re-wrapping (`torch.tensor(loss, requires_grad=True)`,
    `Variable(loss, requires_grad=True)`) applied to a tensor that carries
    gradients, on its way into what a module's `forward()` or a
    `training_step()` returns, or into a tensor that is `.backward()`-ed
    (also `accelerator.backward(loss)`, `self.manual_backward(loss)`):

    - when every path by which a gradient could reach that value goes
      through such a step (also across NumPy: `np.clip(p.detach().numpy())`
      turned back with `torch.from_numpy`);
    - when a loss term reaches the back-propagated sum only through such a
      step (`adv = adv.item()`, then `loss = l1 + 0.1 * adv`): the sum still
      trains something, but not through that term;
    - when a model's output is detached before the module that judges it
      (`netD(fake.detach())`), in a loss that trains that model by another
      term (`+ l1(fake, real)`) and never through that module undetached,
      while the module also judges data the model did not make (a GAN
      generator step that copied the discriminator step's `detach()`).

    ## Why is this bad?
    Each of these steps gives a value without autograd history. When it is
    the only way from the parameters to the loss, `loss.backward()` either
    fails ("element 0 of tensors does not require grad") or, after a
    re-wrap with `requires_grad=True`, succeeds while every parameter's
    `.grad` stays `None`: the optimizer steps on nothing and the model does
    not train. A `forward()` that returns a detached value silently freezes
    everything before it. A loss term turned into a number only shifts the
    loss value: what it measures is never optimised. A generator whose
    adversarial term is cut learns from its other terms alone.

    ## Example
    ```python
    loss = criterion(model(x), y)
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()

    fake = netG(z)
    g_loss = mse(netD(fake.detach()), ones) + 100 * l1(fake, real)
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    loss.backward()

    g_loss = mse(netD(fake), ones) + 100 * l1(fake, real)
    ```

    ## Fix safety
    Unsafe: removing the step changes what is trained (that is the point),
    and the type of the value (`.item()`, `.tolist()`, `.numpy()` gave Python
    or NumPy values; code around it may rely on that). Chains such as
    `t.detach().cpu().numpy()` lose one step per pass. A line that only
    re-wraps a name into itself (`loss = torch.tensor(loss.item(),
    requires_grad=True)`, `adv = adv.detach().item()`) is deleted. No fix
    when the value then goes through NumPy (the code after it computes on
    arrays).

    Stop-gradients that are clearly intended stay silent: a value that still
    has another path to the parameters (a detached target in a loss), a
    straight-through estimator (`z + (z_q - z).detach()`, `hard -
    soft.detach() + soft`: a term of the sum holds what the step cuts),
    logging and metrics (values that reach neither a return of `forward` nor
    a backward call), a `forward` that hands back NumPy arrays (`np.asarray`
    of `.item()` scores: post-processing), a discriminator step (`netD(fake.detach())` in a loss
    that does not train the generator), a probe trained on detached features
    (the probe judges nothing else), scaling by a detached copy
    (`l1 / l1.detach()`), and detaching a value named `target`, `teacher`,
    `ema`, `momentum`, `frozen`, `sg`. Not seen: values passed through other
    functions or stored on `self`.
    """

    code = "TL302"
    name = "graph-break-detach"
    message = (
        "this detaching step is the only path from the parameters to the value that is returned "
        "from forward() or backward()-ed: the graph is cut and no parameter gets a gradient"
    )
    fix_applicability = Applicability.UNSAFE
    confidence_levels = (
        "`high` when the step is the only path to what is trained, or a loss term reaches it only through "
        "the step. `medium` for a model's output detached before the module that judges it: the analysis "
        "assumes that a module which also judges other data (the real samples) is a discriminator whose "
        "verdict should train the model."
    )
    triggers = ("backward", "forward", "training_step")

    @classmethod
    def prepass(cls, scan):
        # Sinks: a backward call, or the return of a function whose value the framework trains
        # (``forward``, ``training_step``) whose scope names a detaching step.
        def cuts_in_trained_return(region) -> bool:  # a step FunctionFlow.detaching_operand recognises
            return not region.scope_names.isdisjoint(TRAINED_BY_FRAMEWORK) and bool(
                not region.calls.isdisjoint(DETACHING_METHODS)
                or "data" in region.attributes
                or "float" in region.plain_calls
                or "Variable" in region.calls
                or not region.qualified_calls.isdisjoint(REWRAP_FUNCTIONS)
            )

        return (scan.regions_calling(BACKWARD_METHODS) | scan.regions_where(cuts_in_trained_return)) or None

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
        if not differentiates(self.context, node, grad=False):
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
        if function is None or function.name.value not in TRAINED_BY_FRAMEWORK:
            return
        flow = current_flow(self.context)
        # a forward() of a module with layers of its own; a training_step() of any module
        if flow is None or not (flow.class_attributes.modules or (flow.class_attributes.is_module and flow.name != "forward")):
            return
        for value, site in flow.returns:
            if value is node.value:
                # A forward that hands back NumPy arrays (``np.asarray`` of ``.item()`` scores) is
                # post-processing: those elements are not what a loss is computed from.
                if isinstance(value, cst.Tuple):
                    kept = [e for e in value.elements if not flow.is_array_value(e.value, site)]
                    if not kept:
                        continue
                    if len(kept) < len(value.elements):
                        value = value.with_changes(elements=kept)
                elif flow.is_array_value(value, site):
                    continue
                self._check_sink(flow, value, site)

    def _check_sink(self, flow: FunctionFlow, sink: cst.BaseExpression, site: Place) -> None:
        if not flow.carries_grad(sink, at=site):
            if not flow.carries_grad(sink, through_detach=True, at=site):
                return
            self._report_steps(flow, flow.detaching_steps(sink, site), sink, site)
            return
        # The sink trains something: a term of it may still reach it only through a cut.
        for term, where in flow.summands(sink, site):
            if flow.carries_grad(term, at=where) or not flow.carries_grad(term, through_detach=True, at=where):
                continue
            steps = flow.detaching_steps(term, where)
            if any(flow.is_loss_value(flow.detaching_operand(step), None) for step in steps):
                self._report_steps(flow, steps, sink, site, _TERM_MESSAGE)
        self._check_adversarial(flow, sink, site)

    def _report_steps(self, flow: FunctionFlow, steps, sink, site, message: Optional[str] = None, confidence=None) -> None:
        if not steps or any(self._intended(flow, step) for step in steps):
            return
        for step in steps:
            if id(step) not in self._reported:
                self._reported.add(id(step))
                # across NumPy the removed step would leave a tensor where an array was computed on
                fix = None if flow.crosses_arrays(step, sink, site) else self._fix(flow, step)
                if fix is not None:
                    # ``loss.requires_grad = True`` papered over the cut; on a value with history it raises
                    flags = tuple(Replacement(line, cst.RemoveFromParent()) for line in flow.flags_on_the_way(sink, site))
                    fix = FixSpec(fix.applicability, fix.message, fix.replacements + flags, fix.imports)
                self.report(step, message, fix=fix, confidence=confidence)

    def _check_adversarial(self, flow: FunctionFlow, sink: cst.BaseExpression, site: Place) -> None:
        """A GAN's generator step that feeds the discriminator ``fake.detach()``: the loss trains the
        generator by another term (an L1 to the target) but never through the discriminator."""
        for judge, step, where in flow.detached_inputs(sink, site):
            if is_loss_call(self.context, judge):
                continue  # a detached target of a loss (``mse(D(fake), fake.detach())``) is meant to be constant
            operand = flow.detaching_operand(step)
            made_by = {id(call) for call, _ in flow.nearest_forward_passes(operand, where)}
            if not made_by:
                continue
            callee = self.context.code(judge.func)
            judges = [call for call in flow.calls if self.context.code(call.func) == callee]
            direct = {id(call) for call, _ in flow.graph_roots(sink, site, opaque=frozenset(id(call) for call in judges))}
            if not made_by & direct:
                continue  # the loss does not train the model that made the value otherwise
            if any(self._passes_history(flow, call, made_by) for call in judges if call is not judge and id(call) in direct):
                continue  # the model gets the judge's verdict through an undetached call too
            if not any(self._judges_other_data(flow, call, made_by) for call in judges if call is not judge):
                continue  # a probe trained on detached features, not a discriminator
            self._report_steps(flow, [step], sink, site, _ADVERSARIAL_MESSAGE, Confidence.MEDIUM)

    @staticmethod
    def _passes_history(flow: FunctionFlow, call: cst.Call, made_by: Set[int]) -> bool:
        site = flow.sites.get(id(call))
        return site is not None and any(
            id(root) in made_by for arg in call.args for root, _ in flow.graph_roots(arg.value, site)
        )

    @staticmethod
    def _judges_other_data(flow: FunctionFlow, call: cst.Call, made_by: Set[int]) -> bool:
        """Whether ``call``'s first input is not made by the model (the real samples a discriminator sees)."""
        site = flow.sites.get(id(call))
        if site is None or not call.args or call.args[0].keyword is not None:
            return False
        first = call.args[0].value
        if flow.detaching_operand(first) is not None:
            first = flow.detaching_operand(first)
        return not any(id(root) in made_by for root, _ in flow.graph_roots(first, site))

    def _intended(self, flow: FunctionFlow, step: cst.BaseExpression) -> bool:
        operand = flow.detaching_operand(step)
        if operand is None:
            return False
        return bool(STOP_GRADIENT_NAME.search(self.context.code(operand))) or _straight_through(flow, step, operand)

    def _fix(self, flow: FunctionFlow, step: cst.BaseExpression) -> Optional[FixSpec]:
        operand = flow.detaching_operand(step)
        if operand is None:
            return None
        if isinstance(operand, cst.Call) and isinstance(operand.func, cst.Name) and operand.func.value in _LIST_BUILDERS:
            return None  # ``torch.tensor(sorted(scores))``: without the re-wrap the value is a Python list
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


def _straight_through(flow: FunctionFlow, step: cst.BaseExpression, operand: cst.BaseExpression) -> bool:
    """``z + (z_q - z).detach()`` (VQ), ``y_hard - y_soft.detach() + y_soft`` (Gumbel): the step is a
    term of a sum whose other terms hold a value the step cuts, so the gradient goes round it on purpose."""
    cut = read_names(operand)
    values = [b.value for bindings in flow.bindings.values() for b in bindings] + [v for v, _ in flow.returns]
    values += [call.tensor for call in flow.backward_calls]
    for value in values:
        terms = list(_additive_terms(value))
        if any(term is step for term in terms):
            others = set().union(*(read_names(term) for term in terms if term is not step))
            if cut & others:
                return True
    return False


def _additive_terms(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
        yield from _additive_terms(node.left)
        yield from _additive_terms(node.right)
    else:
        yield node

