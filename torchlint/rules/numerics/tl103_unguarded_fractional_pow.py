from __future__ import annotations

import ast

from torchlint.analysis.values.domain import POW, POW_FUNCTIONS, call_names, may_be_fractional_exponent
from torchlint.analysis.flow.grad_need import gradient_regions
from torchlint.rule import Applicability
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedFractionalPow(UnguardedOpRule):
    """
    ## What it does
    Flags a fractional power of a tensor that can reach 0 or go below it:
    `torch.pow(x, p)`, `x.pow(p)`, `x ** p` where `p` is a literal in (0, 1)
    (`0.5`, `0.25`, `1 / 3`: a root spelled as a power is reported here), a
    reciprocal `1 / p` (generalised-mean pooling), or an exponent held in a
    name, attribute or tensor (`gamma`, `self.p`), which may be below 1. An
    exponent known to be an integer (`p: int = 3`) is no root.

    The base is judged as TL101's operand is (`torchlint rule TL101`), and a
    probability counts as zero-capable here: `probs ** gamma` of a focal loss
    meets an exact 0 once a logit passes -17 in float16.

    ## Why is this bad?
    The derivative of `x ** p` is `p * x ** (p - 1)`; for `p < 1` that is
    `inf` at `x = 0`, and a negative base gives NaN already in the forward
    pass. A learnable exponent gets a NaN gradient of its own there
    (`x ** p * log(x)` at 0). Generalised-mean pooling written as
    `F.avg_pool2d(x.pow(p), k).pow(1. / p)` meets 0 at the first all-zero
    feature map; a focal loss `(1 - p) ** gamma` with `gamma < 1` is NaN as
    soon as a prediction is exactly right. A ReLU right before the base helps
    when the exponent is a number (its backward zeroes the gradient where its
    output is 0); `clamp(min=0)` does not.

    ## Example
    ```python
    pooled = F.avg_pool2d(x.pow(p), (h, w)).pow(1.0 / p)
    rms = (x ** 2).mean(-1) ** 0.5
    ```

    ## Use instead
    ```python
    pooled = F.avg_pool2d(x.clamp(min=eps).pow(p), (h, w)).pow(1.0 / p)
    rms = (x ** 2).mean(-1).clamp_min(1e-6) ** 0.5
    ```

    ## Fix safety
    Numerics: the base is clamped, `x ** p` becomes `x.clamp_min(eps) ** p`
    with eps from `[tool.torchlint] eps` (default 1e-6). Values at or above
    eps are computed exactly as before; below it the result is `eps ** p`
    instead of 0 or NaN and the gradient is 0. The gradient just above eps is
    `p * eps ** (p - 1)`: finite in float32 and bfloat16, but in float16 it
    overflows for very small roots (`p <= 0.2` with eps = 1e-6); raise eps for
    such code.

    Where it looks, and what is never reported: as for TL101. Silence one line
    with `# noqa: TL103`.
    """

    code = "TL103"
    name = "unguarded-fractional-pow"
    message = "fractional power of a value that can be 0 or negative: infinite/NaN gradient; clamp the base"
    fix_applicability = Applicability.NUMERICS
    triggers = ("pow", "**")

    confidence_levels = (
        "`high`: a known fraction (`0.5`, `1 / p`) of a base that reaches 0 in ordinary training (a "
        "probability that saturates, a clamp at 0), where gradients flow (or a negative constant anywhere); "
        "`medium`: a base that reaches 0 only on degenerate data (a norm or sum of squares of a zero vector, "
        "a difference whose terms cancel), a `high` base where no gradient is shown, an exponent held in a "
        "name (`x ** gamma`: a hazard only if gamma < 1) over such a base where gradients flow, or a base of "
        "unknown sign where gradients flow; `low`: the rest, an unknown exponent of an unknown base included."
    )

    op_kinds = frozenset({POW})
    callee_names = call_names(POW_FUNCTIONS)
    operators = (ast.Pow,)
    fix_message = "Clamp the base to eps"
    needs_site = True

    @classmethod
    def prepass(cls, scan):
        # ``x ** 2`` is everywhere and never a root: only a power whose exponent may lie in (0, 1) is kept.
        powers = scan.regions_where(lambda region: any(may_be_fractional_exponent(e) for e in region.exponents))
        return gradient_regions(scan, scan.regions_calling_tensor_ops(cls.callee_names) | powers) or None  # an exponent held in a name is followed to its binding (``p: int = 3`` has no root)
