"""Floating-point facts: does a file compute in float16, and which guard literals vanish there?

The limits below were measured with torch (tests/test_runtime_tl105.py pins them):

- float16 rounds every value <= 2**-25 (2.98e-8, half its smallest subnormal
  2**-24 = 5.96e-8) to exactly 0.0; ``torch.zeros(n, dtype=torch.float16) + 1e-8``
  and ``.clamp_min(1e-8)`` are all zeros.
- bfloat16 has float32's exponent range: 1e-10, 1e-20 and 1e-38 survive as
  values (subnormals reach 9.2e-41). A tiny eps is lost only when added to a
  number near 1, where the operand is far from the edge anyway; it is not a
  vanishing guard there.
- float32 rounds every value <= 2**-150 (7.0e-46) to 0.0. Above that a guard
  can still be too small for the op: ``d/dx log(x) = 1/x`` overflows float32
  below 1/FLT_MAX (2.94e-39), and ``d/dd (a/d) = -a/d**2`` below
  FLT_MAX**-0.5 (5.42e-20).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

from torchlint.analysis.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.ops import is_value_receiver, number_value

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext

FLOAT16_ZERO_LIMIT = 2.0 ** -25
FLOAT32_ZERO_LIMIT = 2.0 ** -150
FLOAT32_MAX = 3.4028234663852886e38
# Below these a guard of log / of a divisor leaves an infinite float32 gradient at 0.
FLOAT32_LOG_GUARD_LIMIT = 1.0 / FLOAT32_MAX
FLOAT32_DIVISOR_GUARD_LIMIT = FLOAT32_MAX ** -0.5

_FLOAT16_DTYPES = frozenset({"torch.float16", "torch.half", "torch.HalfTensor", "torch.cuda.HalfTensor"})
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast_mode.autocast"})
_CUDA_AUTOCAST = frozenset({"torch.cuda.amp.autocast"})
_GRAD_SCALERS = frozenset(
    {"torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler"}
)
# Keyword values that select float16 in the libraries that wrap autocast (accelerate, lightning, transformers).
_FLOAT16_KEYWORD_VALUES = {
    "mixed_precision": ("fp16",),
    "precision": ("16", "16-mixed", "16-true", 16),
    "torch_dtype": ("float16", "fp16"),
    "dtype": ("float16", "fp16"),
}
_PREFILTER = ("float16", "half", "autocast", "GradScaler", "fp16", "precision", "HalfTensor")


class _Float16Finder(cst.CSTVisitor):
    def __init__(self, context: "FileContext") -> None:
        super().__init__()
        self.context = context
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        return not self.found and super().on_visit(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.context.qualified_name(node) in _FLOAT16_DTYPES:
            self.found = True

    def visit_Name(self, node: cst.Name) -> None:
        if self.context.qualified_name(node) in _FLOAT16_DTYPES:
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified in _GRAD_SCALERS or qualified in _CUDA_AUTOCAST:
            self.found = True
        elif qualified in _AUTOCAST:
            self.found = _autocast_is_float16(node)
        elif qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "half" and not node.args:
            self.found = is_value_receiver(self.context, func.value)
        if self.found or has_star_args(node):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            wanted = _FLOAT16_KEYWORD_VALUES.get(arg.keyword.value)
            if wanted and _literal(arg.value) in wanted:
                self.found = True
                return


def _literal(node: cst.BaseExpression):
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _autocast_is_float16(call: cst.Call) -> bool:
    """``torch.autocast(device_type, dtype=None)``: float16 by default on CUDA, bfloat16 on CPU."""
    if has_star_args(call) or argument(call, 1, "dtype") is not None:
        return False  # an explicit float16 dtype is itself a marker; bfloat16 is not
    device = argument(call, 0, "device_type")
    return device is None or _literal(device.value) not in ("cpu", "mps", "xpu", "hpu")


def uses_float16(context: "FileContext") -> bool:
    """Whether the file computes in float16: a float16 dtype, ``.half()``, CUDA autocast, GradScaler, fp16 flags.

    Computed once per file. bfloat16-only files (``torch.autocast("cpu")``,
    ``dtype=torch.bfloat16``) do not count: see the module docstring.
    """
    cached = getattr(context, "_torchlint_uses_float16", None)
    if cached is None:
        cached = False
        if any(marker in context.source for marker in _PREFILTER):
            finder = _Float16Finder(context)
            context.module.visit(finder)
            cached = finder.found
        context._torchlint_uses_float16 = cached
    return cached


def clamp_lower_bound(context: "FileContext", call: cst.Call) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(operand, lower bound) for ``torch.clamp(x, min=c)``, ``x.clamp(c)``, ``x.clamp_min(c)``, ``x.clip(min=c)``,
    ``torch.clamp_min(x, c)`` and the in-place ``clamp_`` / ``clamp_min_`` / ``clip_``, else None."""
    if not isinstance(call, cst.Call) or has_star_args(call):
        return None
    func = call.func
    qualified = context.qualified_name(func)
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_min"):
        base = argument(call, 0, "input")
        low = argument(call, 1, "min")
        if base is not None and low is not None:
            return base.value, low.value
        return None
    if qualified is None and isinstance(func, cst.Attribute) and is_value_receiver(context, func.value):
        if func.attr.value in ("clamp", "clip", "clamp_", "clip_", "clamp_min", "clamp_min_"):
            low = argument(call, 0, "min")
            if low is not None:
                return func.value, low.value
    return None


def added_constant(context: "FileContext", node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(operand, addend) for ``x + c`` / ``c + x`` with a numeric literal ``c``, and ``x.add(c)`` / ``x.add_(c)``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if number_value(node.right) is not None:
            return node.left, node.right
        if number_value(node.left) is not None:
            return node.right, node.left
        return None
    if isinstance(node, cst.Call) and not has_star_args(node) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in ("add", "add_") and is_value_receiver(context, node.func.value):
            positional = positional_args(node)
            if len(positional) == 1 and keyword_arg(node, "alpha") is None and number_value(positional[0].value) is not None:
                return node.func.value, positional[0].value
    return None


def format_float(value: float) -> str:
    """``1e-6`` rather than Python's ``1e-06``."""
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        if mantissa.endswith(".0"):
            mantissa = mantissa[:-2]
        sign = "-" if exponent.startswith("-") else ""
        return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text
