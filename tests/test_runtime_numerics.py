"""Runtime proofs for TL101-TL104: the NaN/Inf is real, and the codemod's own output removes it.

Every fixed function below is produced by ``engine.fix_text`` at test time
(``runtime_support.fix_and_exec``), never typed by hand. For each dtype
(float32, float16, bfloat16, on CPU):

- at the boundary inputs (0, and negatives for sqrt, log and pow) the
  original gives a non-finite value or gradient, the fixed code gives finite
  ones;
- on ordinary inputs the fixed code's forward values equal the original's to
  1e-6 relative (the clamps are no-ops there, so they are in fact identical).
"""
from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, forward_backward  # noqa: E402

from torchlint import config  # noqa: E402
from torchlint.rule import Confidence  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_IDS = ["float32", "float16", "bfloat16"]


def finite(*tensors) -> bool:
    return all(bool(torch.isfinite(t.float()).all()) for t in tensors)


def same_forward(bad, good, *inputs, rtol=1e-6):
    with torch.no_grad():
        expected, got = bad(*inputs), good(*inputs)
    assert finite(expected), "ordinary inputs must give finite values in the original"
    torch.testing.assert_close(got.float(), expected.float(), rtol=rtol, atol=0.0)


# -- TL101 -----------------------------------------------------------------------------

SQRT = """
import torch

def root_loss(x):
    return torch.sqrt(x)

def method_root_loss(x):
    return x.sqrt()

def power_root_loss(x: torch.Tensor):
    return x ** 0.5

def distance_loss(a, b):
    return torch.sqrt(((a - b) ** 2).sum(-1))

def feature_std_loss(x):
    return x.var(0).sqrt()

def inverse_root_loss(x):
    return torch.rsqrt(x)

def rounded_root_loss(x):
    return torch.sqrt(x).round()
"""


@pytest.fixture(scope="module")
def sqrt_pair():
    # ``x ** 0.5`` is a root spelled as a power: TL103's finding, fixed the same way.
    return fix_and_exec(SQRT, ("TL101", "TL103"), applicability=("numerics", "unsafe", None), unsafe=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", ["root_loss", "method_root_loss", "power_root_loss"])
def test_sqrt_gradient_at_zero_and_negatives(sqrt_pair, dtype, name):
    bad, good = sqrt_pair.functions(name)
    boundary = torch.tensor([0.0, -1.0, 4.0], dtype=dtype)
    value, (grad,) = forward_backward(bad, boundary)
    assert not finite(grad), f"expected inf/NaN gradient from the original {name}"
    assert torch.isnan(value[1].float()), "sqrt(-1) is NaN in the forward pass"
    value, (grad,) = forward_backward(good, boundary)
    assert finite(value, grad), sqrt_pair.describe()

    ordinary = torch.tensor([0.01, 0.5, 2.0, 300.0], dtype=dtype)
    same_forward(bad, good, ordinary)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_distance_between_identical_points(sqrt_pair, dtype):
    bad, good = sqrt_pair.functions("distance_loss")
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=dtype)
    _, grads = forward_backward(bad, a, a.clone())
    assert torch.isnan(grads[0].float()).all(), "d sqrt(sum((a-b)^2)) at a == b is 0 * inf = NaN"
    value, grads = forward_backward(good, a, a.clone())
    assert finite(value, *grads), sqrt_pair.describe()
    same_forward(bad, good, a, a + torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_std_of_a_constant_feature(sqrt_pair, dtype):
    bad, good = sqrt_pair.functions("feature_std_loss")
    x = torch.tensor([[1.0, 5.0], [1.0, 7.0], [1.0, 9.0]], dtype=dtype)  # column 0 is constant
    _, (grad,) = forward_backward(bad, x)
    assert not finite(grad)
    value, (grad,) = forward_backward(good, x)
    assert finite(value, grad), sqrt_pair.describe()
    same_forward(bad, good, torch.tensor([[1.0, 5.0], [2.0, 7.0], [4.0, 9.0]], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_a_rounded_root_still_has_an_infinite_derivative(sqrt_pair, dtype):
    # round() passes back a zero gradient, and 0 * inf is NaN: rounding does not make the root safe.
    bad, good = sqrt_pair.functions("rounded_root_loss")
    boundary = torch.tensor([0.0, 4.0], dtype=dtype)
    _, (grad,) = forward_backward(bad, boundary)
    assert torch.isnan(grad[0].float()), "d round(sqrt(x)) at 0 is 0 * inf = NaN"
    value, (grad,) = forward_backward(good, boundary)
    assert finite(value, grad), sqrt_pair.describe()
    same_forward(bad, good, torch.tensor([0.01, 2.0, 300.0], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_rsqrt_at_zero(sqrt_pair, dtype):
    bad, good = sqrt_pair.functions("inverse_root_loss")
    boundary = torch.tensor([0.0, -1.0, 4.0], dtype=dtype)
    value, _ = forward_backward(bad, boundary)
    assert not finite(value), "rsqrt(0) = inf in the forward pass"
    # rsqrt's own gradient at eps is -eps**-1.5 / 2: only the clamped entries (0, -1) are tested in float16,
    # where the clamp's zero gradient keeps them finite.
    value, (grad,) = forward_backward(good, boundary)
    assert finite(value, grad), sqrt_pair.describe()
    same_forward(bad, good, torch.tensor([0.25, 1.0, 16.0], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_relu_masks_a_roots_infinite_derivative_where_clamp_and_abs_do_not(dtype):
    """Why TL101/TL103 leave ``sqrt(relu(x))`` alone but report ``sqrt(x.clamp(min=0))`` and ``sqrt(x.abs())``:
    ReLU's backward selects the gradient where its output is positive, clamp's passes x = 0 through,
    abs's multiplies by sign(0) = 0."""
    import torch.nn.functional as F

    boundary = torch.tensor([-1.0, 0.0, 4.0], dtype=dtype)
    _, (grad,) = forward_backward(lambda x: torch.sqrt(F.relu(x)), boundary)
    assert finite(grad) and grad[0] == 0 and grad[1] == 0
    _, (grad,) = forward_backward(lambda x: torch.sqrt(F.relu(x).sum()), torch.tensor([-1.0, -2.0], dtype=dtype))
    assert finite(grad), "a sum of ReLU outputs is 0 only where every one is masked"
    _, (grad,) = forward_backward(lambda x: torch.sqrt(x.clamp(min=0)), boundary)
    assert torch.isinf(grad[1].float())
    _, (grad,) = forward_backward(lambda x: torch.sqrt(x.abs()), boundary)
    assert torch.isnan(grad[1].float())
    # A product lets a zero through that ReLU did not make.
    _, grads = forward_backward(lambda x, w: torch.sqrt(F.relu(x) * w), boundary, torch.tensor([1.0, 1.0, 0.0], dtype=dtype))
    assert not finite(*grads)


def test_a_learnable_exponent_is_not_masked_by_relu():
    """GeM with a learnable p over a dead (all-zero) ReLU map: the input's gradient is 0, p's is NaN."""
    import torch.nn.functional as F

    x = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    p = torch.tensor(3.0, requires_grad=True)
    F.avg_pool1d(F.relu(x).pow(p), 3).pow(1.0 / p).sum().backward()
    assert finite(x.grad) and torch.isnan(p.grad)


def test_sqrt_fix_uses_configured_eps():
    settings = config.Settings(enabled=frozenset({"TL101"}), eps=1e-4, confidence_floor=Confidence.LOW)
    settings = dataclasses.replace(settings, confidence_floor=Confidence.LOW)
    pair = fix_and_exec(SQRT, "TL101", settings=settings, unsafe=True)
    assert "clamp_min(1e-4)" in pair.fixed_source
    assert "clamp_min(1e-6)" in fix_and_exec(SQRT, "TL101", unsafe=True).fixed_source


# -- TL102 -----------------------------------------------------------------------------

LOG = """
import torch

def log_loss(x):
    return torch.log(x)

def log_base2_loss(x):
    return x.log2()

def nll_loss(probs, target):
    return -torch.log(probs.gather(1, target[:, None])).mean()
"""


@pytest.fixture(scope="module")
def log_pair():
    return fix_and_exec(LOG, "TL102", applicability=("numerics", "unsafe", None), unsafe=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", ["log_loss", "log_base2_loss"])
def test_log_at_zero_and_negatives(log_pair, dtype, name):
    bad, good = log_pair.functions(name)
    boundary = torch.tensor([0.0, -1.0, 2.0], dtype=dtype)
    value, (grad,) = forward_backward(bad, boundary)
    assert torch.isneginf(value[0].float()) and torch.isnan(value[1].float())
    assert not finite(grad)
    value, (grad,) = forward_backward(good, boundary)
    assert finite(value, grad), log_pair.describe()
    same_forward(bad, good, torch.tensor([0.001, 0.5, 2.0, 1000.0], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_nll_of_a_zero_probability(log_pair, dtype):
    bad, good = log_pair.functions("nll_loss")
    probs = torch.tensor([[1.0, 0.0], [0.25, 0.75]], dtype=dtype)
    target = torch.tensor([1, 0])
    value, (grad,) = forward_backward(bad, probs, target)
    assert not finite(value) and not finite(grad)
    value, (grad,) = forward_backward(good, probs, target)
    assert finite(value, grad), log_pair.describe()
    same_forward(bad, good, torch.tensor([[0.5, 0.5], [0.25, 0.75]], dtype=dtype), target)


# -- TL103 -----------------------------------------------------------------------------

POW = """
import torch
import torch.nn.functional as F

def cube_root_loss(x):
    return torch.pow(x, 1 / 3)

def forward(x, p):
    pooled = F.avg_pool2d(x.pow(p), (x.size(-2), x.size(-1)))
    return pooled.pow(1.0 / p)
"""


@pytest.fixture(scope="module")
def pow_pair():
    # ``x.pow(p)`` with ``p`` unknown keeps its finding without a fix: p may be an integer power of a signed base.
    return fix_and_exec(POW, "TL103", applicability=("numerics", "unsafe", None), unsafe=True, allow_remaining=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cube_root_at_zero_and_negatives(pow_pair, dtype):
    bad, good = pow_pair.functions("cube_root_loss")
    boundary = torch.tensor([0.0, -8.0, 8.0], dtype=dtype)
    value, (grad,) = forward_backward(bad, boundary)
    assert torch.isnan(value[1].float()) and not finite(grad)
    value, (grad,) = forward_backward(good, boundary)
    assert finite(value, grad), pow_pair.describe()
    same_forward(bad, good, torch.tensor([0.001, 0.5, 8.0, 1000.0], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gem_pooling_of_a_dead_feature_map(pow_pair, dtype):
    bad, good = pow_pair.functions("forward")
    features = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).to(dtype) + 0.1
    features[0, 1] = 0.0  # a channel that ReLU switched off everywhere
    _, (grad,) = forward_backward(bad, features, 3.0)
    assert torch.isnan(grad.float()).any()
    value, (grad,) = forward_backward(good, features, 3.0)
    assert finite(value, grad), pow_pair.describe()
    ordinary = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(1)).to(dtype) + 0.1
    same_forward(bad, good, ordinary, 3.0)


# -- TL104 -----------------------------------------------------------------------------

DIVISION = """
import torch

def masked_mean_loss(loss: torch.Tensor, mask: torch.Tensor):
    return (loss * mask).sum() / mask.sum()

def unit_loss(x):
    return x / x.norm(dim=-1, keepdim=True)

def cosine_loss(a, b):
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))

def standardise_loss(x: torch.Tensor):
    return (x - x.mean(0)) / x.std(0)

def named_unit_loss(x):
    n = torch.norm(x, 2, 1, True)
    return x.div(n.expand_as(x))
"""


def division_pair(eps=None):
    settings = None
    if eps is not None:
        settings = config.Settings(enabled=frozenset({"TL104"}), eps=eps, confidence_floor=Confidence.LOW)
    return fix_and_exec(DIVISION, "TL104", applicability=("numerics", "unsafe", None), unsafe=True, settings=settings)


@pytest.fixture(scope="module")
def div_pair():
    return division_pair()


@pytest.fixture(scope="module")
def div_pair_half_eps():
    # In float16 the gradient of x / max(|x|, eps) at x = 0 is 1 / eps; it fits float16's 65504 only for
    # eps >= ~1.6e-5, so float16 code that divides by norms is documented to set eps = 1e-4.
    return division_pair(1e-4)


def test_division_fixes_are_the_library_idioms(div_pair):
    text = div_pair.fixed_source
    assert "mask.sum().clamp_min(1)" in text
    assert "F.normalize(x, dim=-1, eps=1e-6)" in text
    assert "F.cosine_similarity(a, b, dim=-1, eps=1e-6)" in text
    assert "x.std(0).clamp_min(1e-6)" in text
    assert "import torch.nn.functional as F" in text


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mean_over_an_empty_mask(div_pair, dtype):
    bad, good = div_pair.functions("masked_mean_loss")
    loss = torch.tensor([1.0, 2.0, 3.0], dtype=dtype)
    empty = torch.zeros(3, dtype=dtype)
    value, (grad_loss, _) = forward_backward(bad, loss, empty)
    assert torch.isnan(value.float()) and torch.isnan(grad_loss.float()).all()
    value, grads = forward_backward(good, loss, empty)
    assert finite(value, *grads) and value.item() == 0.0, div_pair.describe()
    same_forward(bad, good, loss, torch.tensor([1.0, 0.0, 1.0], dtype=dtype))


def _norm_pair(request, dtype):
    return request.getfixturevalue("div_pair_half_eps" if dtype == torch.float16 else "div_pair")


# ``x / x.norm(...)`` and the norm kept in a name first (``n = torch.norm(x, 2, 1, True); x.div(n)``)
@pytest.mark.parametrize("function", ["unit_loss", "named_unit_loss"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_normalising_a_zero_vector(request, dtype, function):
    pair = _norm_pair(request, dtype)
    bad, good = pair.functions(function)
    x = torch.tensor([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], dtype=dtype)
    value, (grad,) = forward_backward(bad, x)
    assert torch.isnan(value[0].float()).all() and torch.isnan(grad.float()).any()
    value, (grad,) = forward_backward(good, x)
    assert finite(value, grad), pair.describe()
    same_forward(bad, good, torch.tensor([[1.0, 2.0, 2.0], [3.0, 4.0, 0.5]], dtype=dtype))


def test_float16_norm_gradient_needs_a_larger_eps(div_pair):
    """The documented limit: with the default eps the float16 forward is finite, the gradient 1/eps is not."""
    _, good = div_pair.functions("unit_loss")
    x = torch.zeros(1, 3, dtype=torch.float16)
    value, (grad,) = forward_backward(good, x)
    assert finite(value)
    assert torch.isinf(grad).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cosine_with_a_zero_vector(request, dtype):
    pair = _norm_pair(request, dtype)
    bad, good = pair.functions("cosine_loss")
    a = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=dtype)
    b = torch.tensor([[1.0, 1.0], [2.0, 1.0]], dtype=dtype)
    value, grads = forward_backward(bad, a, b)
    assert torch.isnan(value[0].float()) and not finite(*grads)
    value, grads = forward_backward(good, a, b)
    assert finite(value, *grads), pair.describe()
    a2 = torch.tensor([[0.5, -1.0], [1.0, 2.0]], dtype=dtype)
    if dtype == torch.float32:
        same_forward(bad, good, a2, b)
    else:
        # cosine_similarity normalises before the dot product: in half precision it differs from the
        # manual formula by the dtype's rounding, and both are that close to the float64 value.
        with torch.no_grad():
            exact = bad(a2.double(), b.double())
            resolution = torch.finfo(dtype).eps
            for fn in (bad, good):
                torch.testing.assert_close(fn(a2, b).double(), exact, rtol=4 * resolution, atol=0.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_standardising_a_constant_feature(request, dtype):
    pair = _norm_pair(request, dtype)
    bad, good = pair.functions("standardise_loss")
    x = torch.tensor([[1.0, 5.0], [1.0, 7.0], [1.0, 9.0]], dtype=dtype)
    value, (grad,) = forward_backward(bad, x)
    assert not finite(value) and not finite(grad)
    value, (grad,) = forward_backward(good, x)
    assert finite(value, grad), pair.describe()
    same_forward(bad, good, torch.tensor([[1.0, 5.0], [2.0, 7.0], [4.0, 9.0]], dtype=dtype))


ROOT_DIVISION = """
import torch

def root_unit_loss(x):
    norm = x.pow(2).sum(1, keepdim=True).pow(1.0 / 2)
    return x.div(norm)
"""


def test_a_root_divisor_is_fixed_by_clamping_the_roots_base_not_the_root():
    """TL104 finds the division by a written-out norm without a fix of its own: clamping the root leaves the
    root's infinite gradient at 0 (times the clamp's zero gradient: NaN); the root's TL103 fix clamps its base."""
    x = torch.tensor([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], requires_grad=True)
    clamped_root = x / x.pow(2).sum(1, keepdim=True).pow(0.5).clamp_min(1e-6)
    clamped_root.sum().backward()
    assert torch.isnan(x.grad).any()
    pair = fix_and_exec(ROOT_DIVISION, ("TL103", "TL104"), unsafe=True, settings=config.Settings(
        enabled=frozenset({"TL103", "TL104"}), confidence_floor=Confidence.LOW))
    assert ".clamp_min(" not in pair.fixed_source.split("norm =")[1].split("\n")[1], pair.describe()
    bad, good = pair.functions("root_unit_loss")
    zero = torch.tensor([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    value, (grad,) = forward_backward(bad, zero)
    assert torch.isnan(value[0]).all() and torch.isnan(grad).any()
    value, (grad,) = forward_backward(good, zero)
    assert finite(value, grad), pair.describe()
    same_forward(bad, good, torch.tensor([[1.0, 2.0, 2.0], [3.0, 4.0, 0.5]]))
