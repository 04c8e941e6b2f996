"""Which values are integer tensors, where the code shows it.

``integer_tensor(context, expr)`` is true only for what the code makes: indices torch returns
(``x.argmax(1)``, ``torch.argsort(x)``, ``x.nonzero()``, ``torch.randperm(n)``, the second element of
``x.topk(k)``/``x.max(1)``/``x.sort()``, their ``.indices``), a ``.long()``/``.int()`` conversion, and
arithmetic of those with integers (``+ - * % //``), followed through shape-keeping methods (``squeeze``,
``view``, ``cpu``) and through every binding of a name that may reach the use. A parameter, a loop variable
or a loaded tensor has no dtype the code shows.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from torchlint.analysis.model.calls import has_star_args
from torchlint.analysis.model.dataflow import bindings, path_to, site_of, unpack_position

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

MAX_DEPTH = 6

# Methods (of a tensor, or of an array for the arg* ones) whose result holds integers.
INTEGER_METHODS = frozenset({"argmax", "argmin", "argsort", "nonzero", "long", "int", "multinomial"})
INTEGER_FUNCTIONS = frozenset({
    "torch.argmax", "torch.argmin", "torch.argsort", "torch.nonzero", "torch.randperm", "torch.multinomial",
    "torch.randint", "torch.bucketize", "torch.searchsorted",
})
# Calls that return (values, indices): the second element holds the indices. ``max``/``min`` do so only when a
# dimension is given (alone they return one tensor of values).
VALUES_AND_INDICES = frozenset({"topk", "sort", "kthvalue", "mode", "median", "cummax", "cummin", "max", "min"})
_NEED_A_DIMENSION = frozenset({"max", "min", "median"})
# Methods that keep their receiver's dtype.
DTYPE_KEEPING_METHODS = frozenset({
    "squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "clone", "detach", "cpu", "cuda", "t",
    "transpose", "permute", "expand", "repeat", "view_as", "expand_as", "squeeze_", "unsqueeze_",
})
_INTEGER_KEEPING = (cst.Add, cst.Subtract, cst.Multiply, cst.Modulo, cst.FloorDivide)


def integer_tensor(
    context: "FileContext", node: cst.BaseExpression, ancestors: Optional[Sequence[cst.CSTNode]] = None, depth: int = 0
) -> bool:
    """Whether ``node`` (read below ``ancestors``, by default the node being visited) is a tensor of integers."""
    if depth > MAX_DEPTH:
        return False
    ancestors = context.ancestors if ancestors is None else ancestors
    if isinstance(node, cst.Name):
        return _every_binding_integer(context, node.value, ancestors, depth)
    if isinstance(node, cst.Attribute):
        if node.attr.value == "indices":
            return isinstance(node.value, cst.Call) and _returns_values_and_indices(context, node.value)
        if node.attr.value == "data":
            return integer_tensor(context, node.value, ancestors, depth + 1)
        return False
    if isinstance(node, cst.Subscript):
        return _second_element(node) and isinstance(node.value, cst.Call) and _returns_values_and_indices(context, node.value)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _INTEGER_KEEPING):
        sides = (node.left, node.right)
        tensors = [integer_tensor(context, side, ancestors, depth + 1) for side in sides]
        return any(tensors) and all(t or isinstance(side, cst.Integer) for t, side in zip(tensors, sides))
    if not isinstance(node, cst.Call) or has_star_args(node):
        return False
    qualified = context.qualified_name(node.func)
    if qualified is not None:
        return qualified in INTEGER_FUNCTIONS
    if not isinstance(node.func, cst.Attribute):
        return False
    method = node.func.attr.value
    if method in INTEGER_METHODS:
        return not (method in ("long", "int") and node.args)
    if method in DTYPE_KEEPING_METHODS:
        return integer_tensor(context, node.func.value, ancestors, depth + 1)
    return False


def _every_binding_integer(context: "FileContext", name: str, ancestors: Sequence[cst.CSTNode], depth: int) -> bool:
    """Every binding of ``name`` that may reach the use makes an integer tensor: an assignment of one, or the
    indices of ``values, indices = x.topk(k)``."""
    found = bindings(site_of(ancestors), name)
    if not found:
        return False
    for binding in found:
        if binding.kind in ("assign", "conditional") and binding.value is not None and not _unpacking(binding):
            site_ancestors = _ancestors_of(ancestors, binding)
            if not integer_tensor(context, binding.value, site_ancestors, depth + 1):
                return False
        elif binding.kind in ("unpack", "conditional") and _unpacking(binding):
            position = unpack_position(replace(binding, kind="unpack"), name)
            value = binding.node.value
            if position != (1, 2) or not isinstance(value, cst.Call) or not _returns_values_and_indices(context, value):
                return False
        else:
            return False
    return True


def _unpacking(binding) -> bool:
    node = binding.node
    return (
        isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Tuple, cst.List))
    )


def _ancestors_of(use_ancestors: Sequence[cst.CSTNode], binding) -> Sequence[cst.CSTNode]:
    """Where to read the names a binding's value uses: from the binding's own statement when the model gives its
    path, else from the use (the same function's scope)."""
    root = use_ancestors[0] if use_ancestors else None
    path = path_to(root, binding.node) if root is not None else None
    return path if path is not None else use_ancestors


def _second_element(node: cst.Subscript) -> bool:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    index = node.slice[0].slice.value
    return isinstance(index, cst.Integer) and index.value == "1"


def _returns_values_and_indices(context: "FileContext", call: cst.Call) -> bool:
    """``x.topk(k)``, ``torch.max(x, 1)``, ``x.sort()``: a call returning (values, indices)."""
    if has_star_args(call):
        return False
    qualified = context.qualified_name(call.func)
    if qualified is not None:
        if not qualified.startswith("torch.") or qualified.count(".") != 1:
            return False
        name, rest = qualified[len("torch."):], call.args[1:]  # the tensor is the first argument
    elif isinstance(call.func, cst.Attribute):
        name, rest = call.func.attr.value, call.args
    else:
        return False
    if name not in VALUES_AND_INDICES:
        return False
    return name not in _NEED_A_DIMENSION or _a_dimension(rest)


def _a_dimension(arguments: Sequence[cst.Arg]) -> bool:
    """The first argument after the tensor is a dimension (``max(x, 1)``, ``dim=-1``), not a tensor compared
    elementwise (``torch.max(a, b)`` returns one tensor)."""
    if not arguments:
        return False
    first = arguments[0]
    if first.keyword is not None:
        return first.keyword.value == "dim"
    value = first.value
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    return isinstance(value, cst.Integer)
