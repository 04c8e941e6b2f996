from __future__ import annotations

from torchlint.analysis.domain import RSQRT, RSQRT_FUNCTIONS, SQRT, SQRT_FUNCTIONS, call_names
from torchlint.rule import Applicability
from torchlint.rules.numerics.unguarded import UnguardedOpRule


class UnguardedSqrt(UnguardedOpRule):
    """
    ## What it does
    Flags a square root of a tensor that is not provably positive:
    `torch.sqrt(x)`, `x.sqrt()`, `x ** 0.5`, `torch.pow(x, 0.5)`, `x.pow(.5)`,
    and the reciprocal root `torch.rsqrt(x)` / `x.rsqrt()`.

    An operand counts as guarded (see `torchlint/analysis/guards.py`) when it
    adds a positive literal or an eps-like name (`var + eps`, `x + 1e-6`),
    is clamped to a positive minimum (`clamp(min=eps)`, `clamp_min(1e-6)`,
    `torch.maximum(x, eps)`), is an `exp`, a positive constant, a name bound
    earlier in the function to one of these, or sits under
    `if (x > 0).all():` / `assert` / an earlier `if x == 0: return`. A bound
    written with eps is kept strictly (`2 + eps - x.clamp(max=2)` is at least
    eps), `torch.add(a, b)` and `a.mul(b)` are read as the operators they
    spell, a function named for a small value (`c_f.small_val(dtype)`,
    `get_eps(dtype)`) guards like `eps`, the square of a positive value is
    positive (`sqrt(d * d + mu * mu)` with `self.mu = 0.02`), and an
    `assert (n == 0).sum().item() == 0` guards `n` as `assert (n != 0).all()`
    does.

    ## Why is this bad?
    The derivative of `sqrt(x)` is `1 / (2 * sqrt(x))`: at `x = 0` it is
    `inf`, and autograd multiplies it by the incoming gradient, so a single
    zero (a distance between identical points, the variance of a constant
    feature, a norm of a zero vector written as `sqrt(sum(x ** 2))`) makes the
    gradient `inf`, then `NaN` ("Function 'SqrtBackward0' returned nan
    values"), and the next optimizer step writes NaN into every weight. A
    negative operand (rounding in `E[x^2] - E[x]^2`) is NaN already in the
    forward pass. `rsqrt(0)` is `inf` in the forward pass. `clamp(min=0)`
    does not help: it passes 0 through, and `sqrt(0)` still has an infinite
    gradient (`abs()` gives NaN there). Eps added after the root
    (`torch.sqrt(d) + eps`) guards the output, not the derivative. A ReLU
    right before the root does help: its backward zeroes the gradient
    wherever its output is 0, so `torch.sqrt(F.relu(x))`, and roots of sums,
    means and average pools of ReLU outputs, are not reported (measured in
    `tests/test_runtime_numerics.py`).

    ## Example
    ```python
    dist = torch.sqrt(((a - b) ** 2).sum(-1))
    std = x.var(dim=0).sqrt()
    rms = (x ** 2).mean(-1) ** 0.5
    ```

    ## Use instead
    ```python
    dist = torch.sqrt(((a - b) ** 2).sum(-1).clamp_min(1e-6))
    std = (x.var(dim=0) + 1e-6).sqrt()
    rms = (x ** 2).mean(-1).clamp_min(1e-6) ** 0.5
    ```

    ## Fix safety
    Numerics: the operand is clamped, `torch.sqrt(x)` becomes
    `torch.sqrt(x.clamp_min(eps))` with eps from `[tool.torchlint] eps`
    (default 1e-6, which float16 still represents; 1e-8 would round to 0
    there). Values at or above eps are computed exactly as before; below it
    the result is `sqrt(eps)` instead of 0 or NaN and the gradient is 0
    instead of `inf`/NaN. A clamp is used rather than `+ eps` so that ordinary
    values are bit-for-bit unchanged.

    Where it looks: code that is differentiated, a `forward`, `__call__` or
    `training_step`, a function or class named for a loss, a file in a
    `loss`/`losses` module. Elsewhere (metrics, statistics, geometric solvers,
    helpers) operands are positive by constructions the linter cannot see far
    more often than not (measured in `bench/results/precision_tl1.md`), and
    initialisation code (`__init__`, `reset_parameters`, `*_init`) is never
    differentiated. A root of 0 is a fine value, only its gradient is
    infinite, so nothing is reported where autograd cannot differentiate:
    under `torch.no_grad()` /
    `inference_mode`, in initialisation code (`__init__`, `reset_parameters`,
    `*_init`), in files that define an optimizer (their states are running
    means of squares plus eps), on constants and random draws, on ground
    truth (names such as `target`, `bbox_reg_targets`, `gt_boxes`, `y_true`;
    not `target_logit`, the model's logit of the target class), and on results
    that only feed `detach()`, `long()` or a comparison (they leave autograd)
    or `round()`/`floor()`, unless the operand is written as a difference
    (`E[x^2] - E[x]^2`, which rounding can make negative: NaN already in the
    forward pass); the same holds for a name every read of which is such a
    use (`w_norm = w.pow(2).sum(0).sqrt()` only compared in an `assert`).
    `round()` and `floor()` do pass back a gradient, a zero one,
    and `0 / (2 * sqrt(0))` is still NaN when the operand needs a gradient;
    code that rounds a root computes sizes and counts from values that do not,
    so it is not reported (a known false negative).

    Nor in schedules and visualisation (`scheduling_*.py`, files in a
    `schedulers/`, `visualize/` or `visualization/` directory), nor in a helper
    that every call in the same file runs under `torch.no_grad()`. A
    parameter counts as positive, or as a padding mask, when every call of
    its function in the same file hands in one (`reduce_loss(loss, mask)`
    called only with masks built from lengths); a function passed around as
    a value, called recursively or never called in its file is judged on its
    own. The square of a hyperparameter (a Python number such as
    `config.delta`) added under a root is a smoothing term:
    `sqrt(x ** 2 + delta ** 2)` is not reported.

    Not reported either: test functions named for the loss they test
    (`test_focal_loss`, methods of `TestDiceLoss`), the `__call__` of a
    plain class named as a data transform (`class AmplitudeRescaleTransform:`;
    `nn.Module` subclasses, such as differentiable augmentations, are still
    read), the `forward` of a `torch.autograd.Function` (its
    backward is written by hand), feature extractors and processors
    (`feature_extraction_*.py`, `processing_*.py`, subclasses of
    `*FeatureExtractor`/`*ImageProcessor`/`ProcessorMixin`: input preparation,
    nothing upstream has a gradient), and roots of counts of comparisons or
    boolean masks (`(mask.sum() * scale) ** 0.5`: no gradient).

    Not detected: roots of values stored in containers or attributes and
    computed elsewhere, operators on values whose tensor-ness cannot be seen
    (`x ** 0.5` where `x` is an unannotated argument outside `forward`), and
    roots whose operand is guarded in a function of another file (a helper
    defined in the same file is followed: `torch.sqrt(_power(x))` is guarded
    when every `return` of `_power` is).
    """

    code = "TL101"
    name = "unguarded-sqrt"
    message = "sqrt of a value that can be 0 or negative: infinite/NaN gradient at 0, NaN below; clamp the operand"
    fix_applicability = Applicability.NUMERICS
    triggers = ("sqrt",)

    op_kinds = frozenset({SQRT, RSQRT})
    callee_names = call_names(SQRT_FUNCTIONS, RSQRT_FUNCTIONS)
