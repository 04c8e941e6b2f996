from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from torchlint.analysis.model.calls import positional_args
from torchlint.analysis.values.conditions import condition_implies_positive, condition_implies_zero
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.domain import DIV, DomainOp
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.flow.grad_need import backward_never_reaches
from torchlint.analysis.project.guards import reaches_edge
from torchlint.analysis.project.owners import where_owner
from torchlint.analysis.flow.signs import Sign, sign_of
from torchlint.rule import Applicability, FixSpec, Replacement, Rule
from torchlint.walk_order import visit

# Inside the domain of every op this rule fixes: sqrt(1) = 1, log(1) = 0, 1 ** p = 1, a / 1 = a.
SAFE_VALUE = "1"


class WhereDoesNotGuardGradient(Rule):
    """
    ## What it does
    Flags `torch.where(cond, f(x), other)` where `f` is `sqrt`, `rsqrt`, `log`
    (`log2`, `log10`), a fractional power or a division by a reduction that can
    be 0, and `cond` is the test that is meant to keep `x` off the edge of
    `f`'s domain (`x > 0`, `n != 0`, or the negated form with `f` in the other
    branch: `torch.where(n == 0, 0, s / n)`). Also `f` nested in a branch, as in
    `torch.where(p > 0, p * torch.log(p), 0)`.

    ## Why is this bad?
    `torch.where` evaluates both branches for every element and only selects
    afterwards. The forward pass looks guarded, but the backward pass
    multiplies the gradient of the unselected branch by 0, and `0 * inf` and
    `0 * nan` are NaN: `torch.where(x > 0, torch.sqrt(x), 0)` has a NaN
    gradient at `x = 0` (and at every negative `x`), `torch.where(p > 0,
    p * torch.log(p), 0)` at `p = 0`, `torch.where(n > 0, s / n, 0)` in `s`
    wherever `n = 0`. One NaN gradient makes every weight NaN after the next
    optimizer step.

    ## Example
    ```python
    dist = torch.where(sq > 0, torch.sqrt(sq), torch.zeros_like(sq))
    entropy = -torch.where(p > 0, p * torch.log(p), 0).sum(-1)
    ```

    ## Use instead
    The double `where`: also keep the op's input inside its domain, so that
    the unselected branch is finite too.
    ```python
    dist = torch.where(sq > 0, torch.sqrt(torch.where(sq > 0, sq, 1)), torch.zeros_like(sq))
    entropy = -torch.where(p > 0, p * torch.log(torch.where(p > 0, p, 1)), 0).sum(-1)
    ```

    ## Fix safety
    Numerics: the op's input becomes `torch.where(cond, x, 1)` (or
    `torch.where(cond, 1, x)` when the op is in the `else` branch); the outer
    `where` is kept. Where `cond` selects the op, the input is `x` itself, so
    forward values and gradients there are exactly the original's; elsewhere
    the op sees 1 (`sqrt(1) = 1`, `log(1) = 0`, `a / 1 = a`), whose result the
    outer `where` discards, and the gradient there is 0 instead of NaN.

    Reported without a fix when `cond` mentions the op's input but does not
    show that it keeps the input off the edge in that branch (for example
    `torch.where(x > 0, torch.log(x + 1), 0)`): rewrite it by hand.
    Not reported: code where no backward pass is expected (under
    `torch.no_grad()` / `torch.inference_mode()` or in a function decorated
    with them, `Dataset` methods and `__getitem__`, `Metric` classes and
    `metrics/` / `metrics.py` files: see `analysis/flow/grad_need.py`; also
    initialisation code, optimizer files and helpers that every call in the
    same file runs under `torch.no_grad()`), ops on values autograd never
    differentiates (ratios of counts of comparisons,
    `torch.sum(logits > t).float() / ...`, a nested helper every call of
    which passes constant tensors), and
    inputs the guard analysis shows to be positive already (`x.clamp_min(eps)`,
    `x + eps`, an inner `torch.where(x > 0, x, 1)`).
    """

    code = "TL106"
    name = "where-does-not-guard-gradient"
    message = "torch.where evaluates both branches: this op still gets 0 or negative inputs, and its NaN/Inf gradient leaks through the unselected branch"
    fix_applicability = Applicability.NUMERICS
    triggers = ("where",)
    reads_callers = True

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling({"where"}) or None

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        ancestors = self.context.ancestors
        if not any(isinstance(a, cst.Call) for a in ancestors):
            return
        op = match_domain_op(self.context, node, site_of(list(ancestors) + [node]) if isinstance(node, cst.BinaryOperation) else None)
        if op is None:
            return
        owner = where_owner(self.context, op, ancestors)
        if owner is None or not reaches_edge(self.context, op, ancestors) or backward_never_reaches(self.context, op, ancestors):
            return
        fix = self._fix(op, owner, ancestors)
        self.report(owner, fix=fix)

    def _fix(self, op: DomainOp, owner: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Optional[FixSpec]:
        args = positional_args(owner)
        condition = args[0].value
        branch = _branch_of(owner, ancestors)
        division = op.kind == DIV
        site = site_of(list(ancestors) + [op.node])
        if not division and _tests_not_equal(condition) and sign_of(self.context, op.operand, site) is Sign.UNKNOWN:
            return None  # x != 0 keeps a root's or log's input off 0, not off negative values
        if branch == 1 and condition_implies_positive(self.context, condition, op.operand, division):
            inner = (condition, op.operand, cst.Integer(SAFE_VALUE))
        elif branch == 2 and condition_implies_zero(self.context, condition, op.operand):
            inner = (condition, cst.Integer(SAFE_VALUE), op.operand)
        else:
            return None
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        guarded = cst.Call(
            func=owner.func,
            args=[
                cst.Arg(_without_parens(inner[0]), comma=comma),
                cst.Arg(_without_parens(inner[1]), comma=comma),
                cst.Arg(_without_parens(inner[2])),
            ],
        )
        return FixSpec(
            Applicability.NUMERICS,
            "Keep the op's input in its domain too (the double `where`)",
            (Replacement(op.operand, guarded),),
        )



def _branch_of(owner: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Optional[int]:
    """1 or 2: which of ``owner``'s arguments the visited node is in."""
    ancestors = list(ancestors)
    for position, node in enumerate(ancestors):
        if node is owner and position + 1 < len(ancestors):
            child = ancestors[position + 1]
            args = positional_args(owner)
            for index in (1, 2):
                if child is args[index]:
                    return index
    return None


def _tests_not_equal(condition: cst.BaseExpression) -> bool:
    found = []

    class _Find(cst.CSTVisitor):
        def visit_NotEqual(self, node: cst.NotEqual) -> None:
            found.append(node)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value in ("ne", "not_equal"):
                found.append(node)

    visit(condition, _Find())
    return bool(found)


def _without_parens(node: cst.BaseExpression) -> cst.BaseExpression:
    """Drop redundant parentheses: inside a call argument they are never needed."""
    if getattr(node, "lpar", None) and not isinstance(node, (cst.Tuple, cst.GeneratorExp)):
        return node.with_changes(lpar=[], rpar=[])
    return node
