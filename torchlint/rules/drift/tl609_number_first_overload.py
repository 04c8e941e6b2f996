from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import (
    NUMBER_FIRST_OVERLOADS,
    NUMBER_FIRST_TORCH_ONLY,
    NUMBER_FIRST_WARNS_SINCE,
    SCALED_PRODUCT_TORCH_ONLY,
    effective_target,
    version_text,
)
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.calls import add_keyword, has_star_args, without_args
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.kinds import value_kind
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

_METHODS = frozenset(name + suffix for name in NUMBER_FIRST_OVERLOADS for suffix in ("", "_"))
_SCALE_KEYWORDS = ("beta", "alpha")
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def _is_text(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))


class NumberFirstOverload(Rule):
    """
    ## What it does
    Flags the overloads of `add`, `sub`, `addcmul` and `addcdiv` (and their
    in-place forms) that take the scale factor first, as a positional
    number: `x.add_(alpha, other)`, `x.sub(alpha, other)`,
    `x.addcmul_(value, t1, t2)`, `x.addcdiv_(value, t1, t2)`,
    `torch.add(x, alpha, other)`, `torch.addcmul(x, value, t1, t2)`; and
    the overloads of `addmm`, `addmv`, `addr`, `baddbmm` and `addbmm` (and
    their in-place forms) that take `beta`, or `beta` and `alpha`, first:
    `dist.addmm_(1, -2, x, y.t())`, `out.addmm_(0.5, a, b)` (pairwise
    distances in re-identification and metric-learning code).

    For `add` and `sub`, which other objects define too, the receiver must be
    known to be a tensor (a torch call's result, a tensor method's, a
    `forward` argument, a `.grad`), and the number a literal, a name bound to
    one, or a literal combined with one name (`1 - beta1`). The in-place
    `add_`/`sub_` and `addcmul`/`addcdiv` exist only on tensors, and on a
    tensor two (three) positional arguments are the overload or a
    `TypeError`: there any receiver and scale factor not shown to be
    something else (a number, an array) is enough, as in
    `p.data.add_(-group["lr"] * wd, p.data)` of a hand-written optimizer.

    ## Why is this bad?
    These overloads are deprecated since torch 1.5: the first such call of a
    run warns `This overload of add_ is deprecated: add_(Number alpha, Tensor
    other)` (torch warns once per process), in every old optimizer written
    this way (`exp_avg.mul_(beta1).add_(1 - beta1, grad)`). The scale factor is a keyword in
    the supported signature (`alpha=` for `add`/`sub`, `value=` for
    `addcmul`/`addcdiv`); torch implements the old overload by calling it.

    ## Example
    ```python
    dist.addmm_(1, -2, x, y.t())
    exp_avg.add_(1 - beta1, grad)
    exp_avg_sq.addcmul_(1 - beta2, grad, grad)
    param.addcdiv_(-0.5, exp_avg, denom)
    ```

    ## Use instead
    ```python
    dist.addmm_(x, y.t(), beta=1, alpha=-2)
    exp_avg.add_(grad, alpha=1 - beta1)
    exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)
    param.addcdiv_(exp_avg, denom, value=-0.5)
    ```

    ## Fix safety
    Safe: the number moves to the keyword the supported overload takes
    (`alpha=` or `value=`) and the tensors keep their order; torch computes
    the deprecated overload with exactly that call, so the values are the
    same bit for bit. Not flagged for `target-torch-version` below 1.5, where
    the overload did not warn, nor for a call that also passes keywords or
    `*args` (its overload cannot be read from the text).
    """

    code = "TL609"
    name = "number-first-overload"
    message = "deprecated overload that takes the scale factor first: torch warns of it and keeps it only for old code; pass it as `alpha=`/`value=`"
    fix_applicability = Applicability.SAFE
    triggers = tuple(sorted(_METHODS | SCALED_PRODUCT_TORCH_ONLY))

    @classmethod
    def prepass(cls, scan):
        """Regions calling one of the methods with the overload's count of positional arguments and no
        keyword (``x.add_(a, b)``, ``torch.addcmul(x, v, a, b)``): ``seen.add(k)`` needs no LibCST."""

        def overload_shaped(region) -> bool:
            for node in region.nodes:
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.keywords:
                    continue
                method = node.func.attr
                if method in _METHODS and len(node.args) - NUMBER_FIRST_OVERLOADS[method.rstrip("_")][1] in (1, 2):
                    return True
                if method in SCALED_PRODUCT_TORCH_ONLY and len(node.args) in (3, 4):
                    return True
            return False

        called = scan.regions_calling(_METHODS | SCALED_PRODUCT_TORCH_ONLY)
        return frozenset(i for i in called if overload_shaped(scan.regions[i])) or None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _METHODS | SCALED_PRODUCT_TORCH_ONLY:
            return
        if has_star_args(node) or any(arg.keyword is not None for arg in node.args):
            return
        method = func.attr.value
        if method in SCALED_PRODUCT_TORCH_ONLY:
            self._scaled_product(node, method)
            return
        keyword, tensors = NUMBER_FIRST_OVERLOADS[method.rstrip("_")]
        qualified = self.context.qualified_name(func)
        if qualified is None:
            position = 0  # x.add_(alpha, other): the receiver is the input
        elif qualified == f"torch.{method}" and not method.endswith("_"):
            position = 1  # torch.add(x, alpha, other)
        else:
            return
        if len(node.args) != position + 1 + tensors:
            return
        site = site_of(self.context.ancestors)
        if position == 0 and method in NUMBER_FIRST_TORCH_ONLY and value_kind(self.context, func.value, site) in ("tensor", "unknown"):
            # Only a tensor has the method: with this many positional arguments the call is the overload (or a
            # TypeError), so any scale factor not shown to be a tensor or an array is the overload's number.
            if value_kind(self.context, node.args[0].value, site) not in ("number", "unknown"):
                return
            if any(value_kind(self.context, arg.value, site) not in ("tensor", "unknown") or _is_text(arg.value)
                   for arg in node.args[1:]):
                return  # the overload's other arguments are tensors
        elif not self._is_number(node.args[position].value) or (position == 0 and not self._is_tensor(func.value)):
            return
        if any(value_kind(self.context, arg.value, site) == "number" for arg in node.args[position + 1:]):
            return  # x.add(2, 3) is no overload of these
        if effective_target(self.context.settings.target_torch_version) < NUMBER_FIRST_WARNS_SINCE or is_version_guarded(self.context):
            return
        shown = f"torch.{method}" if position else f"Tensor.{method}"
        self.report(
            node,
            f"`{shown}` with the scale factor first is a deprecated overload (since torch "
            f"{version_text(NUMBER_FIRST_WARNS_SINCE)}): torch warns of it and keeps it only for old code; pass it as `{keyword}=`",
            self._fix(node, position, keyword),
        )

    def _scaled_product(self, node: cst.Call, method: str) -> None:
        """``x.addmm_(beta, alpha, a, b)`` or ``x.addmm_(beta, a, b)``: the supported method takes two positional
        tensors, so three or four are the overload (or a TypeError) on whatever receiver has the method."""
        func = node.func
        if self.context.qualified_name(func) is not None or len(node.args) not in (3, 4):
            return
        site = site_of(self.context.ancestors)
        if value_kind(self.context, func.value, site) not in ("tensor", "unknown"):
            return
        scales, tensors = node.args[:-2], node.args[-2:]
        if any(value_kind(self.context, arg.value, site) not in ("number", "unknown") or _is_text(arg.value) for arg in scales):
            return
        if any(value_kind(self.context, arg.value, site) not in ("tensor", "unknown") or _is_text(arg.value) for arg in tensors):
            return
        if effective_target(self.context.settings.target_torch_version) < NUMBER_FIRST_WARNS_SINCE or is_version_guarded(self.context):
            return
        keywords = _SCALE_KEYWORDS[: len(scales)]
        shown = " and ".join(f"`{k}`" for k in keywords)
        call = without_args(node, list(scales))
        for keyword, arg in zip(keywords, scales):
            call = add_keyword(call, keyword, arg.value)
        self.report(
            node,
            f"`Tensor.{method}` with {shown} first is a deprecated overload (since torch "
            f"{version_text(NUMBER_FIRST_WARNS_SINCE)}): torch warns of it and keeps it only for old code; pass "
            + " and ".join(f"`{k}=`" for k in keywords),
            FixSpec(Applicability.SAFE, "Pass " + " and ".join(f"`{k}=`" for k in keywords), (Replacement(node, call),)),
        )

    def _is_tensor(self, node: cst.BaseExpression) -> bool:
        return value_kind(self.context, node, site_of(self.context.ancestors)) == "tensor"

    def _is_number(self, node: cst.BaseExpression) -> bool:
        """A number literal (``0.9``, ``-1``), a name bound to one, or a literal and one other operand that is
        not known to be a tensor or an array (``1 - beta1``, ``-(1 - beta1)``)."""
        site = site_of(self.context.ancestors)
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            return self._is_number(node.expression)
        if value_kind(self.context, node, site) == "number":
            return True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _ARITHMETIC):
            sides = (node.left, node.right)
            kinds = [value_kind(self.context, side, site) for side in sides]
            literal = any(isinstance(side, (cst.Integer, cst.Float)) for side in sides)
            return literal and all(kind in ("number", "unknown") for kind in kinds) and all(
                isinstance(side, (cst.Integer, cst.Float, cst.Name)) for side in sides
            )
        return False

    @staticmethod
    def _fix(node: cst.Call, position: int, keyword: str) -> Optional[FixSpec]:
        number = node.args[position]
        call = add_keyword(without_args(node, [number]), keyword, number.value)
        return FixSpec(Applicability.SAFE, f"Pass the scale factor as `{keyword}=`", (Replacement(node, call),))
