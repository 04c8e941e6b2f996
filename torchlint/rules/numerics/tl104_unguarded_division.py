from __future__ import annotations

import ast

from typing import Optional

import libcst as cst

from torchlint.analysis.values.domain import DIV, DIV_FUNCTIONS, DomainOp, call_names, constant_value, may_be_divisor
from torchlint.analysis.flow.grad_need import gradient_regions
from torchlint.analysis.flow import signs
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.fixes import clamp_operand_fix, eps_text, functional_reference, operand_is_tensor
from torchlint.rule import Applicability, FixSpec, Replacement
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedDivision(UnguardedOpRule):
    """
    ## What it does
    Flags a division by a tensor reduction that can be 0: `a / d`, `a /= d`,
    `torch.div(a, d)`, `a.div(d)` where `d` (through reshapes such as
    `[:, None]`, `unsqueeze`, `expand`, `view`, and through a local name) is

    - a count: `mask.sum()`, `(labels != ignore).sum()`, `torch.count_nonzero(m)`;
    - a magnitude: a norm, `std`, `var`, a sum of squares, absolute values or
      ReLU outputs, `max - min`, or a product of these, in particular the
      hand-written `x / x.norm(dim=d, keepdim=True)` and cosine
      `(a * b).sum(d) / (a.norm(dim=d) * b.norm(dim=d))`;
    - the sum of the weights of a weighted mean: `mm(w, x) / w.sum(1)`,
      `(w * x).sum(d) / w.sum(d)`;
    - a sum of values of unknown sign (`medium` or `low`: it can cancel to 0).

    A divisor is guarded when the sign domain proves it positive
    (`+ eps`, `clamp_min(1)`, `exp`, a softmax, a count of a padding mask
    such as `attention_mask.sum(1)`: every sequence has a token) or a test
    keeps it off zero (`if mask.any():`, `if n > 0:`, an earlier
    `if n == 0: return`, `0 if d == 0 else x / d`).

    ## Why is this bad?
    An all-padding batch, an empty mask or a zero feature vector makes the
    divisor exactly 0: `0 / 0` is NaN and `x / 0` is `inf` in the forward
    pass, and the gradient of `a / d` contains `1 / d` and `a / d**2`, so the
    backward pass is NaN too. One such batch puts NaN into every weight at the
    next optimizer step.

    ## Example
    ```python
    mean = (loss * mask).sum() / mask.sum()
    unit = x / x.norm(dim=-1, keepdim=True)
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    z = (x - x.mean(0)) / x.std(0)
    ```

    ## Use instead
    ```python
    mean = (loss * mask).sum() / mask.sum().clamp_min(1)
    unit = F.normalize(x, dim=-1, eps=1e-6)
    cos = F.cosine_similarity(a, b, dim=-1, eps=1e-6)
    z = (x - x.mean(0)) / x.std(0).clamp_min(1e-6)
    ```

    ## Fix safety
    Numerics. Counts are clamped to 1 (an empty mask then gives 0 instead of
    NaN; any non-empty count is unchanged). Norms, standard deviations,
    variances, sums of squares and weights are clamped to eps from
    `[tool.torchlint] eps` (default 1e-6). `x / x.norm(dim=d, keepdim=True)`
    becomes `F.normalize(x, dim=d, eps=...)` (same values: it divides by the
    same norm, clamped) and the manual cosine becomes
    `F.cosine_similarity(a, b, dim=d, eps=...)`, which agrees with the manual
    formula to rounding. The eps is passed explicitly because the functions'
    own defaults (1e-12, 1e-8) round to 0 in float16. A sum of unknown sign has
    no automatic fix: a clamp would turn a negative divisor positive. Nor has a
    root of a magnitude written out (`x.pow(2).sum(1).pow(1 / 2)`,
    `torch.sqrt((d ** 2).sum(-1))`): a clamp after the root keeps the root's
    infinite gradient at 0, and the root's own finding (TL101, TL103) clamps
    its base, which guards the division too. In
    float16 the gradient of `x / max(|x|, eps)` at `x = 0` is `1 / eps`, which
    overflows for eps below about 2e-5: set `eps = 1e-4` for code that divides
    by norms in float16.

    Where it looks, and what is never reported: as for TL101 (`torchlint rule
    TL101`). Silence one line with `# noqa: TL104`.
    """

    code = "TL104"
    name = "unguarded-division"
    message = "division by a reduction that can be 0 (empty mask, zero vector, constant feature): NaN/inf; clamp the divisor"
    fix_applicability = Applicability.NUMERICS
    triggers = ("/", "div")

    confidence_levels = (
        "`high`: the divisor reaches 0 in ordinary training (a sum of ReLU outputs, a clamp at 0, a "
        "constant 0); `medium`: it reaches 0 only on degenerate data (a count of an empty mask, a norm or "
        "sum of squares of a zero vector, std/var or `max - min` of a constant feature, weights that are all "
        "0), or a sum of unknown sign where gradients flow (a `forward`, a loss, a scope that calls "
        "`backward()`); `low`: elsewhere. What the data holds is not in the code: `torchlint trace` shows "
        "whether a run meets the edge."
    )

    op_kinds = frozenset({DIV})
    callee_names = call_names(DIV_FUNCTIONS)
    operators = (ast.Div,)
    needs_site = True

    @classmethod
    def prepass(cls, scan):
        # A ``/`` is kept only when its divisor may be a reduction (analysis/domain.may_be_divisor): most
        # divisions of a library divide by a parameter, a constant or a size, never a candidate.
        def divides_by_reduction(region) -> bool:
            assigned = region.assigned if isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            return any(may_be_divisor(divisor, assigned, scan.callee_names) for divisor in region.divisors)

        regions = scan.regions_calling_tensor_ops(cls.callee_names) | scan.regions_where(divides_by_reduction)
        return gradient_regions(scan, regions) or None

    def fix(self, node: cst.CSTNode, op: DomainOp) -> Optional[FixSpec]:
        divisor = op.divisor
        if divisor.kind in ("sum", "difference"):
            return None  # a value of unknown sign: a clamp would turn a negative divisor positive
        if divisor.kind == "root":
            return None  # a clamp after the root keeps its infinite gradient at 0 (times the clamp's 0: NaN)
        eps = eps_text(self.context)
        if not operand_is_tensor(self.context, op):
            return None  # F.normalize, F.cosine_similarity and clamp_min take tensors only
        if divisor.kind == "normalize" and isinstance(op.node, cst.BinaryOperation):
            return self._normalize_fix(op, eps)
        if divisor.kind == "cosine" and isinstance(op.node, cst.BinaryOperation):
            return self._cosine_fix(op, eps)
        if signs.reaches_edge_only_by_rounding(self.context, op.operand, site_of(self.context.ancestors)):
            return None  # a clamp would flatten legitimate small probabilities
        minimum = "1" if divisor.kind == "count" else eps
        what = "Clamp the count to 1" if divisor.kind == "count" else "Clamp the divisor to eps"
        return clamp_operand_fix(self.context, op, minimum, what)

    def _normalize_fix(self, op: DomainOp, eps: str) -> Optional[FixSpec]:
        divisor = op.divisor
        order = divisor.norm_order
        if order is not None and constant_value(order) is None:
            return None
        reference, imports = functional_reference(self.context)
        tensor = self.context.code(divisor.normalized)
        dim = self.context.code(divisor.dim)
        order_text = "" if order is None or constant_value(order) == 2 else f"p={self.context.code(order)}, "
        text = f"{reference}.normalize({tensor}, {order_text}dim={dim}, eps={eps})"
        return self._replace(op, text, imports, "Use F.normalize")

    def _cosine_fix(self, op: DomainOp, eps: str) -> Optional[FixSpec]:
        first, second = op.divisor.cosine_operands
        reference, imports = functional_reference(self.context)
        text = (
            f"{reference}.cosine_similarity({self.context.code(first)}, {self.context.code(second)}, "
            f"dim={self.context.code(op.divisor.dim)}, eps={eps})"
        )
        return self._replace(op, text, imports, "Use F.cosine_similarity")

    def _replace(self, op: DomainOp, text: str, imports, message: str) -> FixSpec:
        new = cst.parse_expression(text).with_changes(lpar=op.node.lpar, rpar=op.node.rpar)
        return FixSpec(Applicability.NUMERICS, message, (Replacement(op.node, new),), imports)
