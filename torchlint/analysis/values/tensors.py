"""Is this expression a tensor?  A small, sure-footed answer for rules that check tensor methods.

TL405 checks the keywords of ``x.backward(...)``, ``x.to(...)`` against torch's signatures only where
``x`` is known to be a tensor; a wrong guess would flag the keywords of some other object's method.
:func:`is_tensor` says yes only for:

- a call of a torch function that returns a tensor (:data:`TENSOR_FUNCTIONS`, every function of
  ``torch.nn.functional`` but the few that return tuples);
- a call of a loss module (``criterion(out, y)`` where ``criterion = nn.CrossEntropyLoss()``, in the
  function, at module level or in ``__init__``: any ``torch.nn.*Loss``);
- a tensor method's result on a tensor (``x.sum()``, ``logits.softmax(-1)``; not ``.item()``, ``.tolist()``,
  ``.size()``, ``.split()``), an element or slice of a tensor, arithmetic with a tensor;
- a name whose one reaching assignment is one of these (analysis/model/bindings.py).

Anything else (a model's output, a parameter, an attribute) is not known to be a tensor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, FrozenSet, Optional, Sequence

import libcst as cst

from torchlint.analysis.model.dataflow import named_call, reaching_definition
from torchlint.analysis.model.ops import module_constructor

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

MAX_DEPTH = 8

TENSOR_FUNCTIONS: FrozenSet[str] = frozenset(
    f"torch.{name}"
    for name in """
    tensor as_tensor from_numpy zeros ones empty full rand randn randint randperm arange linspace logspace eye
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like cat concat stack where clamp clip
    matmul bmm mm einsum softmax log_softmax sigmoid tanh exp log sqrt abs pow sum mean std var argmax argmin cumsum
    norm cdist masked_fill gather index_select flatten reshape squeeze unsqueeze transpose permute
    """.split()
)
# torch.nn.functional returns tensors but for these.
_FUNCTIONAL_TUPLES: FrozenSet[str] = frozenset({"multi_head_attention_forward", "max_pool1d_with_indices", "max_pool2d_with_indices"})
# Tensor methods whose result is not a tensor (or not always one).
NON_TENSOR_METHODS: FrozenSet[str] = frozenset(
    {
        "item", "tolist", "numpy", "size", "dim", "numel", "split", "chunk", "unbind", "max", "min", "sort", "topk",
        "nonzero", "element_size", "data_ptr", "is_contiguous", "type", "backward", "register_hook", "storage",
        "untyped_storage", "stride", "get_device", "equal", "allclose", "__len__", "keys", "values", "items",
    }
)


def is_tensor(context: "FileContext", node: cst.BaseExpression, ancestors: Optional[Sequence[cst.CSTNode]] = None, depth: int = 0) -> bool:
    """Whether ``node`` (read below ``ancestors``, by default the node being visited) is known to be a tensor."""
    if depth > MAX_DEPTH:
        return False
    ancestors = context.ancestors if ancestors is None else ancestors
    if isinstance(node, cst.Name):
        definition = reaching_definition(ancestors, node.value)
        if definition is None:
            return False
        return is_tensor(context, definition.value, definition.ancestors, depth + 1)
    if isinstance(node, cst.Subscript):
        return is_tensor(context, node.value, ancestors, depth + 1)
    if isinstance(node, cst.BinaryOperation):
        return is_tensor(context, node.left, ancestors, depth + 1) or is_tensor(context, node.right, ancestors, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return is_tensor(context, node.expression, ancestors, depth + 1)
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    qualified = context.qualified_name(func)
    if qualified is not None:
        if qualified in TENSOR_FUNCTIONS:
            return True
        prefix, _, last = qualified.rpartition(".")
        if prefix == "torch.nn.init" and last.endswith("_") and not last.startswith("_"):
            return True  # the in-place initialisers return the tensor they fill
        return prefix == "torch.nn.functional" and last not in _FUNCTIONAL_TUPLES and not last.startswith("_")
    if isinstance(func, cst.Attribute):
        if func.attr.value in NON_TENSOR_METHODS:
            return False
        if is_tensor(context, func.value, ancestors, depth + 1):
            return True
    return _is_loss_module(context, func, ancestors)


def _is_loss_module(context: "FileContext", func: cst.BaseExpression, ancestors: Sequence[cst.CSTNode]) -> bool:
    """``criterion`` in ``criterion(out, y)``: built by a ``torch.nn.*Loss`` constructor here, at module level or in ``__init__``."""
    constructor = module_constructor(context, func)
    if constructor is None and isinstance(func, cst.Name):
        held = named_call(context, func.value, ancestors)
        constructor = held[0] if held is not None else None
    if not isinstance(constructor, cst.Call):
        return False
    qualified = context.qualified_name(constructor.func) or ""
    return qualified.startswith("torch.nn.") and qualified.endswith("Loss")
