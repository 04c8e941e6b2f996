"""Same-file callers: every call this file makes of one of its functions, and what it hands in.

The guard analysis asks two questions of the function that holds an op when
the op's operand is a parameter, or when the function itself runs nowhere
differentiated: "what do the callers pass?" (``reduce_loss(loss, mask)``
called only with masks built from lengths) and "where do the callers run?"
(``self._project_batch(w)`` called only under ``torch.no_grad()``).  The
file is taken at its word: a function it calls only with positive
arguments is not reported for a zero it is never handed here, even a public
loss function that other modules may call too (the linter cannot see them).

:func:`call_sites` answers only when the file shows every way it reaches the
function:

- a helper the file owns (nested in a function, or private: ``_project``)
  or a loss function (:func:`judged_by_callers`): a public
  helper serves other modules with values the file does not show;
- a plain name bound to a ``def`` (module level or nested), or a method
  called as ``self.name(...)`` from a method of its own class;
- every other mention of the name in the file is one of these calls (of
  this def or of another def the lookup ties it to: a method of the same
  name in another class): a function passed as a value (``map(fn, xs)``,
  ``self.hook = self._fn``), reached through another object
  (``other._fn(x)``, ``super()._fn(x)``), or called from code the lookup
  cannot tie to a def makes the answer None;
- the ``forward`` of a loss module class of the file
  (:func:`judged_by_instances`) is reached through its
  instances: every one is stored as ``self.attr = Cls(...)`` (moves such as
  ``.to(device)`` allowed; ``super(Cls, self)`` inside ``Cls`` is no use of the
  class) in a class of the file, and each such ``self.attr``
  is only called, tested (``if self.attr``, ``self.attr is not None``) or
  reset to ``None``; its calls ``self.attr(...)`` are the call sites;
- not a dunder or decorated function, nor another method the framework
  calls (``training_step``): their callers are not in the file.

:func:`argument_for` maps a parameter to the expression a call passes for
it (positional, keyword or the default), None when ``*args``/``**kwargs``
hide it.

The index is one walk of the module, done the first time a rule asks
(``FileContext.memoized``).  With the pre-pass, the regions that mention a
seeded function's name are kept (``Scan.with_mentions``), so the calls seen
here are the file's own.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis.model.dataflow import Site, site_of
from torchlint.analysis.model.bindings import all_params, bound_names
from torchlint.analysis.model.ops import MODULE_MOVES, module_constructor, unmoved
from torchlint.analysis.model.returns import classes_of_methods, called_function
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


_FRAMEWORK_METHODS = frozenset({"forward", "training_step", "validation_step", "test_step", "predict_step"})


def framework_called(name: str) -> bool:
    """Functions (by name) the framework or Python calls (``forward``, dunders): their callers are not in the file."""
    return name in _FRAMEWORK_METHODS or name.startswith("__")


_LOSS_WORD = re.compile(r"loss|criterion", re.IGNORECASE)


def judged_by_callers(function_name: str, nested: bool) -> bool:
    """Whether a function's parameters are judged by what the file's calls pass it: helpers the file owns
    (nested in a function, or private: ``_project``) and loss functions (``reduce_loss(loss, mask)``
    called with length masks).  A public helper (``get_timestep_embedding``) serves other modules too,
    and keeping every such callers' region for LibCST made a cold run over diffusers 15% slower."""
    private = function_name.startswith("_") and not function_name.startswith("__")
    # A cost gate, not evidence: which functions' callers are read at all (the pre-pass keeps their regions).
    # What the callers pass is the fact; a public helper's callers left unread leave it unguarded.
    return nested or private or bool(_LOSS_WORD.search(function_name))


def judged_by_instances(class_name: str) -> bool:
    """Whether a module class's ``forward`` is judged by what its instances are called with: loss modules,
    which a model calls with predictions it prepared (``self.criterion(sigma.clamp_min(eps), ...)``).
    A layer's ``forward`` gets activations no caller bounds; keeping its callers for LibCST would cost
    much of a model file for nothing (a sample of transformers: 38% of its characters parsed instead of 31%)."""
    return bool(_LOSS_WORD.search(class_name))  # a cost gate, as judged_by_callers


@dataclass(frozen=True)
class CallSite:
    call: cst.Call
    ancestors: Tuple[cst.CSTNode, ...]  # outermost first (the module), the call excluded
    through_self: bool  # ``self.name(...)``: the call's first argument is the method's second parameter


def called_in_text(context: "FileContext", name: str) -> bool:
    """Whether ``name(`` stands in the file's text other than in its ``def``: when it does not, no call of
    it exists and the module need not be walked to find one."""
    known: Dict[str, bool] = context.memoized("callers.called-in-text", context.module, lambda _: {})
    if name not in known:
        known[name] = len(re.findall(rf"\b{re.escape(name)}\s*\(", context.source)) >= 2
    return known[name]


def call_sites(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    """Every call of ``function`` in the file, or None when the file may reach it otherwise (see module docs)."""
    return context.memoized("callers.sites", function, lambda node: _call_sites(context, node))


def _call_sites(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    name = function.name.value
    if function.decorators or function.asynchronous is not None:
        return None
    if name == "forward":
        return _module_call_sites(context, function)
    if framework_called(name) or not called_in_text(context, name):
        return None
    index = _index(context)
    if not judged_by_callers(name, nested=id(function) in index.nested):
        return None
    return _plain_call_sites(context, function, index)


def every_call_site(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    """Every call of ``function`` in the file whatever its name says (a public ``train(model, loader)``
    too), or None when the file may reach it otherwise (see the module docs).  Unlike :func:`call_sites`
    this is no claim that the file shows every caller: other modules may call a public function, and an
    analysis that reads a parameter from these calls assumes they are the ones that matter."""

    def compute(node: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
        if node.decorators or node.asynchronous is not None or framework_called(node.name.value):
            return None
        if not called_in_text(context, node.name.value):
            return None
        # ``model.train()`` cannot run a function of the module: only a method is reached through an attribute.
        method = id(node) in classes_of_methods(context)
        return _plain_call_sites(context, node, _index(context), attributes_escape=method)

    return context.memoized("callers.every-site", function, compute)


def _plain_call_sites(
    context: "FileContext", function: cst.FunctionDef, index: "_Index", attributes_escape: bool = True
) -> Optional[Tuple[CallSite, ...]]:
    """The calls ``name(...)`` / ``self.name(...)`` of ``function``, when every mention of its name is one
    (``other.name`` counts as a mention when ``attributes_escape``)."""
    name = function.name.value
    if name in index.escaped or (attributes_escape and name in index.escaped_attributes):
        return None
    found = []
    for site in index.calls.get(name, ()):
        if any(node is function for node in site.ancestors):
            return None  # recursive: what it passes itself depends on what it was passed
        callee = called_function(context, site.call, site_of(list(site.ancestors) + [site.call]))
        if callee is None:
            return None  # a call of the name the lookup cannot tie to a def: it may be this one
        if callee is function:
            found.append(site)
    return tuple(found) or None


def file_calls(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    """Every call the file makes of ``function``, owned or public, or None when it makes none or may reach
    it otherwise (passed as a value, recursion, a call the lookup cannot tie to a def).  Unlike
    :func:`call_sites`, a public function qualifies: this answers where the file itself runs it."""

    def compute(node: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
        name = node.name.value
        if node.decorators or framework_called(name) or name == "forward" or not called_in_text(context, name):
            return None
        index = _index(context)
        if name in index.escaped:
            return None
        found = []
        for site in index.calls.get(name, ()):
            if any(outer is node for outer in site.ancestors):
                return None
            callee = called_function(context, site.call, site_of(list(site.ancestors) + [site.call]))
            if callee is None:
                return None
            if callee is node:
                found.append(site)
        return tuple(found) or None

    return context.memoized("callers.file-calls", function, compute)


def calls_named(context: "FileContext", name: str) -> Tuple[CallSite, ...]:
    """Every plain or ``self.`` call of a function the file defines as ``name`` (whichever def it reaches)."""
    if not called_in_text(context, name):
        return ()
    return tuple(_index(context).calls.get(name, ()))


def argument_for(function: cst.FunctionDef, parameter: str, site: CallSite) -> Optional[cst.BaseExpression]:
    """What ``site`` passes for ``parameter`` of ``function`` (its default when the call omits it), or None."""
    params = function.params
    call = site.call
    if any(arg.star for arg in call.args):
        return None
    positional = list(params.posonly_params) + list(params.params)
    if site.through_self:
        positional = positional[1:]  # ``self`` is bound by the attribute lookup
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    passed = [arg.value for arg in call.args if arg.keyword is None]
    for position, param in enumerate(positional):
        if param.name.value == parameter:
            if position < len(passed):
                return passed[position]
            return keywords.get(parameter, param.default)
    for param in params.kwonly_params:
        if param.name.value == parameter:
            return keywords.get(parameter, param.default)
    return None


@dataclass
class _Index:
    calls: Dict[str, List[CallSite]]
    escaped: Set[str]  # names mentioned other than as the callee of a plain or ``self.`` call
    escaped_attributes: Set[str]  # the same, as attributes of something else (``model.train()``, ``other._fn``)
    nested: Set[int]  # ids of the defs inside a def


def _index(context: "FileContext") -> _Index:
    return context.memoized(
        "callers.index", context.module, lambda module: _build_index(module, defined_function_names(context))
    )


_DEF_LINE = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


def defined_function_names(context: "FileContext") -> FrozenSet[str]:
    """Names of every function and method defined in the file (``def log(self)`` of a Lie group), once per
    file, read from the text (a ``def`` line inside a string adds a name: harmless, never one missed)."""
    return context.memoized("callers.defined-names", context.module, lambda _: frozenset(_DEF_LINE.findall(context.source)))


def _build_index(module: cst.Module, wanted: FrozenSet[str]) -> _Index:
    index = _Index({}, set(), set(), set())
    path: List[cst.CSTNode] = []
    callees: Set[int] = set()  # ids of the Name/Attribute nodes that are the callee of an indexed call

    class _Calls(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            kind = type(node)  # exact types: isinstance on LibCST's ABC-derived classes is slow here
            if kind is cst.Call:
                name, through_self = _callee(node.func)
                if name in wanted:
                    index.calls.setdefault(name, []).append(CallSite(node, tuple(path), through_self))
                    callees.add(id(node.func))
            elif kind is cst.Name:
                if node.value in wanted and id(node) not in callees:
                    index.escaped.add(node.value)
            elif kind is cst.Attribute:
                if node.attr.value in wanted and id(node) not in callees:
                    index.escaped_attributes.add(node.attr.value)
                callees.add(id(node.attr))  # the attribute's own Name is not a mention of a plain name
            elif kind is cst.Arg:
                if node.keyword is not None:
                    callees.add(id(node.keyword))  # ``train=True``: a keyword's name mentions no function
            elif kind is cst.FunctionDef:
                callees.add(id(node.name))  # the definition itself
                if any(isinstance(outer, cst.FunctionDef) for outer in path):
                    index.nested.add(id(node))
            path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            path.pop()

    visit(module, _Calls())
    return index


def _callee(func: cst.BaseExpression) -> Tuple[Optional[str], bool]:
    if isinstance(func, cst.Name):
        return func.value, False
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value, True
    return None, False


def enclosing_function(ancestors: Sequence[cst.CSTNode]) -> Optional[cst.FunctionDef]:
    """The innermost ``def`` around a node (lambdas and classes in between end the search)."""
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
    return None


def function_of_parameter(
    ancestors: Sequence[cst.CSTNode], name: str, context: Optional["FileContext"] = None
) -> Optional[cst.FunctionDef]:
    """The function whose parameter ``name`` is where the engine stands: the innermost ``def``, or an enclosing
    one that a nested ``def`` reads it from when the inner ones bind no ``name`` (``def closure():`` inside
    ``train(criterion)`` calling ``criterion(out, y)``); None when a class, a lambda or a binding comes first.
    With ``context``, each body's bound names are read once per file."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(node, cst.FunctionDef):
            if any(param.name.value == name for param in all_params(node.params)):
                return node
            if name in _bound_in(context, node):
                return None
    return None


def _bound_in(context: Optional["FileContext"], function: cst.FunctionDef) -> Set[str]:
    if context is None:
        return bound_names(function.body)
    return context.memoized("callers.bound-names", function, lambda f: bound_names(f.body))


def arguments_from_callers(
    context: "FileContext", ancestors: Sequence[cst.CSTNode], name: str
) -> Optional[List[Tuple[cst.BaseExpression, List[cst.CSTNode]]]]:
    """What each call in the file passes for parameter ``name`` of the function around ``ancestors`` (or of the one a
    nested ``def`` reads it from), each with the ancestors of its call (to read the value where it was written);
    None when the body rebinds the parameter, a call passes nothing known, or the file may call it otherwise."""
    function = function_of_parameter(ancestors, name, context)
    if function is None or name in _bound_in(context, function):
        return None
    passed = arguments_at_calls(context, function, name)
    return [(value, list(site.ancestors)) for value, site in passed] if passed else None


def arguments_at_calls(
    context: "FileContext", function: cst.FunctionDef, name: str
) -> Optional[List[Tuple[cst.BaseExpression, CallSite]]]:
    """What every call of ``function`` in the file (:func:`every_call_site`) passes for parameter ``name``, with
    the call; None when the file may call it otherwise or a call passes nothing known for it; empty when the
    file never calls it."""
    sites = every_call_site(context, function)
    if sites is None:
        return None
    passed = []
    for site in sites:
        value = argument_for(function, name, site)
        if value is None:
            return None
        passed.append((value, site))
    return passed


@dataclass
class _Instances:
    holders: Dict[str, Set[Tuple[int, str]]]  # class name -> (id of the class holding it, attribute)
    escaped_classes: Set[str]  # named other than in ``self.attr = Cls(...)``
    escaped_attributes: Set[str]  # ``self.attr`` used other than called, tested or reset to None
    attribute_calls: Dict[Tuple[int, str], List[CallSite]]


def _module_call_sites(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    """The calls of a module class's instances (see module docs), or None."""
    owner = classes_of_methods(context).get(id(function))
    if owner is None or owner.decorators or not any(statement is owner for statement in context.module.body):
        return None
    if not judged_by_instances(owner.name.value):
        return None
    instances = context.memoized("callers.instances", context.module, _build_instances)
    name = owner.name.value
    if name in instances.escaped_classes or name not in instances.holders:
        return None
    holders = instances.holders[name]
    attributes = {attribute for _, attribute in holders}
    if attributes & instances.escaped_attributes:
        return None
    found: List[CallSite] = []
    for key, calls in instances.attribute_calls.items():
        if key[1] in attributes:
            if key not in holders:
                return None  # ``self.attr(...)`` in a class that does not store the instance (a subclass)
            found.extend(calls)
    return tuple(found) or None


def _names_own_class_in_super(call: cst.Call, owner: Optional[cst.ClassDef]) -> bool:
    """``super(Cls, self)`` inside ``Cls``."""
    return (
        owner is not None
        and isinstance(call.func, cst.Name)
        and call.func.value == "super"
        and bool(call.args)
        and isinstance(call.args[0].value, cst.Name)
        and call.args[0].value.value == owner.name.value
    )


def _build_instances(module: cst.Module) -> _Instances:
    classes = {s.name.value for s in module.body if isinstance(s, cst.ClassDef) and not s.decorators}
    found = _Instances({}, set(), set(), {})
    path: List[cst.CSTNode] = []
    settled: Set[int] = set()  # ids of names and attributes whose use is accounted for

    class _Uses(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Assign):
                self._assignment(node)
            elif isinstance(node, cst.Call):
                attribute = _self_attribute(node.func)
                owner = _enclosing_class(path)
                if _names_own_class_in_super(node, owner):
                    settled.add(id(node.args[0].value))  # super(Cls, self).__init__(): not a use of the class
                if attribute is not None and owner is not None:
                    settled.add(id(node.func))
                    key = (id(owner), attribute)
                    found.attribute_calls.setdefault(key, []).append(CallSite(node, tuple(path), True))
            elif isinstance(node, cst.ClassDef):
                settled.add(id(node.name))
            elif isinstance(node, cst.Name):
                if node.value in classes and id(node) not in settled:
                    found.escaped_classes.add(node.value)
            elif isinstance(node, cst.Attribute):
                settled.add(id(node.attr))
                attribute = _self_attribute(node)
                if attribute is not None and id(node) not in settled and not _tested(node, path):
                    found.escaped_attributes.add(attribute)
            path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            path.pop()

        def _assignment(self, node: cst.Assign) -> None:
            target = node.targets[0].target if len(node.targets) == 1 else None
            attribute = _self_attribute(target) if target is not None else None
            owner = _enclosing_class(path)
            if attribute is None or owner is None:
                return  # held by a plain name or a container: its calls are not followed
            values = [node.value.body, node.value.orelse] if isinstance(node.value, cst.IfExp) else [node.value]
            built = []
            for value in values:
                while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_MOVES:
                    value = value.func.value
                if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in classes:
                    built.append(value.func)
                elif not (isinstance(value, cst.Name) and value.value == "None"):
                    return  # holds something else too: its uses are judged as they come
            settled.add(id(target))  # ``self.attr = Cls(...)``, ``= None`` or ``= Cls(...) if c else None``
            for constructor in built:
                settled.add(id(constructor))
                found.holders.setdefault(constructor.value, set()).add((id(owner), attribute))

    visit(module, _Uses())
    return found


def _self_attribute(node: Optional[cst.BaseExpression]) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _enclosing_class(path: Sequence[cst.CSTNode]) -> Optional[cst.ClassDef]:
    for node in reversed(path):
        if isinstance(node, cst.ClassDef):
            return node
    return None


def _tested(node: cst.CSTNode, path: Sequence[cst.CSTNode]) -> bool:
    """``if self.attr``, ``if a and not self.attr``, ``self.attr is not None``: a use that calls nothing
    and hands the module to nothing."""
    position, child = len(path) - 1, node
    while position >= 0 and (
        isinstance(path[position], cst.BooleanOperation)
        or (isinstance(path[position], cst.UnaryOperation) and isinstance(path[position].operator, cst.Not))
    ):
        position, child = position - 1, path[position]
    parent = path[position] if position >= 0 else None
    if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert)):
        return parent.test is child
    if isinstance(parent, cst.Comparison) and parent.left is node:
        return all(
            isinstance(c.operator, (cst.Is, cst.IsNot)) and isinstance(c.comparator, cst.Name) and c.comparator.value == "None"
            for c in parent.comparisons
        )
    return False


# -- judging a function by its callers ---------------------------------------------------


def every_caller_passes(context: "FileContext", name: str, site: Optional[Site], accepts) -> bool:
    """Whether ``name`` is a parameter of the function holding the op being judged and every same-file
    call of it passes a value ``accepts(value, site)`` (``reduce_loss(loss, mask)`` called with length
    masks only)."""

    def passes(function: cst.FunctionDef, call_site) -> bool:
        value = argument_for(function, name, call_site)
        return value is not None and accepts(value, site_of(list(call_site.ancestors) + [call_site.call]))

    return judged_at_every_call(context, site, passes)


def passed_by_every_call_site(context: "FileContext", name: str, accepts) -> bool:
    """Whether ``name`` is a parameter of the function the engine stands in and every call of the function in the
    file (:func:`every_call_site`: public helpers too) passes a value ``accepts(value, site)``: what a spherical
    interpolation's callers hand it, for one. The caller has shown that the parameter's own binding is what it
    asks about (dataflow's ``param`` binding reaches its use)."""
    if context.reading_callers:
        return False
    function = enclosing_function(context.ancestors)
    if function is None or not any(param.name.value == name for param in all_params(function.params)):
        return False

    def passes(function: cst.FunctionDef, site: CallSite) -> bool:
        value = argument_for(function, name, site)
        return value is not None and accepts(value, site_of(list(site.ancestors) + [site.call]))

    return _holds_at_each(context, function, every_call_site(context, function), passes)


def judged_at_every_call(context: "FileContext", site: Optional[Site], judge) -> bool:
    """Whether the function holding the op being judged has same-file calls and ``judge(function, call_site)``
    holds at each, judged where the call stands (``self.eps`` there is the calling class's: the engine's
    ancestors are swapped for the call's).  One level: the callers' own callers are not read."""
    if context.reading_callers or site is None or site.function is None:
        return False
    function = site.function
    if function is not enclosing_function(context.ancestors):
        return False
    return _holds_at_each(context, function, call_sites(context, function), judge)


def _holds_at_each(context: "FileContext", function: cst.FunctionDef, sites, judge) -> bool:
    """``judge(function, site)`` at each of ``sites`` (none: False), with the engine's ancestors swapped for the
    call's and the callers' own callers left unread."""
    if not sites:
        return False
    visiting = context.ancestors
    context.reading_callers = True
    try:
        for call_site in sites:
            context.ancestors = list(call_site.ancestors)
            if not judge(function, call_site):
                return False
        return True
    finally:
        context.ancestors = visiting
        context.reading_callers = False


# How many callers up a parameter is followed to the module constructor its callers pass.
CONSTRUCTOR_CALLER_DEPTH = 3


def constructor_passed_by_callers(context: "FileContext", name: str, depth: int = 0) -> Optional[cst.Call]:
    """The module constructor behind parameter ``name`` of the function the engine stands in, when every call of
    the function in the file passes a module built by the same class (``train(loader, model, criterion)`` where
    each caller holds ``criterion = nn.CrossEntropyLoss()``): the call's own or the one its name holds there.
    A caller that passes its own parameter on (``train`` calling ``train_one_epoch(model, loss_fn)``) is
    followed to its callers, up to :data:`CONSTRUCTOR_CALLER_DEPTH` levels."""
    if context.reading_callers and depth == 0:
        return None
    passed = arguments_from_callers(context, context.ancestors, name)
    if not passed:
        return None
    found: List[cst.Call] = []
    visiting = context.ancestors
    context.reading_callers = True
    try:
        for value, site_ancestors in passed:
            context.ancestors = site_ancestors
            constructor = module_constructor(context, value) if isinstance(value, cst.Name) else value
            if constructor is None and isinstance(value, cst.Name) and depth < CONSTRUCTOR_CALLER_DEPTH:
                constructor = constructor_passed_by_callers(context, value.value, depth + 1)
                context.ancestors = site_ancestors
            if not isinstance(constructor, cst.Call):
                return None
            found.append(constructor)
    finally:
        context.ancestors = visiting
        context.reading_callers = False
    kinds = {context.qualified_name(unmoved(constructor).func) for constructor in found}
    return found[0] if len(kinds) == 1 and None not in kinds else None
