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

from typing import TYPE_CHECKING, Optional, Sequence

import libcst as cst

from torchlint.analysis.model.bindings import reaching_definition
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, literal_value, positional_args
from torchlint.analysis.model.ops import module_constructor, unmoved
from torchlint.analysis.model.dataflow import bindings, site_of
from torchlint.analysis.values.kinds import value_kind
from torchlint.analysis.values.losses import is_loss_call
from torchlint.analysis.values.tensors import ancestors_of, is_tensor

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
RANK_KEEPING_METHODS = frozenset({"relu", "sigmoid", "tanh", "float", "double", "half", "contiguous", "detach", "clone", "to", "cuda", "cpu"})
FLATTEN_MODULES = frozenset({"torch.nn.Flatten", "torch.nn.modules.flatten.Flatten"})
# Reductions to one number when called with no dimension (and no other argument).
FULL_REDUCTIONS = frozenset({"sum", "mean", "norm", "prod", "std", "var", "max", "min"})
# A loss call returns one number under these reductions.
REDUCING = frozenset({"mean", "sum", "batchmean"})
# *Loss modules that do not return a loss tensor.
_NOT_SCALAR_LOSSES = frozenset({"AdaptiveLogSoftmaxWithLoss"})


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
        return known_rank(context, definition.value, ancestors_of(definition.statement, ancestors), depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ELEMENTWISE):
        return _scalar_arithmetic_rank(context, (node.left, node.right), ancestors, depth)
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    if _is_scalar_loss(context, node):
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
        return None
    is_self_module = isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"
    if isinstance(func, cst.Attribute) and not is_self_module:
        method = func.attr.value
        if method in FULL_REDUCTIONS and not node.args:
            receiver = func.value
            known = (
                is_tensor(context, receiver, ancestors)
                or value_kind(context, receiver, site_of(ancestors)) == "tensor"
                or known_rank(context, receiver, ancestors, depth + 1) is not None
            )
            return 0 if known else None
        if method in ("view", "reshape"):
            return _shape_rank(node)
        if method == "flatten":
            return _flatten_rank(node, 0)
        if method == "mm":
            return 2
        if method in RANK_KEEPING_METHODS:
            return known_rank(context, func.value, ancestors, depth + 1)
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
        if binding.value is None or binding.kind not in ("assign", "conditional"):
            continue
        rank = known_rank(context, binding.value, ancestors, 1)
        if rank is not None and rank != 0:
            return False
        zero = zero or rank == 0
    return zero


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


def scalar_loss_module(context: "FileContext", constructor: Optional[cst.Call]) -> bool:
    """``constructor`` builds a torch loss module (``nn.CrossEntropyLoss()``, also moved: ``.cuda()``) whose
    output is one number: a reducing ``reduction``."""
    constructor = unmoved(constructor)
    if constructor is None:
        return False
    built = context.qualified_name(constructor.func) or ""
    if not (built.startswith("torch.nn.") and built.endswith("Loss")) or built.rsplit(".", 1)[-1] in _NOT_SCALAR_LOSSES:
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
