"""What activation ends a value: the output of a call, of a module, of a model class's ``forward``.

Several rules ask whether a tensor is already a softmax, sigmoid, log-softmax or log-sigmoid output
when the activation is not written where the tensor is used: TL206 of a loss's input
(``criterion(model(x), y)`` where ``model`` is a ``Network`` whose ``forward`` ends in ``F.softmax``,
or an auxiliary classifier head ``nn.Sequential(..., nn.Softmax())``), the fused-op rules of a log's
operand (``torch.log(D(x))`` where ``D`` ends in ``nn.Sigmoid()``).  This module answers once.

API:

- :func:`output_activation` ``(context, expression) -> Optional[str]``: the kind (``"softmax"``,
  ``"sigmoid"``, ``"log_softmax"``, ``"logsigmoid"``: :data:`ACTIVATION_KINDS`) that the value of
  ``expression`` ends in, ``expression`` being read at the node the rule is visiting
  (``context.ancestors``); None when it is not known to end in one.
- :func:`trace_output`: the same as a :class:`Traced` (kind, where it comes from for a message, and
  whether the answer assumed something).
- :func:`module_output`: what the module ``expression`` (``model``, ``self.head``, ``nn.Sequential(...)``)
  returns when called.
- :func:`class_output`: what the ``forward`` of a class returns (a :class:`Traced`, a tuple of them
  for ``return validity, label``, or None).

How it decides, in at most :data:`MAX_DEPTH` steps:

- activations come from one table (:data:`ACTIVATION_FUNCTIONS`, :data:`ACTIVATION_METHODS`,
  :data:`ACTIVATION_MODULES`); ``exp`` undoes a log (``torch.exp(log_softmax(z))`` is a softmax) and
  ``log`` takes one; steps that keep values (``.view``, ``.squeeze``, ``torch.squeeze``, ``.type(...)``,
  ``.to(device)``, indexing) are looked through;
- at the use (LibCST): a name is followed to the bindings that reach it (analysis/model/dataflow.py; every
  one must agree), ``a, b = model(x)`` to the element of the call's tuple, a parameter to what the
  file's own calls of its function pass (then the answer is *assumed*: other modules may call it with
  other values), a same-file helper to what it returns;
- a called module is followed through the name, ``self.`` attribute or parameter holding it, moves
  (``Net().to(device)``, ``.eval()``), wrappers (``nn.DataParallel(m)``, ``torch.compile(m)``), a
  helper that builds it, to its constructor: ``nn.Sequential`` ends in what its last layer ends in,
  an activation module is that activation, and a class of the file or of the project (analysis/model/project_index.py,
  read with ``ast``) returns what its ``forward`` returns (inherited from a base of the project when it
  defines none);
- in a ``forward`` (``ast``): every ``return`` must agree (``return logits if self.training else
  probs`` agrees on nothing); names are followed to the one assignment that reaches the return in
  straight-line code; ``self.attr(x)`` to what ``__init__`` stored in ``self.attr``; ``self.helper(x)``
  and module-level functions to what they return.

Not followed: modules kept in containers (``self.layers[-1]``, ``ModuleList``), Sequentials whose last
layer comes from a list (``nn.Sequential(*layers)``; ``nn.Sequential(*blocks, nn.Sigmoid())`` ends in its sigmoid), classes outside the project (``transformers``' models),
``__call__`` overrides, values whose bindings disagree or are conditional.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name, own_nodes
from torchlint.analysis.flow.callers import arguments_at_calls
from torchlint.analysis.model.dataflow import Site, bindings, bound_on_every_path, site_of, unpack_position, unpacked_element
from torchlint.analysis.values.fused import SHAPE_METHODS, SIGMOID_FUNCTIONS, SIGMOID_MODULES
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.ops import MODULE_MOVES, SOFTMAX_FUNCTIONS, SOFTMAX_MODULES, is_value_receiver
from torchlint.analysis.model.project_index import ModuleFacts, definition, file_facts
from torchlint.analysis.model.returns import called_function, classes_of_methods, returned_values
from torchlint.analysis.project.project_calls import ForeignArgument, arguments_from_other_modules

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

MAX_DEPTH = 12

ACTIVATION_KINDS: FrozenSet[str] = frozenset({"softmax", "sigmoid", "log_softmax", "logsigmoid"})

_LOG_SOFTMAX_FUNCTIONS = ("torch.log_softmax", "torch.nn.functional.log_softmax", "torch.special.log_softmax")
ACTIVATION_FUNCTIONS: Dict[str, str] = {
    **{name: "softmax" for name in SOFTMAX_FUNCTIONS},
    **{name: "sigmoid" for name in SIGMOID_FUNCTIONS},
    **{name: "log_softmax" for name in _LOG_SOFTMAX_FUNCTIONS},
    "torch.nn.functional.logsigmoid": "logsigmoid",
}
ACTIVATION_METHODS: Dict[str, str] = {"softmax": "softmax", "sigmoid": "sigmoid", "log_softmax": "log_softmax"}
ACTIVATION_MODULES: Dict[str, str] = {
    **{name: "softmax" for name in SOFTMAX_MODULES},
    **{name: "sigmoid" for name in SIGMOID_MODULES},
    "torch.nn.Softmax2d": "softmax",
    "torch.nn.modules.activation.Softmax2d": "softmax",
    "torch.nn.LogSoftmax": "log_softmax",
    "torch.nn.modules.activation.LogSoftmax": "log_softmax",
    "torch.nn.LogSigmoid": "logsigmoid",
    "torch.nn.modules.activation.LogSigmoid": "logsigmoid",
}
# exp of a log-probability is the probability; log of a probability the log-probability.
UNDONE_BY_EXP: Dict[str, str] = {"log_softmax": "softmax", "logsigmoid": "sigmoid"}
TAKEN_BY_LOG: Dict[str, str] = {"softmax": "log_softmax", "sigmoid": "logsigmoid"}
EXP_FUNCTIONS: FrozenSet[str] = frozenset({"torch.exp"})
LOG_FUNCTIONS: FrozenSet[str] = frozenset({"torch.log"})
# Steps that keep every value of a tensor (they move, relabel or convert elements).
VALUE_METHODS: FrozenSet[str] = SHAPE_METHODS | frozenset({"type", "cuda", "cpu", "clone", "detach", "expand", "expand_as"})
VALUE_FUNCTIONS: FrozenSet[str] = frozenset(
    {"torch.squeeze", "torch.unsqueeze", "torch.flatten", "torch.reshape", "torch.transpose", "torch.permute", "torch.t"}
)
# Wrappers whose output is the wrapped module's (the module is their first argument).
MODULE_WRAPPERS: FrozenSet[str] = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.compile",
        "torch.jit.script",
    }
)
SEQUENTIAL: FrozenSet[str] = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})


@dataclass(frozen=True)
class Traced:
    """An activation a value ends in: ``kind`` (one of :data:`ACTIVATION_KINDS`), ``origin`` (where, for a
    message: ``Network.forward``, ``F.softmax``) and ``assumed`` (the answer took a function's parameter to
    hold what the file's own calls pass it)."""

    kind: str
    origin: str
    assumed: bool = False


# How a name is read: as a tensor (``probs``) or as a module that is called (``model`` in ``model(x)``).
VALUE, MODULE = "value", "module"

# A value: an activation, a tuple of values (``return validity, label``), or nothing known.
Output = Union[None, Traced, Tuple["Output", ...]]


def output_activation(context: "FileContext", expression: cst.BaseExpression, site: Optional[Site] = None) -> Optional[str]:
    """The activation kind the value of ``expression`` ends in, or None (see the module docs)."""
    traced = trace_output(context, expression, site)
    return traced.kind if traced is not None else None


def trace_output(context: "FileContext", expression: cst.BaseExpression, site: Optional[Site] = None) -> Optional[Traced]:
    """:func:`output_activation` with where the activation is and whether the answer assumed something."""
    found = _SiteReader(context).value(expression, site or _here(context), 0)
    return found if isinstance(found, Traced) else None


def module_output(context: "FileContext", expression: cst.BaseExpression, site: Optional[Site] = None) -> Output:
    """What the module ``expression`` returns when called (``model`` in ``model(x)``), or None."""
    return _SiteReader(context).module(expression, site or _here(context), 0)


def class_output(facts: ModuleFacts, name: str, project=None) -> Output:
    """What ``forward`` of class ``name`` of module ``facts`` returns, its own or inherited."""
    return _AstReader(facts, project).class_output(name, 0)


def element(output: Output, index: int, length: Optional[int] = None) -> Output:
    """Element ``index`` of a tuple output (of ``length`` elements when given), else None."""
    if isinstance(output, tuple) and -len(output) <= index < len(output) and (length is None or length == len(output)):
        return output[index]
    return None


def join(outputs: Sequence[Output]) -> Output:
    """The output every one of ``outputs`` agrees on (the first's origin; assumed if any is), else None."""
    if not outputs or any(output is None for output in outputs):
        return None
    first = outputs[0]
    if isinstance(first, Traced):
        if not all(isinstance(o, Traced) and o.kind == first.kind for o in outputs):
            return None
        return replace(first, assumed=any(o.assumed for o in outputs))  # type: ignore[union-attr]
    if isinstance(first, tuple):
        if not all(isinstance(o, tuple) and len(o) == len(first) for o in outputs):
            return None
        return tuple(join([o[i] for o in outputs]) for i in range(len(first)))  # type: ignore[index]
    return None


def _assumed(output: Output) -> Output:
    if isinstance(output, Traced):
        return replace(output, assumed=True)
    if isinstance(output, tuple):
        return tuple(_assumed(o) for o in output)
    return None


def _here(context: "FileContext") -> Site:
    return site_of(list(context.ancestors))


# -- at the use: LibCST ------------------------------------------------------------------------------


class _SiteReader:
    """Values and modules as the visited file's code builds them, followed through bindings and calls."""

    def __init__(self, context: "FileContext") -> None:
        self.context = context
        self.facts = file_facts(context)

    # -- tensors ----------------------------------------------------------------------

    def value(self, node: cst.BaseExpression, site: Optional[Site], depth: int) -> Output:
        if depth > MAX_DEPTH:
            return None
        depth += 1
        if isinstance(node, cst.Subscript):
            inner = self.value(node.value, site, depth)
            index = _integer_index(node)
            if isinstance(inner, tuple):
                return element(inner, index) if index is not None else None
            return inner
        if isinstance(node, cst.Name):
            return self._name(node.value, site, depth, VALUE)
        if isinstance(node, cst.Tuple):
            if any(isinstance(e, cst.StarredElement) for e in node.elements):
                return None
            return tuple(self.value(e.value, site, depth) for e in node.elements)
        if isinstance(node, cst.IfExp):
            return join([self.value(node.body, site, depth), self.value(node.orelse, site, depth)])
        if isinstance(node, cst.Call):  # ``model(**inputs)``: what a module or helper returns is not in its arguments
            return self._call(node, site, depth)
        return None

    def _call(self, node: cst.Call, site: Optional[Site], depth: int) -> Output:
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified is not None:
            step = call_step(qualified, None, bool(node.args))
            if step is not None:
                first = _first_argument(node)
                return _stepped(step, _text(self.context, func), lambda: self.value(first, site, depth) if first is not None else None)
            if qualified.startswith("torch."):
                return None
        if isinstance(func, cst.Attribute) and qualified is None and is_value_receiver(self.context, func.value):
            step = call_step(None, func.attr.value, bool(node.args))
            if step is not None:
                return _stepped(step, f".{func.attr.value}()", lambda: self.value(func.value, site, depth))
        helper = called_function(self.context, node, site) if site is not None else None
        if helper is not None:
            returned = returned_values(self.context, helper)
            if returned is None:
                return None
            return join([self.value(value, at, depth) for value, at in returned])
        if not (isinstance(func, cst.Name) and site is not None and bindings(site, func.value)):
            found = self._definition(func, qualified)
            if found is not None:
                facts, name = found
                reader = _AstReader(facts, self.context.project)
                if name in facts.functions:
                    return reader.function_output(facts.functions[name], None, depth)
                if name in facts.values:
                    return reader.module(facts.values[name], _Scope(None, None, ()), depth)
                return None  # a class: calling it builds a module, not a tensor
        return self.module(func, site, depth)

    # -- modules ----------------------------------------------------------------------

    def module(self, node: cst.BaseExpression, site: Optional[Site], depth: int) -> Output:
        """What the module ``node`` returns when called."""
        if depth > MAX_DEPTH:
            return None
        depth += 1
        if isinstance(node, cst.Name):
            if site is not None and not bindings(site, node.value):
                found = self._definition(node, self.context.qualified_name(node))
                if found is not None and found[1] in found[0].values:  # an instance another module builds
                    return _AstReader(found[0], self.context.project).module(found[0].values[found[1]], _Scope(None, None, ()), depth)
                return None
            return self._name(node.value, site, depth, MODULE)
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self" and site is not None and site.function is not None:
                owner = classes_of_methods(self.context).get(id(site.function))
                if owner is not None and self.facts is not None and owner.name.value in self.facts.class_nodes:
                    reader = _AstReader(self.facts, self.context.project)
                    return reader.attribute_module(self.facts.class_nodes[owner.name.value], node.attr.value, depth)
            return None
        if not isinstance(node, cst.Call):
            return None
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified in SEQUENTIAL and node.args and not node.args[-1].star and node.args[-1].keyword is None:
            return self.module(node.args[-1].value, site, depth)  # its last layer, whatever blocks come before it
        if any(arg.star for arg in node.args):
            return None
        if isinstance(func, cst.Attribute) and func.attr.value in MODULE_MOVES and qualified is None:
            return self.module(func.value, site, depth)
        first = _first_argument(node)
        if qualified in MODULE_WRAPPERS:
            return self.module(first, site, depth) if first is not None else None
        if qualified in SEQUENTIAL:
            layers = [arg for arg in node.args if arg.keyword is None]
            return self.module(layers[-1].value, site, depth) if layers else None
        if qualified in ACTIVATION_MODULES:
            return Traced(ACTIVATION_MODULES[qualified], _text(self.context, func))
        helper = called_function(self.context, node, site) if site is not None else None
        if helper is not None:
            returned = returned_values(self.context, helper)
            if returned is None:
                return None
            return join([self.module(value, at, depth) for value, at in returned])
        found = self._definition(func, qualified)
        if found is None:
            return None
        facts, name = found
        reader = _AstReader(facts, self.context.project)
        if name in facts.class_nodes:
            return reader.class_output(name, depth)
        if name in facts.functions:
            return reader.function_module(facts.functions[name], None, depth)
        return None

    # -- names ------------------------------------------------------------------------

    def _read(self, mode: str, node: cst.BaseExpression, site: Optional[Site], depth: int) -> Output:
        return self.value(node, site, depth) if mode == VALUE else self.module(node, site, depth)

    def _name(self, name: str, site: Optional[Site], depth: int, mode: str) -> Output:
        """What every binding of ``name`` that reaches ``site`` holds, read as a ``mode`` (value or module)."""
        if site is None:
            return None
        reaching = bindings(site, name)
        if not reaching:
            return None
        if reaching[-1].kind in ("conditional", "masked") and not bound_on_every_path(site, name):
            return None  # no binding on every path: the name may hold something from before
        outputs: List[Output] = []
        for binding in reaching:
            if binding.kind in ("assign", "module", "conditional") and binding.value is not None:
                outputs.append(self._read(mode, binding.value, binding.site, depth))
            elif binding.kind == "unpack":
                outputs.append(self._unpacked(binding, name, mode, depth))
            elif binding.kind == "param" and site.function is not None:
                outputs.append(self._parameter(site.function, name, mode, depth))
            else:
                return None
        return join(outputs)

    def _unpacked(self, binding, name: str, mode: str, depth: int) -> Output:
        direct = unpacked_element(binding, name)
        if direct is not None:
            return self._read(mode, direct, binding.site, depth)
        position = unpack_position(binding, name)
        if position is None or mode != VALUE:
            return None
        return element(self.value(binding.value, binding.site, depth), position[0], position[1])

    def _parameter(self, function: cst.FunctionDef, name: str, mode: str, depth: int) -> Output:
        """What every call of ``function`` in this file passes for ``name``, or, when the file never calls it, what
        every call in the project's other modules passes (assumed either way: a user may call it otherwise)."""
        passed = arguments_at_calls(self.context, function, name)
        if not passed and self.context.project is not None:
            foreign = arguments_from_other_modules(self.context, function, name)
            if not foreign:
                return None
            outputs = []
            for argument in foreign:
                scope = _scope_of_call(argument)
                if scope is None:
                    return None
                outputs.append(_AstReader(argument.facts, self.context.project)._read(mode, argument.value, scope, depth))
            return _assumed(join(outputs))
        if not passed:
            return None
        outputs = [self._read(mode, value, site_of(list(call_site.ancestors) + [call_site.call]), depth) for value, call_site in passed]
        return _assumed(join(outputs))

    def _definition(self, func: cst.BaseExpression, qualified: Optional[str]) -> Optional[Tuple[ModuleFacts, str]]:
        """The class or function of the file or the project that ``func`` names."""
        if self.facts is None:
            return None
        if qualified is None:
            # A name of the file itself, or imported relatively (LibCST's table leaves both unresolved).
            qualified = self.facts.qualify_dotted(dotted_name(func))
        if qualified is None or qualified.startswith("torch."):
            return None
        return definition(qualified, self.facts, self.context.project)


def _first_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.star == "*":
            return None  # ``torch.sigmoid(*xs)``: the first argument is not written
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "input":
            return arg.value
    return None


def _integer_index(node: cst.Subscript) -> Optional[int]:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    sign = 1
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        sign, value = -1, value.expression
    if isinstance(value, cst.Integer):
        return sign * int(value.evaluated_value)
    return None


def _text(context: "FileContext", node: cst.CSTNode) -> str:
    return context.module.code_for_node(node)


def call_step(qualified: Optional[str], method: Optional[str], has_arguments: bool) -> Optional[Tuple[str, object]]:
    """What a call does to its operand's activation, read off the tables, for a function (``qualified``) or a
    tensor method (``method``): ``("activation", kind)`` it is one; ``("compose", table)`` exp or log of the
    operand (``table`` maps its kind); ``("keep", None)`` the operand's values moved or relabelled; None:
    none of these."""
    if qualified is not None:
        if qualified in ACTIVATION_FUNCTIONS:
            return "activation", ACTIVATION_FUNCTIONS[qualified]
        if qualified in EXP_FUNCTIONS:
            return "compose", UNDONE_BY_EXP
        if qualified in LOG_FUNCTIONS:
            return "compose", TAKEN_BY_LOG
        return ("keep", None) if qualified in VALUE_FUNCTIONS else None
    if method in ACTIVATION_METHODS:
        return "activation", ACTIVATION_METHODS[method]
    if method in ("exp", "log") and not has_arguments:
        return "compose", UNDONE_BY_EXP if method == "exp" else TAKEN_BY_LOG
    return ("keep", None) if method in VALUE_METHODS else None


def _stepped(step: Tuple[str, object], origin: str, operand: Callable[[], Output]) -> Output:
    kind, payload = step
    if kind == "activation":
        return Traced(payload, origin)  # type: ignore[arg-type]
    inner = operand()
    return inner if kind == "keep" else _composed(payload, inner)  # type: ignore[arg-type]


def _named(output: Output, origin: str) -> Output:
    """``output`` as the result of ``origin`` (the class whose forward a caller runs names it best)."""
    if isinstance(output, Traced):
        return replace(output, origin=origin)
    if isinstance(output, tuple):
        return tuple(_named(o, origin) for o in output)
    return None


def _composed(table: Dict[str, str], inner: Output) -> Output:
    if isinstance(inner, Traced) and inner.kind in table:
        return replace(inner, kind=table[inner.kind])
    return None


# -- in class and function bodies: ast --------------------------------------------------------------

# A block's statements and the index of the one holding a position.
_Frame = Tuple[Sequence[ast.stmt], int]
_Frames = Tuple[_Frame, ...]
_IN_PROGRESS = object()


class _Scope:
    """Where an expression of a module's code stands: the function (None at the top level), its class and
    the statement frames down to the statement holding it."""

    __slots__ = ("function", "owner", "frames")

    def __init__(self, function: Optional[ast.FunctionDef], owner: Optional[ast.ClassDef], frames: _Frames) -> None:
        self.function = function
        self.owner = owner
        self.frames = frames


class _AstReader:
    """Outputs of the definitions of one module (the file being linted or one of the project's)."""

    def __init__(self, facts: ModuleFacts, project) -> None:
        self.facts = facts
        self.project = project

    # -- classes ----------------------------------------------------------------------

    def class_output(self, name: str, depth: int) -> Output:
        key = ("module_outputs.class", name)
        memo = self.facts.memo
        if key in memo:
            found = memo[key]
            return None if found is _IN_PROGRESS else found  # type: ignore[return-value]
        memo[key] = _IN_PROGRESS
        # From depth 0: the answer is memoized, so it must not depend on how the question was reached.
        result = self._class_output(self.facts.class_nodes.get(name), 0)
        memo[key] = result
        return result

    def _class_output(self, node: Optional[ast.ClassDef], depth: int) -> Output:
        if node is None or depth > MAX_DEPTH:
            return None
        forward = _method(node, "forward")
        if forward is not None:
            return _named(self.function_output(forward, node, depth + 1), f"{node.name}.forward")
        if _method(node, "__call__") is not None:
            return None
        for base in node.bases:
            found = self._resolve(base)
            if found is not None and found[1] in found[0].class_nodes:
                return _AstReader(found[0], self.project).class_output(found[1], depth + 1)
        return None

    def attribute_module(self, owner: ast.ClassDef, attribute: str, depth: int) -> Output:
        """What the module stored in ``self.<attribute>`` by ``owner``'s methods returns when called."""
        stored = []
        for method in owner.body:
            if not isinstance(method, ast.FunctionDef):
                continue
            for statement, frames in _statements(method):
                if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                    for target in targets:
                        if _is_self_attribute(target, attribute):
                            if _moves_itself(statement.value, attribute):
                                continue  # ``self.D = self.D.to(device)``: the same module, moved
                            stored.append(self.module(statement.value, _Scope(method, owner, frames), depth + 1))
                        elif isinstance(target, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in target.elts):
                            # ``self.G, self.D = build_models(cfg)``: that element of what the builder returns
                            for index, part in enumerate(target.elts):
                                if _is_self_attribute(part, attribute):
                                    scope = _Scope(method, owner, frames)
                                    stored.append(self.module_element(statement.value, index, len(target.elts), scope, depth + 1))
        return join(stored)

    def module_element(self, node: ast.expr, index: int, length: int, scope: _Scope, depth: int) -> Output:
        """What element ``index`` of the ``length`` modules ``node`` gives (a tuple, or a call of a function of
        the project whose every ``return`` is such a tuple) returns when called."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Tuple):
            if len(node.elts) != length or any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return self.module(node.elts[index], scope, depth + 1)
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        found = self._resolve(node.func)
        if found is None or found[1] not in found[0].functions:
            return None
        facts, name = found
        reader = self if facts is self.facts else _AstReader(facts, self.project)
        function = facts.functions[name]
        returns = reader._returns(function)
        if returns is None:
            return None
        return join([reader.module_element(value, index, length, _Scope(function, None, frames), depth + 1) for value, frames in returns])

    # -- functions --------------------------------------------------------------------

    def function_output(self, function: ast.FunctionDef, owner: Optional[ast.ClassDef], depth: int) -> Output:
        """What ``function`` returns as a tensor: every ``return`` agreeing, None if one returns nothing."""
        returns = self._returns(function)
        if returns is None:
            return None
        return join([self.value(value, _Scope(function, owner, frames), depth + 1) for value, frames in returns])

    def function_module(self, function: ast.FunctionDef, owner: Optional[ast.ClassDef], depth: int) -> Output:
        """What the module ``function`` returns (``def build(): return nn.Sequential(...)``) outputs when called."""
        returns = self._returns(function)
        if returns is None:
            return None
        return join([self.module(value, _Scope(function, owner, frames), depth + 1) for value, frames in returns])

    def _returns(self, function: ast.FunctionDef) -> Optional[List[Tuple[ast.expr, _Frames]]]:
        if function.decorator_list and not all(_is_harmless_decorator(d) for d in function.decorator_list):
            return None
        found: List[Tuple[ast.expr, _Frames]] = []
        for statement, frames in _statements(function):
            if isinstance(statement, ast.Return):
                if statement.value is None:
                    return None
                found.append((statement.value, frames))
        if not found or any(isinstance(node, (ast.Yield, ast.YieldFrom)) for node in own_nodes(function)):
            return None
        last = function.body[-1]
        if not isinstance(last, (ast.Return, ast.Raise, ast.If, ast.Try, ast.With)):
            return None  # control can fall off the end: an implicit None
        return found

    # -- expressions ------------------------------------------------------------------

    def value(self, node: ast.expr, scope: _Scope, depth: int) -> Output:
        if depth > MAX_DEPTH:
            return None
        depth += 1
        if isinstance(node, ast.Subscript):
            inner = self.value(node.value, scope, depth)
            if isinstance(inner, tuple):
                index = node.slice
                if isinstance(index, ast.Constant) and isinstance(index.value, int):
                    return element(inner, index.value)
                return None
            return inner
        if isinstance(node, ast.Name):
            return self._name(node.id, scope, depth, VALUE)
        if isinstance(node, ast.Tuple):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return tuple(self.value(e, scope, depth) for e in node.elts)
        if isinstance(node, ast.IfExp):
            return join([self.value(node.body, scope, depth), self.value(node.orelse, scope, depth)])
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qualified = self._qualified(func)
        if qualified is not None:
            step = call_step(qualified, None, bool(node.args))
            if step is not None:
                first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "input"), None)
                if isinstance(first, ast.Starred):
                    return None  # ``torch.sigmoid(*xs)``: the first argument is not written
                return _stepped(step, ast.unparse(func), lambda: self.value(first, scope, depth) if first is not None else None)
            if qualified.startswith("torch."):
                return None
        if isinstance(func, ast.Attribute) and _is_self(func.value) and scope.owner is not None:
            method = _method(scope.owner, func.attr)
            if method is not None:
                return self.function_output(method, scope.owner, depth)
            return self.attribute_module(scope.owner, func.attr, depth)
        if isinstance(func, ast.Attribute) and qualified is None:
            step = call_step(None, func.attr, bool(node.args))
            if step is None:
                return None
            return _stepped(step, f".{func.attr}()", lambda: self.value(func.value, scope, depth))
        if isinstance(func, ast.Name) and self._bound_in(scope, func.id):
            return self.module(func, scope, depth)
        found = self._resolve(func)
        if found is None:
            return None
        facts, name = found
        reader = _AstReader(facts, self.project)
        if name in facts.functions:
            return reader.function_output(facts.functions[name], None, depth)
        if name in facts.values:
            return reader.module(facts.values[name], _Scope(None, None, ()), depth)
        return None  # a class: calling it builds a module, not a tensor

    def module(self, node: ast.expr, scope: _Scope, depth: int) -> Output:
        """What the module ``node`` returns when called."""
        if depth > MAX_DEPTH:
            return None
        depth += 1
        if isinstance(node, ast.Name):
            return self._name(node.id, scope, depth, MODULE)
        if isinstance(node, ast.Attribute) and _is_self(node.value) and scope.owner is not None:
            return self.attribute_module(scope.owner, node.attr, depth)
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qualified = self._qualified(func)
        if qualified in SEQUENTIAL and node.args and not isinstance(node.args[-1], ast.Starred):
            return self.module(node.args[-1], scope, depth)  # its last layer, whatever blocks come before it
        if any(isinstance(a, ast.Starred) for a in node.args):
            return None
        if isinstance(func, ast.Attribute) and qualified is None and func.attr in MODULE_MOVES:
            return self.module(func.value, scope, depth)
        if qualified in MODULE_WRAPPERS:
            return self.module(node.args[0], scope, depth) if node.args else None
        if qualified in SEQUENTIAL:
            return self.module(node.args[-1], scope, depth) if node.args else None
        if qualified in ACTIVATION_MODULES:
            return Traced(ACTIVATION_MODULES[qualified], ast.unparse(func))
        if isinstance(func, ast.Attribute) and _is_self(func.value) and scope.owner is not None:
            method = _method(scope.owner, func.attr)
            return self.function_module(method, scope.owner, depth) if method is not None else None
        found = self._resolve(func)
        if found is None:
            return None
        facts, name = found
        reader = _AstReader(facts, self.project)
        if name in facts.class_nodes:
            return reader.class_output(name, depth)
        if name in facts.functions:
            return reader.function_module(facts.functions[name], None, depth)
        return None

    # -- names --------------------------------------------------------------------------

    def _read(self, mode: str, node: ast.expr, scope: _Scope, depth: int) -> Output:
        return self.value(node, scope, depth) if mode == VALUE else self.module(node, scope, depth)

    def _name(self, name: str, scope: _Scope, depth: int, mode: str) -> Output:
        """The one assignment of ``name`` that reaches the position in straight-line code, read as a ``mode``."""
        if scope.function is None:
            return self._global(name, mode, depth)
        for level in range(len(scope.frames) - 1, -1, -1):
            body, index = scope.frames[level]
            for position in range(index - 1, -1, -1):
                statement = body[position]
                if not _binds(statement, name):
                    continue
                frames = scope.frames[:level] + ((body, position),)
                if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                    if len(targets) == 1 and isinstance(targets[0], ast.Name):
                        return self._read(mode, statement.value, _Scope(scope.function, scope.owner, frames), depth)
                    if len(targets) == 1 and isinstance(targets[0], ast.Tuple):
                        names = [e.id if isinstance(e, ast.Name) else None for e in targets[0].elts]
                        if name in names and not any(isinstance(e, ast.Starred) for e in targets[0].elts):
                            at = _Scope(scope.function, scope.owner, frames)
                            if mode != VALUE:
                                return self.module_element(statement.value, names.index(name), len(names), at, depth)
                            return element(self.value(statement.value, at, depth), names.index(name), len(names))
                return None  # bound some other way, or on some paths only
        if self._bound_in(scope, name):
            return None  # a parameter (or a binding the frames do not reach)
        return self._global(name, mode, depth)

    def _global(self, name: str, mode: str, depth: int) -> Output:
        """A module-level name: assigned once in this module, or imported from one of the project's."""
        found = self._resolve(ast.Name(id=name, ctx=ast.Load()))
        if found is None or found[1] not in found[0].values:
            return None
        reader = self if found[0] is self.facts else _AstReader(found[0], self.project)
        return reader._read(mode, found[0].values[found[1]], _Scope(None, None, ()), depth)

    def _bound_in(self, scope: _Scope, name: str) -> bool:
        """Whether ``name`` is a local of the function holding the position (a parameter or bound in its body)."""
        function = scope.function
        if function is None:
            return False
        arguments = function.args
        every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [a for a in (arguments.vararg, arguments.kwarg) if a]
        return any(a.arg == name for a in every) or any(_binds(statement, name) for statement in function.body)

    # -- lookups ------------------------------------------------------------------------

    def _qualified(self, func: ast.expr) -> Optional[str]:
        """``torch.nn.functional.softmax`` for ``F.softmax`` through the module's imports; None for the rest."""
        return self.facts.imported(ast_dotted_name(func))

    def _resolve(self, node: ast.expr) -> Optional[Tuple[ModuleFacts, str]]:
        dotted = ast_dotted_name(node)
        if dotted is None:
            return None
        qualified = self.facts.qualify_dotted(dotted)
        if qualified is None or qualified.startswith("torch."):
            return None
        return definition(qualified, self.facts, self.project)


def _is_self_attribute(node: ast.expr, attribute: str) -> bool:
    return isinstance(node, ast.Attribute) and _is_self(node.value) and node.attr == attribute


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _method(owner: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    for statement in owner.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == name:
            return statement
    return None


def _is_harmless_decorator(decorator: ast.expr) -> bool:
    """Decorators that do not change what a function returns (``@torch.no_grad()``, ``@staticmethod``)."""
    dotted = ast_dotted_name(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
    return dotted.rsplit(".", 1)[-1] in ("no_grad", "inference_mode", "staticmethod", "classmethod", "enable_grad")


def _scope_of_call(argument: ForeignArgument) -> Optional[_Scope]:
    """Where a call of another module stands: its function, that function's class and the frames down to the
    statement holding the call (the module's top level: no frames)."""
    function = argument.function
    if function is None:
        return _Scope(None, None, ())
    owner = next((node for node in argument.facts.class_nodes.values() if function in node.body), None)
    holding = None
    for statement, frames in _statements(function):
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
            node is argument.call for node in ast.walk(statement)
        ):
            holding = frames  # the innermost statement holding it comes last
    return _Scope(function, owner, holding) if holding is not None else None


def _statements(function: ast.FunctionDef):
    """(statement, frames) for every statement of ``function``, nested blocks included, nested scopes not."""
    pending: List[Tuple[Sequence[ast.stmt], _Frames]] = [(function.body, ())]
    while pending:
        body, outer = pending.pop()
        for index, statement in enumerate(body):
            frames = outer + ((body, index),)
            yield statement, frames
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    pending.append((block, frames))
            for handler in getattr(statement, "handlers", ()) or ():
                pending.append((handler.body, frames))


def _binds(statement: ast.stmt, name: str) -> bool:
    """Whether ``statement`` binds ``name`` anywhere (nested scopes' own names excluded)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name == name
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".", 1)[0]) == name for alias in node.names
        ):
            return True
    return False


__all__ = [
    "ACTIVATION_FUNCTIONS",
    "ACTIVATION_KINDS",
    "ACTIVATION_METHODS",
    "ACTIVATION_MODULES",
    "MODULE_MOVES",
    "Output",
    "Traced",
    "call_step",
    "class_output",
    "element",
    "join",
    "module_output",
    "output_activation",
    "trace_output",
]


# -- a module's output under a log (TL201, TL202) ------------------------------------------------------


@dataclass(frozen=True)
class ModuleActivation:
    """A called module's output that ends in an activation: ``D(x)`` where ``D`` ends in ``nn.Sigmoid()``.

    ``traced``: what it ends in; ``call``: the module call; ``head_dropped``: the same call with the
    activation layer sliced off (``D[:-1](x)``) when ``D`` is a name bound once to a literal
    ``nn.Sequential(..., act)`` (its slice shares the layers, so the logits are computed by the same
    parameters), else None; ``layer``: that last layer's constructor call, for its ``dim``.
    """

    traced: Traced
    call: Optional[cst.Call]
    head_dropped: Optional[cst.Call] = None
    layer: Optional[cst.Call] = None


def called_module_activation(context: "FileContext", expression: cst.BaseExpression, kinds: Sequence[str]) -> Optional[ModuleActivation]:
    """The activation (one of ``kinds``) that a module's output ``expression`` (a call of a name or a
    ``self.`` attribute, not of a torch function) ends in, or None."""
    if isinstance(expression, cst.Name):
        traced = trace_output(context, expression)  # ``p = D(x)`` ... ``log(p)``: reported, not rewritten
        return ModuleActivation(traced, None) if traced is not None and traced.kind in kinds and _from_module(context, expression) else None
    if not isinstance(expression, cst.Call) or any(arg.star for arg in expression.args):
        return None
    if not _calls_a_module(context, expression.func):
        return None
    func = expression.func
    traced = trace_output(context, expression)
    if traced is None or traced.kind not in kinds:
        return None
    layer = _sequential_last_layer(context, func) if isinstance(func, cst.Name) else None
    head_dropped = None
    if layer is not None and ACTIVATION_MODULES.get(context.qualified_name(layer.func) or "") == traced.kind:
        sliced = cst.Subscript(
            value=func,
            slice=[cst.SubscriptElement(cst.Slice(lower=None, upper=cst.UnaryOperation(cst.Minus(), cst.Integer("1"))))],
        )
        head_dropped = expression.with_changes(func=sliced, lpar=[], rpar=[])
    else:
        layer = None
    return ModuleActivation(traced, expression, head_dropped, layer)


def _from_module(context: "FileContext", name: cst.Name) -> bool:
    """Whether every binding of ``name`` reaching here is a call of a module."""
    reaching = bindings(_here(context), name.value)
    return bool(reaching) and all(
        binding.kind == "assign" and isinstance(binding.value, cst.Call) and _calls_a_module(context, binding.value.func)
        for binding in reaching
    )


def _calls_a_module(context: "FileContext", func: cst.BaseExpression) -> bool:
    """``D(x)``, ``self.head(x)``: a name or a ``self.`` attribute that is not a torch function (whose
    activations the fused matchers read where they are written); a tensor's method is no module."""
    if isinstance(func, cst.Attribute):
        return isinstance(func.value, cst.Name) and func.value.value == "self"
    if not isinstance(func, cst.Name):
        return False
    qualified = context.qualified_name(func)
    return qualified is None or not qualified.startswith("torch.")


def _sequential_last_layer(context: "FileContext", func: cst.Name) -> Optional[cst.Call]:
    """The last layer of the ``nn.Sequential(...)`` literal that the one binding of ``func`` reaching
    here holds, when it is a constructor call."""
    reaching = bindings(_here(context), func.value)
    if len(reaching) != 1 or reaching[0].kind not in ("assign", "module") or not isinstance(reaching[0].value, cst.Call):
        return None
    built = reaching[0].value
    if context.qualified_name(built.func) not in SEQUENTIAL or any(arg.star for arg in built.args):
        return None
    layers = [arg.value for arg in built.args if arg.keyword is None]
    return layers[-1] if layers and isinstance(layers[-1], cst.Call) else None


def _moves_itself(value: ast.expr, attribute: str) -> bool:
    """``self.<attribute>.to(device)`` (any chain of module moves, which return the module itself)."""
    moved = False
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MODULE_MOVES:
        value, moved = value.func.value, True
    return (
        moved and isinstance(value, ast.Attribute) and value.attr == attribute
        and isinstance(value.value, ast.Name) and value.value.id == "self"
    )

