from __future__ import annotations

import bisect
import re
from typing import FrozenSet, Optional

import libcst as cst

from torchlint.analysis.model.dataflow import bindings, site_of
from torchlint.analysis.model.literals import literal_behind, number_value
from torchlint.analysis.flow.grad_need import gradient_flows
from torchlint.analysis.values.kinds import computes_with_other_framework
from torchlint.analysis.model.ops import is_value_receiver, match_unary
from torchlint.analysis.values.precision import (
    FLOAT16_ONE_MINUS_LIMIT,
    FLOAT16_TEXT_MARKERS,
    FLOAT16_ZERO_LIMIT,
    FLOAT32_ONE_MINUS_LIMIT,
    FLOAT32_RECIPROCAL_LIMIT,
    FLOAT32_ZERO_LIMIT,
    added_guard,
    clamp_lower_bound,
    clamp_upper_bound,
    computed_in_float32_under_autocast,
    format_float,
    is_guard_term,
    one_minus_term,
    project_uses_float16,
    uses_float16,
)
from torchlint.rule import WHOLE_FILE, Applicability, Confidence, FixSpec, Replacement, Rule

ONE_MINUS_FLOAT32_MESSAGE = (
    "1 - eps rounds to exactly 1.0 in float32 for this eps (<= 2.98e-8): the upper bound keeps nothing below 1 "
    "and log(1 - p) is -inf there"
)
ONE_MINUS_FLOAT16_MESSAGE = (
    "1 - eps rounds to exactly 1.0 in float16 for this eps (<= 2.44e-4): the upper bound keeps nothing below 1 "
    "and log(1 - p) is -inf there"
)
UNDER_HALF_PRECISION_MESSAGE = (
    "this epsilon rounds to 0 in float16 (it is <= 2.98e-8): run under half precision, the guard vanishes and "
    "the op gives Inf/NaN at 0"
)

# ``log(1 - p)``, ``(1. - p).log()``, ``log1p(-p)``: what a bound below 1 exists for.
_LOG_OF_COMPLEMENT = re.compile(r"log1p\(\s*-|log\w*\(\s*1\.?0*\s*-|\(\s*1\.?0*\s*-[^()]*\)\s*\.\s*log")

_LOG_FUNCTIONS = frozenset({"torch.log", "torch.log2", "torch.log10", "torch.special.log"})
_LOG_METHODS = ("log", "log2", "log10", "log_")
# Functions whose arguments are Python numbers or NumPy arrays (float64): their eps does not vanish.
_NOT_TORCH_PREFIXES = ("math.", "numpy.", "np.", "scipy.", "statistics.")


class VanishingEpsilon(Rule):
    """
    ## What it does
    Flags an epsilon literal used as a guard that is too small to guard
    anything in the precision the code runs in:

    - in code that computes in float16, a literal <= 2**-25 (2.98e-8) used as `x + 1e-10`, `1e-10 + x`,
      `x.add(1e-10)`, `x += 1e-10`, `clamp(min=1e-12)`, `clamp_min(1e-9)`, `clip(min=...)`;
      also such a literal given as the default of an eps-like parameter
      (`def f(x, eps=1e-9)`), assigned to `self.eps` or to a module constant `EPS`,
      when that name is used as a guard (`+ eps`, `clamp_min(self.eps)`) in the same
      function, class or module;
      Float16 code: a file that sets up a float16 run (`GradScaler`, CUDA
      `autocast` without a bfloat16 dtype and not turned off,
      `torch.cuda.amp.autocast`, `mixed_precision="fp16"` / `precision=16` /
      `torch_dtype="float16"` keywords), or a class (else function) that
      makes values float16 (a `torch.float16` / `torch.half` dtype passed to
      a call or assigned to a name, `.half()`; not `x.half().float()`,
      which only rounds);
    - in any file, a guard literal that float32 itself rounds to 0 (<= 2**-150, e.g.
      `1e-50`), or a guard of `log` or of a divisor below 1/FLT_MAX (2.94e-39).

    ## Why is this bad?
    float16 rounds every value <= 2.98e-8 to exactly 0 (measured:
    `torch.zeros(4, dtype=torch.float16) + 1e-10` and `.clamp_min(1e-10)` are
    zeros). The guard is gone: `sqrt(x + 1e-10)` at `x = 0` has an infinite
    gradient, `log(x + 1e-10)` is `-inf`, `x / (x.sum() + 1e-10)` is `0/0 = NaN`,
    and one NaN gradient poisons every weight at the next optimizer step. Under
    autocast the addition runs in the operand's float16 even when the op itself
    is promoted to float32, so the eps is lost before the op sees it.
    In float32, `log(x + 1e-45)` is finite but its gradient `1/1.4e-45`
    overflows to `inf`, and so does the gradient `1/1e-40` of `a / (d + 1e-40)`.
    (`1e-20` in a divisor is not flagged: its gradient `1e20` is finite, and
    `-a/1e-40` overflows only where `a` is not 0 while `d` is.)

    bfloat16 has float32's exponent range, so a tiny eps survives there
    (1e-10, 1e-20, 1e-38 are representable); bfloat16-only code is not flagged.
    Nor is a file that only compares dtypes (`x.dtype in (torch.float16,
    torch.bfloat16)`): such code handles half precision, usually by
    computing in float32.

    ## Example
    ```python
    with torch.autocast("cuda"):
        norm = torch.sqrt((x * x).sum(-1) + 1e-10)
    ```

    ## Use instead
    ```python
    with torch.autocast("cuda"):
        norm = torch.sqrt((x * x).sum(-1) + 1e-6)
    ```

    ## Fix safety
    Numerics: the literal becomes `[tool.torchlint] eps` (default 1e-6, the
    smallest round power of ten that float16 keeps as a non-zero number:
    1e-6 is stored as 1.013e-6). On ordinary operands the value moves by
    about eps (relative change below 1e-6 for operands >= 1); at the domain
    edge the op becomes finite. The fix is offered only when the configured eps
    is larger than the literal and itself survives the precision.

    Measured limits of eps = 1e-6 in float16: `sqrt(0 + 1e-6)` has the gradient
    496; `log(0 + 1e-6)` has the gradient 1/1e-6, which overflows float16's
    65504 unless the upstream gradient is small (a mean over >= 16 elements,
    or a GradScaler that lowers its scale); `1 / (0 + 1e-6)` overflows float16
    in the forward pass. For divisions and logs computed in float16 set
    `eps` to 1e-3 or larger, or compute them in float32.

    Not seen: eps values passed to torch's own layers and functions
    (`nn.LayerNorm(d, eps=1e-12)`: their kernels add eps in float32), an eps
    passed as a keyword argument to your own function (`loss(x, eps=1e-10)`:
    the default is checked, the call is not), literals bound to names that are
    not eps-like, guards whose precision is set in another file (a model
    `.half()`-ed by a training script elsewhere), and which tensors of a
    float16 file are float16: an operand cast in the same expression
    (`x.float() + 1e-10`, `x.to(torch.float32).clamp_min(1e-12)`) is left
    alone, one computed in float32 on an earlier line is still reported.
    """

    code = "TL105"
    name = "vanishing-epsilon"
    message = "this epsilon rounds to 0 in float16 (it is <= 2.98e-8): the guard vanishes and the op gives Inf/NaN gradients at 0"
    fix_applicability = Applicability.NUMERICS
    # A literal at most 1e-2 is written with an exponent or with ".0" (0.00000001, .001): a sound necessary condition.
    triggers = ("e-", "E-", ".0")

    confidence_levels = (
        "`high` where the precision is known to lose the guard: float16 code (GradScaler, CUDA autocast, "
        "fp16 flags, `.half()` in scope), or float32 itself (`1e-50` is 0; `1 - 1e-8` is 1.0 where a log of "
        "`1 - p` follows). Elsewhere an eps that float16 rounds to 0 is `medium` where gradients flow when the "
        "project runs in float16 somewhere (a `--fp16` option, a GradScaler in the training script: callers may "
        "run this under mixed precision), and `low` otherwise, without a fix: a project with no float16 computes "
        "in float32, where the eps guards, and raising it would change a value the code chose."
    )

    @classmethod
    def prepass(cls, scan):
        # Every literal it reports is at most 2**-12 (an upper bound ``1 - eps`` in float16), and above 2**-25
        # only in float16 code, which needs a float16 word in the file (precision.uses_float16).  A guard may
        # name a literal bound in another region (``self.eps`` set in ``__init__``): the whole file is read.
        smallest = min((region.smallest_float for region in scan.regions), default=float("inf"))
        if smallest < FLOAT32_RECIPROCAL_LIMIT:
            return WHOLE_FILE
        if any(marker in scan.source for marker in FLOAT16_TEXT_MARKERS):
            return _seeds(scan, FLOAT16_ONE_MINUS_LIMIT) if smallest <= FLOAT16_ONE_MINUS_LIMIT else None
        return _seeds(scan, FLOAT16_ZERO_LIMIT) if smallest <= FLOAT16_ZERO_LIMIT else None

    reads_callers = True  # where a guard's function is called says whether gradients flow (medium or low)

    # -- guard sites: where an eps is added, or bounds a clamp ---------------------

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        found = added_guard(self.context, node)
        if found is not None and not self._is_python_number(found[0]):
            self._check(node, found[0], found[1], self._consumer(node))

    def visit_Call(self, node: cst.Call) -> None:
        found = added_guard(self.context, node)
        if found is not None:
            self._check(node, found[0], found[1], self._consumer(node))
            return
        upper = clamp_upper_bound(self.context, node)
        below_one = one_minus_term(self.context, upper[1]) if upper is not None else None
        if below_one is not None and self._check(node, upper[0], below_one, None, upper_bound=True):
            return  # one finding per clamp: the bound float32 itself loses
        clamp = clamp_lower_bound(self.context, node)
        if clamp is not None and not self._is_python_number(clamp[0]):
            self._check(node, clamp[0], clamp[1], self._consumer(node))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.AddAssign) and is_guard_term(self.context, node.value):
            if not self._is_python_number(node.target):
                self._check(node, node.target, node.value, None)

    # -- deciding ----------------------------------------------------------------

    def _check(
        self,
        site: cst.CSTNode,
        operand: cst.BaseExpression,
        term: cst.BaseExpression,
        consumer: Optional[str],
        upper_bound: bool = False,
    ) -> bool:
        """Judge the guard ``term`` (a literal or a name bound to one) kept on ``operand`` at ``site``; report
        at ``site``.  True when it reported."""
        if computes_with_other_framework(self.context):
            return False  # a TensorFlow or JAX twin of a torch script: not torch's float16
        literal = self._literal_of(term)
        value = number_value(literal) if literal is not None else None
        if value is None or value <= 0:
            return False
        verdict = self._verdict(site, operand, value, consumer, upper_bound)
        if verdict is None:
            return False
        message, limit, confidence, fixable = verdict
        eps = self.context.settings.eps
        fix = None
        if fixable and eps > limit and eps > value:
            fix = FixSpec(
                Applicability.NUMERICS,
                f"Raise the epsilon to {format_float(eps)}",
                (Replacement(literal, format_float(eps)),),
            )
        self.report(site, message, fix, confidence=confidence)
        return True

    def _verdict(self, site: cst.CSTNode, operand: cst.BaseExpression, value: float, consumer: Optional[str], upper_bound: bool):
        """(message, the limit a replacement must exceed, confidence, whether a fix may raise it), or None when
        the guard holds.  An eps is raised only where the precision it runs in loses it: float32 itself, or
        float16 code in sight; elsewhere it may be the value float32 code chose."""
        if upper_bound:
            if value <= FLOAT32_ONE_MINUS_LIMIT:
                return ONE_MINUS_FLOAT32_MESSAGE, FLOAT32_ONE_MINUS_LIMIT, self._bound_confidence(site), True
            if value <= FLOAT16_ONE_MINUS_LIMIT and self._in_float16_code(site):
                return ONE_MINUS_FLOAT16_MESSAGE, FLOAT16_ONE_MINUS_LIMIT, self._bound_confidence(site), True
            return None
        if value <= FLOAT32_ZERO_LIMIT:
            message = "this epsilon rounds to 0 even in float32 (<= 7e-46): the guard does nothing and the op gives Inf/NaN at 0"
            return message, FLOAT32_ZERO_LIMIT, Confidence.HIGH, True
        if consumer == "log" and value < FLOAT32_RECIPROCAL_LIMIT:
            message = "this epsilon is below 1/FLT_MAX (2.9e-39): the gradient of log at 0, 1/eps, overflows to inf in float32"
            return message, FLOAT32_RECIPROCAL_LIMIT, Confidence.HIGH, True
        if consumer == "divisor" and value < FLOAT32_RECIPROCAL_LIMIT:
            message = "this epsilon is below 1/FLT_MAX (2.9e-39): dividing by it at 0, the gradient 1/eps overflows to inf in float32"
            return message, FLOAT32_RECIPROCAL_LIMIT, Confidence.HIGH, True
        if value > FLOAT16_ZERO_LIMIT:
            return None
        if self._in_float16_code(site):
            return self.message, FLOAT16_ZERO_LIMIT, Confidence.HIGH, True
        # Not in float16 code, but the project runs in float16 somewhere (a --fp16 option, a GradScaler in the
        # training script): callers may run this under mixed precision, where the guard vanishes unless autocast
        # computes the guarded value in float32 (a sum, a norm: then only .half() loses it).  A project with no
        # float16 anywhere computes in float32, where this eps guards.
        if not project_uses_float16(self.context):
            return UNDER_HALF_PRECISION_MESSAGE, FLOAT16_ZERO_LIMIT, Confidence.LOW, False
        maybe_float16 = not computed_in_float32_under_autocast(self.context, operand)
        confidence = Confidence.MEDIUM if maybe_float16 and gradient_flows(self.context, self.context.ancestors) else Confidence.LOW
        return UNDER_HALF_PRECISION_MESSAGE, FLOAT16_ZERO_LIMIT, confidence, True

    def _bound_confidence(self, site: cst.CSTNode) -> Confidence:
        """``clamp(p, max=1 - eps)`` that keeps nothing below 1 breaks a log of ``1 - p`` (or of ``1 - p``'s
        name) in the same function; without one, the useless bound changes nothing observable."""
        function = self.context.enclosing(cst.FunctionDef)
        scope = function if function is not None else self.context.module
        code = self.context.code(scope)
        return Confidence.HIGH if _LOG_OF_COMPLEMENT.search(code) else Confidence.LOW

    def _literal_of(self, term: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        return literal_behind(self.context, term, site_of(list(self.context.ancestors)))

    def _in_float16_code(self, site: cst.CSTNode) -> bool:
        """A float16 run set up in the file, or float16 values made where this guard can see them: earlier in
        its own function, or anywhere in the other methods of its class."""
        function = self.context.enclosing(cst.FunctionDef)
        class_def = self.context.enclosing(cst.ClassDef)
        if function is None:
            return uses_float16(self.context, class_def)
        if uses_float16(self.context, function, before=site):
            return True
        return class_def is not None and uses_float16(self.context, class_def, skip=function)

    def _consumer(self, guard: cst.CSTNode) -> Optional[str]:
        """What the guarded value feeds directly: "log", "divisor" or None (ancestors exclude ``guard``)."""
        ancestors = self.context.ancestors
        if not ancestors:
            return None
        parent = ancestors[-1]
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Divide, cst.FloorDivide)):
            return "divisor" if parent.right is guard else None
        if isinstance(parent, cst.Attribute) and parent.value is guard and len(ancestors) >= 2:
            call = ancestors[-2]
            if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in _LOG_METHODS:
                return "log"
            return None
        if isinstance(parent, cst.Arg) and len(ancestors) >= 2:
            call = ancestors[-2]
            if isinstance(call, cst.Call):
                log = match_unary(self.context, call, _LOG_FUNCTIONS, "log")
                if log is not None and log.operand is guard:
                    return "log"
                if self.context.qualified_name(call.func) in ("torch.div", "torch.true_divide") and len(call.args) >= 2 and call.args[1] is parent:
                    return "divisor"
        return None

    def _is_python_number(self, node: cst.BaseExpression, _depth: int = 0) -> bool:
        """Operands that are plain Python or NumPy numbers (float64), or cast to float32/64 right there."""
        if _casts_to_full_precision(self.context, node):
            return True
        if number_value(node) is not None:
            return True
        if isinstance(node, cst.Call):
            qualified = self.context.qualified_name(node.func)
            if qualified is not None:
                return qualified.startswith(_NOT_TORCH_PREFIXES) or qualified in ("len", "float", "int")
            if isinstance(node.func, cst.Name) and node.func.value in ("len", "float", "int", "abs", "sum", "max", "min"):
                return not self.context.imports.is_bound(node.func.value)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("size", "numel", "item", "dim"):
                return is_value_receiver(self.context, node.func.value)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Attribute) and node.value.attr.value == "shape":
            return True
        if isinstance(node, cst.Name) and _depth < 3:
            reaching = bindings(site_of(list(self.context.ancestors)), node.value)
            values = [b.value for b in reaching if b.kind in ("assign", "module") and b.value is not None]
            return bool(values) and len(values) == len(reaching) and all(self._is_python_number(v, _depth + 1) for v in values)
        if isinstance(node, cst.BinaryOperation):
            return self._is_python_number(node.left, _depth) and self._is_python_number(node.right, _depth)
        return False


def _seeds(scan, limit: float) -> FrozenSet[int]:
    """The regions that decide a finding: those holding a literal at most ``limit``; every member of their
    classes (a class's guards read ``self.eps`` and its float16 values across its methods); the module's
    uses of an eps name bound at top level; and every region where a float16 run may be set up or
    float16 values made (a marker word in its lines, or an import alias of one)."""
    literal_regions = [i for i, region in enumerate(scan.regions) if region.smallest_float <= limit]
    classes = {scan.regions[i].enclosing_class for i in literal_regions} - {None}
    module_names = set()
    for i in literal_regions:
        region = scan.regions[i]
        if region.enclosing_class is None and region.stores_are_bindings:  # top-level code, not a def
            module_names |= region.binds
    aliases = {local for local, original in scan.aliases.items() if any(marker in original for marker in FLOAT16_TEXT_MARKERS)}
    marked_lines = [n for n, line in enumerate(scan.source.splitlines(), 1) if any(marker in line for marker in FLOAT16_TEXT_MARKERS)]
    seeds = set(literal_regions)
    for i, region in enumerate(scan.regions):
        if (
            region.enclosing_class in classes
            or not region.uses.isdisjoint(module_names)
            or not region.uses.isdisjoint(aliases)
            or bisect.bisect_left(marked_lines, region.first_line) < bisect.bisect_right(marked_lines, region.last_line)
        ):
            seeds.add(i)
    return frozenset(seeds)


_FULL_PRECISION = frozenset({"torch.float32", "torch.float", "torch.float64", "torch.double"})


def _casts_to_full_precision(context, node: cst.BaseExpression) -> bool:
    """``x.float()``, ``x.double()``, ``x.to(torch.float32)``, ``x.type(torch.float64)``, also further down a
    chain of methods (``x.float().var(-1)``): a float32 tensor's methods return float32."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in ("float", "double") and not node.args:
            return is_value_receiver(context, node.func.value)
        if method in ("to", "type") and node.args:
            dtype = [a for a in node.args if a.keyword is None or a.keyword.value == "dtype"]
            return bool(dtype) and context.qualified_name(dtype[-1].value) in _FULL_PRECISION
        if method in ("half", "bfloat16") or not is_value_receiver(context, node.func.value):
            return False
        node = node.func.value
    return False
