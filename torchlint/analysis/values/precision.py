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
  can still be too small for the op: ``d/dx log(x) = 1/x`` and, for a
  division, ``d/da (a/d) = 1/d`` overflow float32 below 1/FLT_MAX (2.94e-39).
  (``d/dd (a/d) = -a/d**2`` overflows already below 5.4e-20, but only where
  ``a`` is not 0 while ``d`` is; in ``w / (w.sum() + eps)`` both are 0 there
  and 1e-20 leaves a finite gradient: measured.)
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name, every_node, import_bindings
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.model.literals import number_value
from torchlint.analysis.model.ops import is_eps_like, is_value_receiver
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

FLOAT16_ZERO_LIMIT = 2.0 ** -25
# ``1 - eps`` rounds to exactly 1.0 for eps at most half the spacing below 1: 2**-25 in float32, 2**-12 in float16.
FLOAT32_ONE_MINUS_LIMIT = 2.0 ** -25
FLOAT16_ONE_MINUS_LIMIT = 2.0 ** -12
FLOAT32_ZERO_LIMIT = 2.0 ** -150
FLOAT32_MAX = 3.4028234663852886e38
# Below this a guard of log or of a divisor leaves an infinite float32 gradient (1/eps) at 0.
FLOAT32_RECIPROCAL_LIMIT = 1.0 / FLOAT32_MAX

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
# Words without which a file cannot compute in float16 (a cheap text test before any walk).
FLOAT16_TEXT_MARKERS = ("float16", "half", "autocast", "GradScaler", "fp16", "precision", "HalfTensor")
# Command-line options that offer a float16 run (``parser.add_argument("--fp16", action="store_true")``).
_MODULE_TEXT_MARKERS = tuple(marker.encode() for marker in FLOAT16_TEXT_MARKERS) + (b"-amp", b"_amp")
_FLOAT16_OPTION = re.compile(r"^--?(fp16|half|amp|use[-_]amp|mixed[-_]precision|float16|half[-_]precision)$")


class _Float16Finder(cst.CSTVisitor):
    """Records the float16 markers of a subtree: ``strong`` ones set up a float16 run (GradScaler, CUDA
    autocast, fp16 flags), ``local`` ones make values float16 (a float16 dtype passed or bound, ``.half()``)."""

    def __init__(self, context: "FileContext", stop: Optional[cst.CSTNode] = None, skip: Optional[cst.CSTNode] = None) -> None:
        super().__init__()
        self.context = context
        self.strong = False
        self.local = False
        self._rounding_only: set = set()
        # Markers after ``stop`` (in source order) and inside ``skip`` are not recorded.
        self._stop = stop
        self._skip = skip
        self._stopped = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is self._stop:
            self._stopped = True
        if self._stopped or node is self._skip or self.strong:
            return False
        return super().on_visit(node)

    def _is_float16(self, node: Optional[cst.BaseExpression]) -> bool:
        return node is not None and self.context.qualified_name(node) in _FLOAT16_DTYPES

    # A float16 dtype counts where it makes something float16: passed to a call (``.to(torch.half)``,
    # ``dtype=torch.float16``) or bound to a name. Compared against (``x.dtype == torch.float16``,
    # ``x.dtype in (torch.float16, torch.bfloat16)``), it is code that handles half precision, usually
    # by computing in float32: not a marker.
    def visit_Assign(self, node: cst.Assign) -> None:
        if self._is_float16(node.value):
            self.local = True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self._is_float16(node.value):
            self.local = True

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified in _GRAD_SCALERS:
            self.strong = True
        elif qualified in _CUDA_AUTOCAST:
            self.strong = not _turned_off(argument(node, 0, "enabled"))
        elif qualified in _AUTOCAST:
            dtype = argument(node, 1, "dtype")
            if dtype is not None and not _turned_off(argument(node, 2, "enabled")):
                self.strong = self._is_float16(dtype.value)
            else:
                self.strong = _autocast_is_float16(node)
        elif qualified in _FLOAT16_DTYPES or any(self._is_float16(arg.value) for arg in node.args):
            if not self._float32_round_trip(node):
                self.local = True
        elif qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "half" and not node.args:
            if id(node) not in self._rounding_only and is_value_receiver(self.context, func.value):
                self.local = True
        self._float32_round_trip(node)
        if self.strong or has_star_args(node):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            wanted = _FLOAT16_KEYWORD_VALUES.get(arg.keyword.value)
            if wanted and _literal(arg.value) in wanted:
                self.strong = True
                return

    def _float32_round_trip(self, node: cst.Call) -> bool:
        """``x.half().float()`` / ``x.to(torch.float16).float()`` round to float16's grid and compute in float32:
        remember the inner conversion (visited after this call) as no marker."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("float", "double", "to")):
            return id(node) in self._rounding_only
        receiver = func.value
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value in ("half", "to"):
            self._rounding_only.add(id(receiver))
        return id(node) in self._rounding_only


def _literal(node: cst.BaseExpression):
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def _turned_off(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"


def _autocast_is_float16(call: cst.Call) -> bool:
    """``torch.autocast(device_type, dtype=None, enabled=True)``: float16 by default on CUDA, bfloat16 on CPU."""
    if has_star_args(call) or argument(call, 1, "dtype") is not None:
        return False
    if _turned_off(argument(call, 2, "enabled")):
        return False  # a region that turns autocast off computes in float32  # an explicit float16 dtype is itself a marker; bfloat16 is not
    device = argument(call, 0, "device_type")
    return device is None or _literal(device.value) not in ("cpu", "mps", "xpu", "hpu")


def uses_float16(
    context: "FileContext",
    scope: Optional[cst.CSTNode] = None,
    before: Optional[cst.CSTNode] = None,
    skip: Optional[cst.CSTNode] = None,
) -> bool:
    """Whether code in ``scope`` (a class or function; default the module) computes in float16.

    True when the file sets up a float16 run anywhere (GradScaler, CUDA
    autocast that is not turned off, ``mixed_precision="fp16"`` /
    ``precision=16`` / ``torch_dtype="float16"`` flags), or when ``scope``
    itself makes values float16 (a float16 dtype passed to a call or bound to
    a name, ``.half()``; not ``x.half().float()``, which only rounds).
    bfloat16-only code (``torch.autocast("cpu")``, ``dtype=torch.bfloat16``)
    does not count: see the module docstring.  ``before``: only markers that
    come before this node in ``scope`` count (a value converted after the
    guard is not what the guard sees); ``skip``: a subtree whose markers do
    not count.  Cached per file and scope.
    """
    cache = getattr(context, "_torchlint_float16", None)
    if cache is None:
        cache = context._torchlint_float16 = {}
    if not any(marker in context.source for marker in FLOAT16_TEXT_MARKERS):
        return False
    if "file" not in cache:
        finder = _Float16Finder(context)
        visit(context.module, finder)
        cache["file"] = finder.strong
        cache[id(context.module)] = finder.strong or finder.local
    if cache["file"]:
        return True
    scope = scope if scope is not None else context.module
    if before is not None or skip is not None:
        finder = _Float16Finder(context, before, skip)
        visit(scope, finder)
        return finder.strong or finder.local
    if id(scope) not in cache:
        finder = _Float16Finder(context)
        visit(scope, finder)
        cache[id(scope)] = finder.strong or finder.local
    return cache[id(scope)]


def project_uses_float16(context: "FileContext") -> bool:
    """Whether the code around this file may run in float16: this file sets up or makes float16 values
    anywhere (:func:`uses_float16` of the module), or another module of the project does, or offers a
    float16 option (``--fp16``, ``--amp``).  Without a project (a text linted alone) the file decides.
    The project's modules are read as text and only those holding a float16 word are parsed (with
    ``ast``), once per run."""
    if uses_float16(context):
        return True
    project = context.project
    if project is None:
        return False
    return project.fact("precision.float16", lambda: any(_module_uses_float16(data) for data in project.module_texts()))


def guard_vanishes_in_float16(context: "FileContext", term: cst.BaseExpression) -> bool:
    """An eps literal that float16 rounds to 0, in a project that runs in float16: what it guards is unguarded
    there."""
    value = number_value(term)
    return value is not None and value <= FLOAT16_ZERO_LIMIT and project_uses_float16(context)


def _module_uses_float16(data: bytes) -> bool:
    """A module's float16 markers, read with ``ast``: the same tables as :class:`_Float16Finder` (GradScaler,
    float16 autocast, a float16 dtype passed or bound, ``.half()``, fp16 keyword values), plus float16
    command-line options."""
    if not any(marker in data for marker in _MODULE_TEXT_MARKERS):
        return False
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    nodes = every_node(tree)
    aliases: Dict[str, str] = {}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            aliases.update(import_bindings(node))

    def qualified(node: ast.expr) -> Optional[str]:
        dotted = ast_dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = aliases.get(head)
        return (base + ("." + rest if rest else "")) if base else dotted

    def is_float16(node: Optional[ast.expr]) -> bool:
        return node is not None and qualified(node) in _FLOAT16_DTYPES

    for node in nodes:
        if isinstance(node, ast.Assign) and is_float16(node.value):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _FLOAT16_OPTION.match(node.value):
            return True
        if not isinstance(node, ast.Call):
            continue
        name = qualified(node.func)
        keywords = {keyword.arg: keyword.value for keyword in node.keywords if keyword.arg}
        if name in _GRAD_SCALERS:
            return True
        if name in _AUTOCAST and not _ast_turned_off(keywords.get("enabled")):
            dtype = keywords.get("dtype", node.args[1] if len(node.args) > 1 else None)
            device = keywords.get("device_type", node.args[0] if node.args else None)
            if dtype is not None:
                if is_float16(dtype):
                    return True
            elif name in _CUDA_AUTOCAST or not (isinstance(device, ast.Constant) and device.value in ("cpu", "mps", "xpu", "hpu")):
                return True
        if any(is_float16(arg) for arg in node.args) or any(is_float16(value) for value in keywords.values()):
            return True
        if isinstance(node.func, ast.Attribute) and node.func.attr == "half" and not node.args and name not in ("np.half", "numpy.half"):
            return True
        for keyword, value in keywords.items():
            wanted = _FLOAT16_KEYWORD_VALUES.get(keyword)
            if wanted and isinstance(value, ast.Constant) and value.value in wanted:
                return True
    return False


def _ast_turned_off(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


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


# Ops that CUDA autocast runs in float32 (the "ops that can autocast to float32" list of torch's AMP docs):
# an eps added to their result survives mixed precision; only code made float16 by hand (``.half()``) loses it.
AUTOCAST_FLOAT32_OPS = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log1p", "log2", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "norm", "nuclear_norm", "frobenius_norm",
    "normalize", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "cdist", "pdist",
    "dist", "renorm", "softmax", "log_softmax", "softmin", "cumprod", "cumsum", "sum", "prod", "vector_norm",
    "matrix_norm", "l1_loss", "mse_loss", "smooth_l1_loss", "kl_div", "cross_entropy", "binary_cross_entropy_with_logits",
})


def computed_in_float32_under_autocast(context: "FileContext", node: cst.BaseExpression) -> bool:
    """An op CUDA autocast keeps in float32 (a sum, a norm, an exp, ...), a shape step of one, or a sum,
    difference or product of such: adding eps to it is safe under mixed precision."""
    from torchlint.analysis.model.ops import call_parts, without_shape_steps

    node = without_shape_steps(context, node)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Power):
        return True  # ``__pow__`` is on the list
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        sides = [side for side in (node.left, node.right) if number_value(side) is None]
        return bool(sides) and all(computed_in_float32_under_autocast(context, side) for side in sides)
    if isinstance(node, cst.Call) and not has_star_args(node):
        name, _, _ = call_parts(context, node)
        return name in AUTOCAST_FLOAT32_OPS
    return False


def is_guard_term(context: "FileContext", node: cst.BaseExpression) -> bool:
    """A term added to stay off zero: a numeric literal, a name or ``self`` attribute the code shows holds a
    small positive literal, or (the naming convention) one named like an eps (``eps``, ``self.eps``, ``EPS``)."""
    return number_value(node) is not None or is_eps_like(node, context)


def added_guard(context: "FileContext", node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(operand, addend) for ``x + c`` / ``c + x`` with ``c`` a numeric literal or an eps-like name, and
    ``x.add(c)`` / ``x.add_(c)``."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if is_guard_term(context, node.right) and not is_guard_term(context, node.left):
            return node.left, node.right
        if is_guard_term(context, node.left) and not is_guard_term(context, node.right):
            return node.right, node.left
        return None
    if isinstance(node, cst.Call) and not has_star_args(node) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in ("add", "add_") and is_value_receiver(context, node.func.value):
            positional = positional_args(node)
            if len(positional) == 1 and keyword_arg(node, "alpha") is None and is_guard_term(context, positional[0].value):
                return node.func.value, positional[0].value
    return None


def clamp_upper_bound(context: "FileContext", call: cst.Call) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """(operand, upper bound) for ``torch.clamp(x, lo, hi)``, ``x.clamp(max=hi)``, ``x.clamp_max(hi)``, ``x.clip(lo, hi)``."""
    if not isinstance(call, cst.Call) or has_star_args(call):
        return None
    func = call.func
    qualified = context.qualified_name(func)
    if qualified in ("torch.clamp", "torch.clip", "torch.clamp_max"):
        base = argument(call, 0, "input")
        high = argument(call, 1, "max") if qualified == "torch.clamp_max" else argument(call, 2, "max")
        return (base.value, high.value) if base is not None and high is not None else None
    if qualified is None and isinstance(func, cst.Attribute) and is_value_receiver(context, func.value):
        if func.attr.value in ("clamp", "clip", "clamp_", "clip_"):
            high = argument(call, 1, "max")
        elif func.attr.value in ("clamp_max", "clamp_max_"):
            high = argument(call, 0, "max")
        else:
            return None
        return (func.value, high.value) if high is not None else None
    return None


def one_minus_term(context: "FileContext", node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``eps`` for an upper bound written ``1 - eps`` (``1.0 - eps``, ``1 - 1e-8``), else None."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract):
        if number_value(node.left) == 1.0 and is_guard_term(context, node.right):
            return node.right
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
