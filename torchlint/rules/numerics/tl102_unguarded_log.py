from __future__ import annotations

import libcst as cst

from torchlint.analysis.domain import LOG, LOG_FUNCTIONS, call_names, match_domain_op
from torchlint.analysis.fixes import clamp_operand_fix, eps_text
from torchlint.analysis.grad_need import gradient_regions
from torchlint.analysis.guards import assess
from torchlint.rule import Applicability, Rule


class UnguardedLog(Rule):
    """
    ## What it does
    Flags a logarithm of a tensor that is not provably positive:
    `torch.log(x)`, `torch.log2(x)`, `torch.log10(x)`, `x.log()`, `x.log2()`,
    `x.log10()`.

    An operand counts as guarded (see `torchlint/analysis/guards.py`) when it
    adds a positive literal or an eps-like name (`p + eps`, `x + 1e-6`,
    `1 + x`), is clamped to a positive minimum (`clamp(min=eps)`,
    `clamp_min(1e-6)`, `torch.maximum(x, eps)`), is an `exp`, a positive
    constant, a name bound earlier in the function to one of these, or sits
    under `if (x > 0).all():` / `assert` / an earlier `if x == 0: return`.
    The magnitude of entries selected off zero is positive:
    `w[w < 0].abs().log()`, and `w[neg].abs()` with `neg = ~(w >= 0)`; so is
    `p / (1 - p)` after `p = p.clamp(eps, 1 - eps)`; and a positive value
    plus a masked sum of non-negative ones, as in a stable log-sum-exp over
    the negatives a 0/1 mask keeps: `log(exp(pos - m) + (mask * exp(neg - m)).sum(1))`;
    and `-expm1(x)` of an `x` clamped strictly below 0, the stable
    `log(1 - exp(x))`: `log(-torch.expm1(log_s.clamp(max=-1e-7)))`. Constant
    tensors of configured values are never reported: `log(1 - alpha_t)` with
    `alpha_t = torch.tensor(alpha)`, like `math.log(1 - alpha)`.
    The other guard forms (bounds written with eps, `torch.add`,
    `c_f.small_val(dtype)`) are as for TL101 (`torchlint rule TL101`).

    Logs that a fused op replaces are left to their own rules, so one bug
    gives one finding: `log(softmax)` (TL201), `log(sigmoid)` and
    `log(1 - sigmoid)` (TL202), `log(sum(exp))` (TL203), `x * log(x)`
    (TL204), `log(1 + x)` (TL205); so are logs in a `torch.where` branch
    whose condition tests the operand (TL106) and logs whose result is
    filtered by `nan_to_num` / `isnan` masking (TL107).

    ## Why is this bad?
    `log(0)` is `-inf` and its derivative `1 / x` is `inf` there; a negative
    operand gives NaN. One zero probability, count or distance turns the loss
    into `-inf`/`NaN` ("Function 'LogBackward0' returned nan values"), and the
    next optimizer step writes NaN into every weight. Clamping the result
    afterwards (`torch.log(p).clamp_min(-100)`) keeps the forward value finite
    but not the gradient: autograd still evaluates `1 / 0` at the log.

    ## Example
    ```python
    nll = -torch.log(probs.gather(1, target[:, None]))
    entropy = -(p * p.log2()).sum(-1)   # TL204 reports this one
    ratio = torch.log(pred / target)
    ```

    ## Use instead
    ```python
    nll = -torch.log(probs.gather(1, target[:, None]).clamp_min(1e-6))
    ratio = torch.log(pred.clamp_min(1e-6) / target.clamp_min(1e-6))
    ```

    ## Fix safety
    Numerics: the operand is clamped, `torch.log(x)` becomes
    `torch.log(x.clamp_min(eps))` with eps from `[tool.torchlint] eps`
    (default 1e-6, which float16 still represents; 1e-8 would round to 0
    there, and `log(1e-6) = -13.8` is finite in every dtype). Values at or
    above eps are computed exactly as before; below it the result is
    `log(eps)` instead of `-inf`/NaN and the gradient is 0.

    Where it looks: code that is differentiated, a `forward`, `__call__` or
    `training_step`, a function or class named for a loss, a file in a
    `loss`/`losses` module. Metric and statistics code (logs of counts,
    cluster sizes, nonzero-filtered entries) is positive by constructions the
    linter cannot see far more often than not (measured in
    `bench/results/precision_tl1.md`) and is not reported.

    Schedules, visualisation, helpers called only under `torch.no_grad()`
    and parameters judged by what the same file's calls pass: as for TL101
    (`torchlint rule TL101`).

    A helper defined in the same file is followed: `torch.log(stft(x))` is
    guarded when every `return` of `stft` (or of `self._energy` in the same
    class) is positive, e.g. clamped before it returns; so is a name unpacked
    from the tuples it returns (`mag, phase = self.stft(x)`).

    Not detected: logs of values computed in a function of another file or
    stored in attributes, and logs whose operand is guarded in another file.
    """

    code = "TL102"
    name = "unguarded-log"
    message = "log of a value that can be 0 or negative: -inf/NaN and an infinite gradient; clamp the operand"
    fix_applicability = Applicability.NUMERICS
    triggers = ("log",)
    reads_callers = True

    @classmethod
    def prepass(cls, scan):
        return gradient_regions(scan, scan.regions_calling(call_names(LOG_FUNCTIONS))) or None

    def visit_Call(self, node: cst.Call) -> None:
        op = match_domain_op(self.context, node)
        if op is None or op.kind != LOG:
            return
        confidence = assess(self.context, op)
        if confidence is not None:
            fix = clamp_operand_fix(self.context, op, eps_text(self.context), "Clamp the operand to eps")
            self.report(node, fix=fix, confidence=confidence)
