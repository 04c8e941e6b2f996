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
    entropy = -torch.xlogy(p, p.clamp_min(torch.finfo(p.dtype).tiny)).sum(-1)
    ```

    ## Fix safety
    Safe: the forward values equal the original's wherever x is 0 or a
    normal number (below the dtype's smallest normal, `tiny`, the terms are
    under 1e-36 in float32 and the fix's differ from them by as little) and
    are 0 instead of NaN where x is 0. The gradient is finite everywhere:
    `xlogy(x, x)` alone would give 0 forward but still NaN backward at 0
    (its gradient reads `log` of its second argument, measured in
    tests/test_runtime_fused.py), so the second argument is floored at
    `torch.finfo(x.dtype).tiny`, where the gradient is `log(tiny)` (about
    -87 in float32) instead of NaN. The fix keeps a method form a
    method (`p * p.log()` -> `p.xlogy(p.clamp_min(...))`).

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
    message = "x * log(x) is 0 * -inf = NaN where x is 0 (a NaN entropy or loss); torch.xlogy gives 0 there"
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
        """``torch.exp(l) * l`` -> ``torch.xlogy(p, p.clamp_min(tiny))`` of ``p = torch.exp(l)``: 0 where ``l`` is
        -inf, and a finite gradient there."""
        # exp keeps its input's dtype: the floor reads it from ``l`` (not from a third exp)
        replacement, imports = self._guarded_xlogy(bare(found.exp.call), found.exp.method, dtype_of=found.exponent)
        replacement = in_place_of(found.node, replacement)
        return FixSpec(
            Applicability.SAFE, "Replace with `torch.xlogy(p, p.clamp_min(tiny))` of `p = exp(l)`", (Replacement(found.node, replacement),), imports
        )

    def _guarded_xlogy(self, x: cst.BaseExpression, method: bool, dtype_of: cst.BaseExpression = None):
        """``torch.xlogy(x, x.clamp_min(torch.finfo(x.dtype).tiny))`` (``x.xlogy(...)`` for a method form) and its
        imports: ``x * log(x)`` wherever ``x`` is a normal number, 0 at 0, and a finite gradient there (xlogy's
        gradient at 0 reads the log of its second argument: ``log(tiny)``, where ``log(0)`` gave NaN)."""
        finfo, finfo_imports = torch_function(self.context, "finfo")
        tiny = cst.Attribute(
            cst.Call(func=finfo, args=[positional(cst.Attribute(as_receiver(dtype_of if dtype_of is not None else x), cst.Name("dtype")))]),
            cst.Name("tiny"),
        )
        floored = cst.Call(func=cst.Attribute(as_receiver(x), cst.Name("clamp_min")), args=[positional(tiny)])
        if method:
            return cst.Call(func=cst.Attribute(as_receiver(x), cst.Name("xlogy")), args=[positional(floored)]), finfo_imports
        func, imports = torch_function(self.context, "xlogy")
        return cst.Call(func=func, args=[positional(x, comma=True), positional(floored)]), imports + tuple(
            r for r in finfo_imports if r not in imports
        )

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
        replacement, imports = self._guarded_xlogy(bare(found.x), found.log.method)
        if found.negated:
            replacement = cst.UnaryOperation(cst.Minus(), replacement)
        if found.factor is not None:
            replacement = cst.BinaryOperation(found.factor, cst.Multiply(), replacement)
        replacement = in_place_of(found.node, replacement)
        return FixSpec(Applicability.SAFE, "Replace with `torch.xlogy(x, x.clamp_min(tiny))`", (Replacement(found.node, replacement),), imports)

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
