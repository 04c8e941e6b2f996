from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.values.fused import (
    activation_of,
    functional,
    is_pure,
    match_log,
    match_unary,
    negated,
    one_minus,
    positional,
    tanh_squared,
)
from torchlint.analysis.model.ops import strip_eps
from torchlint.analysis.values.fixes import BARE_PARENTS
from torchlint.analysis.values.precision import added_guard, guard_vanishes_in_float16
from torchlint.analysis.project.module_outputs import ModuleActivation, called_module_activation
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

LOG1P_FUNCTIONS = frozenset({"torch.log1p"})
TANH_MESSAGE = (
    "log(1 - tanh(x)**2) is -inf with a NaN gradient once tanh(x) rounds to ±1 (|x| above ~9 in float32, ~4.5 in "
    "float16); 2 * (log(2) - x - F.softplus(-2 * x)) is the same value, finite everywhere"
)
TANH_GUARDED_MESSAGE = (
    "log(1 - tanh(x)**2 + eps) is floored at log(eps) once tanh(x) rounds to ±1: past it the term is flat and its "
    "gradient vanishes; 2 * (log(2) - x - F.softplus(-2 * x)) is exact"
)
GUARDED_MESSAGE = (
    "log(sigmoid(x) + eps) is finite but floored at log(eps): past it the loss is flat and its gradient vanishes; "
    "F.logsigmoid is exact"
)


class LogOfSigmoid(Rule):
    """
    ## What it does
    Flags the logarithm of a sigmoid and of its complement:
    `torch.log(torch.sigmoid(x))`, `x.sigmoid().log()`, `torch.log(nn.Sigmoid()(x))`,
    `torch.log(1 - torch.sigmoid(x))`, `(1 - x.sigmoid()).log()` and
    `torch.log1p(-torch.sigmoid(x))`, also when the sigmoid was assigned to a
    local name a few lines earlier (`p = torch.sigmoid(x)` ... `torch.log(p)`,
    `torch.log(1 - p)`), and the log of a model's output when the model ends
    in a sigmoid: `torch.log(D(x))`, `torch.log(1. - D(G(z)))` with
    `D = nn.Sequential(..., nn.Sigmoid())` or a `forward` that returns
    `torch.sigmoid(...)`, in this file or another module of the project.

    Also the log-derivative of tanh, `torch.log(1 - torch.tanh(u) ** 2)`
    (`.pow(2)`, `torch.square`, `t * t`; the tanh inline or in a local
    name): the log-probability correction of a tanh-squashed policy and the
    log-determinant of a planar flow. `1 - tanh(u)**2 = 4 sigmoid(2u)
    sigmoid(-2u)`, the same family.

    ## Why is this bad?
    `sigmoid(x)` rounds to exactly 0 for x below about -88 in float32 (-17 in
    float16) and to exactly 1 for x above about 17 in float32 (8 in float16).
    Then `log(sigmoid(x))` or `log(1 - sigmoid(x))` is `-inf` and its gradient
    is NaN: measured with torch, `log(sigmoid(-90.))` and `log(1 - sigmoid(17.))`
    in float32 give `-inf` with a NaN gradient. `F.logsigmoid(x)` computes
    `min(x, 0) - log1p(exp(-|x|))`, finite for every finite input, and
    `log(1 - sigmoid(x)) = logsigmoid(-x)`.

    ## Example
    ```python
    log_p = torch.log(torch.sigmoid(logits))
    log_not_p = torch.log(1 - torch.sigmoid(logits))
    ```

    ## Use instead
    ```python
    log_p = F.logsigmoid(logits)
    log_not_p = F.logsigmoid(-logits)
    ```

    `tanh(u)` rounds to exactly ±1 past |u| of about 9 in float32 (4.5 in
    float16): `log(1 - tanh(u)**2)` is then `-inf` with a NaN gradient
    (0/0), and `2 * (log(2) - u - softplus(-2u))` is its exact value,
    finite everywhere, with the gradient `-2 tanh(u)`.

    ## Fix safety
    Safe: the values equal the original's wherever it is finite (to float
    rounding) and are finite where it was not. The tanh form becomes
    `2 * (math.log(2) - u - F.softplus(-2 * u))` (importing `math` when
    needed) when `u` is a plain expression not changed in between; a guarded
    `log(1 - tanh(u)**2 + eps)` is reported at `low` without a fix, as the
    guarded sigmoid is. The fix writes
    `F.logsigmoid(x)` (importing `torch.nn.functional as F` when the file has
    no alias for it). When the sigmoid was stored in a variable, the fix
    writes the sigmoid's input at the log, and only when that input is a
    plain expression (no call) whose names are not reassigned or changed in
    place in between; otherwise the finding has no fix.

    A guarded log, `torch.log(torch.sigmoid(x) + eps)` or
    `torch.log(1 - torch.sigmoid(x) + eps)`, stays finite but is floored at
    `log(eps)`: once sigmoid passes the floor the loss is constant and its
    gradient vanishes, so the worst-scored examples stop learning. It is reported at
    `low` without a fix, since the floor may be meant (a flow's bounded
    log-scale, `log(1e-6 + sigmoid(s))`), and `F.logsigmoid` drops it (high,
    with the fix, when float16 rounds the eps to 0 in a project that runs in
    float16). Not detected: `log2`/`log10`.

    A model's output is rewritten only when the model is a name bound once to
    an `nn.Sequential(..., nn.Sigmoid())` literal: `F.logsigmoid(D[:-1](x))`
    (the slice shares the layers); other model outputs are reported without
    a fix, since the model's `forward` is what has to return logits.
    """

    code = "TL202"
    name = "log-of-sigmoid"
    message = "log(sigmoid(x)) and log(1 - sigmoid(x)) are -inf with NaN gradients once sigmoid rounds to 0 or 1; use F.logsigmoid"
    fix_applicability = Applicability.SAFE
    confidence_levels = """
- **high**: the sigmoid is written in the log, stored in a name the log takes, or ends the model (an
  `nn.Sequential` or a `forward` of this file or the project) whose output the log takes.
- **medium**: the model reaches the log through a parameter of a function, and every call of that
  function in the file passes a model that ends in the sigmoid; other modules may pass other models.
"""
    triggers = ("sigmoid", "Sigmoid", "expit", "log")  # log: a model of another module may end in one

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"log", "log1p"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        log = match_log(self.context, node)
        guard = None
        if log is not None:
            operand, complement = log.operand, False
            guard = added_guard(self.context, operand)
            if guard is not None:
                operand = strip_eps(operand, self.context)
        else:
            log = match_unary(self.context, node, LOG1P_FUNCTIONS, "log1p")
            if log is None:
                return
            # log1p(-sigmoid(x)) is log(1 - sigmoid(x))
            operand = log.operand
            if not (isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Minus)):
                return
            operand, complement = operand.expression, True
        if not complement:
            rest = one_minus(operand)
            if rest is not None:
                square = tanh_squared(self.context, rest)
                if square is not None:
                    self._tanh(node, log, square, guard)
                    return
                operand, complement = rest, True
        activation = activation_of(self.context, operand, kinds=("sigmoid",))
        if activation is None:
            if guard is None:  # a model's guarded output: the model's forward is what has to change
                self._module_output(node, log, operand, complement)
            return
        direct = activation.definition.value if activation.definition is not None else operand
        if direct is not activation.call:
            return  # shape ops between the sigmoid and the log: left alone
        fix = None if log.extra_args else self._fix(node, activation, complement)
        if guard is not None and not guard_vanishes_in_float16(self.context, guard[1]):
            # ``log(sigmoid(x) + eps)``: finite, only floored at log(eps); logsigmoid is still the exact form.
            # No fix: the floor may be the design (a flow's bounded log-scale), and the exact form drops it.
            self.report(node, message=GUARDED_MESSAGE, confidence=Confidence.LOW)
            return
        self.report(node, fix=fix)

    def _tanh(self, log_call: cst.Call, log, square, guard) -> None:
        """``log(1 - tanh(x) ** 2)``: the log-derivative of tanh (a tanh-squashed policy's or flow's
        log-determinant), ``2 * (log(2) - x - softplus(-2x))`` exactly."""
        if guard is not None and not guard_vanishes_in_float16(self.context, guard[1]):
            self.report(log_call, message=TANH_GUARDED_MESSAGE, confidence=Confidence.LOW)
            return
        value = square.input
        fix = None
        if not log.extra_args and is_pure(value) and (square.definition is None or square.definition.unchanged_at_use(value)):
            softplus, imports = functional(self.context, "softplus")
            math, math_import = self.context.reference("math", "math")
            text = self.context.module.code_for_node(value.with_changes(lpar=[], rpar=[]))
            atomic = isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float))
            x = text if atomic else f"({text})"
            softplus_text = self.context.module.code_for_node(softplus)
            replacement = cst.parse_expression(f"2 * ({math}.log(2) - {x} - {softplus_text}(-2 * {x}))")
            if not isinstance(self.context.parent, BARE_PARENTS) or log_call.lpar:
                replacement = replacement.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            fix = FixSpec(
                Applicability.SAFE,
                "Replace with `2 * (math.log(2) - x - F.softplus(-2 * x))`",
                (Replacement(log_call, replacement),),
                tuple(imports) + tuple(r for r in (math_import,) if r),
            )
        self.report(log_call, message=TANH_MESSAGE, fix=fix)

    def _fix(self, log_call: cst.Call, activation, complement: bool) -> Optional[FixSpec]:
        value = activation.input
        if activation.definition is not None and not (is_pure(value) and activation.definition.unchanged_at_use(value)):
            return None
        func, imports = functional(self.context, "logsigmoid")
        argument = negated(value) if complement else value
        call = cst.Call(func=func, args=[positional(argument)], lpar=log_call.lpar, rpar=log_call.rpar)
        message = "Replace with `F.logsigmoid(-x)`" if complement else "Replace with `F.logsigmoid(x)`"
        return FixSpec(Applicability.SAFE, message, (Replacement(log_call, call),), imports)

    def _module_output(self, log_call: cst.Call, log, operand: cst.BaseExpression, complement: bool) -> None:
        """``torch.log(D(x))`` where the module ``D`` ends in a sigmoid (its last layer or its ``forward``)."""
        found: Optional[ModuleActivation] = called_module_activation(self.context, operand, ("sigmoid",))
        if found is None:
            return
        fix = None
        if found.head_dropped is not None and not log.extra_args:
            func, imports = functional(self.context, "logsigmoid")
            logits = negated(found.head_dropped) if complement else found.head_dropped
            call = cst.Call(func=func, args=[positional(logits)], lpar=log_call.lpar, rpar=log_call.rpar)
            fix = FixSpec(Applicability.SAFE, "Replace with `F.logsigmoid` of the model's logits", (Replacement(log_call, call),), imports)
        confidence = Confidence.MEDIUM if found.traced.assumed else Confidence.HIGH
        message = f"log of a model's sigmoid output ({found.traced.origin}) is -inf with NaN gradients once it rounds to 0 or 1; take F.logsigmoid of the logits"
        self.report(log_call, message=message, fix=fix, confidence=confidence)
