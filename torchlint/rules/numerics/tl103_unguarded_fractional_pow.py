from __future__ import annotations

import ast

from torchlint.analysis.domain import POW, POW_FUNCTIONS, call_names
from torchlint.rule import Applicability
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedFractionalPow(UnguardedOpRule):
    """
    ## What it does
    Flags a fractional power with an exponent in (0, 1) of a tensor that is
    not provably positive: `torch.pow(x, p)`, `x.pow(p)`, `x ** p` where `p`
    is a literal such as `0.25` or `1 / 3`, or a reciprocal of unknown order
    such as `1 / p` or `1. / self.p` (generalised-mean pooling). Square roots
    (`** 0.5`) are TL101's.

    A base counts as guarded (see `torchlint/analysis/guards.py`) when it
    adds a positive literal or an eps-like name, is clamped to a positive
    minimum (`x.clamp(min=eps).pow(p)`), is an average pool or mean of such a
    value, an `exp`, a positive constant, or a name bound earlier in the
    function to one of these.

    ## Why is this bad?
    The derivative of `x ** p` is `p * x ** (p - 1)`; for `p < 1` that is
    `inf` at `x = 0`, and a negative base gives NaN already in the forward
    pass. Generalised-mean pooling written as
    `F.avg_pool2d(x.pow(p), k).pow(1. / p)` meets 0 at the first all-zero
    feature map: a learnable `p` gets a NaN gradient there
    (`x ** (1/p) * log(x)` at 0) and is NaN after one step, and so does `x`
    unless a ReLU right before masks it. `clamp(min=0)` does not help: it
    passes 0 through with the root's infinite derivative. A ReLU does help the
    base: its backward zeroes the gradient wherever its output is 0, so
    `F.relu(x).pow(3)` pooled and rooted with a constant exponent is not
    reported (measured in `tests/test_runtime_numerics.py`). Nor is an
    attention average of positive values (`softmax(scores) @ v` or
    `F.scaled_dot_product_attention(q, k, v)` without dropout, `v` shifted
    above 0): its rows are weighted averages.

    ## Example
    ```python
    pooled = F.avg_pool2d(x.pow(p), (h, w)).pow(1.0 / p)
    cbrt = torch.pow(volume, 1 / 3)
    ```

    ## Use instead
    ```python
    pooled = F.avg_pool2d(x.clamp(min=eps).pow(p), (h, w)).pow(1.0 / p)
    cbrt = torch.pow(volume.clamp_min(1e-6), 1 / 3)
    ```

    ## Fix safety
    Numerics: the base is clamped, `x ** p` becomes `x.clamp_min(eps) ** p`
    with eps from `[tool.torchlint] eps` (default 1e-6, which float16 still
    represents; 1e-8 would round to 0 there). Values at or above eps are
    computed exactly as before; below it the result is `eps ** p` instead of
    0 or NaN and the gradient is 0. The gradient just above eps is
    `p * eps ** (p - 1)`: finite in float32 and bfloat16, but in float16 it
    overflows for very small roots (`p <= 0.2` with eps = 1e-6); raise eps
    for such code.

    Like TL101, reported only in differentiated code (a `forward`, a loss
    function or class, a `losses` module), never in code autograd cannot
    differentiate (`no_grad`, initialisation, optimizer files, constants,
    random draws) unless the base is written as a difference.

    Schedules, visualisation, helpers called only under `torch.no_grad()`
    and parameters judged by what the same file's calls pass: as for TL101
    (`torchlint rule TL101`).

    Not detected: exponents held in variables other than `1 / p` (the linter
    cannot see that `x ** p` has `p < 1`), and integer or negative exponents,
    which have no infinite derivative at 0 of this kind.
    """

    code = "TL103"
    name = "unguarded-fractional-pow"
    message = "fractional power of a value that can be 0 or negative: infinite/NaN gradient; clamp the base"
    fix_applicability = Applicability.NUMERICS
    triggers = ("pow", "**")

    op_kinds = frozenset({POW})
    callee_names = call_names(POW_FUNCTIONS)
    operators = (ast.Pow,)
    fix_message = "Clamp the base to eps"
    needs_site = True  # an exponent held in a name is followed to its binding (``p: int = 3`` has no root)
