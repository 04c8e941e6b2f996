from __future__ import annotations

import libcst as cst

from torchlint.analysis.values.fused import (
    as_receiver,
    bare,
    in_place_of,
    is_one,
    match_exp,
    match_log,
    match_sum_of_exp,
    one_plus,
    positional,
    torch_function,
)
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule


class Expm1Log1p(Rule):
    """
    ## What it does
    Flags `torch.exp(x) - 1` (and `x.exp() - 1`, `1 - torch.exp(x)`) and
    `torch.log(1 + x)` (and `torch.log(x + 1)`, `(1 + x).log()`).
    `torch.log(1 + torch.exp(x))` is TL203's: it overflows, a softplus.

    ## Why is this bad?
    Near 0 the subtraction and the addition throw the answer away:
    `1 + x` rounds to exactly 1 for |x| below 6e-8 in float32 (4.9e-4 in
    float16), so `torch.log(1 + x)` is exactly 0 there instead of x, and
    `torch.exp(x) - 1` is 0 (or off by a whole float16 step) instead of x.
    Anything divided by such a value becomes NaN or inf
    (`(torch.exp(x) - 1) / x` at `x = 1e-8` is 0 instead of 1). `torch.log1p`
    and `torch.expm1` are exact near 0 and equal elsewhere.

    ## Example
    ```python
    y = torch.log(1 + distance)
    z = torch.exp(rate * t) - 1
    ```

    ## Use instead
    ```python
    y = torch.log1p(distance)
    z = torch.expm1(rate * t)
    ```

    ## Fix safety
    Safe: the values equal the original's to float rounding and are exact
    where the original lost them. Method forms stay methods
    (`x.exp() - 1` -> `x.expm1()`); `1 - torch.exp(x)` becomes
    `-torch.expm1(x)`. `F.softplus` equals `log(1 + exp(x))` to within 2e-9
    (it returns x itself above x = 20, where the difference is below float32
    resolution). Calls with `out=` are reported without a fix.

    Not detected: `torch.log(x + 1.0 + y)` and other sums of more than two
    terms, `torch.pow(torch.e, x) - 1`, `log2`/`log10`.
    """

    code = "TL205"
    confidence_levels = """
- **high**: the result divides or is divided (`(torch.exp(x) - 1) / x`, `y / torch.log(1 + x)`): a value that
  lost its digits becomes 0, inf or NaN there.
- **low**: anywhere else: the lost digits are below float32's resolution of the sum they join and the gradient
  (`1 / (1 + x)`, `exp(x)`) is exact, so nothing shows unless `x` is tiny and the result is read alone.
"""
    name = "expm1-log1p"
    message = "exp(x) - 1 and log(1 + x) lose every digit for small |x| (1 + x rounds to 1); use torch.expm1 / torch.log1p"
    fix_applicability = Applicability.SAFE
    triggers = ("exp", "log")

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"exp", "log"}) or None

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Subtract):
            return
        if is_one(node.right):
            exp = match_exp(self.context, node.left)
            if exp is not None:
                self.report(node, fix=None if exp.extra_args else self._expm1(node, exp, negate=False), confidence=self._level(node))
        elif is_one(node.left):
            exp = match_exp(self.context, node.right)
            if exp is not None:
                self.report(node, fix=None if exp.extra_args else self._expm1(node, exp, negate=True), confidence=self._level(node))

    def visit_Call(self, node: cst.Call) -> None:
        log = match_log(self.context, node)
        if log is None:
            return
        rest = one_plus(log.operand)
        if rest is None:
            return
        if match_exp(self.context, rest) is not None or match_sum_of_exp(self.context, rest) is not None:
            return  # log(1 + exp(x)), log(1 + sum(exp(x))) overflow: TL203's; their 1 + x loses no digit that shows
        self.report(node, fix=None if log.extra_args else self._log1p(node, rest, log.method), confidence=self._level(node))

    def _level(self, node: cst.CSTNode) -> Confidence:
        """High where the result is a side of a division (through parentheses), low elsewhere."""
        child: cst.CSTNode = node
        for outer in reversed(self.context.ancestors):
            if isinstance(outer, cst.BinaryOperation):
                if isinstance(outer.operator, (cst.Divide, cst.FloorDivide)) and child in (outer.left, outer.right):
                    return Confidence.HIGH
                if not isinstance(outer.operator, (cst.Multiply, cst.Add, cst.Subtract)):
                    return Confidence.LOW
            elif not isinstance(outer, (cst.UnaryOperation,)):
                return Confidence.LOW
            child = outer
        return Confidence.LOW

    def _expm1(self, node: cst.BinaryOperation, exp, negate: bool) -> FixSpec:
        if exp.method:
            call: cst.BaseExpression = cst.Call(func=cst.Attribute(as_receiver(exp.operand), cst.Name("expm1")))
            imports = ()
        else:
            func, imports = torch_function(self.context, "expm1")
            call = cst.Call(func=func, args=[positional(bare(exp.operand))])
        if negate:
            call = cst.UnaryOperation(cst.Minus(), call)
        call = in_place_of(node, call)
        return FixSpec(Applicability.SAFE, "Replace with `expm1`", (Replacement(node, call),), imports)

    def _log1p(self, node: cst.Call, operand: cst.BaseExpression, method: bool) -> FixSpec:
        if method:
            call = cst.Call(func=cst.Attribute(as_receiver(operand), cst.Name("log1p")))
            imports = ()
        else:
            func, imports = torch_function(self.context, "log1p")
            call = cst.Call(func=func, args=[positional(bare(operand))])
        call = call.with_changes(lpar=node.lpar, rpar=node.rpar)
        return FixSpec(Applicability.SAFE, "Replace with `log1p`", (Replacement(node, call),), imports)
