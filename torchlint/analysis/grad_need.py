"""Where a NaN gradient cannot happen because no gradient is computed: the negative signals TL106/TL107 ask for.

A NaN that only appears in the backward pass matters only where a backward
pass runs. Statically that is unknowable in general; these are the places
where it is known or conventional that it does not:

- code under ``torch.no_grad()`` / ``torch.inference_mode()`` /
  ``set_grad_enabled(False)`` or in a function decorated with them
  (:func:`torchlint.analysis.gradflow.in_no_grad_region`);
- data loading: ``__getitem__`` / ``__iter__`` of a class, any method of a
  ``Dataset`` / ``IterableDataset`` subclass, ``collate_fn``-style functions;
- metrics: methods of a class deriving from ``Metric``, and files in a
  ``metrics/`` or ``torchmetrics/`` directory or named ``metrics.py`` /
  ``metric.py`` (metric learning, ``pytorch_metric_learning/losses``, is not
  matched: it trains through its losses).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.gradflow import in_no_grad_region
from torchlint.analysis.names import dotted_name

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext

_DATA_METHODS = frozenset({"__getitem__", "__iter__", "__next__", "__getitems__"})
_NO_GRAD_BASES = re.compile(r"(^|\.)(Dataset|IterableDataset|Metric)$")
_NO_GRAD_FUNCTION = re.compile(r"collate|preprocess|transform$")
_METRIC_PATH = re.compile(r"(^|[\\/])(torch)?metrics?([\\/]|\.py$)", re.IGNORECASE)


def gradient_unlikely(context: "FileContext") -> bool:
    """Whether the node being visited runs where no backward pass is expected (see the module docs)."""
    if in_no_grad_region(context):
        return True
    if _METRIC_PATH.search(context.path or ""):
        return True
    for node in reversed(context.ancestors):
        if isinstance(node, cst.FunctionDef) and (
            node.name.value in _DATA_METHODS or _NO_GRAD_FUNCTION.search(node.name.value)
        ):
            return True
        if isinstance(node, cst.ClassDef):
            for base in node.bases:
                name = dotted_name(base.value)
                if name is not None and _NO_GRAD_BASES.search(name):
                    return True
    return False


_INTEGER_CASTS = frozenset({"long", "int", "bool", "short", "byte"})
_COUNTING = frozenset({"count_nonzero", "any", "all", "argmax", "argmin"})
_KEEPING = frozenset({"sum", "float", "double", "half", "to", "type_as", "squeeze", "unsqueeze", "view", "reshape", "flatten"})


def carries_no_gradient(context: "FileContext", node: cst.BaseExpression, ancestors=None, _depth: int = 0) -> bool:
    """Values autograd never differentiates: comparisons, integer/bool casts, counts of them
    (``torch.sum(logits > t).float()``, ``(m > 0).sum()``, ``count_nonzero``), names bound only to such values."""
    from torchlint.analysis.dataflow import bindings, site_of

    if _depth > 4:
        return False
    again = _depth + 1
    if isinstance(node, cst.Comparison):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.BitInvert, cst.Not)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return True
    if isinstance(node, cst.Call) and node.args is not None:
        qualified = context.qualified_name(node.func)
        if qualified is not None:
            name = qualified.rsplit(".", 1)[-1]
            if not qualified.startswith("torch."):
                return False
            if name in _COUNTING:
                return True
            if name in _KEEPING and node.args:
                return carries_no_gradient(context, node.args[0].value, ancestors, again)
            return False
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in _INTEGER_CASTS or method in _COUNTING:
                return True
            if method in _KEEPING:
                return carries_no_gradient(context, node.func.value, ancestors, again)
        return False
    if isinstance(node, cst.Name) and ancestors is not None:
        reaching = bindings(site_of(list(ancestors)), node.value)
        values = [b.value for b in reaching if b.kind == "assign" and b.value is not None]
        return bool(values) and len(values) == len(reaching) and all(
            carries_no_gradient(context, value, ancestors, again) for value in values
        )
    return False
