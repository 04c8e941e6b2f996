from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchlint.analysis.values.fused import (
    SumOfExp,
    as_receiver,
    bare,
    functional,
    match_exp,
    one_plus,
    is_max_shifted,
    is_pure,
    keyword,
    match_log,
    match_log1p,
    match_sum_of_exp,
    positional,
    torch_function,
)
from torchlint.analysis.model.ops import strip_eps
from torchlint.rule import Applicability, FixSpec, Replacement, Rule


ONE_PLUS_SUM_MESSAGE = (
    "log(1 + sum(exp(x))) overflows to inf (NaN gradient) once x exceeds ~88 in float32 or ~11 in float16; "
    "use torch.logsumexp over x with a 0 appended"
)
TWO_TERMS_MESSAGE = (
    "log(exp(a) + exp(b)) overflows to inf (NaN gradient) once a term exceeds ~88 in float32, and is -inf (with an "
    "eps, flat at log(eps) with no gradient) once both fall below ~-103; use torch.logaddexp"
)
SOFTPLUS_MESSAGE = "log(1 + exp(x)) overflows to inf (NaN gradient) once x exceeds ~88 in float32 or ~11 in float16; use F.softplus"


class LogSumExp(Rule):
    """
    ## What it does
    Flags a log-sum-exp written out: `torch.log(torch.sum(torch.exp(x), d))`,
    `torch.log(torch.exp(x).sum(d))`, `x.exp().sum(-1).log()`, with or without
    an `eps` added inside the log, also when the exponentials or their sum
    were stored in a local name a few lines earlier
    (`e = torch.exp(scores)` ... `torch.log(e.sum(1))`); and its two-term
    case, the softplus written out: `torch.log(1 + torch.exp(x))`.

    ## Why is this bad?
    `exp` overflows to `inf` for inputs above about 88.7 in float32 (11.1 in
    float16), so the result is `inf` and the gradient NaN; for inputs all
    below about -103 in float32 every exponential underflows to 0 and the
    result is `-inf`. Scores, energies and logits reach those ranges in
    ordinary training (a temperature of 0.05 turns a cosine of 5 into 100).
    An `eps` inside the log guards only the underflow. `torch.logsumexp`
    subtracts the maximum first and is finite for every finite input.

    `log(1 + exp(x))` is `log(exp(0) + exp(x))`: it overflows the same way
    (`inf` for x above 88.7, where the answer is simply x), which `log1p`
    does not cure; `F.softplus(x)` is finite everywhere. Also flagged in
    the spellings `torch.log1p(torch.exp(x))` and `x.exp().add(1).log()`,
    and with a sum of exponentials after the `1 +`:
    `torch.log(1 + torch.exp(x).sum(1))` overflows the same way.

    ## Example
    ```python
    lse = torch.log(torch.sum(torch.exp(scores), dim=1))
    lse = scores.exp().sum(-1, keepdim=True).log()
    soft = torch.log(1 + torch.exp(margin))
    ```

    ## Use instead
    ```python
    lse = torch.logsumexp(scores, dim=1)
    lse = scores.logsumexp(-1, keepdim=True)
    soft = F.softplus(margin)
    ```

    ## Fix safety
    Safe: the values equal the original's wherever it is finite (to float
    rounding) and are finite where it was not. `dim` and `keepdim` are kept
    as written; a sum over every element (no `dim`) becomes
    `torch.logsumexp(torch.flatten(x), 0)`. With an `eps` inside the log the
    values differ by about `eps / sum(exp(x))`. No fix is offered when the
    sum has a `dtype` (logsumexp has no such parameter), when the log or exp
    has an `out=`, or when a stored exponent is not a plain expression that
    is unchanged at the log.

    `log(1 + sum(exp(x)))` has no fix: it is `logsumexp` over `x` with a 0
    term appended (`torch.logsumexp(F.pad(x, (1, 0)), dim=-1)` for the last
    dimension), a rewrite that depends on the layout.

    The max-shifted form `m + torch.log(torch.exp(x - m).sum(d))` with `m`
    a `max`/`amax` of `x` is stable and not flagged. Not detected:
    `log2`/`log10`, `torch.exp(x).sum(d).log()` through attributes.

    Two terms written out, `torch.log(torch.exp(a) + torch.exp(b))` (with or
    without an `eps`), are flagged too and become `torch.logaddexp(a, b)`:
    a mixture of two Gaussians' energy, `log(exp(-d1) + exp(-d2) + 1e-10)`,
    underflows in its tails to the floor `log(1e-10)`, where its gradient is
    0; `logaddexp` keeps both the value and the gradient.
    """

    code = "TL203"
    name = "log-sum-exp"
    message = "log(sum(exp(x))) overflows to inf (NaN gradient) once x exceeds ~88 in float32 or ~11 in float16; use torch.logsumexp"
    fix_applicability = Applicability.SAFE
    triggers = ("exp",)

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"log", "log1p"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        log1p = match_log1p(self.context, node)
        log = log1p or match_log(self.context, node)
        if log is None:
            return
        # log1p(s) is log(1 + s): the same overflow once s is exp(x) or a sum of them.
        rest = log.operand if log1p is not None else one_plus(log.operand)
        exp = match_exp(self.context, rest) if rest is not None else None
        if exp is not None:
            plain = not (log.extra_args or exp.extra_args)
            self.report(node, SOFTPLUS_MESSAGE, fix=self._softplus(node, exp.operand) if plain else None)
            return
        if rest is not None:
            found = match_sum_of_exp(self.context, rest)
            if found is not None and not is_max_shifted(self.context, found.exp.operand):
                # log(1 + sum(exp(x))) is a log-sum-exp with a 0 among the terms: no one-call spelling.
                self.report(node, ONE_PLUS_SUM_MESSAGE)
            return
        if log1p is not None:
            return
        summed = strip_eps(log.operand, self.context)
        found = match_sum_of_exp(self.context, summed)
        if found is None:
            self._two_terms(node, log, summed)
            return
        if is_max_shifted(self.context, found.exp.operand):
            return  # exp(x - max) is already the stable form
        fix = None if log.extra_args or found.exp.extra_args or found.sum.other_args else self._fix(node, found)
        self.report(node, fix=fix)

    def _two_terms(self, node: cst.Call, log, summed: cst.BaseExpression) -> None:
        """``log(exp(a) + exp(b))``: a log-sum-exp of two terms, which ``torch.logaddexp`` computes stably."""
        if not (isinstance(summed, cst.BinaryOperation) and isinstance(summed.operator, cst.Add)):
            return
        first, second = match_exp(self.context, summed.left), match_exp(self.context, summed.right)
        if first is None or second is None:
            return
        fix = None
        if not (log.extra_args or first.extra_args or second.extra_args):
            func, imports = torch_function(self.context, "logaddexp")
            call = cst.Call(
                func=func,
                args=[positional(bare(first.operand), comma=True), positional(bare(second.operand))],
                lpar=node.lpar,
                rpar=node.rpar,
            )
            fix = FixSpec(Applicability.SAFE, "Replace with `torch.logaddexp`", (Replacement(node, call),), imports)
        self.report(node, TWO_TERMS_MESSAGE, fix=fix)

    def _softplus(self, node: cst.Call, exponent: cst.BaseExpression) -> FixSpec:
        func, imports = functional(self.context, "softplus")
        call = cst.Call(func=func, args=[positional(bare(exponent))], lpar=node.lpar, rpar=node.rpar)
        return FixSpec(Applicability.SAFE, "Replace with `F.softplus`", (Replacement(node, call),), imports)

    def _fix(self, log_call: cst.Call, found: SumOfExp) -> Optional[FixSpec]:
        exponent = found.exp.operand
        if found.definitions and not (is_pure(exponent) and all(d.unchanged_at_use(exponent) for d in found.definitions)):
            return None
        dim, keepdim = found.sum.dim, found.sum.keepdim
        imports = ()
        if dim is None:
            if keepdim is not None:
                return None
            flatten, imports = torch_function(self.context, "flatten")
            exponent = cst.Call(func=flatten, args=[positional(exponent)])
            args: List[cst.Arg] = [positional(cst.Integer("0"))]
        else:
            given = dim.value
            args = [keyword("dim", given, comma=keepdim is not None) if dim.keyword is not None else positional(given, comma=keepdim is not None)]
            if keepdim is not None:
                args.append(keyword("keepdim", keepdim.value))
        if found.exp.method:
            call = cst.Call(func=cst.Attribute(as_receiver(exponent), cst.Name("logsumexp")), args=args)
        else:
            func, more = torch_function(self.context, "logsumexp")
            imports = tuple(dict.fromkeys(imports + more))
            call = cst.Call(func=func, args=[positional(exponent, comma=True)] + args)
        call = call.with_changes(lpar=log_call.lpar, rpar=log_call.rpar)
        return FixSpec(Applicability.SAFE, "Replace with `logsumexp`", (Replacement(log_call, call),), imports)
