from __future__ import annotations

from torchlint.analysis.values.domain import RSQRT, RSQRT_FUNCTIONS, SQRT, SQRT_FUNCTIONS, call_names
from torchlint.rule import Applicability
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedSqrt(UnguardedOpRule):
    """
    ## What it does
    Flags a square root of a tensor that can reach 0 or go below it:
    `torch.sqrt(x)`, `x.sqrt()`, and the reciprocal root `torch.rsqrt(x)` /
    `x.rsqrt()`. A root spelled as a power (`x ** 0.5`, `x.pow(.5)`) is
    reported as one, by TL103.

    The operand is judged by what it is (`torchlint/analysis/flow/signs.py`): a
    norm, a variance, a sum of squares, a count, a difference that can cancel
    (`E[x^2] - E[x]^2`), a constant 0 reach the edge by construction; `x + eps`,
    `clamp(min=eps)`, `exp(x)` and names bound to them do not, nor does an
    operand a test keeps off zero (`if (x > 0).all():`, an earlier
    `if x == 0: return`: `torchlint/analysis/values/conditions.py`).

    ## Why is this bad?
    The derivative of `sqrt(x)` is `1 / (2 * sqrt(x))`: at `x = 0` it is
    `inf`, and autograd multiplies it by the incoming gradient, so a single
    zero (a distance between identical points, the variance of a constant
    feature, a norm of a zero vector written as `sqrt(sum(x ** 2))`) makes the
    gradient `inf`, then `NaN` ("Function 'SqrtBackward0' returned nan
    values"), and the next optimizer step writes NaN into every weight. A
    negative operand (rounding in `E[x^2] - E[x]^2`) is NaN already in the
    forward pass; `rsqrt(0)` is `inf` there. `clamp(min=0)` does not help (it
    passes 0 through) and `abs()` gives NaN at 0; eps added after the root
    (`torch.sqrt(d) + eps`) guards the output, not the derivative. A ReLU right
    before the root does help, since its backward zeroes the gradient where its
    output is 0: `torch.sqrt(F.relu(x))` is not reported.

    ## Example
    ```python
    dist = torch.sqrt(((a - b) ** 2).sum(-1))
    std = x.var(dim=0).sqrt()
    ```

    ## Use instead
    ```python
    dist = torch.sqrt(((a - b) ** 2).sum(-1).clamp_min(1e-6))
    std = x.var(dim=0).clamp_min(1e-6).sqrt()
    ```

    ## Fix safety
    Numerics: the operand is clamped, `torch.sqrt(x)` becomes
    `torch.sqrt(x.clamp_min(eps))` with eps from `[tool.torchlint] eps`
    (default 1e-6, which float16 still represents; 1e-8 would round to 0
    there). Values at or above eps are computed exactly as before; below it
    the result is `sqrt(eps)` instead of 0 or NaN and the gradient is 0
    instead of `inf`/NaN.

    ## Where it looks
    Everywhere a tensor op runs, except code that says no gradient is computed
    there: `torch.no_grad()`/`inference_mode` (a region, a decorator, or every
    call the file makes of a helper), `__init__`/`reset_parameters`,
    `Dataset`/`__getitem__`/collate code, `Metric` classes, optimizer update
    code. A root of 0 is a fine value, only its gradient is infinite, so a root
    whose result only feeds `detach()`, `round()` or a comparison, of constants
    or random draws, or of ground truth (`target`, `gt_boxes`) is not
    reported either. Python numbers (`math.sqrt`, `.size(0)`) and NumPy values
    never are. Silence one line with `# noqa: TL101`.
    """

    code = "TL101"
    name = "unguarded-sqrt"
    message = "sqrt of a value that can be 0 or negative: infinite/NaN gradient at 0, NaN below; clamp the operand"
    fix_applicability = Applicability.NUMERICS
    triggers = ("sqrt", "**", "pow")  # x ** 0.5 and x.pow(0.5) are roots too

    confidence_levels = (
        "`high`: a negative constant, or an operand that reaches 0 in ordinary training (a constant 0, a "
        "clamp at 0) where gradients flow (a `forward`, a loss, a scope that calls `backward()`); `medium`: "
        "an operand that reaches 0 or below only on degenerate data (a norm, std/var or sum of squares of a "
        "zero vector, a count of an empty mask, a difference whose terms cancel), or a `high` one where no "
        "gradient is shown (sqrt(0) = 0 is a fine value), or an operand of unknown sign where gradients "
        "flow; `low`: a degenerate-data zero where no gradient is shown, unknown sign elsewhere."
    )

    op_kinds = frozenset({SQRT, RSQRT})
    callee_names = call_names(SQRT_FUNCTIONS, RSQRT_FUNCTIONS)
