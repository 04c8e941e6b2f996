"""Fix builders shared by the TL1xx rules: guard the operand, not the result.

``eps_text(context)``
    The configured ``[tool.torchlint] eps`` rendered as a short literal
    (``1e-6``).  The default, 1e-6 (``config.DEFAULT_EPS``), survives float16:
    the smallest float16 subnormal is about 6e-8, so 1e-8 or 1e-10 round to 0
    there and guard nothing, while 1e-6 stays about 1.0e-6; in bfloat16 and
    float32 it is far above the smallest normal.  ``sqrt(1e-6) = 1e-3`` and
    ``log(1e-6) = -13.8`` are finite in every dtype.

``clamped(operand, minimum)``
    ``operand.clamp_min(minimum)`` as a node, parenthesising the operand when
    a method call would otherwise bind to part of it (``(a - b).clamp_min(eps)``).

``clamp_operand_fix(context, op, minimum, message)``
    The FixSpec replacing ``op.operand`` by ``clamped(op.operand, minimum)``
    (Applicability.NUMERICS), offered only where ``operand_is_tensor`` (no tensor method on a NumPy
    array, a pandas column or a number): ``torch.sqrt(x)`` -> ``torch.sqrt(x.clamp_min(1e-6))``,
    ``x ** 0.5`` -> ``x.clamp_min(1e-6) ** 0.5``, ``a / m.sum()`` -> ``a / m.sum().clamp_min(1)``.

``functional_reference(context)``
    ``(text, imports)`` naming ``torch.nn.functional`` (an existing alias
    such as ``F`` is reused; otherwise ``import torch.nn.functional as F`` is
    requested once through ``context.reference``).

A clamp has zero gradient below its minimum: where the original produced
NaN/Inf (0 or negative operands) the fixed code produces a finite value and
a zero gradient; above the minimum it computes exactly what the original did.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Tuple, Union

import libcst as cst

from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.kinds import value_kind
from torchlint.analysis.values.kinds import is_tensor
from torchlint.findings import Applicability, FixSpec, ImportRequirement, Replacement

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.values.domain import DomainOp
    from torchlint.analysis.model.file_context import FileContext

# Parents in which an expression a fix writes needs no parentheses of its own.
BARE_PARENTS = (cst.Arg, cst.Assign, cst.AnnAssign, cst.Return, cst.Expr, cst.AugAssign)
# Nodes a trailing ``.method()`` binds to as a whole, without parentheses.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Tuple, cst.Dict, cst.Set)


def eps_text(context: "FileContext") -> str:
    return float_literal(context.settings.eps)


def float_literal(value: float) -> str:
    """``1e-6`` for 1e-06, ``1e-4`` for 0.0001, ``0.01`` for 1e-2: the shortest exact rendering."""
    value = float(value)
    if value != 0 and abs(value) < 1e-3:
        for digits in range(16):
            text = f"{value:.{digits}e}"
            if float(text) == value:
                mantissa, exponent = text.split("e")
                sign = "-" if exponent.startswith("-") else ""
                return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return repr(value)


def clamped(operand: cst.BaseExpression, minimum: Union[str, cst.BaseExpression]) -> cst.Call:
    """``operand.clamp_min(minimum)``."""
    low = cst.parse_expression(minimum) if isinstance(minimum, str) else minimum
    return method_call(operand, "clamp_min", (low,))


def method_call(operand: cst.BaseExpression, method: str, arguments: Sequence[cst.BaseExpression]) -> cst.Call:
    """``operand.method(*arguments)``, with the operand parenthesized where a trailing call would bind to a part
    of it (``a + b``, a number literal)."""
    value = operand
    if (not isinstance(operand, _ATOMS) and not getattr(operand, "lpar", None)) or isinstance(operand, (cst.Integer, cst.Float)):
        value = operand.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name(method)), args=[cst.Arg(argument) for argument in arguments])


def operand_is_tensor(context: "FileContext", op: "DomainOp") -> bool:
    """Whether the code shows ``op.operand`` to be a tensor, so that a tensor method may be called on it: the
    operand of a torch function or of a tensor method is one by construction; that of ``/`` or ``**`` only when
    the analysis sees it (a NumPy array, a pandas column or a Python number has no ``clamp_min``)."""
    if op.form == "function":
        return op.name.startswith("torch.")
    if op.form == "method" and op.name in TENSOR_ONLY_METHODS:
        return True  # ``v.sqrt()``: NumPy arrays and pandas columns have no such method
    site = site_of(context.ancestors)
    if value_kind(context, op.operand, site) in ("array", "number"):
        return False
    # ``data.std()`` is what ``data`` is: a reduction's name is no proof (NumPy and pandas have it too).
    root = op.operand
    while isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute) and context.qualified_name(root.func) is None:
        root = root.func.value
    if _spelled_for_tensors(op.operand):
        return True
    kind = value_kind(context, root, site)
    # Not shown either way is no proof: a NumPy array or a pandas column in a file that imports torch has no
    # ``clamp_min`` either (RULES.md, fix safety).
    return kind == "tensor" or is_tensor(context, root)


# Methods a tensor has and a NumPy array, a pandas column or a Python number has not: a value they are called on
# (when the call runs) is a tensor.
TENSOR_ONLY_METHODS = frozenset({
    "sqrt", "rsqrt", "log", "log2", "log10", "log1p", "exp", "expm1", "clamp", "clamp_min", "clamp_max", "softmax",
    "log_softmax", "sigmoid", "norm", "square", "reciprocal", "detach", "unsqueeze", "float", "double", "half",
})
# Keywords only torch spells so (NumPy and pandas say ``axis``, ``keepdims``).
_TENSOR_ONLY_KEYWORDS = frozenset({"dim", "keepdim"})


def _spelled_for_tensors(operand: cst.BaseExpression) -> bool:
    """Whether the operand's own chain of method calls shows a tensor: a tensor-only method (``x.norm()``) or a
    keyword only torch takes (``x.std(dim=0)``, ``x.sum(-1, keepdim=True)``)."""
    node = operand
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in TENSOR_ONLY_METHODS:
            return True
        if any(arg.keyword is not None and arg.keyword.value in _TENSOR_ONLY_KEYWORDS for arg in node.args):
            return True
        node = node.func.value
    return False


def clamp_operand_fix(context: "FileContext", op: "DomainOp", minimum: str, message: str) -> Optional[FixSpec]:
    """The clamp of the operand, or None where the operand is not shown to be a tensor."""
    if not operand_is_tensor(context, op):
        return None
    return FixSpec(
        Applicability.NUMERICS,
        message,
        (Replacement(op.operand, clamped(op.operand, minimum)),),
    )


def functional_reference(context: "FileContext") -> Tuple[str, Tuple[ImportRequirement, ...]]:
    reference, requirement = context.reference("torch.nn.functional", "F")
    return reference, tuple(r for r in (requirement,) if r is not None)
