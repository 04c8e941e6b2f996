from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.bindings import Definition
from torchlint.analysis.fused import activation_of, is_pure, log_softmax_call
from torchlint.analysis.ops import SoftmaxCall, match_softmax, match_unary, strip_clamp_min, strip_eps
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

LOG_FUNCTIONS = frozenset({"torch.log"})


class LogOfSoftmax(Rule):
    """
    ## What it does
    Flags the logarithm of a softmax: `torch.log(torch.softmax(x, d))`,
    `F.softmax(x, d).log()`, `torch.log(nn.Softmax(d)(x))` (also through a
    `self.softmax = nn.Softmax(d)` attribute or a name such as
    `sm = nn.Softmax(d)`), with or without an `eps` added or clamped in
    between, and the log of a name the softmax was stored in
    (`p = F.softmax(z, -1)`, then `torch.log(p)` or `p.log()`).

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

    Not detected: a softmax stored in a variable and logged on a later line,
    `log2`/`log10` of a softmax, softmax modules held in containers.
    """

    code = "TL201"
    name = "log-of-softmax"
    message = "log(softmax(x)) gives -inf and NaN gradients once a probability underflows to 0; use log_softmax"
    fix_applicability = Applicability.SAFE
    triggers = ("softmax", "Softmax")

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"log"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        log = match_unary(self.context, node, LOG_FUNCTIONS, "log")
        if log is None:
            return
        operand = strip_clamp_min(self.context, strip_eps(log.operand))
        softmax = match_softmax(self.context, operand)
        definition: Optional[Definition] = None
        if softmax is None and isinstance(operand, cst.Name):
            stored = activation_of(self.context, operand, kinds=("softmax",))
            if stored is not None and stored.definition is not None and stored.definition.value is stored.call:
                softmax, definition = stored.softmax, stored.definition
        if softmax is None or softmax.input is None:
            return
        rebuildable = definition is None or (is_pure(softmax.input) and definition.unchanged_at_use(softmax.node))
        fix = self._fix(node, softmax) if rebuildable and not log.extra_args else None
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
