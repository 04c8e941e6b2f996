from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.model.dataflow import Definition
from torchlint.analysis.model.calls import argument
from torchlint.analysis.values.fused import activation_of, functional, is_pure, keyword, log_softmax_call, positional
from torchlint.analysis.project.module_outputs import called_module_activation
from torchlint.analysis.model.ops import SoftmaxCall, match_softmax, match_unary, strip_clamp_min, strip_eps
from torchlint.analysis.values.precision import added_guard, guard_vanishes_in_float16
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

LOG_FUNCTIONS = frozenset({"torch.log"})


GUARDED_MESSAGE = (
    "log(softmax(x) + eps) is finite but flattens every log-probability below log(eps) and its gradient; "
    "log_softmax is exact"
)


class LogOfSoftmax(Rule):
    """
    ## What it does
    Flags the logarithm of a softmax: `torch.log(torch.softmax(x, d))`,
    `F.softmax(x, d).log()`, `torch.log(nn.Softmax(d)(x))` (also through a
    `self.softmax = nn.Softmax(d)` attribute or a name such as
    `sm = nn.Softmax(d)`), with or without an `eps` added or clamped in
    between, and the log of a name the softmax was stored in
    (`p = F.softmax(z, -1)`, then `torch.log(p)` or `p.log()`), and the log
    of a model's output when the model ends in a softmax
    (`nn.Sequential(..., nn.Softmax(dim=1))`, a `forward` returning
    `F.softmax(...)`), in this file or another module of the project.

    ## Why is this bad?
    Softmax computes `exp(x_i - max) / sum`; for confident logits the small
    probabilities underflow to exactly 0 (float32 below ~1e-45, float16 below
    ~6e-8), `log(0)` is `-inf`, and the backward pass multiplies `inf` by 0:
    the gradient is NaN ("Function 'LogSoftmaxBackward0' returned nan values"
    under anomaly detection, a NaN loss without it). With logits
    `[100, 0, -100]` it happens already in float32. Adding `eps` inside the log
    hides the `-inf` but clips the loss at `log(eps)`, which changes what is
    optimised. `log_softmax` computes `x_i - max - log(sum(exp(x - max)))`,
    which is finite for every finite input.

    ## Example
    ```python
    log_probs = torch.log(F.softmax(logits, dim=-1))
    log_probs = logits.softmax(-1).log()
    ```

    ## Use instead
    ```python
    log_probs = F.log_softmax(logits, dim=-1)
    log_probs = logits.log_softmax(-1)
    ```

    ## Fix safety
    Safe: the forward values equal the original's wherever the original is
    finite (to float rounding), and are finite where it was not. `dim` and
    `dtype` are kept; `torch.softmax`'s positional `dtype` becomes a keyword.
    When the original adds an `eps`, values differ by about `eps` for
    ordinary probabilities and the loss is no longer clipped at `log(eps)`.
    `torch.nn.functional` is imported as `F` if the file has no alias for it.

    A model's output is rewritten only when the model is a name bound once to
    an `nn.Sequential(..., nn.Softmax(d))` literal: `F.log_softmax(model[:-1](x),
    dim=d)` (the slice shares the layers); other model outputs are reported
    without a fix, since the model's `forward` is what has to change.

    Not detected: `log2`/`log10` of a softmax, softmax modules held in
    containers.
    """

    code = "TL201"
    name = "log-of-softmax"
    message = "log(softmax(x)) gives -inf and NaN gradients once a probability underflows to 0; use log_softmax"
    fix_applicability = Applicability.SAFE
    confidence_levels = """
- **high**: the softmax is written in the log, stored in a name the log takes, or ends the model (an
  `nn.Sequential` or a `forward` of this file or the project) whose output the log takes.
- **medium**: the model reaches the log through a parameter of a function, and every call of that
  function in the file passes a model that ends in the softmax; other modules may pass other models.
- **low**: `log(softmax(x) + eps)` with an eps the precision keeps: nothing becomes infinite, the form is
  only inexact (high when float16 rounds the eps to 0 in a project that runs in float16).
"""
    triggers = ("softmax", "Softmax", "log")  # log: a model of another module may end in one

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"log"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        log = match_unary(self.context, node, LOG_FUNCTIONS, "log")
        if log is None:
            return
        operand = strip_clamp_min(self.context, strip_eps(log.operand, self.context))
        softmax = match_softmax(self.context, operand)
        definition: Optional[Definition] = None
        if softmax is None and isinstance(operand, cst.Name):
            stored = activation_of(self.context, operand, kinds=("softmax",))
            if stored is not None and stored.definition is not None and stored.definition.value is stored.call:
                softmax, definition = stored.softmax, stored.definition
        if softmax is None:
            self._module_output(node, log, operand)
            return
        if softmax.input is None:
            return
        rebuildable = definition is None or (is_pure(softmax.input) and definition.unchanged_at_use(softmax.node))
        fix = self._fix(node, softmax) if rebuildable and not log.extra_args else None
        guard = added_guard(self.context, log.operand)
        if guard is not None and not guard_vanishes_in_float16(self.context, guard[1]):
            # ``log(softmax(x) + eps)``: finite, only biased below eps; log_softmax is still the exact form.
            self.report(node, message=GUARDED_MESSAGE, fix=fix, confidence=Confidence.LOW)
            return
        self.report(node, fix=fix)

    def _fix(self, log_call: cst.Call, softmax: SoftmaxCall) -> Optional[FixSpec]:
        replacement = log_softmax_call(self.context, softmax)
        if replacement is None:
            return None
        call, imports = replacement
        call = call.with_changes(lpar=log_call.lpar, rpar=log_call.rpar)
        return FixSpec(
            Applicability.SAFE,
            "Replace with `log_softmax`",
            (Replacement(log_call, call),),
            imports,
        )

    def _module_output(self, log_call: cst.Call, log, operand: cst.BaseExpression) -> None:
        """``torch.log(model(x))`` where ``model`` ends in a softmax (its last layer or its ``forward``)."""
        found = called_module_activation(self.context, operand, ("softmax",))
        if found is None:
            return
        fix = None
        if found.head_dropped is not None and found.layer is not None and not log.extra_args:
            func, imports = functional(self.context, "log_softmax")
            dim = argument(found.layer, 0, "dim")
            args = [positional(found.head_dropped, comma=dim is not None)] + ([keyword("dim", dim.value)] if dim is not None else [])
            call = cst.Call(func=func, args=args, lpar=log_call.lpar, rpar=log_call.rpar)
            fix = FixSpec(Applicability.SAFE, "Replace with `log_softmax` of the model's logits", (Replacement(log_call, call),), imports)
        confidence = Confidence.MEDIUM if found.traced.assumed else Confidence.HIGH
        message = f"log of a model's softmax output ({found.traced.origin}) is -inf with NaN gradients once a probability underflows to 0; take log_softmax of the logits"
        guard = added_guard(self.context, log.operand)
        if guard is not None and not guard_vanishes_in_float16(self.context, guard[1]):
            message, confidence = GUARDED_MESSAGE, Confidence.LOW
        self.report(log_call, message=message, fix=fix, confidence=confidence)
