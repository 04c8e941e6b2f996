from __future__ import annotations

import libcst as cst

from torchlint.analysis.fused import activation_of
from torchlint.analysis.losses import match_loss, rewrite_activation
from torchlint.rule import Applicability, FixSpec, Rule


class KlDivProbabilities(Rule):
    """
    ## What it does
    Flags `F.kl_div` and `nn.KLDivLoss` (built inline, in `__init__`, earlier
    in the function or at module level) whose first argument, the input, is a
    softmax: `F.kl_div(F.softmax(a, -1), F.softmax(b, -1))`,
    `nn.KLDivLoss(reduction="batchmean")(probs, t)` with
    `probs = F.softmax(z, -1)` a few lines before.

    ## Why is this bad?
    `kl_div(input, target)` computes `sum(target * (log(target) - input))`:
    it expects `input` to be log-probabilities. Given probabilities it
    returns a number that is not a divergence at all: it can be negative,
    is not 0 for identical distributions, and its gradient pushes the model
    somewhere arbitrary. No error, no NaN: training just optimises the wrong
    thing (R-Drop, distillation and consistency losses are typical victims).

    ## Example
    ```python
    loss = F.kl_div(F.softmax(student, -1), F.softmax(teacher, -1), reduction="batchmean")
    ```

    ## Use instead
    ```python
    loss = F.kl_div(F.log_softmax(student, -1), F.softmax(teacher, -1), reduction="batchmean")
    ```

    ## Fix safety
    The softmax becomes `log_softmax` with the same `dim` and `dtype`; the
    target, `reduction` and `log_target` are kept. The loss value changes on
    every input (the original is wrong); the model's outputs do not, and
    the fix is applied by `--fix`, labelled `numerics`. When the softmax is
    stored in a name that is also read elsewhere (returned, logged) and its
    input cannot be written at the loss (it is a call), the fix rewrites the
    assignment, changing what those readers see: unsafe.

    Not flagged: `F.kl_div(log_probs, probs)`,
    `F.kl_div(a, b, log_target=True)` with two log-softmaxes, a softmax as
    the target. Not detected: probabilities from a sigmoid or from another
    function.
    """

    code = "TL207"
    name = "kl-div-probabilities"
    message = "kl_div expects log-probabilities as input: on softmax outputs it returns a wrong (even negative) divergence"
    fix_applicability = Applicability.UNSAFE
    triggers = ("kl_div", "KLDivLoss")

    @classmethod
    def prepass(cls, scan):
        return scan.regions_using_both(cls.triggers, ("softmax", "Softmax")) or None  # the triggers are the loss's names

    def visit_Call(self, node: cst.Call) -> None:
        loss = match_loss(self.context, node)
        if loss is None or loss.kind != "kl_div" or loss.input is None:
            return
        activation = activation_of(self.context, loss.input.value, kinds=("softmax",))
        if activation is None:
            return
        rewrite = rewrite_activation(self.context, activation, "log_softmax")
        fix = None
        if rewrite is not None:
            applicability = Applicability.UNSAFE if rewrite.changes_other_uses else Applicability.NUMERICS
            fix = FixSpec(applicability, "Use `log_softmax` for the input", rewrite.replacements, tuple(dict.fromkeys(rewrite.imports)))
        self.report(node, fix=fix)
