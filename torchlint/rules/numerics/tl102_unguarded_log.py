from __future__ import annotations

import libcst as cst

from torchlint.analysis.values.domain import LOG, LOG_FUNCTIONS, call_names
from torchlint.analysis.flow import signs
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.fixes import clamp_operand_fix, eps_text
from torchlint.analysis.flow.grad_need import gradient_regions
from torchlint.analysis.project.guards import assess
from torchlint.rule import Applicability, Rule


class UnguardedLog(Rule):
    """
    ## What it does
    Flags a logarithm of a tensor that can reach 0 or go below it:
    `torch.log(x)`, `torch.log2(x)`, `torch.log10(x)`, `x.log()`, `x.log2()`,
    `x.log10()`.

    The operand is judged by what it is (`torchlint/analysis/flow/signs.py`): a
    count, a norm, a ReLU output, `1 - p` of a probability, `max - min`, a
    constant 0 reach 0 by construction; `p + eps`, `clamp(min=eps)`, `exp(x)`,
    `1 + x` and names bound to them do not, nor does an operand a test keeps
    off zero (`torchlint/analysis/values/conditions.py`). A log that a fused op
    replaces is left to its own rule, so one bug gives one finding:
    `log(softmax)` (TL201, also through a name), `log(sigmoid)` and
    `log(1 - sigmoid)` (TL202), `log(sum(exp))` and `log(1 + exp)` (TL203),
    `x * log(x)` (TL204), `log(1 + x)` (TL205); so are logs in a `torch.where`
    branch that tests the operand (TL106) and logs whose result is filtered
    for NaN (TL107).

    ## Why is this bad?
    `log(0)` is `-inf` and its derivative `1 / x` is `inf` there; a negative
    operand gives NaN. One zero probability, count or distance turns the loss
    into `-inf`/`NaN` ("Function 'LogBackward0' returned nan values"), and the
    next optimizer step writes NaN into every weight. Clamping the result
    afterwards (`torch.log(p).clamp_min(-100)`) keeps the forward value finite
    but not the gradient.

    ## Example
    ```python
    nll = -torch.log(probs.gather(1, target[:, None]))
    psnr = 10 * torch.log10(1.0 / ((a - b) ** 2).mean())
    ```

    ## Use instead
    ```python
    nll = -torch.log(probs.gather(1, target[:, None]).clamp_min(1e-6))
    psnr = 10 * torch.log10(1.0 / ((a - b) ** 2).mean().clamp_min(1e-6))
    ```

    ## Fix safety
    Numerics: the operand is clamped, `torch.log(x)` becomes
    `torch.log(x.clamp_min(eps))` with eps from `[tool.torchlint] eps`
    (default 1e-6, which float16 still represents; `log(1e-6) = -13.8` is
    finite in every dtype). Values at or above eps are computed exactly as
    before; below it the result is `log(eps)` instead of `-inf`/NaN and the
    gradient is 0. Where the operand is a softmax or sigmoid output, the TL2xx
    rules' fixes work from the logits instead.

    Where it looks, and what is never reported: as for TL101 (`torchlint rule
    TL101`). Silence one line with `# noqa: TL102`.
    """

    judges_names = True  # guards.assess weighs naming conventions per op
    code = "TL102"
    name = "unguarded-log"
    message = "log of a value that can be 0 or negative: -inf/NaN and an infinite gradient; clamp the operand"
    fix_applicability = Applicability.NUMERICS
    triggers = ("log",)
    reads_callers = True
    confidence_levels = (
        "`high`: the operand reaches 0 in ordinary training (a ReLU output, `1 - p` of a probability that "
        "saturates, a constant 0 or negative); `medium`: it reaches 0 only on degenerate data (a count of an "
        "empty mask, a norm or std/var of a zero vector, `max - min` of a constant input), or an operand of "
        "unknown sign where gradients flow (a `forward`, a loss, a scope that calls `backward()`); `low`: "
        "unknown sign elsewhere."
    )

    @classmethod
    def prepass(cls, scan):
        return gradient_regions(scan, scan.regions_calling_tensor_ops(call_names(LOG_FUNCTIONS))) or None

    def visit_Call(self, node: cst.Call) -> None:
        op = match_domain_op(self.context, node)
        if op is None or op.kind != LOG:
            return
        confidence = assess(self.context, op, shown=self.shown_level)
        if confidence is not None:
            fix = None
            if not signs.reaches_edge_only_by_rounding(self.context, op.operand, site_of(self.context.ancestors)):
                fix = clamp_operand_fix(self.context, op, eps_text(self.context), "Clamp the operand to eps")
            self.report(node, fix=fix, confidence=confidence)
