from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.values.fused import activation_of
from torchlint.analysis.values.losses import match_loss, rewrite_activation
from torchlint.analysis.project.module_outputs import trace_output
from torchlint.analysis.model import conventions
from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# A name that says it holds probabilities, not their logs: ``probs``, ``mean_anchor_probs``, ``p_student``
# is not one (``p`` alone says nothing), nor ``log_probs``/``lprobs``/``logp``.
_PROBABILITY_NAME = re.compile(r"(^|_)(probs?|probas?|probabilities|probability)(_|$)", re.IGNORECASE)
_NAMED_MESSAGE = (
    "kl_div expects log-probabilities as input, and this input is named as probabilities: the divergence is wrong "
    "(even negative) unless it holds their log"
)
_LOG_NAME = re.compile(r"(^|_)(log|l)(_?probs?|p|_)|log", re.IGNORECASE)


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
    target, `reduction` and `log_target` are kept. When the target is itself
    computed as log-probabilities (the two swapped:
    `F.kl_div(F.softmax(s, 1), F.log_softmax(t, 1))`), the fix also passes
    `log_target=True`, without which the fixed loss would still be wrong; for
    `nn.KLDivLoss`, whose flag belongs to its constructor, no fix is offered
    then. The loss value changes on
    every input (the original is wrong); the model's outputs do not, and
    the fix is applied by `--fix`, labelled `numerics`. When the softmax is
    stored in a name that is also read elsewhere (returned, logged) and its
    input cannot be written at the loss (it is a call), the fix rewrites the
    assignment, changing what those readers see: unsafe.

    An input the code only names as probabilities (`F.kl_div(mean_anchor_probs, t)`,
    a parameter or attribute called `probs`, `*_probs`, `probabilities`) is
    reported with `medium` confidence and no fix: the name is the only
    evidence, and the fix (`torch.log` of it, or the logits' `log_softmax`)
    depends on where it comes from.

    The input is also followed into the model that produced it, as TL206
    does (`criterion = nn.KLDivLoss()` ... `criterion(net(x), y)` with a
    `forward` that ends in a softmax, in this file or another module of the
    project): reported without a fix, since the model's output would change.

    Not flagged: `F.kl_div(log_probs, probs)`,
    `F.kl_div(a, b, log_target=True)` with two log-softmaxes, a softmax as
    the target. Not detected: probabilities from a sigmoid or from another
    function, under a name that does not say so.
    """

    code = "TL207"
    name = "kl-div-probabilities"
    message = "kl_div expects log-probabilities as input: on softmax outputs it returns a wrong (even negative) divergence"
    fix_applicability = Applicability.UNSAFE
    triggers = ("kl_div", "KLDivLoss")

    confidence_levels = (
        "`high` when the input is a softmax (inline or stored in a name), or the output of a model whose "
        "`forward` ends in one (`criterion(net(x), y)`); `medium` when only its name says it holds "
        "probabilities (`probs`, `mean_anchor_probs`), or the model is one the file's calls hand in; `low` when "
        "nothing shows where the input comes from (a suspect for `torchlint trace`)."
    )

    @classmethod
    def prepass(cls, scan):
        words = scan.reachable_words(cls.triggers)  # the triggers are the loss's names
        return scan.regions_where(lambda region: not region.uses.isdisjoint(words)) or None

    def visit_Call(self, node: cst.Call) -> None:
        loss = match_loss(self.context, node)
        if loss is None or loss.kind != "kl_div" or loss.input is None:
            return
        activation = activation_of(self.context, loss.input.value, kinds=("softmax",))
        if activation is None:
            traced = trace_output(self.context, loss.input.value)
            if traced is not None and traced.kind == "softmax":
                message = f"{self.message} (the input is the output of {traced.origin}, which ends in softmax)"
                self.report(node, message, confidence=Confidence.MEDIUM if traced.assumed else Confidence.HIGH)
            elif traced is None and not _computed_as_logs(self.context, loss.input.value):
                # Nothing shows where the input comes from: a suspect; a name that says probabilities is one
                # level more (a naming convention).
                named = _named_probabilities(loss.input.value)
                self.report(node, _NAMED_MESSAGE, confidence=Confidence.MEDIUM if named else Confidence.LOW)
            return
        rewrite = rewrite_activation(self.context, activation, "log_softmax")
        fix = None
        if rewrite is not None:
            applicability = Applicability.UNSAFE if rewrite.changes_other_uses else Applicability.NUMERICS
            replacements, title = rewrite.replacements, "Use `log_softmax` for the input"
            if _log_probability_target(self.context, loss):
                # a target already in logs (the two swapped: ``kl_div(softmax(s), log_softmax(t))``) must be read
                # as logs too, or the fixed loss is still wrong
                flag = _log_target_flag(self.context, loss, replacements)
                replacements = replacements + (flag,) if flag is not None else None
                title = "Use `log_softmax` for the input and read the log-probability target with `log_target=True`"
            if replacements is not None:
                fix = FixSpec(applicability, title, replacements, tuple(dict.fromkeys(rewrite.imports)))
        self.report(node, fix=fix)


def _log_probability_target(context, loss) -> bool:
    """The target is computed as log-probabilities and nothing says to read it so (no ``log_target=True``)."""
    if loss.target is None or not _computed_as_logs(context, loss.target.value):
        return False
    flags = [arg for arg in loss.node.args if arg.keyword is not None and arg.keyword.value == "log_target"]
    if loss.form == "module" and loss.constructor is not None:
        flags += [arg for arg in loss.constructor.args if arg.keyword is not None and arg.keyword.value == "log_target"]
    return not flags


def _log_target_flag(context, loss, replacements) -> Optional[Replacement]:
    """``log_target=True`` added after the call's last argument (a function call whose last argument the input's
    rewrite does not touch); None when it cannot be written there (a module's flag belongs to its constructor)."""
    if loss.form != "function" or not loss.node.args or any(arg.star for arg in loss.node.args):
        return None
    last = loss.node.args[-1].value
    touched = {id(replacement.old) for replacement in replacements}
    if any(id(node) in touched for node in _subtree(last)):
        return None
    return Replacement(last, f"{context.code(last).strip()}, log_target=True")


def _subtree(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _subtree(child)


def _computed_as_logs(context, node: cst.BaseExpression) -> bool:
    """``F.log_softmax(x)``, ``torch.log(p)``, ``dist.log_prob(y)``, a name assigned one: log-probabilities."""
    if isinstance(node, cst.Name):
        definition = reaching_definition(context.ancestors, node.value)
        if definition is not None:
            node = definition.value
    if isinstance(node, cst.Call):
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return name.startswith("log") or name in ("logsigmoid",)
    return False


def _named_probabilities(node: cst.BaseExpression) -> bool:
    """``probs``, ``self.mean_probs``, ``teacher_probabilities``: a name that says probabilities, not logs."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
    return conventions.says(bool(word) and bool(_PROBABILITY_NAME.search(word)) and not _LOG_NAME.search(word))
