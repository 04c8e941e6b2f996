"""TL106 under torch: torch.where does not stop NaN gradients; the codemod's double where does."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, forward_backward  # noqa: E402

SNIPPET = '''
import torch


def distance(sq):
    return torch.where(sq > 0, torch.sqrt(sq), torch.zeros_like(sq))


def entropy(p):
    return -torch.where(p > 0, p * torch.log(p), 0).sum(-1)


def log_or_zero(p):
    return torch.where(p <= 0, torch.zeros_like(p), p.log())


def inverse_std(var):
    return torch.where(var > 0, torch.rsqrt(var), 0.0)


def cube_root(x: torch.Tensor):
    return torch.where(x > 0, x ** (1 / 3), torch.zeros_like(x))


def masked_mean(x, mask):
    total = (x * mask).sum(-1)
    return torch.where(mask.sum(-1) == 0, torch.zeros_like(total), total / mask.sum(-1))
'''

UNARY = ["distance", "entropy", "log_or_zero", "inverse_std", "cube_root"]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def pair():
    return fix_and_exec(SNIPPET, "TL106", applicability="numerics")


def test_every_where_is_rewritten(pair):
    assert pair.applied == 6, pair.describe()
    assert pair.fixed_source.count("torch.where(") == 12, pair.describe()


def test_torch_where_leaks_nan_at_zero_as_the_rule_says():
    x = torch.zeros(3, requires_grad=True)
    torch.where(x > 0, torch.sqrt(x), 0).sum().backward()
    assert torch.isnan(x.grad).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_boundary_gradient_is_finite_after_the_fix(pair, name, dtype):
    bad, good = pair.functions(name)
    edge = torch.tensor([0.0, -1.0, 0.0, -0.5, 2.0, 0.25], dtype=dtype).reshape(2, 3)
    out_bad, (grad_bad,) = forward_backward(bad, edge)
    assert not torch.isfinite(grad_bad).all(), pair.describe()
    out_good, (grad_good,) = forward_backward(good, edge)
    assert torch.isfinite(grad_good).all(), pair.describe()
    # The outer where is kept: forward values are the original's everywhere, edge included.
    torch.testing.assert_close(out_good, out_bad, rtol=0, atol=0, equal_nan=True)
    # On the selected elements the gradient is the original's.
    selected = torch.isfinite(grad_bad)
    torch.testing.assert_close(grad_good[selected], grad_bad[selected], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_forward_values_agree_on_ordinary_inputs(pair, name, dtype):
    bad, good = pair.functions(name)
    x = (0.5 + torch.rand(16, 8, generator=torch.Generator().manual_seed(1))).to(dtype)
    out_bad, (grad_bad,) = forward_backward(bad, x)
    out_good, (grad_good,) = forward_backward(good, x)
    torch.testing.assert_close(out_good, out_bad, rtol=1e-6, atol=0)
    torch.testing.assert_close(grad_good, grad_bad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_mean_with_an_empty_row(pair, dtype):
    bad, good = pair.functions("masked_mean")
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2)).to(dtype)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=dtype)
    out_bad, (grad_bad, _) = forward_backward(bad, x, mask)
    assert torch.isnan(grad_bad[1]).all()  # the empty row: 0 * (1/0)
    out_good, (grad_good, _) = forward_backward(good, x, mask)
    assert torch.isfinite(grad_good).all()
    torch.testing.assert_close(out_good, out_bad, rtol=0, atol=0)
    torch.testing.assert_close(grad_good[[0, 2]], grad_bad[[0, 2]], rtol=0, atol=0)
