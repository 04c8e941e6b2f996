from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchlint.analysis.calls import argument, positional_args
from torchlint.analysis.ops import SoftmaxCall, match_softmax, match_unary, strip_clamp_min, strip_eps
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

LOG_FUNCTIONS = frozenset({"torch.log"})


class LogOfSoftmax(Rule):
    """
    ## What it does
    Flags the logarithm of a softmax: `torch.log(torch.softmax(x, d))`,
    `F.softmax(x, d).log()`, `torch.log(nn.Softmax(d)(x))` (also through a
    `self.softmax = nn.Softmax(d)` attribute), with or without an `eps` added
    or clamped in between.

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

    def visit_Call(self, node: cst.Call) -> None:
        log = match_unary(self.context, node, LOG_FUNCTIONS, "log")
        if log is None:
            return
        softmax = match_softmax(self.context, strip_clamp_min(self.context, strip_eps(log.operand)))
        if softmax is None or softmax.input is None:
            return
        fix = None if log.extra_args else self._fix(node, softmax)
        self.report(node, fix=fix)

    def _fix(self, log_call: cst.Call, softmax: SoftmaxCall) -> Optional[FixSpec]:
        replacement = self._log_softmax_call(softmax)
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

    def _log_softmax_call(self, softmax: SoftmaxCall):
        node = softmax.node
        if softmax.form == "method":
            func = node.func.with_changes(attr=cst.Name("log_softmax"))
            return cst.Call(func=func, args=node.args), ()
        if softmax.form == "function" and softmax.qualified in ("torch.nn.functional.softmax", "torch.special.softmax"):
            # Same signature as the log_softmax beside it: keep every argument as written.
            if isinstance(node.func, cst.Attribute):
                return node.with_changes(func=node.func.with_changes(attr=cst.Name("log_softmax"))), ()
            module = softmax.qualified.rsplit(".", 1)[0]
            reference, requirement = self.context.reference(module, "F")
            func = cst.parse_expression(f"{reference}.log_softmax")
            return node.with_changes(func=func), tuple(r for r in (requirement,) if r)
        reference, requirement = self.context.reference("torch.nn.functional", "F")
        func = cst.parse_expression(f"{reference}.log_softmax")
        imports = tuple(r for r in (requirement,) if r)
        if softmax.form == "function":  # torch.softmax(input, dim, dtype=None): dtype may be positional
            args: List[cst.Arg] = list(node.args)
            positional = positional_args(node)
            if len(positional) >= 3:
                dtype = positional[2]
                index = args.index(dtype)
                args[index] = dtype.with_changes(
                    keyword=cst.Name("dtype"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                )
                if len(positional) > 3:
                    return None
            return cst.Call(func=func, args=args), imports
        # Module form: nn.Softmax(dim)(x) -> F.log_softmax(x, dim=dim)
        args = [cst.Arg(softmax.input)]
        dim = argument(softmax.constructor, 0, "dim")
        if dim is not None:
            args = [
                cst.Arg(softmax.input, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(
                    dim.value,
                    keyword=cst.Name("dim"),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                ),
            ]
        return cst.Call(func=func, args=args), imports

