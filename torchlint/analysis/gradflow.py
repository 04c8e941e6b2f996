"""Local autograd dataflow inside one function: which values carry gradients, and where they go.

Built on demand (``flow_for``) only when a rule has found its trigger in a
function, with one walk of that function's body; no LibCST scope metadata.
A ``FunctionFlow`` answers:

- ``carries_grad(expr)``: does the value come from calling a module
  (``self.fc(x)`` where ``__init__`` set ``self.fc = nn.Linear(...)``,
  ``nn.Linear(3, 1)(x)``, a callee named like a model: ``model(x)``,
  ``self.encoder(x)``, ``netG(z)``), an ``nn.Parameter`` attribute, or
  arithmetic, indexing, a field whose name says tensor (``out.logits``,
  ``out.last_hidden_state``; not ``results[0].speed``), a tensor method or
  a ``torch.*`` / ``F.*`` function applied to such a value, or a loss
  (``criterion(out, y)``, a callee whose name says loss) of one?  Names are
  followed through their assignments in the function (tuple unpacking,
  ``+=``, ``for`` targets over such a value).  ``.item()``, ``.detach()``,
  ``.tolist()``, ``.numpy()``, ``.data``, ``float(t)`` and re-wrapping with
  ``torch.tensor(t)`` / ``Variable(t)`` cut the graph; so does code under
  ``torch.no_grad()`` / ``torch.inference_mode()`` / ``set_grad_enabled(False)``
  or in a function decorated with them.
- ``list_elements(name)``: what a list receives by ``append``, ``extend``,
  ``insert``, ``+=``, a list display or a list comprehension, with whether
  that happens under ``no_grad``.
- ``detaching_steps(expr)``: the graph-cutting steps on the paths by which a
  gradient would otherwise reach ``expr``.
- ``backward_calls``: ``t.backward()`` / ``torch.autograd.backward(t)`` with
  their order, enclosing loops and branches, and whether they free the graph;
  ``lone_statements`` tells which calls (and one-line assignment values) are
  a whole statement line, and in which block, and ``removable_lines`` which
  of those lines can go without emptying their block, for fixes that delete
  or merge lines.
- ``graph_roots(expr)``: the module calls (forward passes) a value was
  computed from, for "two losses share one forward pass"; ``flows_into(sink)``:
  every expression whose value reaches ``sink``.
- ``element_shape(expr)``: "scalar" (0-d: a full reduction, a loss with a
  reducing ``reduction``), "one" (shape ``(1,)``: ``.view(1)``,
  ``.reshape(-1)``, ``.flatten()`` of a one-element tensor) or None.

Other helpers: ``module_attributes`` (``self.x = nn.Layer(...)`` in a class),
``in_no_grad_region`` and ``in_debug_condition`` for the node being visited,
``is_test_path``.

What it does not see: the order of statements when deciding what a name holds
(any assignment in the function counts; ``graph_roots`` and backward calls do
keep order); values passed between functions (a parameter of the function
carries nothing; a helper's return value carries only if its name says loss);
containers other than lists held in plain names (``self.preds.append``,
dicts); aliasing (``a = b`` then ``a.append``); modules stored in containers
other than ``self.x[i]``; callees whose names say neither model nor loss
(``self.backbone_fn(x)``). Top-level code of a script is analysed as one
more function (``current_flow`` outside any def).

Why not ``analysis.bindings``: that module answers "which assignment reaches
this use" for the node being visited, from the ancestor chain; the questions
here are about every statement of a function (all feeds of a list, all
backward calls and their order), so one pre-order walk of the body serves them.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchlint.analysis.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.names import dotted_name
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext

# -- vocabulary ----------------------------------------------------------------------

NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
# Methods whose result has no autograd history.
DETACHING_METHODS = frozenset({"detach", "item", "tolist", "numpy"})
NON_DIFFERENTIABLE_METHODS = frozenset(
    {
        "argmax", "argmin", "argsort", "long", "int", "bool", "byte", "short", "size", "dim", "numel",
        "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite", "nonzero", "count_nonzero",
        "detach_", "requires_grad_", "zero_", "zeros_like", "new_zeros", "new_ones", "new_empty",
        "new_tensor", "new_full", "get_device", "is_contiguous", "data_ptr",
    }
)
NON_DIFFERENTIABLE_ATTRIBUTES = frozenset(
    {"shape", "device", "dtype", "grad", "requires_grad", "is_leaf", "ndim", "grad_fn", "is_cuda", "layout"}
)
NON_DIFFERENTIABLE_FUNCTIONS = frozenset(
    {
        "torch.argmax", "torch.argmin", "torch.argsort", "torch.zeros_like", "torch.ones_like", "torch.empty_like",
        "torch.full_like", "torch.rand_like", "torch.randn_like", "torch.randint_like", "torch.is_tensor",
        "torch.numel", "torch.eq", "torch.ne", "torch.gt", "torch.lt", "torch.ge", "torch.le", "torch.isnan",
        "torch.isinf", "torch.isfinite", "torch.nonzero", "torch.count_nonzero", "torch.from_numpy",
        "torch.as_tensor", "torch.no_grad", "torch.inference_mode", "torch.bucketize", "torch.searchsorted",
    }
)
# Calls that copy data into a new leaf tensor: the graph ends there.
REWRAP_FUNCTIONS = frozenset(
    {"torch.tensor", "torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.Tensor", "torch.FloatTensor"}
)
REDUCTION_METHODS = frozenset({"sum", "mean", "prod", "norm", "std", "var", "max", "min", "amax", "amin", "nansum", "nanmean", "median"})
FLAT_ONE_METHODS = frozenset({"flatten", "ravel"})
NOT_MODULE_CLASSES = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Buffer"}
)
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})

# A callee named like a network: model, self.encoder, student_net, netG, self.fc, self.head2.
_MODEL_NAME = re.compile(
    r"^(?:[a-z0-9]+_)*(?:model|net|network|encoder|decoder|backbone|classifier|generator|discriminator|"
    r"critic|actor|policy|student|regressor)$|^net[A-Z]\w*$|^(?:fc|head|proj|mlp|linear|conv)\d*$"
)
_LOSS_NAME = re.compile(r"(?:^|_)(?:loss|losses|criterion|criterions|loss_fn|loss_func|objective)(?:$|_)|^criterion|loss$", re.I)
# Values named this way are meant to stop gradients (teacher outputs, EMA, targets).
STOP_GRADIENT_NAME = re.compile(r"target|teacher|ema|momentum|(?:^|_)sg(?:$|_)|frozen|stop_grad", re.I)
# Attributes of a model output that hold tensors (ModelOutput fields, tensor views).
_TENSOR_FIELD = re.compile(
    r"logit|hidden|embed|loss|out|feat|score|pred|prob|state|sample|attn|attention|encoding|latent|"
    r"pool|mean|var|^T$|^mT$|^H$|^real$|^imag$|^weight$|^bias$",
    re.I,
)
_DEBUG_WORD = re.compile(r"debug|anomal|detect|check|verbose|verify|trace|nan", re.I)
_TEST_PATH = re.compile(r"(?:^|[\\/])(?:tests?|testing)[\\/]|(?:^|[\\/])(?:test_[^\\/]*|[^\\/]*_test|conftest)\.py$")


def is_test_path(path: str) -> bool:
    """``tests/...``, ``test_x.py``, ``x_test.py``, ``conftest.py``."""
    return bool(_TEST_PATH.search(path))


def looks_like_model(name: str) -> bool:
    return bool(_MODEL_NAME.match(name)) and not STOP_GRADIENT_NAME.search(name)


def looks_like_loss(name: str) -> bool:
    return bool(_LOSS_NAME.search(name))


def _last_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _truthy_literal(node: cst.BaseExpression) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value == "True"
    if isinstance(node, cst.Integer):
        return node.evaluated_value != 0
    return None


# -- classes: which attributes are layers ------------------------------------------------------


@dataclass(frozen=True)
class ClassAttributes:
    modules: Dict[str, cst.Call]  # attr -> the constructor call (nn.Linear(...), MyBlock(...))
    parameters: Set[str]  # attrs holding an nn.Parameter
    other: Set[str]  # attrs assigned something else (known not to be a module)


def module_attributes(context: "FileContext", class_def: cst.ClassDef) -> ClassAttributes:
    """``self.x = nn.Layer(...)`` (or a module class of this file) anywhere in the class's methods."""
    from torchlint.analysis.scope import assignments

    local_modules = module_classes(context)
    modules: Dict[str, cst.Call] = {}
    parameters: Set[str] = set()
    other: Set[str] = set()
    for stmt in class_def.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        for target, value in assignments(stmt.body.body):
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
                continue
            attr = target.attr.value
            kind = _constructed_kind(context, value, local_modules)
            if kind == "module":
                modules[attr] = value
            elif kind == "parameter":
                parameters.add(attr)
            else:
                other.add(attr)
    return ClassAttributes(modules, parameters, other - set(modules) - parameters)


def _constructed_kind(context: "FileContext", value: cst.BaseExpression, local_modules: Set[str]) -> Optional[str]:
    if not isinstance(value, cst.Call):
        return None
    qualified = context.qualified_name(value.func)
    if qualified in PARAMETER_CLASSES:
        return "parameter"
    if qualified is not None and _is_nn_class(qualified):
        return "module"
    if isinstance(value.func, cst.Name) and value.func.value in local_modules:
        return "module"
    return None


def _is_nn_class(qualified: str) -> bool:
    if not qualified.startswith("torch.nn.") or qualified in NOT_MODULE_CLASSES:
        return False
    last = qualified.rsplit(".", 1)[-1]
    return last[:1].isupper() and ".functional." not in qualified and ".init." not in qualified


_module_class_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def module_classes(context: "FileContext") -> Set[str]:
    """Names of the top-level classes of this file that subclass ``nn.Module`` (directly or via each other)."""
    cached = _module_class_cache.get(context)
    if cached is not None:
        return cached
    classes = [stmt for stmt in context.module.body if isinstance(stmt, cst.ClassDef)]
    found: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for class_def in classes:
            if class_def.name.value in found:
                continue
            for base in class_def.bases:
                qualified = context.qualified_name(base.value)
                if (qualified is not None and _is_nn_class(qualified)) or _last_name(base.value) in found:
                    found.add(class_def.name.value)
                    changed = True
                    break
    _module_class_cache[context] = found
    return found


# -- regions of the node being visited ---------------------------------------------------------


def is_no_grad_item(context: "FileContext", expr: cst.BaseExpression) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (also undecorated forms)."""
    call = expr if isinstance(expr, cst.Call) else None
    qualified = context.qualified_name(call.func if call is not None else expr)
    if qualified in NO_GRAD_CONTEXTS:
        if call is not None and qualified.endswith("inference_mode"):
            mode = argument(call, 0, "mode")
            return mode is None or _truthy_literal(mode.value) is not False
        return True
    if call is not None and qualified in SET_GRAD_ENABLED:
        mode = argument(call, 0, "mode")
        return mode is not None and _truthy_literal(mode.value) is False
    return False


def function_is_no_grad(context: "FileContext", function: cst.FunctionDef) -> bool:
    return any(is_no_grad_item(context, d.decorator) for d in function.decorators)


def in_no_grad_region(context: "FileContext") -> bool:
    """Whether the node being visited runs with gradients off (a ``with`` block or a decorated function)."""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.With) and any(is_no_grad_item(context, item.item) for item in node.items):
            return True
        if isinstance(node, cst.FunctionDef):
            if function_is_no_grad(context, node):
                return True
            return False  # gradients inside a def depend on its caller, not on the enclosing blocks
    return False


def in_debug_condition(context: "FileContext") -> bool:
    """Whether the node being visited sits under an ``if`` (or a function) that only runs when debugging.

    Any ``if``/``elif``/conditional expression on something other than a constant or
    ``__name__ == "__main__"`` counts (a flag, an argument, an environment variable); so does a
    function whose name says debug/check/anomaly.
    """
    for node in reversed(context.ancestors):
        if isinstance(node, (cst.If, cst.IfExp)):
            if _is_runtime_condition(node.test):
                return True
        elif isinstance(node, cst.FunctionDef):
            if _DEBUG_WORD.search(node.name.value):
                return True
    return False


def _is_runtime_condition(test: cst.BaseExpression) -> bool:
    if _truthy_literal(test) is not None or isinstance(test, (cst.SimpleString, cst.Integer, cst.Float)):
        return False
    if isinstance(test, cst.Comparison) and dotted_name(test.left) == "__name__":
        return False
    return True


# -- one function's flow -----------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """Where a statement sits: its order in the function, enclosing loops and branches."""

    order: int
    loops: Tuple[cst.CSTNode, ...]
    branches: Tuple[Tuple[int, str], ...]
    no_grad: bool

    def exclusive_with(self, other: "Site") -> bool:
        """Both cannot run in one pass: they sit in different branches of one ``if`` or ``try``."""
        mine = dict(self.branches)
        return any(key in mine and mine[key] != branch for key, branch in other.branches)


@dataclass(frozen=True)
class Binding:
    name: str
    value: cst.BaseExpression
    site: Site
    element: bool = False  # the name holds one element of ``value`` (for-target, unpacking)


@dataclass(frozen=True)
class ListFeed:
    elements: Tuple[cst.BaseExpression, ...]
    site: Site
    # ``extend(xs)``: the elements are those of ``xs`` (when ``xs`` is not a display).
    iterable: Optional[cst.BaseExpression] = None


@dataclass(frozen=True)
class BackwardCall:
    call: cst.Call
    tensor: cst.BaseExpression  # what is differentiated (``loss`` in ``scaler.scale(loss).backward()``)
    site: Site
    frees_graph: bool  # no retain_graph/create_graph that may keep it


class FunctionFlow:
    """The flow of one function body, or of the module's top-level statements (a script)."""

    def __init__(
        self, context: "FileContext", function: Union[cst.FunctionDef, cst.Module], class_def: Optional[cst.ClassDef]
    ) -> None:
        self.context = context
        self.function = function
        # "" for a module: scripts run their training loops at the top level too
        self.name = function.name.value if isinstance(function, cst.FunctionDef) else ""
        self.class_attributes = _class_attributes_for(context, class_def)
        self.no_grad_function = isinstance(function, cst.FunctionDef) and function_is_no_grad(context, function)
        self.bindings: Dict[str, List[Binding]] = {}
        self.list_feeds: Dict[str, List[ListFeed]] = {}
        self.backward_calls: List[BackwardCall] = []
        self.returns: List[Tuple[cst.BaseExpression, Site]] = []
        self.sites: Dict[int, Site] = {}  # id(call node) -> site, for calls that start a graph
        self.step_sites: List[Site] = []  # optimizer.step() and friends
        # id(call) -> (its statement line, id of the block) for calls that are a whole line
        self.lone_statements: Dict[int, Tuple[cst.SimpleStatementLine, int]] = {}
        self.removable_lines: Set[int] = set()  # lines whose block keeps other statements
        self.break_sites: List[Site] = []
        self._order = 0
        self._carries: Dict[tuple, Tuple[cst.BaseExpression, bool]] = {}
        self._names: Dict[tuple, bool] = {}
        self._scan_block(function.body if isinstance(function, cst.FunctionDef) else function, (), (), self.no_grad_function)

    # -- the walk ------------------------------------------------------------------

    def _site(self, loops, branches, no_grad) -> Site:
        self._order += 1
        return Site(self._order, loops, branches, no_grad)

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
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            return
        elif isinstance(stmt, cst.If):
            site = self._site(loops, branches, no_grad)
            self._scan_expressions(stmt.test, site)
            key = id(stmt)
            self._scan_block(stmt.body, loops, branches + ((key, "body"),), no_grad)
            if stmt.orelse is not None:
                if isinstance(stmt.orelse, cst.If):
                    self._scan_statement(stmt.orelse, loops, branches + ((key, "else"),), no_grad)
                else:
                    self._scan_block(stmt.orelse.body, loops, branches + ((key, "else"),), no_grad)
        elif isinstance(stmt, (cst.For, cst.While)):
            site = self._site(loops, branches, no_grad)
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
            self._scan_block(stmt.body, loops, branches + ((key, "body"),), no_grad)
            for index, handler in enumerate(stmt.handlers):
                self._scan_block(handler.body, loops, branches + ((key, f"except{index}"),), no_grad)
            if stmt.orelse is not None:
                self._scan_block(stmt.orelse.body, loops, branches + ((key, "body"),), no_grad)
            if stmt.finalbody is not None:
                self._scan_block(stmt.finalbody.body, loops, branches, no_grad)
        else:  # match and anything newer: look at nothing inside
            return

    def _scan_small(self, smalls: Sequence[cst.BaseSmallStatement], site: Site) -> None:
        for small in smalls:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    self._bind_target(target.target, small.value, site)
                self._record_list_display(small, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                self._bind_target(small.target, small.value, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.AugAssign):
                self._bind_target(small.target, small.value, site)
                if isinstance(small.target, cst.Name) and isinstance(small.operator, cst.AddAssign):
                    self._record_feed(small.target.value, small.value, site)
                self._scan_expressions(small.value, site)
            elif isinstance(small, cst.Return):
                if small.value is not None:
                    self.returns.append((small.value, site))
                    self._scan_expressions(small.value, site)
            elif isinstance(small, cst.Break):
                self.break_sites.append(site)
            elif isinstance(small, cst.Expr):
                self._scan_expressions(small.value, site)

    def _bind_target(self, target: cst.BaseExpression, value: cst.BaseExpression, site: Site, element: bool = False) -> None:
        if isinstance(target, cst.Name):
            self.bindings.setdefault(target.value, []).append(Binding(target.value, value, site, element))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for item in target.elements:
                inner = item.value.value if isinstance(item, cst.StarredElement) else item.value
                self._bind_target(inner, value, site, element=True)

    def _record_list_display(self, assign: cst.Assign, site: Site) -> None:
        for target in assign.targets:
            if isinstance(target.target, cst.Name):
                self._record_feed(target.target.value, assign.value, site, assignment=True)

    def _record_feed(self, name: str, value: cst.BaseExpression, site: Site, assignment: bool = False) -> None:
        if isinstance(value, (cst.List, cst.Tuple)):
            elements = tuple(e.value for e in value.elements if not isinstance(e, cst.StarredElement))
            if elements:
                self.list_feeds.setdefault(name, []).append(ListFeed(elements, site))
        elif isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            self._bind_comprehension(value, site)
            self.list_feeds.setdefault(name, []).append(ListFeed((value.elt,), site))
        elif isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add) and assignment:
            if _last_name(value.left) == name:  # L = L + [x]
                self._record_feed(name, value.right, site)

    def _bind_comprehension(self, comp: cst.BaseExpression, site: Site) -> None:
        clause = getattr(comp, "for_in", None)
        while clause is not None:
            self._bind_target(clause.target, clause.iter, site, element=True)
            clause = clause.inner_for_in

    def _scan_expressions(self, expr: cst.CSTNode, site: Site) -> None:
        scanner = _CallScanner(self, site)
        visit(expr, scanner)

    # -- questions -----------------------------------------------------------------

    def is_module_call(self, call: cst.Call) -> bool:
        """A forward pass: ``self.fc(x)``, ``self.blocks[i](x)``, ``model(x)``, ``nn.Linear(3, 1)(x)``."""
        func = call.func
        if isinstance(func, cst.Subscript):
            func = func.value
        if isinstance(func, cst.Call):
            qualified = self.context.qualified_name(func.func)
            return qualified is not None and _is_nn_class(qualified)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            attr = func.attr.value
            if attr in self.class_attributes.modules:
                return True
            return attr not in self.class_attributes.other and looks_like_model(attr)
        if isinstance(func, cst.Name):
            if self.context.qualified_name(func) is not None:
                return False
            for binding in self.bindings.get(func.value, ()):
                if _constructed_kind(self.context, binding.value, module_classes(self.context)) == "module":
                    return True
            return looks_like_model(func.value)
        if isinstance(func, cst.Attribute):  # self.model.encoder(x), trainer.model(x)
            return looks_like_model(func.attr.value) and self.context.qualified_name(func) is None
        return False

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

    def carries_grad(self, expr: cst.BaseExpression, through_detach: bool = False, at: Optional[Site] = None) -> bool:
        """Whether ``expr``, evaluated at ``at`` (any point when None), carries an autograd history.

        ``through_detach=True`` pretends the detaching steps keep the graph: the
        difference between the two answers is what those steps cut.
        """
        if self.no_grad_function:
            return False
        return self._carries_expr(expr, through_detach, at, set())

    def _carries_expr(self, expr: cst.BaseExpression, through: bool, at: Optional[Site], visiting: Set) -> bool:
        key = (id(expr), through, at.order if at is not None else None)
        known = self._carries.get(key)
        if known is not None and known[0] is expr:
            return known[1]
        result = self._compute(expr, through, at, visiting)
        self._carries[key] = (expr, result)  # the node is kept so that its id is not reused
        return result

    def reaching(self, name: str, at: Optional[Site]) -> List[Binding]:
        """The bindings of ``name`` that may give its value at ``at`` (all of them when ``at`` is None).

        Walks back from ``at``: an earlier binding in the same or an enclosing
        branch ends the walk; one in another branch does not. In a loop, when no
        binding inside the loop precedes the use, the loop's later bindings
        reach it from the previous iteration.
        """
        bindings = self.bindings.get(name, [])
        if at is None:
            return list(bindings)
        found: List[Binding] = []
        killed_in_loop = False
        for binding in sorted((b for b in bindings if b.site.order < at.order), key=lambda b: -b.site.order):
            found.append(binding)
            if at.branches[: len(binding.site.branches)] == binding.site.branches:
                killed_in_loop = bool(at.loops) and at.loops[-1] in binding.site.loops
                break
        if at.loops and not killed_in_loop:
            loop = at.loops[-1]
            found.extend(b for b in bindings if b.site.order >= at.order and loop in b.site.loops)
        return found

    def _compute(self, expr: cst.BaseExpression, through: bool, at: Optional[Site], visiting: Set) -> bool:
        step = self.detaching_operand(expr)
        if step is not None:
            return through and self._carries_expr(step, through, at, visiting)
        if isinstance(expr, cst.Name):
            return self._name_carries(expr.value, through, at, visiting)
        if isinstance(expr, cst.Call):
            return self._call_carries(expr, through, at, visiting)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NON_DIFFERENTIABLE_ATTRIBUTES:
                return False
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return expr.attr.value in self.class_attributes.parameters
            # Only fields that name tensors (``out.logits``); ``results[0].speed`` is a dict of timings.
            return bool(_TENSOR_FIELD.search(expr.attr.value)) and self._carries_expr(expr.value, through, at, visiting)
        if isinstance(expr, cst.Subscript):
            return self._carries_expr(expr.value, through, at, visiting)
        if isinstance(expr, cst.BinaryOperation):
            return self._carries_expr(expr.left, through, at, visiting) or self._carries_expr(expr.right, through, at, visiting)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self._carries_expr(expr.expression, through, at, visiting)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return any(self._carries_expr(e.value, through, at, visiting) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(e, cst.DictElement) and self._carries_expr(e.value, through, at, visiting) for e in expr.elements
            )
        if isinstance(expr, cst.IfExp):
            return self._carries_expr(expr.body, through, at, visiting) or self._carries_expr(expr.orelse, through, at, visiting)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return self._carries_expr(expr.elt, through, at, visiting)
        return False

    def _name_carries(self, name: str, through: bool, at: Optional[Site], visiting: Set) -> bool:
        # Memoised per (name, point); a name met again while it is being answered (a loop
        # carried dependency) counts as not carrying until its answer is known.
        key = (name, through, at.order if at is not None else None)
        if key in self._names:
            return self._names[key]
        self._names[key] = False
        result = self._name_value_carries(name, through, at, visiting)
        self._names[key] = result
        return result

    def _name_value_carries(self, name: str, through: bool, at: Optional[Site], visiting: Set) -> bool:
        for binding in self.reaching(name, at):
            if binding.site.no_grad:
                continue
            if self._carries_expr(binding.value, through, binding.site if at is not None else None, visiting):
                return True
        # A list holds what it was fed: ``outs[0]``, ``for o in outs``.
        for element, site in self.list_elements(name):
            if at is not None and site.order >= at.order and not (at.loops and at.loops[-1] in site.loops):
                continue
            if not site.no_grad and self._carries_expr(element, through, site if at is not None else None, visiting):
                return True
        return False

    def _call_carries(self, call: cst.Call, through: bool, at: Optional[Site], visiting: Set) -> bool:
        if self.sites.get(id(call)) is not None and self.sites[id(call)].no_grad:
            return False
        func = call.func
        qualified = self.context.qualified_name(func)
        args = [a.value for a in call.args]
        if qualified is not None:
            if qualified in NON_DIFFERENTIABLE_FUNCTIONS or qualified in REWRAP_FUNCTIONS:
                return False
            if qualified.startswith("torch.") or qualified.startswith("einops."):
                if _is_nn_class(qualified):
                    return False  # constructing a layer
                return any(self._carries_expr(a, through, at, visiting) for a in args)
            return False  # numpy, math, other libraries
        if self.is_module_call(call):
            constructor = self.module_constructor(call)
            if constructor is not None and _constructor_is_loss(self.context, constructor):
                return any(self._carries_expr(a, through, at, visiting) for a in args)
            return True
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if isinstance(func.value, cst.Name) and func.value.value in ("self", "super"):
                return looks_like_loss(method) and any(self._carries_expr(a, through, at, visiting) for a in args)
            if method in NON_DIFFERENTIABLE_METHODS:
                return False
            if self._carries_expr(func.value, through, at, visiting):
                return True
            # x.matmul(w), loss_fn.forward(out, y)
            return (looks_like_loss(method) or _is_tensor_method_with_tensor_args(method)) and any(
                self._carries_expr(a, through, at, visiting) for a in args
            )
        if isinstance(func, cst.Name):
            if func.value in ("len", "print", "str", "repr", "isinstance", "range", "enumerate", "zip", "int", "bool", "round"):
                return False
            if looks_like_loss(func.value):
                return any(self._carries_expr(a, through, at, visiting) for a in args)
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

    def detaching_steps(self, expr: cst.BaseExpression, at: Optional[Site] = None) -> List[cst.BaseExpression]:
        """The graph-cutting steps through which a gradient would otherwise reach ``expr`` (at ``at``)."""
        found: List[cst.BaseExpression] = []
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Optional[Site]) -> None:
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
                return
            for child in _dataflow_operands(node):
                walk(child, where)

        walk(expr, at)
        return found

    def graph_roots(self, expr: cst.BaseExpression, at: Optional[Site] = None) -> List[Tuple[cst.Call, Site]]:
        """The forward passes (module calls, with their sites) ``expr`` at ``at`` was computed from, ordered."""
        roots: Dict[int, Tuple[cst.Call, Site]] = {}
        seen: Set = set()

        def walk(node: cst.BaseExpression, where: Optional[Site] = at) -> None:
            key = (id(node), where.order if where is not None else None)
            if key in seen:
                return
            seen.add(key)
            if self.detaching_operand(node) is not None:
                return
            if isinstance(node, cst.Name):
                for binding in self.reaching(node.value, where):
                    if not binding.site.no_grad:
                        walk(binding.value, binding.site if where is not None else None)
                return
            if isinstance(node, cst.Call) and self.is_module_call(node):
                site = self.sites.get(id(node))
                constructor = self.module_constructor(node)
                if site is not None and not site.no_grad and not (constructor is not None and _constructor_is_loss(self.context, constructor)):
                    roots[id(node)] = (node, site)
            for child in _dataflow_operands(node):
                walk(child, where)

        walk(expr, at)
        return sorted(roots.values(), key=lambda pair: pair[1].order)

    def flows_into(self, sink: cst.BaseExpression, at: Optional[Site] = None) -> Set[int]:
        """Ids of the expression nodes whose values flow into ``sink`` (evaluated at ``at``)."""
        seen: Set = set()
        nodes: Set[int] = set()

        def walk(node: cst.BaseExpression, where: Optional[Site]) -> None:
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

    def list_elements(self, name: str) -> List[Tuple[cst.BaseExpression, Site]]:
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


class _CallScanner(cst.CSTVisitor):
    """Records, inside one statement's expressions, list feeds, backward calls and module-call sites."""

    def __init__(self, flow: FunctionFlow, site: Site) -> None:
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
            elif method == "backward" and flow.context.qualified_name(func) is None:
                flow.backward_calls.append(BackwardCall(node, _unscaled(receiver), self.site, _frees_graph(node)))
            elif method == "step" and not node.args:
                flow.step_sites.append(self.site)
        qualified = flow.context.qualified_name(func)
        if qualified == "torch.autograd.backward":
            first = argument(node, 0, "tensors")
            if first is not None:
                flow.backward_calls.append(BackwardCall(node, first.value, self.site, _frees_graph(node)))


def _unscaled(receiver: cst.BaseExpression) -> cst.BaseExpression:
    """``loss`` for ``scaler.scale(loss)`` (GradScaler) and ``accelerator``-style wrappers."""
    if (
        isinstance(receiver, cst.Call)
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value == "scale"
        and len(receiver.args) == 1
    ):
        return receiver.args[0].value
    return receiver


def _frees_graph(call: cst.Call) -> bool:
    """No ``retain_graph``/``create_graph`` that could keep the graph (a non-literal value may)."""
    if has_star_args(call):
        return False
    for name in ("retain_graph", "create_graph"):
        arg = keyword_arg(call, name)
        if arg is not None and _truthy_literal(arg.value) is not False:
            return False
    # Tensor.backward(gradient, retain_graph, create_graph): positional forms
    positional = positional_args(call)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward" and len(positional) >= 2:
        return all(_truthy_literal(p.value) is False for p in positional[1:3])
    return True


def _is_tensor_method_with_tensor_args(method: str) -> bool:
    return method in {"matmul", "mm", "bmm", "mul", "add", "sub", "div", "dot", "expand_as", "view_as", "type_as", "where"}


def _is_loss_function(name: str) -> bool:
    return name.endswith("loss") or name in {
        "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "nll_loss",
        "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "margin_ranking_loss", "cosine_embedding_loss",
    }


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


# -- entry points --------------------------------------------------------------------------------

_class_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_flow_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _class_attributes_for(context: "FileContext", class_def: Optional[cst.ClassDef]) -> ClassAttributes:
    if class_def is None:
        return ClassAttributes({}, set(), set())
    table = _class_cache.setdefault(context, {})
    key = id(class_def)
    if key not in table:
        table[key] = module_attributes(context, class_def)
    return table[key]


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
    key = id(function)
    flow = table.get(key)
    if flow is None:
        flow = table[key] = FunctionFlow(context, function, class_def)
    return flow


def current_flow(context: "FileContext") -> Optional[FunctionFlow]:
    """The flow of the function around the visited node, or of the module for top-level code."""
    function, class_def = enclosing_function(context)
    if function is None:
        if any(isinstance(node, cst.ClassDef) for node in context.ancestors):
            return None  # class bodies hold definitions, not training code
        return flow_for(context, context.module, None)
    return flow_for(context, function, class_def)
