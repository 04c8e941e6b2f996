"""Local autograd dataflow inside one function: which values carry gradients, and where they go.

Built on demand (``flow_for``) only when a rule has found its trigger in a
function, with one walk of that function's body; no LibCST scope metadata.
A ``FunctionFlow`` answers:

- ``carries_grad(expr)``: does the value come from a forward pass (a module
  call: ``self.fc(x)`` where ``__init__`` set ``self.fc = nn.Linear(...)``,
  ``nn.Linear(3, 1)(x)``, a callee named like a model: ``model(x)``,
  ``self.encoder(x)``, ``netG(z)``, ``G(z)``, a name the file calls
  ``.parameters()`` / ``.train()`` on, ``x.forward(...)``, in a module class
  an attribute the class never assigns (a LightningModule's ``self.d``); a
  method of such a module: ``D.compute_loss(x)``, ``head.loss(x, y)``), an
  ``nn.Parameter`` attribute, a leaf the code asked gradients for
  (``torch.zeros(3, requires_grad=True)``, ``x.requires_grad = True``,
  ``x.requires_grad_()``), or arithmetic, indexing, a field whose name says
  tensor (``out.logits``; not ``results[0].speed``), a tensor method or a
  ``torch.*`` / ``F.*`` function applied to such a value, or a loss
  (``criterion(out, y)``, a callee whose name says loss) of one?  Names are
  followed through their assignments in order (tuple unpacking, ``+=`` as
  ``x + ...``, ``for`` targets, both arms of an ``if``/``else``, the
  bindings that end a loop iteration).  ``.item()``, ``.detach()``,
  ``.tolist()``, ``.numpy()``, ``.data``, ``float(t)`` and re-wrapping with
  ``torch.tensor(t)`` / ``Variable(t)`` cut the graph; so does code under
  ``torch.no_grad()`` / ``torch.inference_mode()`` / ``set_grad_enabled(False)``
  or in a function decorated with them.  ``through_detach=True`` asks the same
  as if those steps kept the graph (values handed across NumPy included).
- ``carries_from_previous_iteration(expr, at, loop)`` and
  ``carries_from_parameters(expr, at, names)``: the same question restricted
  to history from one origin (a state an iteration hands to the next; what a
  caller passed in); module calls then pass on only their inputs' history, and
  a helper of the file (``def``) passes what its returns take from its
  parameters.
- ``list_elements(name)``: what a list receives by ``append``, ``extend``,
  ``insert``, ``+=``, a list display or a list comprehension, with whether
  that happens under ``no_grad``.
- ``detaching_steps(expr)``: the graph-cutting steps on the paths by which a
  gradient would otherwise reach ``expr``; ``summands(expr)``: the terms it
  adds up; ``is_loss_value(expr)``; ``detached_inputs(expr)``: forward passes
  on its paths handed a detached value (``netD(fake.detach())``).
- ``backward_calls``: ``t.backward()``, ``accelerator.backward(loss)``,
  ``self.manual_backward(loss)``, ``torch.autograd.backward(t)`` and
  ``torch.autograd.grad(t, ...)`` with their order, enclosing loops and
  branches, and whether they free the graph; ``step_calls``: optimizer steps,
  and ``step_updates(step, module)``: whether one updates a module's
  parameters (from the optimizer's construction, else from paired names),
  ``zeroes(receiver, at, module)`` the same for ``receiver.zero_grad()``;
  ``optimizer_modules``, ``parameter_owners`` and ``bound_values`` read the
  constructions behind them;
  ``leaves_after(a, b)``: a ``break``/``continue``/``return``/``raise``
  between two statements; ``lone_statements`` tells which calls (and
  one-line assignment values) are a whole statement line, and in which
  block, and ``removable_lines`` which of those lines can go without
  emptying their block, for fixes that delete or merge lines.
- ``graph_roots(expr)``: the forward passes a value was computed from, for
  "two losses share one forward pass"; ``nearest_forward_passes(expr)``: the
  ones that made it directly; ``flows_into(sink)``: every expression whose
  value reaches ``sink``.
- ``element_shape(expr)``: "scalar" (0-d: a full reduction, a loss with a
  reducing ``reduction``), "one" (shape ``(1,)``: ``.view(1)``,
  ``.reshape(-1)``, ``.flatten()`` of a one-element tensor) or None.

Beside it: the words it reads code with (autograd_terms.py), which names hold
modules and where the visited node runs (module_evidence.py: ``module_attributes``,
``evidenced_modules``, ``in_no_grad_region``, ``in_debug_condition``,
``is_test_path``), and the records of a walk (flow_events.py: ``Place``,
``FlowBinding``, ``BackwardCall``, ``StepCall``).  Here: ``differentiates`` (a call
is a backward call), ``flow_for``, ``built_flows``, ``current_flow``.

What it does not see: values passed between functions except as said above (a
parameter of the function carries nothing; a helper's return value carries
only if its name says loss); containers other than lists held in plain names
(``self.preds.append``, dicts); aliasing (``a = b`` then ``a.append``);
modules stored in containers other than ``self.x[i]``; callees whose names
say neither model nor loss (``self.backbone_fn(x)`` when the class assigns
it). Top-level code of a script is analysed as one more function
(``current_flow`` outside any def).

Why not ``analysis.bindings``: that module answers "which assignment reaches
this use" for the node being visited, from the ancestor chain; the questions
here are about every statement of a function (all feeds of a list, all
backward calls and their order), so one pre-order walk of the body serves them.
"""
from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING, AbstractSet, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.flow.autograd_terms import (
    ACROSS_ARRAYS,
    ARRAY_LIBRARIES,
    ARRAY_PASSING_FUNCTIONS,
    AUTOGRAD_GRAD,
    BACKWARD_METHODS,
    DETACHING_METHODS,
    FLAT_ONE_METHODS,
    NON_DIFFERENTIABLE_ATTRIBUTES,
    NON_DIFFERENTIABLE_FUNCTIONS,
    NON_DIFFERENTIABLE_METHODS,
    NON_FORWARD_MODULE_METHODS,
    NON_MODULE_SELF_ATTRIBUTES,
    OPTIMIZER_NAME,
    PARAMETER_CLASSES,
    REDUCTION_METHODS,
    REWRAP_FUNCTIONS,
    SCHEDULER_NAME,
    TENSOR_FIELD,
    VALUE_PASSING_BUILTINS,
)
from torchlint.analysis.flow.module_evidence import (
    constructed_kind,
    evidenced_modules,
    is_nn_class,
    last_name,
    looks_like_loss,
    looks_like_model,
    module_classes,
    truthy_literal,
)
from torchlint.analysis.flow.flow_walk import (
    FunctionWalk,
    requests_grad,
)
from torchlint.analysis.flow.flow_events import (
    BackwardCall,
    FlowBinding,
    Origin,
    Place,
    StepCall,
)
from torchlint.analysis.model import conventions
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


# -- one function's flow -----------------------------------------------------------------------


class FunctionFlow(FunctionWalk):
    """The flow of one function body, or of the module's top-level statements (a script)."""

    # -- questions -----------------------------------------------------------------

    def is_module_call(self, call: cst.Call) -> bool:
        """A forward pass: ``self.fc(x)``, ``self.blocks[i](x)``, ``model(x)``, ``nn.Linear(3, 1)(x)``,
        ``D(x)`` where the file calls ``D.parameters()``, ``self.enc.forward(x)``."""
        func = call.func
        if isinstance(func, cst.Subscript):
            func = func.value
        if isinstance(func, cst.Call):
            qualified = self.context.qualified_name(func.func)
            return qualified is not None and is_nn_class(qualified)
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":  # not a loss's own forward
            return self.context.qualified_name(func) is None and not looks_like_loss(last_name(func.value) or "")
        return self.is_module_object(func)

    def is_module_object(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` (a name or attribute, not a call) holds a module (see :meth:`is_module_call`).

        In a method of a module class, ``self.x`` that the class never assigns nor defines is a
        submodule its base class or a builder set (``self.d`` in a LightningModule)."""
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            attr = node.attr.value
            attributes = self.class_attributes
            if attr in attributes.modules or f"self.{attr}" in evidenced_modules(self.context):
                return True
            if attr in attributes.other or attr in attributes.parameters or attr in attributes.methods:
                return False
            if looks_like_model(attr):
                return True
            return (
                attributes.is_module
                and not attr.startswith("_")
                and not looks_like_loss(attr)
                and attr not in NON_MODULE_SELF_ATTRIBUTES
            )
        if isinstance(node, cst.Name):
            if self.context.qualified_name(node) is not None:
                return False
            if not self.bindings.get(node.value) and self._own_function(node.value) is not None:
                return False  # a function the file defines: a call of it runs its body, read as such, whatever its name
            for binding in self.bindings.get(node.value, ()):
                if constructed_kind(self.context, binding.value, module_classes(self.context)) == "module":
                    return True
            return (
                looks_like_model(node.value)
                or node.value in evidenced_modules(self.context)
                or self._trained_parameter(node.value)
            )
        if isinstance(node, cst.Attribute):  # self.model.encoder(x), trainer.model(x)
            return looks_like_model(node.attr.value) and self.context.qualified_name(node) is None
        return False

    def _trained_parameter(self, name: str) -> bool:
        """The one parameter called in a body that back-propagates and steps an optimizer (never rebound):
        what the step trains has to run somewhere, and the only callable handed in is where it can.  A
        parameter whose call makes what is back-propagated (``loss = criterion(model(x), y)``) computes the
        loss from the module's output and is not counted.  With two left (a model and a frozen teacher)
        nothing tells which one is trained."""
        return name == self._only_called_parameter()

    def _only_called_parameter(self) -> Optional[str]:
        def compute() -> Optional[str]:
            if not self.step_calls or not any(b.kind == "backward" for b in self.backward_calls):
                return None
            called = set(self._called_parameters())
            if len(called) > 1:
                called -= self._parameters_making_the_loss()
            return next(iter(called)) if len(called) == 1 else None

        return self.context.memoized("gradflow.only-called-parameter", self.function, lambda _: compute())

    def _called_parameters(self) -> FrozenSet[str]:
        """The function's parameters (never rebound in it) that it calls."""
        parameters = {name for name in self._parameter_names() if not self.bindings.get(name)}
        return frozenset(call.func.value for call in self.calls if isinstance(call.func, cst.Name) and call.func.value in parameters)

    def _parameters_making_the_loss(self) -> FrozenSet[str]:
        """Called parameters that compute what a backward call differentiates from another called
        parameter's output (``loss = criterion(model(x), y)``, or ``out = model(x)`` then
        ``criterion(out, y)``): the outermost call of a parameter in the differentiated value, or in a value
        bound to that name in this body, every call of which holds such an output among its arguments.
        What they return is back-propagated, so it carries what they are given."""

        def calls_of(node: cst.CSTNode, names: AbstractSet[str]) -> Iterator[cst.Call]:
            """The outermost calls of ``names`` in ``node``."""
            stack = [node]
            while stack:
                current = stack.pop()
                if isinstance(current, cst.Call) and isinstance(current.func, cst.Name) and current.func.value in names:
                    yield current
                    continue
                stack.extend(child for child in current.children if isinstance(child, cst.CSTNode))

        def bound_values(name: str) -> List[cst.BaseExpression]:
            return [b.value for b in self.bindings.get(name, ()) if b.value is not None]

        def takes_an_output_of(call: cst.Call, others: AbstractSet[str]) -> bool:
            """An argument holds a call of ``others``, or is a name bound in the body to a value that does."""
            for arg in call.args:
                values = [arg.value] + (bound_values(arg.value.value) if isinstance(arg.value, cst.Name) else [])
                if any(next(calls_of(value, others), None) is not None for value in values):
                    return True
            return False

        def compute() -> FrozenSet[str]:
            called = self._called_parameters()
            candidates: Set[str] = set()
            for backward in self.backward_calls:
                values = [backward.tensor]
                if isinstance(backward.tensor, cst.Name):
                    values += bound_values(backward.tensor.value)
                for value in values:
                    candidates.update(call.func.value for call in calls_of(value, called))
            # A module is also called on data alone (a discriminator on the real samples); a loss never is.
            return frozenset(
                name
                for name in candidates
                if all(
                    takes_an_output_of(call, called - {name})
                    for call in self.calls
                    if isinstance(call.func, cst.Name) and call.func.value == name
                )
            )

        return self.context.memoized("gradflow.loss-making-parameters", self.function, lambda _: compute())

    def is_forward_pass(self, call: cst.Call) -> bool:
        """A module call, or a method of a module that computes with its parameters (``D.compute_loss(x)``)."""
        if self.is_module_call(call):
            return True
        func = call.func
        return isinstance(func, cst.Attribute) and (
            (_runs_the_module(func.attr.value) and self.is_module_object(func.value)) or self._loss_of_an_object(func)
        )

    def _cuts_history(self, call: cst.Call) -> bool:
        """A call of a helper of this file that hands back nothing of what it is given (``repackage(h)``)."""
        func = call.func
        helper = None
        if isinstance(func, cst.Name):
            helper = self._own_function(func.value)
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            helper = self._own_function(func.attr.value, method=True)
            return helper is not None and not _passes_history(self.context, helper, self.class_def)
        return helper is not None and not _passes_history(self.context, helper)

    def _own_function(self, name: str, method: bool = False) -> Optional[cst.FunctionDef]:
        """The ``def`` of this file a call of ``name`` runs: a function nested in this one, one at the
        module's top level (not shadowed here), or (``method``) a method of this class."""
        if method:
            if self.class_def is None:
                return None
            body = self.class_def.body.body
        else:
            if name in self.nested_defs:
                return self.nested_defs[name]
            if name in self.bindings:
                return None
            body = self.context.module.body
        for statement in body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == name and not statement.decorators:
                return statement
        return None

    def _loss_of_an_object(self, func: cst.Attribute) -> bool:
        """``head.loss(x, y)``, ``D.compute_loss(real, fake)``: a loss an object computes, with what it
        holds (a model head's weights); not a loss object's own method (``criterion.loss(...)``)."""
        receiver = func.value
        return (
            looks_like_loss(func.attr.value)
            and isinstance(receiver, (cst.Name, cst.Attribute))
            and not (isinstance(receiver, cst.Name) and receiver.value in ("self", "super"))
            and not looks_like_loss(last_name(receiver) or "")
            and self.context.qualified_name(receiver) is None
        )

    def module_constructor(self, call: cst.Call) -> Optional[cst.Call]:
        func = call.func
        if isinstance(func, cst.Call):
            return func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            return self.class_attributes.modules.get(func.attr.value)
        if isinstance(func, cst.Name):
            for binding in self.bindings.get(func.value, ()):
                if isinstance(binding.value, cst.Call):
                    return binding.value
        return None

    def carries_grad(self, expr: cst.BaseExpression, through_detach: bool = False, at: Optional[Place] = None) -> bool:
        """Whether ``expr``, evaluated at ``at`` (any point when None), carries an autograd history.

        ``through_detach=True`` pretends the detaching steps keep the graph: the
        difference between the two answers is what those steps cut.
        """
        if self.no_grad_function:
            return False
        return self._carries_expr(expr, through_detach, at, set(), None)

    def carries_from_previous_iteration(self, expr: cst.BaseExpression, at: Place, loop: cst.CSTNode) -> bool:
        """Whether ``expr`` at ``at`` carries history that an earlier iteration of ``loop``, one that ran
        ``at`` too, built and handed on (``out, h = rnn(x, h)`` with no ``h = h.detach()`` before the
        loop comes round)."""
        if self.no_grad_function:
            return False
        return self._carries_expr(expr, False, at, set(), Origin(loop=loop, given=at))

    def carries_from_parameters(self, expr: cst.BaseExpression, at: Place, parameters: FrozenSet[str]) -> bool:
        """Whether ``expr`` at ``at`` carries the history of what a caller passed in ``parameters``."""
        if self.no_grad_function or not parameters:
            return False
        return self._carries_expr(expr, False, at, set(), Origin(parameters=parameters))

    def _carries_expr(
        self, expr: cst.BaseExpression, through: int, at: Optional[Place], visiting: Set, origin: Optional[Origin]
    ) -> bool:
        key = (id(expr), through, at.order if at is not None else None, origin.key if origin is not None else None)
        known = self._carries.get(key)
        if known is not None and known[0] is expr:
            return known[1]
        result = self._compute(expr, through, at, visiting, origin)
        self._carries[key] = (expr, result)  # the node is kept so that its id is not reused
        return result

    def reaching(self, name: str, at: Optional[Place]) -> List[FlowBinding]:
        """The bindings of ``name`` that may give its value at ``at`` (all of them when ``at`` is None).

        Walks back from ``at``: an earlier binding in the same or an enclosing
        branch ends the walk; one in another branch does not. In a loop, when no
        binding inside the loop precedes the use, the bindings that end an
        iteration reach it from the previous one: walking back from the loop's
        end, up to and including the first one made in every iteration.
        """
        bindings = self.bindings.get(name, [])
        if at is None:
            return list(bindings)
        inner = [b for b in bindings if b.comprehension and b.site.order == at.order]
        if inner:
            return inner  # ``sum(v for v in values)``: the comprehension's own ``v``
        found: List[FlowBinding] = []
        killed_in_loop = False
        for binding in sorted((b for b in bindings if b.site.order < at.order), key=lambda b: -b.site.order):
            found.append(binding)
            if at.branches[: len(binding.site.branches)] == binding.site.branches or self._covers(found, binding, at):
                killed_in_loop = bool(at.loops) and at.loops[-1] in binding.site.loops
                break
        if at.loops and not killed_in_loop:
            loop = at.loops[-1]
            header = self.loop_sites.get(id(loop))
            for binding in sorted((b for b in bindings if loop in b.site.loops), key=lambda b: -b.site.order):
                if binding.site.order < at.order:
                    break
                found.append(binding)
                if header is not None and binding.site.loops[-1] is loop and binding.site.branches == header.branches:
                    break  # made in every iteration: nothing bound before it in the body gets round
        return found

    def _covers(self, found: List[FlowBinding], binding: FlowBinding, at: Place) -> bool:
        """Whether the bindings found so far bind the name on every path through the ``if`` that
        ``binding`` sits in, off ``at``'s path (``if c: x = a`` / ``else: x = b``)."""
        branches = binding.site.branches
        depth = 0
        while depth < len(branches) and depth < len(at.branches) and branches[depth] == at.branches[depth]:
            depth += 1
        if depth >= len(branches):
            return False
        key = branches[depth][0]
        loops = binding.site.loops
        group = [
            b.site.branches
            for b in found
            if len(b.site.branches) > depth
            and b.site.branches[:depth] == branches[:depth]
            and b.site.branches[depth][0] == key
            and at.loops[: len(b.site.loops)] == b.site.loops
        ]
        return at.loops[: len(loops)] == loops and self._covered(group, depth, binding.name)

    def _covered(self, paths: List[Tuple[Tuple[int, str], ...]], depth: int, name: str) -> bool:
        if any(len(path) == depth for path in paths):
            return True
        for key in {path[depth][0] for path in paths}:
            body = [path for path in paths if path[depth] == (key, "body")]
            if key not in self.ifs_with_else:
                # ``if h is not None: h = h.detach()``: the value that skips the body is ``None``
                if body and _tests_not_none(self.if_tests.get(key), name) and self._covered(body, depth + 1, name):
                    return True
                continue
            other = [path for path in paths if path[depth] == (key, "else")]
            if body and other and self._covered(body, depth + 1, name) and self._covered(other, depth + 1, name):
                return True
        return False

    def from_previous_iteration(self, binding: FlowBinding, at: Place, loop: cst.CSTNode) -> bool:
        """Whether ``binding``, reaching a use at ``at``, was made by the previous iteration of ``loop``: it
        stands at or after ``at`` in the loop, and no binding of the name that every iteration makes before
        ``at`` (``entropy = 0`` at the top of the body) starts the iteration afresh.  A binding that reaches
        ``at`` round an inner loop's back edge only (``entropy += ...`` in the steps of one rollout) is
        that iteration's own."""
        if binding.comprehension or binding.site.order < at.order or loop not in binding.site.loops:
            return False
        if self._first_iteration_unbound(binding.name, at, loop):
            return False
        return not any(
            earlier.site.order < at.order
            and self._starts_every_iteration(earlier, loop, at)
            and not earlier.element
            and not _reads_name(earlier.value, earlier.name)
            for earlier in self.bindings.get(binding.name, ())
        )

    def _first_iteration_unbound(self, name: str, at: Place, loop: cst.CSTNode) -> bool:
        """An iteration of ``loop`` that reaches ``at`` with the previous iteration's ``name`` skipped every
        binding of it before ``at`` that does not read it; when each of them is skipped only by ``if`` tests
        that read nothing the loop changes, the first iteration skipped them too, and there ``name`` was
        unbound (nothing binds it before the loop, it is no parameter): that path never runs
        (``if mode == "a": loss = ...`` / ``elif mode == "b": loss = ...``, then ``loss.backward()``)."""
        header = self.loop_sites.get(id(loop))
        if header is None or name in self._parameter_names():
            return False
        bindings = self.bindings.get(name, ())
        if any(b.site.order < header.order or loop not in b.site.loops for b in bindings if b.site.order < at.order):
            return False
        changed = self._names_bound_in(loop)
        for earlier in bindings:
            if earlier.site.order >= at.order or earlier.element or _reads_name(earlier.value, name):
                continue
            if at.loops[: len(earlier.site.loops)] != earlier.site.loops:
                return False  # in an inner loop that may run no time
            for key, branch in earlier.site.branches[len(header.branches):]:
                test = self.if_tests.get(key)
                if test is None or not _invariant_test(test, changed):
                    return False
        return True

    def _parameter_names(self) -> FrozenSet[str]:
        if not isinstance(self.function, cst.FunctionDef):
            return frozenset()
        params = self.function.params
        names = [p.name.value for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params)]
        names += [star.name.value for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)]
        return frozenset(names)

    def _names_bound_in(self, loop: cst.CSTNode) -> FrozenSet[str]:
        return frozenset(name for name, bound in self.bindings.items() if any(loop in b.site.loops for b in bound))

    def _starts_every_iteration(self, earlier: FlowBinding, loop: cst.CSTNode, at: Place) -> bool:
        """``earlier`` runs on no condition in the body of a loop that holds ``at`` and is ``loop`` or lies
        inside it: every pass of ``loop`` that reaches ``at`` made it first (``loss = 0`` at the top of the
        batch loop, inside the epoch loop)."""
        if not earlier.site.loops or loop not in earlier.site.loops:
            return False
        inner = earlier.site.loops[-1]
        header = self.loop_sites.get(id(inner))
        return header is not None and inner in at.loops and earlier.site.branches == header.branches

    def ends_iteration(self, binding: FlowBinding, loop: cst.CSTNode, given: Optional[Place]) -> bool:
        """Whether ``binding`` gets round ``loop``'s back edge in an iteration that ran ``given``: no
        binding of the name comes after it in the body whenever ``given`` ran."""
        header = self.loop_sites.get(id(loop))
        for later in self.bindings.get(binding.name, ()):
            if later.site.order <= binding.site.order or loop not in later.site.loops or later.site.loops[-1] is not loop:
                continue
            if header is not None and later.site.branches == header.branches:
                return False
            if given is not None and later.site.order > given.order and given.branches[: len(later.site.branches)] == later.site.branches:
                return False
        return True

    def runs_after(self, first: Place, then: Place) -> bool:
        """Whether one pass can run ``then`` after ``first`` (``first`` precedes it in the code): not in
        two arms of one ``if``, no jump between, in the same loops or one nested in the other's."""
        if first.order >= then.order or first.exclusive_with(then) or self.leaves_after(first, then):
            return False
        shorter = min(len(first.loops), len(then.loops))
        return first.loops[:shorter] == then.loops[:shorter]

    def freeing_call(self, passes: Set[int], until: Place) -> Optional[BackwardCall]:
        """The latest backward call that runs before ``until`` and freed the graph of one of the forward
        passes ``passes`` (call ids), run before it."""
        for call in sorted(self.backward_calls, key=lambda c: -c.site.order):
            if not call.frees_graph or not self.runs_after(call.site, until):
                continue
            if any(id(root) in passes and site.order < call.site.order for root, site in self.graph_roots(call.tensor, call.site)):
                return call
        return None

    def leaves_after(self, first: Place, then: Place) -> bool:
        """Whether a pass that runs ``first`` cannot go on to ``then``: a ``break`` or ``continue`` of a
        loop around ``then``, a ``return`` or a ``raise`` comes after ``first``, on its path, before ``then``."""
        for kind, site in self.jumps:
            if not first.order < site.order < then.order:
                continue
            if first.branches[: len(site.branches)] != site.branches or first.loops[: len(site.loops)] != site.loops:
                continue  # in a branch or a loop ``first`` need not run through
            if kind in ("return", "raise") or (site.loops and site.loops[-1] in then.loops):
                return True
        return False

    def _compute(
        self, expr: cst.BaseExpression, through: int, at: Optional[Place], visiting: Set, origin: Optional[Origin]
    ) -> bool:
        step = self.detaching_operand(expr)
        if step is not None:
            operand_carries = self._carries_expr(step, ACROSS_ARRAYS, at, visiting, origin)
            # ``torch.tensor(0.5, requires_grad=True)`` is a new leaf; over a value with history, a cut
            new_leaf = origin is None and isinstance(expr, cst.Call) and requests_grad(expr)
            if through:
                return operand_carries or new_leaf
            return new_leaf and not operand_carries
        if isinstance(expr, cst.Name):
            return self._name_carries(expr.value, through, at, visiting, origin)
        if isinstance(expr, cst.Call):
            return self._call_carries(expr, through, at, visiting, origin)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NON_DIFFERENTIABLE_ATTRIBUTES:
                return False
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return origin is None and expr.attr.value in self.class_attributes.parameters
            # Only fields that name tensors (``out.logits``); ``results[0].speed`` is a dict of timings.
            return bool(TENSOR_FIELD.search(expr.attr.value)) and self._carries_expr(expr.value, through, at, visiting, origin)
        if isinstance(expr, cst.Subscript):
            return self._carries_expr(expr.value, through, at, visiting, origin)
        if isinstance(expr, cst.BinaryOperation):
            return self._carries_expr(expr.left, through, at, visiting, origin) or self._carries_expr(
                expr.right, through, at, visiting, origin
            )
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self._carries_expr(expr.expression, through, at, visiting, origin)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return any(self._carries_expr(e.value, through, at, visiting, origin) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(e, cst.DictElement) and self._carries_expr(e.value, through, at, visiting, origin)
                for e in expr.elements
            )
        if isinstance(expr, cst.IfExp):
            return self._carries_expr(expr.body, through, at, visiting, origin) or self._carries_expr(
                expr.orelse, through, at, visiting, origin
            )
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self._carries_expr(expr.elt, through, at, visiting, origin)
        return False

    def _name_carries(self, name: str, through: int, at: Optional[Place], visiting: Set, origin: Optional[Origin]) -> bool:
        # Memoised per (name, point); a name met again while it is being answered (a loop
        # carried dependency) counts as not carrying until its answer is known.
        key = (name, through, at.order if at is not None else None, origin.key if origin is not None else None)
        if key in self._names:
            return self._names[key]
        self._names[key] = False
        result = self._name_value_carries(name, through, at, visiting, origin)
        self._names[key] = result
        return result

    def _name_value_carries(self, name: str, through: int, at: Optional[Place], visiting: Set, origin: Optional[Origin]) -> bool:
        reaching = self.reaching(name, at)
        if origin is not None and origin.parameters and at is not None and not reaching and name in origin.parameters:
            return True
        for binding in reaching:
            if binding.site.no_grad:
                continue
            if binding.leaf:
                if origin is not None:
                    continue
                before = self._carries_expr(binding.value, True, binding.site if at is not None else None, visiting, None)
                if through or not before:
                    return True
                continue
            where = binding.site if at is not None else None
            if origin is not None and origin.loop is not None and at is not None and self.from_previous_iteration(binding, at, origin.loop):
                if self.ends_iteration(binding, origin.loop, origin.given) and self._carries_expr(
                    binding.value, through, where, visiting, None
                ):
                    return True
                continue
            if self._carries_expr(binding.value, through, where, visiting, origin):
                return True
        # A list holds what it was fed: ``outs[0]``, ``for o in outs``.
        for element, site in self.list_elements(name):
            if at is not None and site.order >= at.order and not (at.loops and at.loops[-1] in site.loops):
                continue
            if not site.no_grad and self._carries_expr(element, through, site if at is not None else None, visiting, origin):
                return True
        return False

    def _call_carries(self, call: cst.Call, through: int, at: Optional[Place], visiting: Set, origin: Optional[Origin]) -> bool:
        if self.sites.get(id(call)) is not None and self.sites[id(call)].no_grad:
            return False
        func = call.func
        qualified = self.context.qualified_name(func)
        args = [a.value for a in call.args]

        def any_arg(mode: int = through) -> bool:
            return any(self._carries_expr(a, mode, at, visiting, origin) for a in args)

        if qualified is not None:
            if qualified in PARAMETER_CLASSES:
                return origin is None or any_arg()
            # Through a cut, values that come back into torch (``torch.from_numpy(np.clip(a))``,
            # ``torch.tensor(preds)`` over ``.item()`` values) bring what was cut before them; NumPy
            # passes values on only on such a way back (an array returned as such is no tensor).
            if through and (qualified in ARRAY_PASSING_FUNCTIONS or (qualified in REWRAP_FUNCTIONS and args and isinstance(args[0], cst.Name))):
                return any_arg(ACROSS_ARRAYS)
            if through == ACROSS_ARRAYS and qualified.startswith(ARRAY_LIBRARIES):
                return any_arg()
            if qualified in NON_DIFFERENTIABLE_FUNCTIONS or qualified in REWRAP_FUNCTIONS:
                return False
            if qualified in AUTOGRAD_GRAD:  # gradients have a history only when asked to (gradient penalties)
                create = keyword_arg(call, "create_graph")
                return create is not None and truthy_literal(create.value) is not False and any_arg()
            if qualified.startswith("torch.") or qualified.startswith("einops."):
                if is_nn_class(qualified):
                    return False  # constructing a layer
                if origin is None and requests_grad(call):
                    return True  # ``torch.zeros(3, requires_grad=True)``: a leaf
                return any_arg()
            return False  # numpy, math, other libraries
        if self.is_module_call(call):
            constructor = self.module_constructor(call)
            if origin is not None or (constructor is not None and _passes_inputs_only(self.context, constructor)):
                return any_arg()
            return True
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if isinstance(receiver, cst.Name) and receiver.value in ("self", "super"):
                if origin is not None and method in self.class_attributes.methods:
                    helper = self._own_function(method, method=True)
                    return helper is not None and _passes_history(self.context, helper, self.class_def) and any_arg()
                return looks_like_loss(method) and any_arg()
            if method == "requires_grad_":
                if origin is None and requests_grad(call):
                    return True
                return self._carries_expr(receiver, through, at, visiting, origin)
            if method in NON_DIFFERENTIABLE_METHODS:
                return False
            if _runs_the_module(method) and self.is_module_object(receiver):
                return origin is None or any_arg()  # ``D.compute_loss(x)``: the module's parameters
            if self._carries_expr(receiver, through, at, visiting, origin):
                return True
            if self._loss_of_an_object(func):
                return origin is None or any_arg()
            if method == "forward":  # ``loss_fn.forward(out, y)``
                return any_arg()
            # x.matmul(w), loss_fn.forward(out, y)
            return (looks_like_loss(method) or _is_tensor_method_with_tensor_args(method)) and any_arg()
        if isinstance(func, cst.Name):
            if func.value in ("len", "print", "str", "repr", "isinstance", "range", "enumerate", "zip", "int", "bool", "round"):
                return False
            if func.value in VALUE_PASSING_BUILTINS and self.context.qualified_name(func) is None:
                return any_arg()  # ``sum(losses)``, ``sorted(scores)``
            if looks_like_loss(func.value) or func.value in self._parameters_making_the_loss():
                return any_arg()
            if origin is not None:
                helper = self._own_function(func.value)
                return helper is not None and _passes_history(self.context, helper) and any_arg()
        return False

    def detaching_operand(self, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """``t`` for a graph-cutting step on ``t``: ``t.detach()``, ``t.item()``, ``t.tolist()``,
        ``t.numpy()``, ``t.data``, ``float(t)``, ``torch.tensor(t, ...)``, ``Variable(t, ...)``."""
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            if not (isinstance(expr.value, cst.Name) and expr.value.value == "self"):
                return expr.value
            return None
        if not isinstance(expr, cst.Call) or has_star_args(expr):
            return None
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in DETACHING_METHODS and not expr.args:
            if self.context.qualified_name(func.value) is None:
                return func.value
            return None
        if isinstance(func, cst.Name) and func.value == "float" and self.context.qualified_name(func) is None:
            if len(expr.args) == 1 and not expr.args[0].keyword:
                return expr.args[0].value
            return None
        qualified = self.context.qualified_name(func)
        if qualified in REWRAP_FUNCTIONS or (qualified or "").endswith(".Variable"):
            first = argument(expr, 0, "data")
            if first is None or isinstance(first.value, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
                return None
            if isinstance(first.value, cst.Name) and first.value.value in self.list_feeds:
                return None  # a list of tensors: graph-break-tensor-from-list's case
            return first.value
        return None

    def detaching_steps(self, expr: cst.BaseExpression, at: Optional[Place] = None) -> List[cst.BaseExpression]:
        """The graph-cutting steps through which a gradient would otherwise reach ``expr`` (at ``at``)."""
        found: List[cst.BaseExpression] = []
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Optional[Place]) -> None:
            key = (id(node), where.order if where is not None else None)
            if key in seen:
                return
            seen.add(key)
            operand = self.detaching_operand(node)
            if operand is not None:
                if self.carries_grad(operand, through_detach=True, at=where):
                    found.append(node)
                    walk(operand, where)  # an earlier step on the same path is reported too
                return
            if isinstance(node, cst.Name):
                for binding in self.reaching(node.value, where):
                    if not binding.site.no_grad:
                        walk(binding.value, binding.site if where is not None else None)
                for element, site in self.list_elements(node.value):  # ``preds.append(out.item())``
                    if not site.no_grad and (where is None or site.order < where.order or (where.loops and where.loops[-1] in site.loops)):
                        walk(element, site if where is not None else None)
                return
            for child in _dataflow_operands(node):
                walk(child, where)

        walk(expr, at)
        return found

    def _walk_graph(
        self,
        expr: cst.BaseExpression,
        at: Optional[Place],
        visit_node: Callable[[cst.BaseExpression, Optional[Place]], Optional[Sequence[cst.BaseExpression]]],
        fresh: Optional[Callable[[cst.Name, Place], bool]] = None,
    ) -> None:
        """Walk back over the values ``expr`` at ``at`` is computed from: names through the bindings that
        reach them (none made under ``no_grad``), never past a detaching step, each node once per site.
        ``visit_node(node, site)`` returns the sub-expressions to go on with (None: all its operands);
        ``fresh(name, site)`` stops the walk at a name."""
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Optional[Place]) -> None:
            key = (id(node), where.order if where is not None else None)
            if key in seen:
                return
            seen.add(key)
            if self.detaching_operand(node) is not None:
                return
            if isinstance(node, cst.Name):
                if fresh is not None and where is not None and fresh(node, where):
                    return
                for binding in self.reaching(node.value, where):
                    if not binding.site.no_grad:
                        walk(binding.value, binding.site if where is not None else None)
                return
            children = visit_node(node, where)
            for child in _dataflow_operands(node) if children is None else children:
                walk(child, where)

        walk(expr, at)

    def graph_roots(
        self,
        expr: cst.BaseExpression,
        at: Optional[Place] = None,
        opaque: FrozenSet[int] = frozenset(),
        fresh: Optional[Callable[[cst.Name, Place], bool]] = None,
    ) -> List[Tuple[cst.Call, Place]]:
        """The forward passes (module calls, with their sites) ``expr`` at ``at`` was computed from, ordered;
        the inputs of the calls whose ids are in ``opaque`` are not followed, nor the names read where
        ``fresh(name, site)`` says."""
        roots: Dict[int, Tuple[cst.Call, Place]] = {}

        def visit_node(node: cst.BaseExpression, where: Optional[Place]) -> Optional[Sequence[cst.BaseExpression]]:
            if not isinstance(node, cst.Call):
                return None
            if self._cuts_history(node):
                return ()
            if not self.is_forward_pass(node):
                return None
            site = self.sites.get(id(node))
            constructor = self.module_constructor(node)
            if site is not None and not site.no_grad and not (constructor is not None and _passes_inputs_only(self.context, constructor)):
                roots[id(node)] = (node, site)
            if id(node) in opaque:
                return ()
            if isinstance(node.func, cst.Attribute) and id(node) in roots and not self.is_module_call(node) and self.is_module_object(node.func.value):
                return [arg.value for arg in node.args]  # ``model.loss(x)``: the receiver is the module, not a value computed
            return None

        self._walk_graph(expr, at, visit_node, fresh)
        return sorted(roots.values(), key=lambda pair: pair[1].order)

    def summands(self, expr: cst.BaseExpression, at: Place) -> List[Tuple[cst.BaseExpression, Place]]:
        """The terms ``expr`` at ``at`` adds up (``a + b - c``, through names, ``+=`` and every binding
        that may reach), each with the site it is evaluated at; a term is anything but ``+``/``-``."""
        terms: List[Tuple[cst.BaseExpression, Place]] = []
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Place) -> None:
            key = (id(node), where.order)
            if key in seen:
                return
            seen.add(key)
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
                walk(node.left, where)
                walk(node.right, where)
            elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
                walk(node.expression, where)
            elif isinstance(node, cst.Name) and self.reaching(node.value, where):
                for binding in self.reaching(node.value, where):
                    if not binding.site.no_grad and not binding.element and not binding.leaf:
                        walk(binding.value, binding.site)
            else:
                terms.append((node, where))

        walk(expr, at)
        return terms

    def is_loss_value(self, expr: cst.BaseExpression, at: Optional[Place]) -> bool:
        """Whether ``expr`` is a loss: named so, or computed by a loss (``criterion(...)``,
        ``F.mse_loss(...)``, ``self.adv_loss(...)``, an ``nn.*Loss`` module) from what it holds."""
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Optional[Place], depth: int) -> bool:
            key = (id(node), where.order if where is not None else None)
            if key in seen or depth > 12:
                return False
            seen.add(key)
            if isinstance(node, cst.Name):
                if looks_like_loss(node.value):
                    return True
                return any(
                    walk(b.value, b.site if where is not None else None, depth + 1) for b in self.reaching(node.value, where)
                )
            if isinstance(node, cst.Attribute) and looks_like_loss(node.attr.value):
                return True  # ``outputs.loss``
            if isinstance(node, cst.Call):
                func = node.func
                qualified = self.context.qualified_name(func) or ""
                if qualified.startswith("torch.nn.functional.") and _is_loss_function(qualified.rsplit(".", 1)[-1]):
                    return True
                name = last_name(func)
                if not qualified and name is not None and looks_like_loss(name):
                    return True
                if self.is_module_call(node):
                    constructor = self.module_constructor(node)
                    if constructor is not None and _constructor_is_loss(self.context, constructor):
                        return True
            if isinstance(node, (cst.BinaryOperation, cst.UnaryOperation, cst.Subscript)) or (
                isinstance(node, cst.Call) and self.detaching_operand(node) is not None
            ):
                return any(walk(child, where, depth + 1) for child in _dataflow_operands(node))
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
                return walk(node.func.value, where, depth + 1)  # ``loss.mean()``, ``loss.detach()``
            return False

        return walk(expr, at, 0)

    def detached_inputs(self, expr: cst.BaseExpression, at: Place) -> List[Tuple[cst.Call, cst.BaseExpression, Place]]:
        """``(D(...), step, site)`` for each forward pass on ``expr``'s paths that is handed a detached
        value (``netD(fake.detach())``, or a name bound to one)."""
        found: List[Tuple[cst.Call, cst.BaseExpression, Place]] = []

        def detached(node: cst.BaseExpression, where: Place, depth: int) -> Optional[cst.BaseExpression]:
            if self.detaching_operand(node) is not None:
                return node
            if isinstance(node, cst.Name) and depth < 3:
                reaching = self.reaching(node.value, where)
                if len(reaching) == 1 and not reaching[0].element:
                    return detached(reaching[0].value, reaching[0].site, depth + 1)
            return None

        def visit_node(node: cst.BaseExpression, where: Optional[Place]) -> None:
            if isinstance(node, cst.Call) and where is not None and self.is_forward_pass(node):
                for arg in node.args:
                    step = detached(arg.value, where, 0)
                    if step is not None:
                        found.append((node, step, where))

        self._walk_graph(expr, at, visit_node)
        return found

    def nearest_forward_passes(self, expr: cst.BaseExpression, at: Place) -> List[Tuple[cst.Call, Place]]:
        """The forward passes that made ``expr`` directly (``self.g(z)`` for ``fake``), not those
        that made their inputs."""
        passes: Dict[int, Tuple[cst.Call, Place]] = {}

        def visit_node(node: cst.BaseExpression, where: Optional[Place]) -> Optional[Sequence[cst.BaseExpression]]:
            if isinstance(node, cst.Call) and self.is_forward_pass(node):
                site = self.sites.get(id(node))
                if site is not None and not site.no_grad:
                    passes[id(node)] = (node, site)
                return ()
            return None

        self._walk_graph(expr, at, visit_node)
        return list(passes.values())

    def is_array_value(self, expr: cst.BaseExpression, at: Optional[Place]) -> bool:
        """Whether ``expr`` at ``at`` is a NumPy (or other array library) value: an array library's call,
        or a name every binding of which is one."""
        if isinstance(expr, cst.Name):
            reaching = self.reaching(expr.value, at)
            return bool(reaching) and all(b.value is not None and self.is_array_value(b.value, b.site) for b in reaching)
        if isinstance(expr, cst.Call):
            return (self.context.qualified_name(expr.func) or "").startswith(ARRAY_LIBRARIES)
        return False

    def crosses_arrays(self, start: cst.BaseExpression, sink: cst.BaseExpression, at: Optional[Place] = None) -> bool:
        """Whether the value of ``start`` goes through NumPy (``np.clip(a)``, ``torch.from_numpy(a)``) on
        its way to ``sink``."""
        reaching = self.flows_into(sink, at)
        for call in self.calls:
            if id(call) not in reaching:
                continue
            qualified = self.context.qualified_name(call.func) or ""
            if qualified in ARRAY_PASSING_FUNCTIONS or qualified.startswith(ARRAY_LIBRARIES):
                if id(start) in self.flows_into(call, self.sites.get(id(call))):
                    return True
        return False

    def module_of(self, call: cst.Call) -> Optional[str]:
        """The module a forward pass runs, as written: ``netD`` for ``netD(x)``, ``self.D`` for
        ``self.D.compute_loss(x)`` or ``self.D.forward(x)``, ``self.blocks`` for ``self.blocks[i](x)``."""
        func = call.func
        if isinstance(func, cst.Subscript):
            func = func.value
        if isinstance(func, cst.Attribute) and not self.is_module_call(call):
            func = func.value  # a method of the module
        elif isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if isinstance(func, (cst.Name, cst.Attribute)):
            return self.context.code(func).strip()
        return None

    def step_updates(self, step: StepCall, module: Optional[str]) -> Optional[str]:
        """Whether ``step`` updates the parameters of ``module`` (see :meth:`module_of`): "built" when the
        optimizer's construction in the file names that module's ``parameters()`` (or a module holding
        it, or one it holds), "named" when only the names pair them (``optimizer_D`` and ``netD``, a
        plain ``optimizer``), None when they do not."""
        return self._optimizer_updates(step.optimizer, step.site, module)

    def zeroes(self, receiver: cst.BaseExpression, at: Place, module: Optional[str]) -> Optional[str]:
        """Whether ``receiver.zero_grad()`` at ``at`` clears the gradients of ``module``'s parameters, as
        :meth:`step_updates` answers for a step: ``receiver`` is an optimizer (as a step's is recognised)
        or a module that is ``module``, holds it or is held by it ("built"); "named" when only the names
        pair them or nothing tells; None when they do not."""
        name = last_name(receiver.value if isinstance(receiver, cst.Subscript) else receiver) or ""
        written = self.context.code(receiver).strip()
        stepped = any(self.context.code(step.optimizer).strip() == written for step in self.step_calls)
        if (
            stepped
            or self.optimizer_modules(receiver, at) is not None
            or (OPTIMIZER_NAME.search(name) and not SCHEDULER_NAME.search(name))
        ):
            return self._optimizer_updates(receiver, at, module)
        if module is None:
            return "named"
        if _dotted_related(written, module) or (written == "self" and module.startswith("self.")):
            return "built"
        own, other = _name_tag(name, _MODULE_WORDS), _name_tag(module.rsplit(".", 1)[-1], _MODULE_WORDS)
        return "named" if not own or not other or _tags_pair(own, other) else None

    def _optimizer_updates(self, optimizer: cst.BaseExpression, at: Place, module: Optional[str]) -> Optional[str]:
        built = self.optimizer_modules(optimizer, at)
        if built is not None:
            return "built" if module is not None and any(_dotted_related(module, m) for m in built) else None
        name = last_name(optimizer.value if isinstance(optimizer, cst.Subscript) else optimizer) or ""
        tag = _name_tag(name, _OPTIMIZER_WORDS)
        if not tag or module is None:
            return "named"  # one optimizer for everything (``optimizer.step()``)
        if not _OPTIMIZER_WORD.search(name.lower()):
            # a name that follows no convention pairs with nothing: the only optimizer this body steps is
            # taken to update what it trains, one of several is not known to
            written = self.context.code(optimizer).strip()
            others = {self.context.code(step.optimizer).strip() for step in self.step_calls} - {written}
            return None if others else "named"
        module_tag = _name_tag(module.rsplit(".", 1)[-1], _MODULE_WORDS)
        if not module_tag or _tags_pair(tag, module_tag):
            return "named"
        return None

    def bound_values(self, node: cst.BaseExpression, at: Place) -> List[cst.BaseExpression]:
        """The values the code binds to ``node`` (a name or ``self.x``) as it is at ``at``: the assignments
        of this function that reach it, else those at module level (a name) or in the class's methods
        (``self.x``); empty when it shows none (a parameter).  Elements of a value (a ``for`` target, an
        unpacked tuple) are left out."""
        if isinstance(node, cst.Name):
            reaching = self.reaching(node.value, at)
            if reaching:
                return [b.value for b in reaching if not b.element]
            return [value for target, value in _module_assignments(self.context) if isinstance(target, cst.Name) and target.value == node.value]
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
            if self.class_def is not None:
                value = _class_assignments(self.context, self.class_def).get(node.attr.value)
                return [value] if value is not None else []
        return []

    def constructed_optimizer(self, receiver: cst.BaseExpression, at: Place) -> bool:
        """Every value the code binds to ``receiver`` where it is stepped is a ``torch.optim`` optimizer (not a
        learning-rate scheduler, whose ``step()`` updates no parameter)."""
        values = self.bound_values(receiver, at)
        return bool(values) and all(
            isinstance(value, cst.Call) and _is_optimizer_class(self.context.qualified_name(value.func)) for value in values
        )

    def optimizer_modules(self, optimizer: cst.BaseExpression, at: Place) -> Optional[FrozenSet[str]]:
        """The modules (as written) whose ``parameters()`` built ``optimizer`` as it is at ``at`` (a
        ``torch.optim`` construction bound to the name, at module level or to ``self.x`` in the class), or
        None unseen."""
        values = self.bound_values(optimizer, at)
        constructions = [v for v in values if isinstance(v, cst.Call) and (self.context.qualified_name(v.func) or "").startswith("torch.optim.")]
        if not constructions or len(constructions) != len(values):
            return None
        found: Set[str] = set()
        for construction in constructions:
            for arg in construction.args:
                found |= self.parameter_owners(arg.value, at)
        return frozenset(found) or None

    def parameter_owners(self, node: cst.BaseExpression, at: Place, depth: int = 0) -> Set[str]:
        """``{"D"}`` for ``D.parameters()`` anywhere inside ``node`` (names bound to such followed once)."""
        found: Set[str] = set()

        class _Owners(cst.CSTVisitor):
            def visit_Call(inner, call: cst.Call) -> None:
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
                    found.add(self.context.code(func.value).strip())

            def visit_Name(inner, name: cst.Name) -> None:
                if depth < 2:
                    for binding in self.reaching(name.value, at):
                        found.update(self.parameter_owners(binding.value, binding.site, depth + 1))

        visit(node, _Owners())
        return found

    def flags_on_the_way(self, sink: cst.BaseExpression, at: Optional[Place] = None) -> List[cst.SimpleStatementLine]:
        """The lines ``x.requires_grad = True`` / ``x.requires_grad_()`` on the way to ``sink`` that a fix
        can delete (whole lines, in blocks that keep other statements)."""
        reaching = self.flows_into(sink, at)
        lines = []
        for bindings in self.bindings.values():
            for binding in bindings:
                if binding.leaf and id(binding.value) in reaching:
                    line = self.lone_statements.get(id(self.flag_statements.get(id(binding.value))))
                    if line is not None and id(line[0]) in self.removable_lines:
                        lines.append(line[0])
        return lines

    def flows_into(self, sink: cst.BaseExpression, at: Optional[Place] = None) -> Set[int]:
        """Ids of the expression nodes whose values flow into ``sink`` (evaluated at ``at``)."""
        seen: Set = set()
        nodes: Set[int] = set()

        def walk(node: cst.BaseExpression, where: Optional[Place]) -> None:
            key = (id(node), where.order if where is not None else None)
            if key in seen:
                return
            seen.add(key)
            nodes.add(id(node))
            if isinstance(node, cst.Name):
                for binding in self.reaching(node.value, where):
                    walk(binding.value, binding.site if where is not None else None)
                return
            for child in _dataflow_operands(node):
                walk(child, where)

        walk(sink, at)
        return nodes

    def list_elements(self, name: str) -> List[Tuple[cst.BaseExpression, Place]]:
        """What list ``name`` receives (``append``/``extend``/``insert``/``+=``/display/comprehension)."""
        out = []
        for feed in self.list_feeds.get(name, ()):
            for element in feed.elements:
                out.append((element, feed.site))
            if feed.iterable is not None:
                out.append((feed.iterable, feed.site))
        return out

    def element_shape(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """"scalar" (0-d), "one" (shape ``(1,)``), "number" (a Python number) or None (unknown).

        For a value that must hold one element (what ``torch.tensor(list)`` accepts),
        ``.squeeze()`` is 0-d and ``.view(-1)`` / ``.flatten()`` are ``(1,)``.
        """
        if depth > 8:
            return None
        if isinstance(expr, (cst.Integer, cst.Float)):
            return "number"
        if isinstance(expr, cst.Name):
            shapes = {self.element_shape(b.value, depth + 1) for b in self.bindings.get(expr.value, ()) if not b.element}
            elements = [b for b in self.bindings.get(expr.value, ()) if b.element]
            return shapes.pop() if len(shapes) == 1 and not elements else None
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.element_shape(expr.left, depth + 1), self.element_shape(expr.right, depth + 1)
            shapes = {s for s in (left, right) if s != "number"}
            if None in (left, right) or len(shapes) != 1:
                return None
            return shapes.pop()
        if isinstance(expr, cst.UnaryOperation):
            return self.element_shape(expr.expression, depth + 1)
        if not isinstance(expr, cst.Call) or has_star_args(expr):
            return None
        func = expr.func
        qualified = self.context.qualified_name(func)
        if qualified is not None:
            name = qualified.rsplit(".", 1)[-1]
            if qualified.startswith("torch.") and name in REDUCTION_METHODS and len(expr.args) == 1:
                return "scalar"
            if qualified.startswith("torch.nn.functional.") and _is_loss_function(name):
                return "scalar" if _reduces(expr) else None
            return None
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            positional = positional_args(expr)
            if method in REDUCTION_METHODS and not expr.args:
                return "scalar"
            if method == "squeeze" and not expr.args:
                return "scalar"
            if method in FLAT_ONE_METHODS and not expr.args:
                return "one"
            if method in ("view", "reshape") and len(positional) == 1 and not isinstance(positional[0].value, cst.Tuple):
                value = positional[0].value
                literal = value.evaluated_value if isinstance(value, cst.Integer) else None
                if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer):
                    literal = -int(value.expression.value)
                if literal in (1, -1):
                    return "one"
                return None
            if method == "unsqueeze" and len(positional) == 1 and self.element_shape(func.value, depth + 1) == "scalar":
                return "one"
            if self.is_module_call(expr):
                constructor = self.module_constructor(expr)
                if constructor is not None and _constructor_is_loss(self.context, constructor):
                    return "scalar" if _reduces(constructor) else None
            return None
        return None










# Module methods that make a fresh state rather than run the module (``model.init_hidden(bsz)``).
_STATE_INITIALISER = re.compile(r"^(?:init|initial|reset|zero|empty|new)(?:_|[A-Z]|$)")


def _invariant_test(test: cst.BaseExpression, changed: FrozenSet[str]) -> bool:
    """An ``if`` test that gives the same answer in every iteration of a loop binding ``changed``: it calls
    nothing and reads no name the loop binds (``mode == "a"``, ``args.fp16``, ``n_gpu > 1``)."""
    found = []

    class _Varies(cst.CSTVisitor):
        def visit_Call(self, visited: cst.Call) -> None:
            found.append(visited)

        def visit_Name(self, visited: cst.Name) -> None:
            if visited.value in changed:
                found.append(visited)

    visit(test, _Varies())
    return not found


def _reads_name(node: Optional[cst.CSTNode], name: str) -> bool:
    """Whether ``name`` is read in ``node`` (``entropy + x`` reads ``entropy``; ``0`` does not)."""
    if node is None:
        return True
    found = []

    class _Reads(cst.CSTVisitor):
        def visit_Name(self, visited: cst.Name) -> None:
            if visited.value == name:
                found.append(visited)

    visit(node, _Reads())
    return bool(found)


def _runs_the_module(method: str) -> bool:
    """Whether ``module.method(...)`` computes with the module's parameters."""
    return method not in NON_FORWARD_MODULE_METHODS and not _STATE_INITIALISER.match(method)


_OPTIMIZER_WORDS = re.compile(r"optimizers?|optim|opts?|_")
_OPTIMIZER_WORD = re.compile(r"optim|opt")
_MODULE_WORDS = re.compile(r"networks?|nets?|models?|_")


def _name_tag(name: str, words: "re.Pattern[str]") -> str:
    """What tells one optimizer or module from another: ``d`` for ``optimizer_D``, ``netD``, ``D``."""
    return words.sub("", name.lower())


def _tags_pair(first: str, second: str) -> bool:
    """``d`` and ``discriminator``, ``gen`` and ``generator``, ``vae`` and ``vae``."""
    shorter, longer = sorted((first, second), key=len)
    return longer.startswith(shorter) and (len(shorter) == 1 or len(shorter) >= 3 or shorter == longer)


def _dotted_related(first: str, second: str) -> bool:
    """``model`` and ``model.encoder``: one holds the other (or they are the same)."""
    return first == second or first.startswith(second + ".") or second.startswith(first + ".")


def _module_assignments(context: "FileContext") -> List[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    from torchlint.analysis.model.scope import assignments

    return context.memoized("gradflow.module-assignments", context.module, lambda module: list(assignments(module.body)))


def _class_assignments(context: "FileContext", class_def: cst.ClassDef) -> Dict[str, cst.BaseExpression]:
    from torchlint.analysis.model.scope import self_attributes

    return context.memoized("gradflow.class-assignments", class_def, self_attributes)


def _tests_not_none(test: Optional[cst.BaseExpression], name: str) -> bool:
    """``name is not None`` (or a bare ``name``): the test fails only when ``name`` holds no tensor."""
    if isinstance(test, cst.Name):
        return test.value == name
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )






_in_progress: Set[int] = set()


def _passes_history(context: "FileContext", function: cst.FunctionDef, class_def: Optional[cst.ClassDef] = None) -> bool:
    """Whether a helper of the file returns a value with the history of what it is handed
    (``compute_diversity(phi)`` returning an eigendecomposition of it; not ``repackage(h)``
    returning ``h.detach()``).  A helper met again while it is being answered (recursion) does not."""

    def compute(node: cst.FunctionDef) -> bool:
        if id(node) in _in_progress:
            return False
        _in_progress.add(id(node))
        try:
            params = node.params
            names = frozenset(
                p.name.value for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
            ) - {"self", "cls"}
            flow = flow_for(context, node, class_def)
            return any(flow.carries_from_parameters(value, site, names) for value, site in flow.returns)
        finally:
            _in_progress.discard(id(node))

    return context.memoized("gradflow.passes-history", function, compute)


def _is_tensor_method_with_tensor_args(method: str) -> bool:
    return method in {"matmul", "mm", "bmm", "mul", "add", "sub", "div", "dot", "expand_as", "view_as", "type_as", "where"}


def _is_loss_function(name: str) -> bool:
    return name.endswith("loss") or name in {
        "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "nll_loss",
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "margin_ranking_loss", "cosine_embedding_loss",
    }


# ``torch.nn`` layers without parameters: their output has the history of their inputs, nothing more.
PARAMETERLESS_LAYERS = frozenset(
    {
        "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Softplus",
        "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "Softmax", "LogSoftmax", "Softmin",
        "Softmax2d", "Threshold", "Tanhshrink", "Softshrink", "Hardshrink", "GLU", "Identity", "Flatten", "Unflatten",
        "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "CosineSimilarity", "PairwiseDistance",
        "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
        "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ZeroPad2d",
        "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
        "ReplicationPad2d", "ChannelShuffle", "Fold", "Unfold",
    }
)


def _passes_inputs_only(context: "FileContext", constructor: cst.Call) -> bool:
    """A loss module or a layer without parameters: calling it starts no graph of its own."""
    qualified = context.qualified_name(constructor.func) or ""
    return _constructor_is_loss(context, constructor) or (
        qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[-1] in PARAMETERLESS_LAYERS
    )


def _constructor_is_loss(context: "FileContext", constructor: cst.Call) -> bool:
    qualified = context.qualified_name(constructor.func) or ""
    return qualified.startswith("torch.nn.") and qualified.endswith("Loss")


def _reduces(call: cst.Call) -> bool:
    """No ``reduction=`` or a reducing one ("mean", "sum", "batchmean")."""
    arg = keyword_arg(call, "reduction")
    if arg is None:
        return True
    return isinstance(arg.value, cst.SimpleString) and arg.value.evaluated_value in ("mean", "sum", "batchmean")


def _dataflow_operands(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The sub-expressions whose values flow into ``node``'s value."""
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute):
            yield node.func.value
        for arg in node.args:
            yield arg.value
    elif isinstance(node, cst.Attribute):
        if node.attr.value not in NON_DIFFERENTIABLE_ATTRIBUTES:
            yield node.value
    elif isinstance(node, cst.Subscript):
        yield node.value
    elif isinstance(node, cst.BinaryOperation):
        yield node.left
        yield node.right
    elif isinstance(node, cst.UnaryOperation):
        yield node.expression
    elif isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        for element in node.elements:
            yield element.value
    elif isinstance(node, cst.Dict):
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                yield element.value
    elif isinstance(node, cst.IfExp):
        yield node.body
        yield node.orelse
    elif isinstance(node, (cst.ListComp, cst.GeneratorExp)):
        yield node.elt


def read_names(node: cst.CSTNode) -> Set[str]:
    """The plain names read in ``node`` (``z`` and ``z_q`` in ``(z_q - z).detach()``; not attribute names)."""
    found: Set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            visit(attribute.value, self)
            return False

    visit(node, _Names())
    return found


def contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``root`` or inside it."""
    found = False

    class _Find(cst.CSTVisitor):
        def on_visit(self, candidate: cst.CSTNode) -> bool:
            nonlocal found
            found = found or candidate is node
            return not found

    visit(root, _Find())
    return found


def differentiates(context: "FileContext", call: cst.Call, grad: bool = True) -> bool:
    """``t.backward()``, ``accelerator.backward(loss)``, ``self.manual_backward(loss)``,
    ``torch.autograd.backward(t)`` and (``grad=True``) ``torch.autograd.grad(t, ...)``: what
    :class:`FunctionFlow` records as backward calls."""
    func = call.func
    qualified = context.qualified_name(func)
    if isinstance(func, cst.Attribute) and func.attr.value in BACKWARD_METHODS and qualified is None:
        return True
    return qualified == "torch.autograd.backward" or (grad and qualified in AUTOGRAD_GRAD)


# -- entry points --------------------------------------------------------------------------------

_flow_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()




def enclosing_function(context: "FileContext") -> Tuple[Optional[cst.FunctionDef], Optional[cst.ClassDef]]:
    """The innermost function around the visited node and the class it is a method of (if any)."""
    ancestors = context.ancestors
    for index in range(len(ancestors) - 1, -1, -1):
        node = ancestors[index]
        if isinstance(node, cst.FunctionDef):
            class_def = None
            for outer in range(index - 1, -1, -1):
                if isinstance(ancestors[outer], cst.ClassDef):
                    class_def = ancestors[outer]
                    break
                if isinstance(ancestors[outer], cst.FunctionDef):
                    break
            return node, class_def
    return None, None


def flow_for(
    context: "FileContext", function: Union[cst.FunctionDef, cst.Module], class_def: Optional[cst.ClassDef]
) -> FunctionFlow:
    """The (cached, per file) flow of ``function``."""
    table = _flow_cache.setdefault(context, {})
    # a flow read with naming conventions and one read without them are two flows (conventions.disabled)
    key = (id(function), conventions.active())
    flow = table.get(key)
    if flow is None:
        flow = table[key] = FunctionFlow(context, function, class_def)
    return flow


def built_flows(context: "FileContext") -> List[FunctionFlow]:
    """The flows built so far in this file (every function a rule asked about), in no set order."""
    return list(_flow_cache.get(context, {}).values())


def current_flow(context: "FileContext") -> Optional[FunctionFlow]:
    """The flow of the function around the visited node, or of the module for top-level code."""
    function, class_def = enclosing_function(context)
    if function is None:
        if any(isinstance(node, cst.ClassDef) for node in context.ancestors):
            return None  # class bodies hold definitions, not training code
        return flow_for(context, context.module, None)
    return flow_for(context, function, class_def)


def _is_optimizer_class(qualified: Optional[str]) -> bool:
    return bool(qualified) and qualified.startswith("torch.optim.") and not qualified.startswith(("torch.optim.lr_scheduler.", "torch.optim.swa_utils."))
