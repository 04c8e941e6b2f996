"""Recognising torch operations in their function, method and module forms.

``torch.log(x)``, ``x.log()``; ``F.softmax(x, 1)``, ``x.softmax(1)``,
``nn.Softmax(1)(x)`` and ``self.softmax(x)`` where ``__init__`` set
``self.softmax = nn.Softmax(1)``.  Rules ask these helpers; they never match
call shapes themselves.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.model.dataflow import bindings, site_of, unpacked_element
from torchlint.analysis.model.literals import EPS_LITERAL_LIMIT, number_value, small_positive_behind
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

SOFTMAX_FUNCTIONS: FrozenSet[str] = frozenset(
    {"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"}
)
SOFTMAX_MODULES: FrozenSet[str] = frozenset({"torch.nn.Softmax", "torch.nn.modules.activation.Softmax"})
# Methods of an nn.Module that return the module itself (``Net().to(device).eval()``).
MODULE_MOVES: FrozenSet[str] = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_", "to_empty"}
)


@dataclass(frozen=True)
class UnaryOp:
    """``torch.log(x)`` or ``x.log()``: the call and its tensor operand."""

    call: cst.Call
    operand: cst.BaseExpression
    method: bool
    # Arguments beyond the operand (``out=``): a fix that rebuilds the call would drop them.
    extra_args: bool


def match_unary(context: "FileContext", node: cst.CSTNode, functions: FrozenSet[str], method: str) -> Optional[UnaryOp]:
    """Match a one-tensor torch op given by qualified ``functions`` and its Tensor ``method`` name."""
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    qualified = context.qualified_name(func)
    if qualified is not None:
        if qualified not in functions:
            return None
        operand = argument(node, 0, "input")
        if operand is None:
            return None
        return UnaryOp(node, operand.value, False, len(node.args) > 1)
    if isinstance(func, cst.Attribute) and func.attr.value == method and is_value_receiver(context, func.value):
        return UnaryOp(node, func.value, True, len(node.args) > 0)
    return None


def is_value_receiver(context: "FileContext", receiver: cst.BaseExpression) -> bool:
    """Whether ``receiver.method(...)`` is a method call on a value (a tensor, maybe), not a module function.

    ``np.log()``, ``math.log()`` resolve through imports and are module
    functions; ``self`` and ``cls`` are the enclosing object, whose methods
    are the user's own.
    """
    if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls", "super"):
        return False
    return context.qualified_name(receiver) is None


@dataclass(frozen=True)
class SoftmaxCall:
    """A softmax in one of its forms.

    form: "function" (``F.softmax(x, d)``), "method" (``x.softmax(d)``) or
    "module" (``nn.Softmax(d)(x)``, also through a ``self.`` attribute).
    """

    node: cst.Call
    form: str
    qualified: Optional[str]  # the function or module class
    input: Optional[cst.BaseExpression]
    dim: Optional[cst.Arg]
    # For "module": the constructor call, whose arguments hold dim.
    constructor: Optional[cst.Call] = None


def match_softmax(context: "FileContext", node: cst.CSTNode) -> Optional[SoftmaxCall]:
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    qualified = context.qualified_name(func)
    if qualified in SOFTMAX_FUNCTIONS:
        given = argument(node, 0, "input")
        return SoftmaxCall(node, "function", qualified, given.value if given else None, argument(node, 1, "dim"))
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "softmax" and is_value_receiver(context, func.value):
        return SoftmaxCall(node, "method", None, func.value, argument(node, 0, "dim"))
    constructor = module_constructor(context, func)
    if constructor is not None and context.qualified_name(constructor.func) in SOFTMAX_MODULES:
        if len(node.args) != 1 or node.args[0].keyword is not None:
            return None
        return SoftmaxCall(
            node, "module", context.qualified_name(constructor.func), node.args[0].value, argument(constructor, 0, "dim"), constructor
        )
    return None


def unmoved(constructor: Optional[cst.Call]) -> Optional[cst.Call]:
    """The constructor a module move wraps: ``nn.MSELoss()`` for ``nn.MSELoss().cuda()`` / ``.to(device)``."""
    while (
        isinstance(constructor, cst.Call)
        and isinstance(constructor.func, cst.Attribute)
        and constructor.func.attr.value in MODULE_MOVES
        and isinstance(constructor.func.value, cst.Call)
    ):
        constructor = constructor.func.value
    return constructor


def module_constructor(context: "FileContext", func: cst.BaseExpression) -> Optional[cst.Call]:
    """The constructor call behind a called module: ``nn.Softmax(1)`` in ``nn.Softmax(1)(x)``, the
    ``__init__`` assignment behind ``self.softmax(x)``, or the assignment behind ``sm(x)``
    (``sm = nn.Softmax()`` earlier in the function or script, or at the module's top level)."""
    from torchlint.analysis.model.dataflow import named_call

    if isinstance(func, cst.Call):
        return func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        value = context.self_attribute_value(func.attr.value)
        return value if isinstance(value, cst.Call) else None
    if isinstance(func, cst.Name):
        found = named_call(context, func.value)
        if found is not None:
            return found[0]
        moved = _built_then_moved(context, func.value)
        if moved is not None:
            return moved
        possible = possible_constructors(context, func.value)
        return possible[0] if len(possible) == 1 else None
    return None


def possible_constructors(context: "FileContext", name: str) -> Tuple[cst.Call, ...]:
    """The calls that may have built the module ``name`` holds where the engine stands, latest first, when every
    binding that may reach builds one or moves one: ``if a: crit = nn.L1Loss()`` / ``else: crit = nn.BCELoss()``,
    or ``sigmoid = nn.Sigmoid()`` bound in the one branch that uses it (a use runs only where some binding ran).
    Empty when any binding that may reach is something else (a parameter, a loop target, an unpacking)."""
    site = site_of(context.ancestors)
    built: List[cst.Call] = []
    for binding in bindings(site, name):
        if binding.kind == "module" and site.function is not None and built:
            continue  # the function binds the name: the module's binding is shadowed there
        value = unpacked_element(binding, name) if binding.kind == "unpack" else binding.value
        if binding.kind not in ("assign", "conditional", "module", "unpack") or not isinstance(value, cst.Call):
            return ()  # an unpacking counts when it pairs the name with a call (``bce, l1 = nn.BCELoss(), nn.L1Loss()``)
        if _moves_name(value, name):
            continue  # ``crit = crit.cuda()``: the module an older binding built
        value = unmoved(value)
        if not any(value is seen for seen in built):
            built.append(value)
    return tuple(built)


def _moves_name(call: cst.Call, name: str) -> bool:
    value: cst.BaseExpression = call
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_MOVES:
        value = value.func.value
    return isinstance(value, cst.Name) and value.value == name


def _built_then_moved(context: "FileContext", name: str) -> Optional[cst.Call]:
    """The call that built ``name`` when every later binding that may reach here only moves it
    (``criterion = nn.MSELoss()`` then ``if cuda: criterion = criterion.cuda()``): a move keeps the module."""
    found = bindings(site_of(context.ancestors), name)
    if len(found) < 2:
        return None
    *moves, built = found
    if built.kind != "assign" or not isinstance(built.value, cst.Call):
        return None
    for move in moves:
        if move.kind not in ("assign", "conditional") or not isinstance(move.value, cst.Call):
            return None
        if not _moves_name(move.value, name):
            return None
    return built.value


# -- eps-like operands --------------------------------------------------------------

_EPS_NAME = re.compile(r"^_*(eps|epsilon|EPS|EPSILON|[A-Za-z0-9_]*_(eps|epsilon|EPS|EPSILON)|(eps|epsilon|EPS|EPSILON)_[A-Za-z0-9_]*)$")


def is_eps_like(node: cst.BaseExpression, context: Optional["FileContext"] = None) -> bool:
    """A small positive literal (``1e-8``); with ``context``, a name or ``self`` attribute the code shows holds one
    (analysis/model/literals.py); else (a naming convention: analysis/model/conventions.py) a name that says eps
    (``eps``, ``self.eps``, ``EPS``, ``log_eps``)."""
    value = number_value(node)
    if value is not None:
        return 0 < value <= EPS_LITERAL_LIMIT
    if context is not None and isinstance(node, (cst.Name, cst.Attribute)) and small_positive_behind(context, node):
        return True
    if isinstance(node, cst.Name):
        return conventions.says(bool(_EPS_NAME.match(node.value)))
    if isinstance(node, cst.Attribute):
        return conventions.says(bool(_EPS_NAME.match(node.attr.value)))
    return False


def strip_eps(node: cst.BaseExpression, context: Optional["FileContext"] = None) -> cst.BaseExpression:
    """``p`` for ``p + eps`` / ``eps + p``; ``node`` itself otherwise (``context``: see :func:`is_eps_like`)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if is_eps_like(node.right, context):
            return node.left
        if is_eps_like(node.left, context):
            return node.right
    return node


def strip_clamp_min(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """``p`` for ``p.clamp(min=eps)``, ``p.clamp_min(eps)``, ``torch.clamp(p, min=eps)``, ``p.clip(eps)``."""
    if not isinstance(node, cst.Call) or has_star_args(node):
        return node
    func = node.func
    qualified = context.qualified_name(func)
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_min"):
        base = argument(node, 0, "input")
        low = argument(node, 1, "min")
        if base is not None and low is not None and is_eps_like(low.value, context):
            return base.value
        return node
    if qualified is None and isinstance(func, cst.Attribute) and is_value_receiver(context, func.value):
        if func.attr.value in ("clamp", "clip", "clamp_min"):
            low = argument(node, 0, "min")
            if low is not None and is_eps_like(low.value, context) and not keyword_arg(node, "max") and len(positional_args(node)) <= 1:
                return func.value
    return node


# -- calls as (name, source, is_method) ------------------------------------------------

# Casts and reshapes: every element keeps its value's sign (sign_of looks through them at no depth).
SHAPE_AND_CAST_CALLS = frozenset({
    "float", "double", "half", "bfloat16", "to", "type", "type_as", "detach", "clone", "contiguous", "view",
    "view_as", "reshape", "reshape_as", "expand", "expand_as", "unsqueeze", "squeeze", "flatten", "unflatten",
    "permute", "transpose", "t", "movedim", "swapaxes", "broadcast_to", "unsqueeze_", "squeeze_",
})

def call_parts(context: "FileContext", call: cst.Call):
    """(short name, source tensor or None, is_method) for a torch function or a tensor method."""
    func = call.func
    qualified = context.qualified_name(func)
    if qualified is not None:
        if not qualified.startswith("torch."):
            return None, None, False
        first = positional_args(call)
        return qualified.rsplit(".", 1)[-1], (first[0].value if first else None), False
    if isinstance(func, cst.Attribute) and is_value_receiver(context, func.value):
        return func.attr.value, func.value, True
    if isinstance(func, cst.Call):  # nn.Sigmoid()(x), nn.Softmax(1)(x)
        name = context.qualified_name(func.func)
        if name is not None and name.startswith("torch.nn."):
            return name.rsplit(".", 1)[-1], (call.args[0].value if call.args else None), False
    return None, None, False



def without_shape_steps(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """``x.view(b, n, 1).to(dtype).transpose(1, 2)`` -> ``x``: casts and reshapes keep every element's
    sign and cost no depth (a mask reshaped and cast on its way to a matmul)."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not has_star_args(node):
        name, source, is_method = call_parts(context, node)
        if not is_method or source is None or name not in SHAPE_AND_CAST_CALLS:
            break
        node = source
    return node


