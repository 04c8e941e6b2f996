"""How many dimensions a tensor has, where the code shows it.

``known_rank(context, expr) -> int | None`` answers only from what the code does to the value:

- ``x.view(a, b)`` / ``x.reshape(a, b)`` / ``x.view((a, b))``: as many dimensions as sizes given;
- ``torch.flatten(x, 1)``, ``x.flatten(1)``, ``nn.Flatten()(x)`` (start 1, end -1): 2; ``x.flatten()``: 1;
- ``torch.mm(a, b)`` / ``a.mm(b)``: 2;
- 0: a full reduction (``x.sum()``, ``x.mean()``, ``x.norm()``, ``torch.sum(x)`` with no dimension) of a
  value known to be a tensor, and a loss's output with a reducing ``reduction`` (the default ``"mean"``,
  ``"sum"``, ``"batchmean"``, or the legacy ``size_average=`` alone or with ``reduce=True``; not ``"none"``,
  a variable, or ``reduce=False``), called
  as a function (``F.nll_loss(x, y)``) or through a module built in the function, ``__init__`` or the script
  (``criterion(out, y)``);
- ops that keep their input's rank (``nn.Linear``, activations, dropout, ``F.linear``, ``F.relu``):
  the rank of their input, followed through modules built in ``__init__`` (``self.fc(x)``) and local names.

``nn.Linear`` alone proves nothing: it maps the last dimension and keeps the others, so a
``(batch, seq, features)`` input stays 3-D.  :func:`sequential_rank_before` reads an
``nn.Sequential(...)``'s elements backwards from a position to a layer that fixes the rank
(``nn.Flatten()``).
"""
from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.analysis.model.calls import NOT_A_LITERAL, argument, backpropagated_names, has_star_args, keyword_arg, literal_value, positional_args
from torchlint.analysis.model.ops import MODULE_MOVES, module_constructor, unmoved
from torchlint.analysis.model.ast_names import own_nodes
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.project_index import bound_once, definition, file_facts
from torchlint.analysis.model.dataflow import bindings, site_of, unpack_position
from torchlint.analysis.model.saved_values import single_assignments
from torchlint.analysis.values.kinds import TENSOR_METHODS, value_kind
from torchlint.analysis.values.losses import is_functional_loss_name, is_loss_call

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

MAX_DEPTH = 8

# Modules whose output has their input's rank (a Linear maps the last dimension only).
RANK_KEEPING_MODULES = frozenset(
    f"torch.nn.{name}"
    for name in """
    Linear Bilinear Identity ReLU ReLU6 LeakyReLU PReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Hardtanh Hardswish
    Hardsigmoid Softplus Softsign Tanhshrink Threshold LogSigmoid Dropout AlphaDropout LayerNorm
    """.split()
)
RANK_KEEPING_FUNCTIONS = frozenset(
    {f"torch.nn.functional.{name}" for name in "linear relu relu6 leaky_relu elu selu celu gelu silu mish sigmoid tanh hardtanh softplus dropout layer_norm".split()}
    | {f"torch.{name}" for name in "relu sigmoid tanh".split()}
)
RANK_KEEPING_METHODS = frozenset({"relu", "sigmoid", "tanh", "float", "double", "half", "contiguous", "detach", "clone", "to", "cuda", "cpu", "numpy"})
FLATTEN_MODULES = frozenset({"torch.nn.Flatten", "torch.nn.modules.flatten.Flatten"})
# Reductions to one number when called with no dimension (and no other argument).
FULL_REDUCTIONS = frozenset({"sum", "mean", "norm", "prod", "std", "var", "max", "min"})
# Arithmetic written as methods (``loss.div(n)``): a 0-dim tensor with a number or another 0-dim one stays 0-dim.
ELEMENTWISE_METHODS = frozenset({"add", "sub", "mul", "div", "true_divide", "add_", "sub_", "mul_", "div_"})
# A loss call returns one number under these reductions.
REDUCING = frozenset({"mean", "sum", "batchmean"})
# *Loss modules that do not return a loss tensor.
_NOT_SCALAR_LOSSES = frozenset({"AdaptiveLogSoftmaxWithLoss"})


def is_torch_loss_module(qualified: Optional[str]) -> bool:
    """A torch loss module class that returns a loss tensor (``torch.nn.CrossEntropyLoss``, the legacy
    ``torch.nn.NLLLoss2d``)."""
    if not qualified or not qualified.startswith("torch.nn."):
        return False
    name = qualified.rsplit(".", 1)[-1]
    return name.endswith(("Loss", "Loss2d")) and name not in _NOT_SCALAR_LOSSES


def known_rank(context: "FileContext", node: cst.BaseExpression, ancestors: Optional[Sequence[cst.CSTNode]] = None, depth: int = 0) -> Optional[int]:
    """The number of dimensions of tensor ``node`` (read below ``ancestors``, by default the node being
    visited), or None when the code does not show it."""
    if depth > MAX_DEPTH:
        return None
    ancestors = context.ancestors if ancestors is None else ancestors
    if isinstance(node, cst.Name):
        definition = reaching_definition(ancestors, node.value)
        if definition is None:
            return _accumulated_rank(context, node.value, ancestors, depth)
        return known_rank(context, definition.value, definition.ancestors, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ELEMENTWISE):
        return _scalar_arithmetic_rank(context, (node.left, node.right), ancestors, depth)
    if isinstance(node, cst.Attribute) and node.attr.value == "data":
        return known_rank(context, node.value, ancestors, depth + 1)  # ``loss.data``: the same tensor, detached
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    if _is_scalar_loss(context, node) or project_loss_module_call(context, node):
        return 0
    qualified = context.qualified_name(func)
    if qualified is not None:
        if qualified[len("torch."):] in FULL_REDUCTIONS and qualified.startswith("torch.") and len(node.args) == 1 and node.args[0].keyword is None:
            return 0  # torch.sum(x)
        if qualified == "torch.flatten":
            return _flatten_rank(node, 1)
        if qualified == "torch.mm":
            return 2
        if qualified in RANK_KEEPING_FUNCTIONS:
            given = argument(node, 0, "input")
            return known_rank(context, given.value, ancestors, depth + 1) if given is not None else None
        return _imported_function_rank(context, qualified, node)
    if isinstance(func, cst.Name) and qualified is None:
        return called_function_rank(context, func.value, node, ancestors)
    is_self_module = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
    if isinstance(func, cst.Attribute) and not is_self_module:
        method = func.attr.value
        if method in FULL_REDUCTIONS and not node.args:
            receiver = func.value
            known = (
                value_kind(context, receiver, site_of(ancestors)) == "tensor"
                or known_rank(context, receiver, ancestors, depth + 1) is not None
            )
            return 0 if known else None
        if method in ELEMENTWISE_METHODS and len(node.args) == 1 and node.args[0].keyword is None:
            return _scalar_arithmetic_rank(context, (func.value, node.args[0].value), ancestors, depth)
        if method in ("view", "reshape"):
            return _shape_rank(node)
        if method == "flatten":
            return _flatten_rank(node, 0)
        if method == "mm":
            return 2
        if method in RANK_KEEPING_METHODS:
            return known_rank(context, func.value, ancestors, depth + 1)
    if isinstance(func, cst.Attribute) and context.qualified_name(func) is None:
        rank = method_return_rank(context, func.attr.value, _call_shape(node))
        if rank is not None:
            return rank
    constructor = module_constructor(context, func)
    if constructor is None or len(node.args) != 1 or node.args[0].keyword is not None:
        return None
    built = context.qualified_name(constructor.func)
    if built in FLATTEN_MODULES:
        return 2 if not constructor.args else None
    if built in RANK_KEEPING_MODULES:
        return known_rank(context, node.args[0].value, ancestors, depth + 1)
    return None


_ELEMENTWISE = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


# -- methods of the project's classes -------------------------------------------------------------------


# What a call passes: how many positional arguments, and each keyword with its value when it is a literal
# (``return_g=True``; :data:`_NOT_KNOWN` otherwise).  None with ``*args``/``**kwargs``.
CallShape = Optional[Tuple[int, Tuple[Tuple[str, object], ...]]]
_NOT_KNOWN = "<not a literal>"


def _call_shape(call: cst.Call) -> CallShape:
    if has_star_args(call):
        return None
    keywords = []
    for arg in call.args:
        if arg.keyword is not None:
            value = literal_value(arg.value)
            keywords.append((arg.keyword.value, _NOT_KNOWN if value is NOT_A_LITERAL else value))
    return (len(call.args) - len(keywords), tuple(sorted(keywords, key=lambda k: k[0])))


def method_return_rank(
    context: "FileContext", method: str, shape: CallShape = None, element: Optional[Tuple[int, int]] = None
) -> Optional[int]:
    """0 when the file and the project define ``method`` in some class and every such definition returns a
    0-dim value on every ``return`` (a full reduction, a torch loss with a reducing reduction, arithmetic of
    those with numbers): ``g_loss = model.g_loss(z)`` where ``WGAN.g_loss`` returns ``-self.critic(g).mean()``.
    The receiver's class is not known, so every class that could be it must agree; None otherwise.  ``shape``
    (what the call passes) decides ``return (l, g) if return_g else l`` when the call leaves ``return_g`` at
    its default.  ``element`` (index, length): the rank of that element of the tuple each definition returns
    (``c_loss, g = model.c_loss(x, z, return_g=True)``)."""
    if method.startswith("__") or method in TENSOR_METHODS or method in FULL_REDUCTIONS or method in RANK_KEEPING_METHODS:
        return None
    project = getattr(context, "project", None)
    if project is None:
        facts = file_facts(context)
        return _methods_rank([facts] if facts is not None else [], method, shape, element)

    def compute() -> Optional[int]:
        modules = project.fact("ranks.indented-definitions", lambda: _indented_definitions(project)).get(method, ())
        return _methods_rank([f for f in map(project.module_facts, modules) if f is not None], method, shape, element)

    return project.fact(f"ranks.method-return:{method}:{shape}:{element}", compute)


_INDENTED_DEF = re.compile(rb"^[ \t]+(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.M)


def _indented_definitions(project) -> Dict[str, Tuple[str, ...]]:
    """Which modules define a function of each name inside a class or a function (read from the text once)."""
    found: Dict[str, List[str]] = {}
    for module, text in project.every_file_text():
        if module is None:
            continue
        for name in set(_INDENTED_DEF.findall(text)):
            found.setdefault(name.decode("ascii", "replace"), []).append(module)
    return {name: tuple(modules) for name, modules in found.items()}


def _methods_rank(modules: Sequence[object], method: str, shape: CallShape, element: Optional[Tuple[int, int]]) -> Optional[int]:
    found = False
    for facts in modules:
        for class_node in facts.class_nodes.values():
            for statement in class_node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == method:
                    if not _returns_zero_dim(statement, facts, _known_parameters(statement, shape), element):
                        return None
                    found = True
    return 0 if found else None


def _known_parameters(method: ast.FunctionDef, shape: CallShape, receiver: int = 1) -> Dict[str, object]:
    """The parameters whose value a call of this shape fixes: a literal keyword it passes, or a constant
    default it leaves (``self`` is the receiver, not a positional argument)."""
    if shape is None:
        return {}
    positional, keywords = shape
    arguments = method.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args]
    defaults = dict(zip(names[len(names) - len(arguments.defaults):], arguments.defaults))
    defaults.update({a.arg: d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None})
    passed = set(names[: positional + receiver]) | {name for name, _ in keywords}
    known = {name: value.value for name, value in defaults.items() if name not in passed and isinstance(value, ast.Constant)}
    known.update({name: value for name, value in keywords if value is not _NOT_KNOWN and value != _NOT_KNOWN})
    return known


def _returned_values(function: ast.FunctionDef) -> Optional[List[ast.expr]]:
    """What each ``return`` gives back (None when one returns nothing, or the function yields)."""
    values = []
    for node in own_nodes(function):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return None
        if isinstance(node, ast.Return):
            if node.value is None:
                return None
            values.append(node.value)
    return values


_AST_ELEMENTWISE = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _ast_zero_dim(
    node: ast.expr, function: ast.FunctionDef, facts, depth: int, defaults: Dict[str, object],
    element: Optional[Tuple[int, int]] = None,
) -> bool:
    """Whether ``node`` (an expression of ``function``, read with ``ast``) is a 0-dim tensor, the parameters of
    ``defaults`` holding their defaults; with ``element`` (index, length), whether it is a tuple of that length
    whose element is."""
    if depth > MAX_DEPTH:
        return False
    if element is not None and not isinstance(node, ast.IfExp):
        index, length = element
        if isinstance(node, ast.Tuple) and len(node.elts) == length and not any(isinstance(e, ast.Starred) for e in node.elts):
            return _ast_zero_dim(node.elts[index], function, facts, depth + 1, defaults)
        return False
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _ast_zero_dim(node.operand, function, facts, depth + 1, defaults)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _AST_ELEMENTWISE):
        sides = (node.left, node.right)
        zero = [_ast_zero_dim(side, function, facts, depth + 1, defaults) for side in sides]
        numbers = [_ast_number(side, function, defaults, facts) for side in sides]
        return any(zero) and all(z or n for z, n in zip(zero, numbers))
    if isinstance(node, ast.IfExp):
        test = node.test
        if isinstance(test, ast.Name) and test.id in defaults and not _rebinds(function, test.id):
            chosen = node.body if defaults[test.id] else node.orelse
            return _ast_zero_dim(chosen, function, facts, depth + 1, defaults, element)
        return all(_ast_zero_dim(branch, function, facts, depth + 1, defaults, element) for branch in (node.body, node.orelse))
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in FULL_REDUCTIONS and not node.args and not node.keywords:
            return True
        if (
            isinstance(func, ast.Attribute) and func.attr in ELEMENTWISE_METHODS and len(node.args) == 1
            and not node.keywords and not isinstance(node.args[0], ast.Starred)
        ):
            # ``loss.div(batch_size)``: the method form of the arithmetic above
            receiver, by = func.value, node.args[0]
            return _ast_zero_dim(receiver, function, facts, depth + 1, defaults) and (
                _ast_number(by, function, defaults, facts) or _ast_zero_dim(by, function, facts, depth + 1, defaults)
            )
        qualified = facts.qualify(func) or ""
        if qualified.startswith("torch.") and qualified[len("torch."):] in FULL_REDUCTIONS:
            return len(node.args) == 1 and not node.keywords
        if isinstance(func, ast.Call) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
            # ``nn.KLDivLoss()(log_p, q)``: a loss module built and called at once
            built = facts.qualify(func.func) or ""
            if is_torch_loss_module(built):
                return len(func.args) <= 1 and _ast_reduces(func.keywords)
            return False
        if qualified.startswith("torch.nn.functional.") and is_functional_loss_name(qualified.rsplit(".", 1)[-1]):
            return _ast_reduces(node.keywords)
        if (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
            and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args)
        ):
            # ``self.loss(log_p, y)`` with ``self.loss = nn.NLLLoss()`` set once by the class
            return _self_loss_module(function, facts, func.attr)
        if isinstance(func, ast.Name) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
            # ``crit = nn.CrossEntropyLoss()`` then ``crit(logits, labels)``: the loss module bound once in the function
            built = _bound_once(function, func.id)
            if isinstance(built, ast.Call):
                made = facts.qualify(built.func) or ""
                if is_torch_loss_module(made):
                    return len(built.args) <= 1 and _ast_reduces(built.keywords)
        return False
    if isinstance(node, ast.Name):
        # every binding of the name in the function is a plain assignment of a 0-dim value, or an elementwise update
        # by a number or a 0-dim value (``kld /= batch_size * 784`` keeps the shape it had)
        values = []
        for statement in own_nodes(function):
            if isinstance(statement, ast.Assign):
                if any(_stores(target, node.id) for target in statement.targets):
                    if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
                        return False  # unpacked or chained
                    values.append(statement.value)
            elif isinstance(statement, ast.AugAssign) and _stores(statement.target, node.id):
                by = statement.value
                if not isinstance(statement.op, _AST_ELEMENTWISE) or not (
                    _ast_number(by, function, defaults, facts) or _ast_zero_dim(by, function, facts, depth + 1, defaults)
                ):
                    return False
            elif any(_stores(target, node.id) for target in _binding_targets(statement)):
                return False  # annotated, a loop or ``with`` target, a walrus
        # a branch that binds None (``else: loss = None``) makes no tensor: indexing fails there too
        values = [value for value in values if not (isinstance(value, ast.Constant) and value.value is None)]
        return bool(values) and all(_ast_zero_dim(value, function, facts, depth + 1, defaults) for value in values)
    return False


def _ast_number(node: ast.expr, function: ast.FunctionDef, defaults: Dict[str, object], facts=None) -> bool:
    """A Python number: a numeric literal, a parameter the call leaves a number (``T=20.0``), a module constant
    (``batch_size = 128`` at the top level, never rebound), arithmetic of those."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        if _rebinds(function, node.id):
            return _counts(_bound_once(function, node.id))  # ``batch_size = x.size(0)``
        if node.id in defaults:
            value = defaults[node.id]
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        return facts is not None and not _is_parameter(function, node.id) and _module_number(facts, node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _ast_number(node.operand, function, defaults, facts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _AST_ELEMENTWISE + (ast.Pow,)):
        return _ast_number(node.left, function, defaults, facts) and _ast_number(node.right, function, defaults, facts)
    return False


def _counts(node: Optional[ast.expr]) -> bool:
    """A size read as a Python int: ``x.size(0)``, ``x.shape[0]``, ``x.numel()``, ``len(x)``, ``int(v)``, or a
    numeric literal."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Subscript):
        index = node.slice
        return (
            isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
            and isinstance(index, ast.Constant) and type(index.value) is int
        )
    if not isinstance(node, ast.Call) or node.keywords:
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in ("len", "int", "float") and len(node.args) == 1
    if isinstance(func, ast.Attribute) and func.attr == "size":
        return len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and type(node.args[0].value) is int
    return isinstance(func, ast.Attribute) and func.attr == "numel" and not node.args


def _is_parameter(function: ast.FunctionDef, name: str) -> bool:
    arguments = function.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [a for a in (arguments.vararg, arguments.kwarg) if a]
    return any(argument.arg == name for argument in every)


def _module_number(facts, name: str) -> bool:
    """``name`` is bound once at the module's top level (its blocks included), to a numeric literal, and no
    function declares it ``global``."""
    value = getattr(facts, "values", {}).get(name)
    if not (isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) and not isinstance(value.value, bool)):
        return False
    return bound_once(facts.tree, name) and not any(isinstance(inner, ast.Global) and name in inner.names for inner in ast.walk(facts.tree))


def _ast_reduces(keywords: Sequence[ast.keyword]) -> bool:
    """A loss call's (or constructor's) keywords leave one number, as :func:`_reduces` reads them: a reducing
    ``reduction``; of the legacy flags, ``size_average=`` (the sum or the mean) and ``reduce=True``."""
    given = {keyword.arg: keyword.value for keyword in keywords}
    if None in given:
        return False
    legacy_reduce = given.get("reduce")
    if legacy_reduce is not None and not (isinstance(legacy_reduce, ast.Constant) and legacy_reduce.value is True):
        return False
    reduction = given.get("reduction")
    return reduction is None or (isinstance(reduction, ast.Constant) and reduction.value in REDUCING)


def _bound_only_by_its_def(ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    """Every binding of ``name`` that reaches the use is a top-level ``def`` of the file."""
    found = bindings(site_of(ancestors), name)
    module = ancestors[0] if ancestors and isinstance(ancestors[0], cst.Module) else None
    return module is not None and bool(found) and all(
        isinstance(binding.node, cst.FunctionDef) and any(binding.node is statement for statement in module.body)
        for binding in found
    )


def called_function_rank(context: "FileContext", name: str, call: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Optional[int]:
    """The rank of what ``call`` returns when ``name`` (its callee, or the function a caller passes for it) is, where
    ``ancestors`` read it, a top-level function of the file: 0 when it returns a 0-dim value."""
    if has_star_args(call):
        return None
    if not _bound_only_by_its_def(ancestors, name) and (bindings(site_of(ancestors), name) or not _star_imported(context, name)):
        return None
    return function_return_rank(context, name, _call_shape(call))


def _star_imported(context: "FileContext", name: str) -> bool:
    """``name`` reaches the file only through a ``from module import *`` of a project module."""
    facts = file_facts(context)
    return facts is not None and name not in facts.functions and name not in facts.imports and facts.imported(name) is not None


def function_return_rank(context: "FileContext", name: str, shape: CallShape = None) -> Optional[int]:
    """0 when ``name`` is a top-level function of the file that returns a 0-dim value on every ``return`` (a loss,
    a full reduction, arithmetic of those with numbers, the numbers a call of ``shape`` passes or leaves at their
    defaults): ``loss = distillation(out, y, teacher, T=20.0, alpha=0.7)``."""
    facts = file_facts(context)
    if facts is None:
        return None
    # this file's function, else one another module of the project defines, imported by name or by ``*``
    found = (facts, facts.functions[name]) if name in facts.functions else _project_function(context, facts.imported(name))
    if found is None:
        return None
    owner, function = found
    return 0 if _returns_zero_dim(function, owner, _known_parameters(function, shape, receiver=0)) else None


def _imported_function_rank(context: "FileContext", qualified: str, call: cst.Call) -> Optional[int]:
    """0 when ``call`` calls a function another module of the project defines (imported by name or by ``*``) that
    returns a 0-dim value on every ``return``: ``loss = binary_cross_entropy_weight(y_pred, y)``."""
    found = None if has_star_args(call) or qualified.startswith("torch.") else _project_function(context, qualified)
    if found is None:
        return None
    owner, function = found
    return 0 if _returns_zero_dim(function, owner, _known_parameters(function, _call_shape(call), receiver=0)) else None


def _project_function(context: "FileContext", qualified: Optional[str]):
    """(the module's facts, the function) that ``qualified`` names in the project, following re-exports; None for
    anything else."""
    project = getattr(context, "project", None)
    if project is None or qualified is None:
        return None
    module, _, name = qualified.rpartition(".")
    # ``model.f`` from a script is the ``model.py`` beside it (its folder comes first on the path)
    located = project.locate(f"{project.resolve_from(context.path, module)}.{name}" if module else qualified)
    if located is None:
        return None
    owner, defined = located
    function = owner.functions.get(defined)
    return (owner, function) if function is not None else None


def _returns_zero_dim(
    function: ast.FunctionDef, facts, known: Dict[str, object], element: Optional[Tuple[int, int]] = None
) -> bool:
    """Every ``return`` of ``function`` gives a 0-dim value (of the tuple's ``element``), ``known`` parameters fixed."""
    returned = _returned_values(function)
    return bool(returned) and all(_ast_zero_dim(value, function, facts, 0, known, element) for value in returned)


def _bound_once(function: ast.FunctionDef, name: str) -> Optional[ast.expr]:
    """The value of the one plain assignment to ``name`` in ``function`` (None when it has another binding)."""
    return None if _is_parameter(function, name) else single_assignments(function).get(name)


def _rebinds(function: ast.FunctionDef, name: str) -> bool:
    """Whether ``function``'s body binds ``name`` (a parameter it then no longer holds as passed)."""
    return any(
        _stores(target, name)
        for statement in own_nodes(function)
        for target in (statement.targets if isinstance(statement, ast.Assign) else _binding_targets(statement))
    )


def _stores(target: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(target))


def _binding_targets(node: ast.AST) -> List[ast.AST]:
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return [node.target]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [ast.Name(node.name, ast.Store())]
    return []


def _is_number(context: "FileContext", node: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) or value_kind(context, node, site_of(ancestors)) == "number"


def _scalar_arithmetic_rank(context: "FileContext", operands, ancestors: Sequence[cst.CSTNode], depth: int) -> Optional[int]:
    """0 when every operand is a 0-dim tensor or a Python number and one is a tensor (``loss.sum() / n``)."""
    ranks = [None if _is_number(context, operand, ancestors) else known_rank(context, operand, ancestors, depth + 1) for operand in operands]
    numbers = [rank is None and _is_number(context, operand, ancestors) for rank, operand in zip(ranks, operands)]
    if 0 in ranks and all(rank == 0 or number for rank, number in zip(ranks, numbers)):
        return 0
    return None


def _accumulated_rank(context: "FileContext", name: str, ancestors: Sequence[cst.CSTNode], depth: int) -> Optional[int]:
    """0 for a name that every binding reaching the use makes a 0-dim tensor or a number, and that some binding
    makes a 0-dim tensor: the summed loss of ``loss = 0`` then ``loss += criterion(out, y)`` in a loop."""
    found = bindings(site_of(ancestors), name)
    if not found:
        return None
    tensor = False
    for binding in found:
        if _unpacked_rank(context, binding, name) == 0:
            tensor = True
            continue
        if binding.value is None or binding.kind not in ("assign", "update", "conditional"):
            return None
        value = binding.value
        if isinstance(binding.node, cst.AugAssign):
            value = binding.node.value  # ``name += rhs``: what is added keeps a 0-dim sum 0-dim
        if _is_number(context, value, ancestors):
            continue
        if known_rank(context, value, ancestors, depth + 1) != 0:
            return None
        tensor = True
    return 0 if tensor else None


def zero_dim_on_some_path(context: "FileContext", name: str, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Some binding of ``name`` in the use's scope makes it a 0-dim tensor and none gives it another known rank:
    ``loss = mixup_loss(out, y)`` on one branch, ``loss = criterion(out, y)`` on the other.  A use that needs
    more than 0 dimensions fails on that branch's path."""
    zero = False
    for binding in bindings(site_of(ancestors), name):
        unpacked = _unpacked_rank(context, binding, name)
        if unpacked is not None:
            zero = True
            continue
        if binding.value is None or binding.kind not in ("assign", "conditional"):
            continue
        rank = known_rank(context, binding.value, ancestors, 1)
        if rank is not None and rank != 0:
            return False
        zero = zero or rank == 0
    return zero


def _unpacked_rank(context: "FileContext", binding, name: str) -> Optional[int]:
    """The rank of ``name`` in ``a, b = obj.method(...)``, from what the project's ``method`` returns."""
    if binding.kind not in ("unpack", "conditional"):
        return None
    # a tuple assignment in a loop or a branch is a conditional binding: its position is read the same way
    position = unpack_position(replace(binding, kind="unpack"), name)
    value = binding.node.value if isinstance(binding.node, cst.Assign) else None
    if position is None or not isinstance(value, cst.Call):
        return None
    if isinstance(value.func, cst.Name):
        return _function_element_rank(context, value.func.value, value, position)
    if not isinstance(value.func, cst.Attribute) or context.qualified_name(value.func) is not None:
        return None
    return method_return_rank(context, value.func.attr.value, _call_shape(value), position)


def _function_element_rank(context: "FileContext", name: str, call: cst.Call, element: Tuple[int, int]) -> Optional[int]:
    """The rank of ``element`` of the tuple a function of the project returns, called by ``name`` (a function of
    this file, or one imported from a module of the project): ``cls_loss, reg_loss, log = rpn_loss(...)``."""
    facts = file_facts(context)
    if facts is None or has_star_args(call):
        return None
    found = (facts, facts.functions[name]) if name in facts.functions else _project_function(context, context.qualified_name(call.func))
    if found is None:
        return None
    owner, function = found
    return 0 if _returns_zero_dim(function, owner, _known_parameters(function, _call_shape(call), receiver=0), element) else None


def sequential_rank_before(context: "FileContext", sequential: cst.Call, position: int) -> Optional[int]:
    """The rank of what reaches element ``position`` of ``nn.Sequential(...)``, when a layer before it fixes
    it and the layers in between keep it."""
    elements = positional_args(sequential)
    for element in reversed(elements[:position]):
        call = element.value
        if not isinstance(call, cst.Call):
            return None
        built = context.qualified_name(call.func)
        if built in FLATTEN_MODULES:
            return 2 if not call.args else None
        if built not in RANK_KEEPING_MODULES:
            return None
    return None


def _shape_rank(call: cst.Call) -> Optional[int]:
    sizes = positional_args(call)
    if len(sizes) != len(call.args):
        return None  # view(dtype=...) and the like
    if len(sizes) == 1 and isinstance(sizes[0].value, (cst.Tuple, cst.List)):
        elements = sizes[0].value.elements
        return len(elements) if all(not isinstance(e, cst.StarredElement) for e in elements) else None
    if len(sizes) == 1:
        return None  # view(shape) or view(dtype): not known
    return len(sizes)


def _flatten_rank(call: cst.Call, first: int) -> Optional[int]:
    """``flatten(start_dim)`` with the default ``end_dim=-1``: ``start_dim + 1`` dimensions."""
    if keyword_arg(call, "end_dim") is not None or len(positional_args(call)) > first + 1:
        return None
    start = argument(call, first, "start_dim")
    value = 0 if start is None else literal_value(start.value)
    return value + 1 if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _is_scalar_loss(context: "FileContext", call: cst.Call) -> bool:
    """A torch loss called with a reduction that leaves one number."""
    if not is_loss_call(context, call):
        return False
    qualified = context.qualified_name(call.func)
    if qualified is not None:
        return _reduces(call, positional_allowed=3)  # F.nll_loss(input, target, weight): reduction comes later
    return scalar_loss_module(context, module_constructor(context, call.func)) and not has_star_args(call)


def project_loss_module_call(context: "FileContext", call: cst.Call) -> bool:
    """A call of a module the file builds from a class of its own or of the project whose ``forward`` returns a 0-dim
    value on every ``return`` (``criterion = CrossEntropyLoss2d(weight)`` where ``forward`` returns
    ``self.loss(log_softmax(outputs, 1), targets)`` and ``__init__`` holds ``self.loss = nn.NLLLoss2d(weight)``)."""
    if isinstance(call.func, cst.Call) or has_star_args(call):
        return False
    constructor = unmoved(module_constructor(context, call.func))
    facts = file_facts(context)
    if constructor is None or facts is None:
        return False
    qualified = context.qualified_name(constructor.func) or facts.qualify_dotted(dotted_name(constructor.func))
    if qualified is None or qualified.startswith("torch."):
        return False
    found = definition(qualified, facts, getattr(context, "project", None))
    if found is None or found[1] not in found[0].class_nodes:
        return False
    owner_facts, name = found
    forward = _method(owner_facts.class_nodes[name], "forward")
    return forward is not None and _returns_zero_dim(forward, owner_facts, _known_parameters(forward, _call_shape(call)))


def _method(class_node: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((s for s in class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name), None)


def _self_loss_module(function: ast.FunctionDef, facts, attribute: str) -> bool:
    """``self.<attribute>`` is set once, in ``__init__`` of the class holding ``function``, to a reducing torch loss
    module (``self.loss = nn.NLLLoss2d(weight)``)."""
    owner = next((c for c in facts.class_nodes.values() if function in c.body), None)
    init = _method(owner, "__init__") if owner is not None else None
    if init is None:
        return False
    built = [
        statement.value
        for klass in (owner,)
        for method in klass.body
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
        for statement in own_nodes(method)
        if isinstance(statement, ast.Assign)
        and any(isinstance(t, ast.Attribute) and t.attr == attribute and isinstance(t.value, ast.Name) and t.value.id == "self" for t in statement.targets)
    ]
    if len(built) != 1 or not isinstance(built[0], ast.Call):
        return False
    made = facts.qualify(built[0].func) or ""
    return (
        is_torch_loss_module(made) and len(built[0].args) <= 1 and _ast_reduces(built[0].keywords)
    )


def ast_builds_scalar_loss(value: Optional[ast.expr], facts) -> bool:
    """``value`` (read with ``ast`` in module ``facts``) builds a torch loss module whose output is one number:
    ``nn.CrossEntropyLoss()``, also moved (``nn.MSELoss().cuda()``)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MODULE_MOVES:
        value = value.func.value
    if not isinstance(value, ast.Call) or any(isinstance(arg, ast.Starred) for arg in value.args):
        return False
    return is_torch_loss_module(facts.qualify(value.func)) and len(value.args) <= 1 and _ast_reduces(value.keywords)


def scalar_loss_module(context: "FileContext", constructor: Optional[cst.Call]) -> bool:
    """``constructor`` builds a torch loss module (``nn.CrossEntropyLoss()``, also moved: ``.cuda()``) whose
    output is one number: a reducing ``reduction``."""
    constructor = unmoved(constructor)
    if constructor is None:
        return False
    built = context.qualified_name(constructor.func) or ""
    if not is_torch_loss_module(built):
        return False
    return _reduces(constructor, positional_allowed=1)


def _reduces(call: cst.Call, positional_allowed: int) -> bool:
    """No ``reduction`` beyond the first ``positional_allowed`` positions, and a reducing one. Of the legacy flags,
    ``size_average=`` only chose the sum or the mean (one number either way); ``reduce=`` reduces when it is
    ``True``."""
    if has_star_args(call) or len(positional_args(call)) > positional_allowed:
        return False
    legacy_reduce = keyword_arg(call, "reduce")
    if legacy_reduce is not None and literal_value(legacy_reduce.value) is not True:
        return False
    reduction = keyword_arg(call, "reduction")
    return reduction is None or literal_value(reduction.value) in REDUCING


# -- what a list collects, and values ``backward()`` shows to hold one element --------------------------------

# Methods that hand back the tensor they are called on, shape kept (``loss.data`` is an attribute, read alike).
_SHAPE_KEEPING_READS = frozenset({"detach", "clone", "cpu", "cuda", "float", "double", "contiguous", "numpy"})
# Reads whose result is out of the autograd graph (``numpy()`` refuses a tensor that requires grad).
_DETACHING_READS = frozenset({"detach", "numpy"})


def without_shape_keeping_reads(node: cst.BaseExpression) -> cst.BaseExpression:
    """``loss`` for ``loss.data``, ``loss.detach().cpu()``: the value whose shape the expression keeps."""
    return _shape_keeping_chain(node)[0]


def read_detached(node: cst.BaseExpression) -> bool:
    """Whether ``node`` reads its value through ``.data``, ``.detach()`` or ``.numpy()`` among such shape-keeping
    reads (``loss.data.cpu()``): the value is out of the autograd graph."""
    return _shape_keeping_chain(node)[1]


def _shape_keeping_chain(node: cst.BaseExpression) -> Tuple[cst.BaseExpression, bool]:
    detached = False
    while True:
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            node, detached = node.value, True
        elif (
            isinstance(node, cst.Call) and not node.args and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in _SHAPE_KEEPING_READS
        ):
            detached = detached or node.func.attr.value in _DETACHING_READS
            node = node.func.value
        else:
            return node, detached


def calls_with_ancestors(root: cst.CSTNode, ancestors: Sequence[cst.CSTNode]):
    """Every call under ``root`` (``root`` included), in source order, with its enclosing nodes (outermost first,
    as a visitor's ``context.ancestors`` holds them when it visits the call)."""
    stack: List[Tuple[cst.CSTNode, List[cst.CSTNode]]] = [(root, list(ancestors))]
    while stack:
        node, above = stack.pop()
        if isinstance(node, cst.Call):
            yield node, above
        inner = above + [node]
        stack.extend((child, inner) for child in reversed(node.children))


def appended_elements(
    holder: cst.BaseExpression, ancestors: Sequence[cst.CSTNode], before: Optional[cst.CSTNode] = None
) -> List[Tuple[cst.BaseExpression, List[cst.CSTNode]]]:
    """What the list ``holder`` receives through ``append``/``extend`` of a display, each with its enclosing
    nodes: a local name, in the innermost function of ``ancestors`` (or the module) up to the node ``before``;
    ``self.name``, in every method of the innermost class (the methods run in any order)."""
    if isinstance(holder, cst.Name):
        scope_at = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.FunctionDef)), 0)
        matches = lambda target: isinstance(target, cst.Name) and target.value == holder.value  # noqa: E731
    elif isinstance(holder, cst.Attribute) and isinstance(holder.value, cst.Name) and holder.value.value == "self":
        scope_at = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.ClassDef)), None)
        if scope_at is None:
            return []
        before = None
        matches = lambda target: (  # noqa: E731
            isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"
            and target.attr.value == holder.attr.value
        )
    else:
        return []
    found: List[Tuple[cst.BaseExpression, List[cst.CSTNode]]] = []
    for call, above in calls_with_ancestors(ancestors[scope_at], ancestors[:scope_at]):
        if call is before:
            break
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend") and matches(func.value)):
            continue
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            continue
        value = call.args[0].value
        if func.attr.value == "append":
            found.append((value, above + [call]))
        elif isinstance(value, (cst.List, cst.Tuple)):
            found.extend((e.value, above + [call]) for e in value.elements if not isinstance(e, cst.StarredElement))
    return found


def backward_shows_one_element(context: "FileContext", name: str, ancestors: Sequence[cst.CSTNode]) -> bool:
    """``name.backward()`` with no gradient in the function of ``ancestors``: autograd creates the gradient only for
    a tensor of one element ("grad can be implicitly created only for scalar outputs"), 0-dim unless the code
    built it with a shape such as ``(1,)``."""
    scope_at = next((i for i in range(len(ancestors) - 1, -1, -1) if isinstance(ancestors[i], cst.FunctionDef)), 0)
    return name in context.memoized("calls.backpropagated-names", ancestors[scope_at], backpropagated_names)
