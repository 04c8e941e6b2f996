"""The walk behind gradflow.FunctionFlow: one pre-order pass over a function body (or a script's top level) that
records where each statement sits (flow_events.Place: order, loops, branches, ``no_grad``) and what it does to
autograd: names bound (tuple unpacking, ``+=``, ``for`` targets, ``x.requires_grad = True``), lists fed
(``append``, ``extend``, ``+=``, displays, comprehensions), backward calls, optimizer steps, jumps, and which
calls are whole statement lines (for fixes that delete or merge lines).  The questions asked of these records
live in gradflow.py."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.flow.autograd_terms import (
    AUTOGRAD_GRAD,
    BACKWARD_METHODS,
    BACKWARD_RUNNER,
    OPTIMIZER_NAME,
    SCALER_NAME,
    SCHEDULER_NAME,
    SET_GRAD_ENABLED,
)
from torchlint.analysis.flow.flow_events import BackwardCall, FlowBinding, ListFeed, Place, StepCall
from torchlint.analysis.flow.module_evidence import (
    ClassAttributes,
    defines_a_backward_method,
    function_is_no_grad,
    is_no_grad_item,
    last_name,
    module_attributes,
    truthy_literal,
)
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.model.names import dotted_name
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


class FunctionWalk:
    """One pre-order walk of a function body (or of a module's top level): the bindings, list feeds, backward calls
    and optimizer steps it records, each at its site (flow_events.py).  gradflow.FunctionFlow asks questions of it."""

    def __init__(
        self, context: "FileContext", function: Union[cst.FunctionDef, cst.Module], class_def: Optional[cst.ClassDef]
    ) -> None:
        self.context = context
        self.function = function
        # "" for a module: scripts run their training loops at the top level too
        self.name = function.name.value if isinstance(function, cst.FunctionDef) else ""
        self.class_def = class_def
        self.class_attributes = class_attributes_for(context, class_def)
        self.no_grad_function = isinstance(function, cst.FunctionDef) and function_is_no_grad(context, function)
        self.bindings: Dict[str, List[FlowBinding]] = {}
        self.list_feeds: Dict[str, List[ListFeed]] = {}
        self.backward_calls: List[BackwardCall] = []
        self.returns: List[Tuple[cst.BaseExpression, Place]] = []
        self.sites: Dict[int, Place] = {}  # id(call node) -> site, for calls that start a graph
        self.step_sites: List[Place] = []  # optimizer.step() and friends
        # id(call) -> (its statement line, id of the block) for calls that are a whole line
        self.lone_statements: Dict[int, Tuple[cst.SimpleStatementLine, int]] = {}
        self.removable_lines: Set[int] = set()  # lines whose block keeps other statements
        self.break_sites: List[Place] = []
        # ``break``/``continue``/``return``/``raise`` (outside any ``try``), with where they sit
        self.jumps: List[Tuple[str, Place]] = []
        self.loop_sites: Dict[int, Place] = {}  # id(for/while) -> the site of its header
        self.ifs_with_else: Set[int] = set()
        self.if_tests: Dict[int, cst.BaseExpression] = {}  # id(if) -> its test
        self.nested_defs: Dict[str, cst.FunctionDef] = {}  # ``def`` statements in the body
        # id(a leaf binding's value) -> the flag's own node (``True`` in ``x.requires_grad = True``,
        # the ``x.requires_grad_()`` call): its line is in ``lone_statements``
        self.flag_statements: Dict[int, cst.CSTNode] = {}  # ids of the ``if`` statements that have an ``else``/``elif``
        self.step_calls: List[StepCall] = []
        self.calls: List[cst.Call] = []  # every call of the body, in order
        self._try_depth = 0
        self._order = 0
        self._carries: Dict[tuple, Tuple[cst.BaseExpression, bool]] = {}
        self._names: Dict[tuple, bool] = {}
        self._zeroed: Optional[Set[str]] = None
        self._scan_block(function.body if isinstance(function, cst.FunctionDef) else function, (), (), self.no_grad_function)

    # -- the walk ------------------------------------------------------------------

    def _site(self, loops, branches, no_grad) -> Place:
        self._order += 1
        return Place(self._order, loops, branches, no_grad)

    def _scan_block(self, body, loops, branches, no_grad) -> None:
        if isinstance(body, cst.SimpleStatementSuite):
            self._scan_small(body.body, self._site(loops, branches, no_grad))
            return
        for stmt in body.body:
            if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], (cst.Expr, cst.Assign)):
                # an expression that is a whole statement line (or the value of a one-line
                # assignment), the line, and the block holding it
                self.lone_statements[id(stmt.body[0].value)] = (stmt, id(body))
                if len(body.body) > 1:
                    self.removable_lines.add(id(stmt))
            self._scan_statement(stmt, loops, branches, no_grad)

    def _scan_statement(self, stmt: cst.CSTNode, loops, branches, no_grad) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            self._scan_small(stmt.body, self._site(loops, branches, no_grad))
        elif isinstance(stmt, cst.FunctionDef):
            self.nested_defs[stmt.name.value] = stmt
        elif isinstance(stmt, cst.ClassDef):
            return
        elif isinstance(stmt, cst.If):
            site = self._site(loops, branches, no_grad)
            self._scan_expressions(stmt.test, site)
            key = id(stmt)
            self.if_tests[key] = stmt.test
            self._scan_block(stmt.body, loops, branches + ((key, "body"),), no_grad)
            if stmt.orelse is not None:
                self.ifs_with_else.add(key)
                if isinstance(stmt.orelse, cst.If):
                    self._scan_statement(stmt.orelse, loops, branches + ((key, "else"),), no_grad)
                else:
                    self._scan_block(stmt.orelse.body, loops, branches + ((key, "else"),), no_grad)
        elif isinstance(stmt, (cst.For, cst.While)):
            site = self._site(loops, branches, no_grad)
            self.loop_sites[id(stmt)] = site
            inner = loops + (stmt,)
            if isinstance(stmt, cst.For):
                self._scan_expressions(stmt.iter, site)
                self._bind_target(stmt.target, stmt.iter, self._site(inner, branches, no_grad), element=True)
            else:
                self._scan_expressions(stmt.test, site)
            self._scan_block(stmt.body, inner, branches, no_grad)
            if stmt.orelse is not None:
                self._scan_block(stmt.orelse.body, loops, branches, no_grad)
        elif isinstance(stmt, cst.With):
            site = self._site(loops, branches, no_grad)
            inner_no_grad = no_grad
            for item in stmt.items:
                self._scan_expressions(item.item, site)
                if is_no_grad_item(self.context, item.item):
                    inner_no_grad = True
                elif isinstance(item.item, cst.Call) and self.context.qualified_name(item.item.func) in SET_GRAD_ENABLED:
                    inner_no_grad = False
            self._scan_block(stmt.body, loops, branches, inner_no_grad)
        elif isinstance(stmt, cst.Try):
            key = id(stmt)
            self._try_depth += 1
            self._scan_block(stmt.body, loops, branches + ((key, "body"),), no_grad)
            self._try_depth -= 1
            for index, handler in enumerate(stmt.handlers):
                self._scan_block(handler.body, loops, branches + ((key, f"except{index}"),), no_grad)
            if stmt.orelse is not None:
                self._scan_block(stmt.orelse.body, loops, branches + ((key, "body"),), no_grad)
            if stmt.finalbody is not None:
                self._scan_block(stmt.finalbody.body, loops, branches, no_grad)
        else:  # match and anything newer: look at nothing inside
            return

    def _scan_small(self, smalls: Sequence[cst.BaseSmallStatement], site: Place) -> None:
        for small in smalls:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    self._bind_target(target.target, small.value, site)
                    self._bind_flag(target.target, small.value, site)
                self._record_list_display(small, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                self._bind_target(small.target, small.value, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.AugAssign):
                self._bind_target(small.target, updated_value(small), site)
                if isinstance(small.target, cst.Name) and isinstance(small.operator, cst.AddAssign):
                    self._record_feed(small.target.value, small.value, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.Return):
                self.jumps.append(("return", site))
                if small.value is not None:
                    self.returns.append((small.value, site))
                    self._scan_expressions(small.value, site)
            elif isinstance(small, cst.Break):
                self.break_sites.append(site)
                self.jumps.append(("break", site))
            elif isinstance(small, cst.Continue):
                self.jumps.append(("continue", site))
            elif isinstance(small, cst.Raise):
                if not self._try_depth:
                    self.jumps.append(("raise", site))
            elif isinstance(small, cst.Expr):
                self._bind_in_place(small.value, site)
                self._scan_expressions(small.value, site)

    def _bind_target(
        self, target: cst.BaseExpression, value: cst.BaseExpression, site: Place, element: bool = False, comprehension: bool = False
    ) -> None:
        if isinstance(target, cst.Name):
            self.bindings.setdefault(target.value, []).append(FlowBinding(target.value, value, site, element, comprehension=comprehension))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for item in target.elements:
                inner = item.value.value if isinstance(item, cst.StarredElement) else item.value
                self._bind_target(inner, value, site, element=True, comprehension=comprehension)

    def _bind_flag(self, target: cst.BaseExpression, value: cst.BaseExpression, site: Place) -> None:
        """``x.requires_grad = True``: from here on ``x`` is a leaf autograd differentiates."""
        if (
            isinstance(target, cst.Attribute)
            and target.attr.value == "requires_grad"
            and isinstance(target.value, cst.Name)
            and truthy_literal(value) is True
        ):
            name = target.value.value
            before = cst.Name(name)
            self.flag_statements[id(before)] = value
            self.bindings.setdefault(name, []).append(FlowBinding(name, before, site, leaf=True))

    def _bind_in_place(self, expr: cst.BaseExpression, site: Place) -> None:
        """``x.requires_grad_()`` makes ``x`` a leaf that needs a gradient; ``x.detach_()`` (and
        ``x.requires_grad_(False)``) cuts its history: both rebind ``x`` from here on."""
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and isinstance(expr.func.value, cst.Name)):
            return
        method, name = expr.func.attr.value, expr.func.value.value
        if method == "requires_grad_" and requests_grad(expr):
            before = cst.Name(name)
            self.flag_statements[id(before)] = expr
            self.bindings.setdefault(name, []).append(FlowBinding(name, before, site, leaf=True))
        elif method in ("requires_grad_", "detach_"):
            self.bindings.setdefault(name, []).append(FlowBinding(name, expr, site))

    def _record_list_display(self, assign: cst.Assign, site: Place) -> None:
        for target in assign.targets:
            if isinstance(target.target, cst.Name):
                self._record_feed(target.target.value, assign.value, site, assignment=True)

    def _record_feed(self, name: str, value: cst.BaseExpression, site: Place, assignment: bool = False) -> None:
        if isinstance(value, (cst.List, cst.Tuple)):
            elements = tuple(e.value for e in value.elements if not isinstance(e, cst.StarredElement))
            if elements:
                self.list_feeds.setdefault(name, []).append(ListFeed(elements, site))
        elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            self._bind_comprehension(value, site)
            self.list_feeds.setdefault(name, []).append(ListFeed((value.elt,), site))
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) and assignment:
            if last_name(value.left) == name:  # L = L + [x]
                self._record_feed(name, value.right, site)

    def _bind_comprehension(self, comp: cst.BaseExpression, site: Place) -> None:
        clause = getattr(comp, "for_in", None)
        while clause is not None:
            self._bind_target(clause.target, clause.iter, site, element=True, comprehension=True)
            clause = clause.inner_for_in

    def constructed_optimizer(self, receiver: cst.BaseExpression, at: "Place") -> bool:
        """Whether the code binds ``receiver`` to a ``torch.optim`` optimizer where it is stepped (the flow of
        bindings answers: :class:`~torchlint.analysis.flow.gradflow.FunctionFlow`)."""
        return False

    def zeroed_receivers(self) -> Set[str]:
        """What the body calls ``zero_grad()`` on (``opt``, ``self.g_optim``), read once, on the first step call
        whose receiver's name says nothing: a receiver of both ``zero_grad()`` and ``step()`` steps parameters."""
        if self._zeroed is None:
            finder = _ZeroGradReceivers()
            visit(self.function, finder)
            self._zeroed = finder.found
        return self._zeroed

    def _scan_expressions(self, expr: cst.CSTNode, site: Place) -> None:
        scanner = _CallScanner(self, site)
        visit(expr, scanner)



class _ZeroGradReceivers(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: Set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "zero_grad":
            name = dotted_name(node.func.value)
            if name is not None:
                self.found.add(name)


class _CallScanner(cst.CSTVisitor):
    """Records, inside one statement's expressions, list feeds, backward calls and module-call sites."""

    def __init__(self, flow: "FunctionWalk", site: Place) -> None:
        super().__init__()
        self.flow = flow
        self.site = site

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self.flow._bind_comprehension(node, self.site)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self.flow._bind_comprehension(node, self.site)

    def visit_Call(self, node: cst.Call) -> None:
        flow = self.flow
        flow.sites[id(node)] = self.site
        flow.calls.append(node)
        func = node.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method in ("append", "insert", "extend") and isinstance(receiver, cst.Name) and not has_star_args(node):
                positional = positional_args(node)
                wanted = 1 if method == "insert" else 0
                if len(positional) > wanted:
                    value = positional[wanted].value
                    name = receiver.value
                    if method == "extend":
                        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
                            flow._record_feed(name, value, self.site)
                        else:
                            flow.list_feeds.setdefault(name, []).append(ListFeed((), self.site, value))
                    else:
                        flow.list_feeds.setdefault(name, []).append(ListFeed((value,), self.site))
            elif method in BACKWARD_METHODS and flow.context.qualified_name(func) is None:
                positional = positional_args(node)
                if method == "manual_backward" or BACKWARD_RUNNER.search(last_name(receiver) or ""):
                    # ``accelerator.backward(loss)``, ``self.manual_backward(loss)``: the loss is the argument
                    if positional:
                        flow.backward_calls.append(BackwardCall(node, positional[0].value, self.site, frees_graph(node, 99)))
                elif not (positional and method == "backward" and defines_a_backward_method(flow.context)):
                    # ``flow.backward(z)`` where the project defines such a method (a flow's inverse) is that method
                    flow.backward_calls.append(BackwardCall(node, unscaled(receiver), self.site, frees_graph(node)))
            elif method == "step" and not node.args:
                flow.step_sites.append(self.site)
            if (method == "step" or method.endswith("_step")) and not has_star_args(node):
                # ``optimizer.step()``, ``scaler.step(optimizer)``, SAM's ``optimizer.first_step()``
                site = self.site
                stepped = stepped_optimizer(node, flow.zeroed_receivers, lambda receiver: flow.constructed_optimizer(receiver, site))
                if stepped is not None:
                    flow.step_calls.append(StepCall(node, stepped, self.site))
                    if node.args:
                        flow.step_sites.append(self.site)
        qualified = flow.context.qualified_name(func)
        if qualified == "torch.autograd.backward":
            first = argument(node, 0, "tensors")
            if first is not None:
                flow.backward_calls.append(BackwardCall(node, first.value, self.site, frees_graph(node, 2)))
        elif qualified in AUTOGRAD_GRAD:
            first = argument(node, 0, "outputs")
            if first is not None:
                flow.backward_calls.append(BackwardCall(node, first.value, self.site, frees_graph(node, 3), kind="grad"))


def unscaled(receiver: cst.BaseExpression) -> cst.BaseExpression:
    """``loss`` for ``scaler.scale(loss)`` (GradScaler) and ``accelerator``-style wrappers."""
    if (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value == "scale"
        and len(receiver.args) == 1
    ):
        return receiver.args[0].value
    return receiver


def frees_graph(call: cst.Call, flags_at: int = 1) -> bool:
    """No ``retain_graph``/``create_graph`` that could keep the graph (a non-literal value may).

    ``flags_at``: the position of ``retain_graph`` when passed positionally (1 for ``Tensor.backward``,
    2 for ``torch.autograd.backward``, 3 for ``torch.autograd.grad``)."""
    if has_star_args(call):
        return False
    for name in ("retain_graph", "create_graph"):
        arg = keyword_arg(call, name)
        if arg is not None and truthy_literal(arg.value) is not False:
            return False
    # Tensor.backward(gradient, retain_graph, create_graph), torch.autograd.backward(tensors,
    # grad_tensors, retain_graph, create_graph), torch.autograd.grad(outputs, inputs, grad_outputs,
    # retain_graph, create_graph): positional forms
    positional = positional_args(call)
    if len(positional) > flags_at:
        return all(truthy_literal(p.value) is False for p in positional[flags_at : flags_at + 2])
    return True


def stepped_optimizer(
    call: cst.Call,
    zeroed: Optional[Callable[[], Set[str]]] = None,
    constructed: Optional[Callable[[cst.BaseExpression], bool]] = None,
) -> Optional[cst.BaseExpression]:
    """``optimizer`` for ``optimizer.step()`` / ``optimizer.step(closure)`` and ``scaler.step(optimizer)``;
    None for what steps no parameters (``scheduler.step()``, ``env.step(action)``).  Besides the receiver's
    name (a convention), facts: the same body calls ``zero_grad()`` on it, or on the one argument of a
    ``step`` (``zeroed``: those receivers), or the code binds it to a ``torch.optim`` optimizer
    (``constructed``)."""
    receiver = call.func.value
    positional = positional_args(call)
    name = last_name(receiver.value if isinstance(receiver, cst.Subscript) else receiver) or ""
    if SCALER_NAME.search(name) and len(positional) == 1:
        return positional[0].value
    if zeroed is not None and len(positional) == 1 and call.func.attr.value == "step":
        # ``scaler.step(optimizer)`` by fact: its argument is zeroed in the same body
        written = dotted_name(positional[0].value)
        if written is not None and written in zeroed():
            return positional[0].value
    if len(positional) > 1:
        return None
    if OPTIMIZER_NAME.search(name) and not SCHEDULER_NAME.search(name):
        return receiver
    if zeroed is not None and call.func.attr.value == "step":
        written = dotted_name(receiver)
        if written is not None and written in zeroed():
            return receiver
    if constructed is not None and call.func.attr.value == "step" and constructed(receiver):
        return receiver
    return None


def updated_value(update: cst.AugAssign) -> cst.BaseExpression:
    """``loss + aux`` for ``loss += aux``: the name keeps what it held (evaluated where the update runs)."""
    operator = getattr(cst, type(update.operator).__name__[: -len("Assign")], None)
    if not isinstance(update.target, cst.Name) or operator is None:
        return update.value
    return cst.BinaryOperation(left=cst.Name(update.target.value), operator=operator(), right=update.value)


def requests_grad(call: cst.Call) -> bool:
    """``requires_grad=True`` (factories, ``torch.tensor``, ``Variable``), ``t.requires_grad_()`` / ``(True)``."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_":
        arg = argument(call, 0, "requires_grad")
        return arg is None or truthy_literal(arg.value) is True
    arg = keyword_arg(call, "requires_grad")
    return arg is not None and truthy_literal(arg.value) is True


def class_attributes_for(context: "FileContext", class_def: Optional[cst.ClassDef]) -> ClassAttributes:
    """What the class's ``__init__`` and methods assign to ``self`` (layers, parameters), once per class and file."""
    if class_def is None:
        return ClassAttributes({}, set(), set())
    return context.memoized("flow.class_attributes", class_def, lambda node: module_attributes(context, node))
