from __future__ import annotations

import libcst as cst

from torchlint.analysis.fused import activation_of
from torchlint.analysis.losses import LOSS_NAMES, LossCall, match_loss, rewrite_activation, with_logits_replacements
from torchlint.rule import Applicability, FixSpec, Rule

MESSAGES = {
    "cross_entropy": (
        "cross_entropy applies log_softmax itself: on softmax outputs it softmaxes twice, "
        "the loss cannot fall below a floor and its gradient vanishes; pass the logits"
    ),
    "nll": "nll_loss expects log-probabilities: on softmax outputs it minimises -p instead of -log p; use log_softmax",
    "bce": (
        "binary_cross_entropy on sigmoid outputs is -inf/clamped at -100 once sigmoid rounds to 0 or 1; "
        "use binary_cross_entropy_with_logits on the logits"
    ),
}
FIX_MESSAGES = {
    "cross_entropy": "Drop the softmax: pass the logits",
    "nll": "Use `log_softmax` instead of `softmax`",
    "bce": "Use the `..._with_logits` loss on the logits",
}


class ActivationBeforeLoss(Rule):
    """
    ## What it does
    Flags an activation fed to a loss that does not want it:
    `F.cross_entropy(F.softmax(z, 1), y)` and `nn.CrossEntropyLoss()(...)` on a
    softmax (softmax twice); `F.nll_loss(F.softmax(z, 1), y)` / `nn.NLLLoss`
    on a softmax (probabilities where log-probabilities belong);
    `F.binary_cross_entropy(torch.sigmoid(z), y)` / `nn.BCELoss()` on a
    sigmoid. The loss may be a function, a module built inline, in
    `__init__` (`self.criterion = nn.BCELoss()`), earlier in the function or
    at module level; the activation may be inline (also under `.view`,
    `.squeeze`, ...) or stored in a local name a few lines before the loss.

    ## Why is this bad?
    `cross_entropy` computes `log_softmax` itself: on probabilities the
    per-sample loss can never go below `log(1 + (C - 1) / e)` (0.55 for
    C = 3) and its gradient shrinks as the model grows confident, so training
    stalls. `nll_loss` on probabilities minimises `-p[y]` instead of
    `-log p[y]`: a different, badly scaled objective. `binary_cross_entropy`
    on a sigmoid takes `log(sigmoid(z))`, which PyTorch clamps at -100 once
    the sigmoid rounds to 0 or 1 (|z| > 17 in float32): the loss saturates
    and the gradient of a confidently wrong sample is 0; under autocast it
    raises an error. The `..._with_logits` loss computes the same value
    stably from the logits.

    ## Example
    ```python
    loss = F.cross_entropy(F.softmax(logits, dim=1), labels)
    self.criterion = nn.BCELoss()                      # in __init__
    loss = self.criterion(torch.sigmoid(self.head(x)), y)
    ```

    ## Use instead
    ```python
    loss = F.cross_entropy(logits, labels)
    self.criterion = nn.BCEWithLogitsLoss()
    loss = self.criterion(self.head(x), y)
    ```

    ## Fix safety
    Every argument of the loss (`weight`, `ignore_index`, `reduction`,
    `label_smoothing`) and of the activation (`dim`, `dtype`) is kept.

    - BCE -> BCE with logits: safe. The values equal the original's on
      ordinary inputs and are exact where the original clamped. A loss module
      built elsewhere is rewritten only when this is its one use; otherwise
      the finding has no fix.
    - cross_entropy / nll_loss: the loss value changes on every input; that
      is the point (the original computes a different, wrong quantity). When
      the model's outputs are untouched (the softmax is inline, or stored in
      a name whose input is written at the loss instead, or stored in a name
      that only the loss reads) the fix is applied by `--fix` and labelled
      `numerics`.
    - unsafe: when the softmax/sigmoid result is stored in a name that is
      also read elsewhere (typically returned from `forward` next to the
      loss) and its input cannot be written at the loss (it is a call such as
      `self.fc(x)`), the fix removes the activation from the assignment, which
      changes what those other readers, and the model's callers, receive.

    Not detected: a model whose `forward` ends in a softmax and whose output
    meets `nn.CrossEntropyLoss` in another function or file; activations
    stored in attributes or containers.
    """

    code = "TL206"
    name = "activation-before-loss"
    message = "softmax/sigmoid fed to a loss that applies its own (cross_entropy, BCE) or needs log-probabilities (nll_loss)"
    fix_applicability = Applicability.UNSAFE
    triggers = ("softmax", "Softmax", "sigmoid", "Sigmoid", "expit")

    @classmethod
    def prepass(cls, scan):
        # Loss and activation modules may be built elsewhere (``__init__``, module level) and reached by name.
        return scan.regions_using_both(LOSS_NAMES, cls.triggers) or None  # the triggers are the activations' names

    def visit_Call(self, node: cst.Call) -> None:
        loss = match_loss(self.context, node)
        if loss is None or loss.kind == "kl_div" or loss.input is None:
            return
        kinds = ("sigmoid",) if loss.kind == "bce" else ("softmax",)
        activation = activation_of(self.context, loss.input.value, kinds=kinds)
        if activation is None:
            return
        self.report(node, message=MESSAGES[loss.kind], fix=self._fix(loss, activation))

    def _fix(self, loss: LossCall, activation):
        rewrite = rewrite_activation(self.context, activation, "log_softmax" if loss.kind == "nll" else "input")
        if rewrite is None:
            return None
        replacements, imports = rewrite.replacements, rewrite.imports
        if loss.kind == "bce":
            swapped = with_logits_replacements(self.context, loss)
            if swapped is None:
                return None
            replacements, imports = replacements + swapped[0], imports + swapped[1]
            applicability = Applicability.SAFE
        else:
            applicability = Applicability.NUMERICS
        if rewrite.changes_other_uses:
            applicability = Applicability.UNSAFE
        return FixSpec(applicability, FIX_MESSAGES[loss.kind], replacements, tuple(dict.fromkeys(imports)))
