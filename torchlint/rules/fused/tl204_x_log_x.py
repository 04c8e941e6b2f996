from __future__ import annotations

import libcst as cst

from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.analysis.values.conditions import guarded_by_condition
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.values.fused import (
    ExpTimesExponent,
    XLogX,
    activation_of,
    as_receiver,
    bare,
    in_place_of,
    is_pure,
    log_softmax_call,
    match_exp_times_exponent,
    match_x_log_x,
    positional,
    torch_function,
)
from torchlint.analysis.model.ops import call_parts
from torchlint.analysis.project.owners import where_owner
from torchlint.analysis.flow.signs import Sign, sign_of
from torchlint.analysis.model import conventions
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# What makes log-probabilities: their -inf (a masked logit, a probability 0) meets exp's 0.
_LOG_PROBABILITY_MAKERS = frozenset({"log_softmax", "logsigmoid", "log_sigmoid", "log", "LogSoftmax", "LogSigmoid"})


class XLogXProduct(Rule):
    """
    ## What it does
    Flags `x * torch.log(x)` in its spellings: `torch.log(x) * x`,
    `p * p.log()`, `-p * torch.log(p)`, `w * p * torch.log(p)`, the heart of
    hand-written entropies (`-(p * torch.log(p)).sum(-1)`); and the same
    product written from log-probabilities, `torch.exp(logp) * logp` with
    `logp` a `log_softmax` (or a name that says log).

    ## Why is this bad?
    Where x is exactly 0 (a probability that underflowed, a padded entry, an
    empty histogram bin) `torch.log(0)` is `-inf` and `0 * -inf` is NaN: the
    entropy, and every gradient that touches it, becomes NaN. By definition
    `0 * log 0 = 0`, and `torch.xlogy(x, x)` returns exactly that. Written
    from log-probabilities the NaN comes from the other side: a masked logit
    of `-inf` makes `logp = -inf` and `exp(logp) * logp = 0 * -inf`.

    ## Example
    ```python
    entropy = -(p * torch.log(p)).sum(-1)
    ```

    ## Use instead
    ```python
    entropy = -torch.xlogy(p, p).sum(-1)
    ```

    ## Fix safety
    Safe: the forward values equal the original's wherever it is finite and
    are 0 instead of NaN where x is 0. The gradient at exactly 0 is still
    unbounded: d/dx xlogy(x, x) = log(x) + 1 is `-inf` there, and torch
    2.13 on CPU returns NaN for it (measured in tests/test_runtime_fused.py),
    so a value that is trained through exactly 0 still needs a guard such as
    `p.clamp_min(eps)`. The fix keeps a method form a method
    (`p * p.log()` -> `p.xlogy(p)`).

    When `p` is a local name assigned a softmax a few lines earlier
    (`p = F.softmax(z, -1)`, with `z` a plain expression unchanged since),
    the fix writes `p * F.log_softmax(z, -1)` instead: the same values, 0
    where `p` underflowed, and a finite gradient everywhere.

    A guarded log such as `p * torch.log(p + eps)` or
    `p * torch.log(p.clamp_min(eps))` is not flagged, nor is an `x` that the
    guard analysis (shared with TL102) proves positive, such as
    `p = p.clamp(eps)` a few lines earlier, or an enclosing `if (p > 0).all():`;
    neither is
    `torch.xlogy` or `torch.special.entr`. Operands are compared as written
    (spaces ignored): `p * torch.log(q)` with `q = p` is not seen.
    """

    code = "TL204"
    name = "x-log-x"
    message = "x * log(x) is 0 * -inf = NaN where x is 0 (a NaN entropy or loss); torch.xlogy(x, x) gives 0 there"
    fix_applicability = Applicability.SAFE
    triggers = ("log",)
    reads_callers = True

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"log", "exp"}) or None

    confidence_levels = (
        "`high` for `x * log(x)` and for `exp(l) * l` with `l` made by a `log_softmax`, `logsigmoid` or `log`; "
        "`medium` for `exp(l) * l` when only the name of `l` says it is a log."
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        found = match_x_log_x(self.context, node)
        if found is not None:
            if not self._guarded(found):
                self.report(node, fix=None if found.log.extra_args else self._fix(found))
            return
        from_logs = match_exp_times_exponent(self.context, node)
        if from_logs is not None:
            confidence = self._log_probability(from_logs.exponent)
            if confidence is not None:
                fix = None if from_logs.exp.extra_args else self._xlogy_of_exp(from_logs)
                self.report(node, fix=fix, confidence=confidence)

    def _log_probability(self, node: cst.BaseExpression):
        """How sure it is that ``node`` holds log-probabilities (they reach -inf), or None."""
        if isinstance(node, cst.Name):
            definition = reaching_definition(self.context.ancestors, node.value)
            if definition is not None and isinstance(definition.value, cst.Call):
                name, _, _ = call_parts(self.context, definition.value)
                if name in _LOG_PROBABILITY_MAKERS:
                    return Confidence.HIGH
            word = node.value
        elif isinstance(node, cst.Attribute):
            word = node.attr.value
        else:
            return None
        # Nothing shows what the exponent is: a suspect; a name that says log is one level more (a convention).
        return Confidence.MEDIUM if conventions.says("log" in word.lower()) else Confidence.LOW

    def _xlogy_of_exp(self, found: ExpTimesExponent) -> FixSpec:
        """``torch.exp(l) * l`` -> ``torch.xlogy(torch.exp(l), torch.exp(l))``: 0 where ``l`` is -inf."""
        probability = bare(found.exp.call)
        if found.exp.method:
            replacement: cst.BaseExpression = cst.Call(
                func=cst.Attribute(as_receiver(probability), cst.Name("xlogy")), args=[positional(probability)]
            )
            imports = ()
        else:
            func, imports = torch_function(self.context, "xlogy")
            replacement = cst.Call(func=func, args=[positional(probability, comma=True), positional(probability)])
        replacement = in_place_of(found.node, replacement)
        return FixSpec(Applicability.SAFE, "Replace with `torch.xlogy(p, p)` of `p = exp(l)`", (Replacement(found.node, replacement),), imports)

    def _guarded(self, found: XLogX) -> bool:
        """x kept off 0 by its author: ``p = p.clamp(eps)`` earlier, ``if (p > 0).all():`` around (the guard analysis).

        A product inside a ``torch.where`` branch whose condition tests ``x``
        is TL106's finding: xlogy would leave that NaN gradient in place.
        """
        ancestors = self.context.ancestors
        log_op = match_domain_op(self.context, found.log.call)
        if log_op is not None and where_owner(self.context, log_op, list(ancestors) + [found.node]) is not None:
            return True
        if sign_of(self.context, found.x, site_of(ancestors)) is Sign.POSITIVE:
            return True
        return guarded_by_condition(self.context, found.x, ancestors, node=found.log.call)

    def _fix(self, found: XLogX) -> FixSpec:
        from_softmax = self._log_softmax_fix(found)
        if from_softmax is not None:
            return from_softmax
        x = bare(found.x)
        if found.log.method:
            replacement: cst.BaseExpression = cst.Call(func=cst.Attribute(as_receiver(found.x), cst.Name("xlogy")), args=[positional(x)])
            imports = ()
        else:
            func, imports = torch_function(self.context, "xlogy")
            replacement = cst.Call(func=func, args=[positional(x, comma=True), positional(x)])
        if found.negated:
            replacement = cst.UnaryOperation(cst.Minus(), replacement)
        if found.factor is not None:
            replacement = cst.BinaryOperation(found.factor, cst.Multiply(), replacement)
        replacement = in_place_of(found.node, replacement)
        return FixSpec(Applicability.SAFE, "Replace with `torch.xlogy(x, x)`", (Replacement(found.node, replacement),), imports)

    def _log_softmax_fix(self, found: XLogX):
        """``p * torch.log(p)`` with ``p = F.softmax(z, d)`` earlier: ``p * F.log_softmax(z, d)``, finite gradient too."""
        if not isinstance(found.x, cst.Name):
            return None
        activation = activation_of(self.context, found.x, kinds=("softmax",))
        if activation is None or activation.definition is None or activation.definition.value is not activation.call:
            return None
        softmax = activation.softmax
        if not (is_pure(softmax.input) and activation.definition.unchanged_at_use(softmax.node)):
            return None
        if softmax.form == "module" and softmax.node.func is not softmax.constructor:
            return None  # ``self.softmax(z)``: the constructor lives elsewhere; keep to the general fix
        built = log_softmax_call(self.context, softmax)
        if built is None:
            return None
        call, imports = built
        return FixSpec(
            Applicability.SAFE,
            "Replace `log(p)` with the `log_softmax` that `p` came from",
            (Replacement(found.log.call, call),),
            imports,
        )
