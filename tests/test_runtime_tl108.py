"""Runtime proof for TL108: acos/asin/atanh at ±1 give an infinite or NaN gradient (or a NaN value), and the
codemod's own output (``runtime_support.fix_and_exec``, never typed by hand) gives finite ones while
computing the same forward values on ordinary inputs."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, forward_backward  # noqa: E402

SOURCE = """
import torch
import torch.nn.functional as F

def angle_loss(a, b):
    return torch.acos(F.cosine_similarity(a, b, dim=-1))

def clamped_angle_loss(a, b):
    return torch.acos(torch.clamp(F.cosine_similarity(a, b, dim=-1), -1, 1))

def sine_loss(a, b):
    return torch.asin((F.normalize(a, dim=-1) * F.normalize(b, dim=-1)).sum(-1))

def squashed_loss(u):
    return torch.atanh(torch.tanh(u))
"""

# The same clamp in a project that computes in float16, where the margin must survive float16's rounding.
FLOAT16_SOURCE = """
import torch
import torch.nn.functional as F

projection = torch.nn.Linear(3, 3).half()

def clamped_angle_loss(a, b):
    return torch.acos(torch.clamp(F.cosine_similarity(a, b, dim=-1), -1, 1))
"""


def finite(*tensors) -> bool:
    return all(bool(torch.isfinite(t.float()).all()) for t in tensors)


@pytest.fixture(scope="module")
def pair():
    return fix_and_exec(SOURCE, "TL108", applicability=("numerics", "unsafe"), unsafe=True)


def parallel_rows(dtype):
    a = torch.tensor([[0.3, -1.2, 2.0], [1.0, 1.0, 1.0]], dtype=dtype)
    return a, a * 2.5  # parallel vectors: a cosine of exactly 1 (or past it, by rounding)


def ordinary_rows(dtype):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(4, 3, generator=generator).to(dtype), torch.randn(4, 3, generator=generator).to(dtype)


@pytest.mark.parametrize("name", ["angle_loss", "clamped_angle_loss", "sine_loss"])
def test_a_cosine_of_parallel_vectors(pair, name):
    bad, good = pair.functions(name)
    value, grads = forward_backward(bad, *parallel_rows(torch.float32))
    assert not finite(value, *grads), f"{name}: expected a NaN/inf value or gradient at a cosine of 1"
    value, grads = forward_backward(good, *parallel_rows(torch.float32))
    assert finite(value, *grads), pair.describe()
    with torch.no_grad():
        torch.testing.assert_close(good(*ordinary_rows(torch.float32)), bad(*ordinary_rows(torch.float32)), rtol=1e-6, atol=0.0)


def test_a_clamp_to_one_cuts_to_a_nan_gradient(pair):
    bad, _ = pair.functions("clamped_angle_loss")
    a, b = parallel_rows(torch.float32)
    value, grads = forward_backward(bad, a, b)
    assert finite(value), "the clamp keeps the forward value finite"
    assert not finite(*grads), "the gradient is not: infinite at 1, zero times infinite past it"


def test_atanh_of_a_saturated_tanh(pair):
    bad, good = pair.functions("squashed_loss")
    u = torch.tensor([0.5, 10.0, -12.0])  # tanh is exactly ±1.0 in float32 beyond |u| = 9
    value, (grad,) = forward_backward(bad, u)
    assert not finite(value, grad)
    value, (grad,) = forward_backward(good, u)
    assert finite(value, grad), pair.describe()
    ordinary = torch.tensor([-2.0, -0.3, 0.0, 0.7, 3.0])
    with torch.no_grad():
        torch.testing.assert_close(good(ordinary), bad(ordinary), rtol=1e-5, atol=0.0)


def test_float16_gets_a_margin_float16_keeps():
    pair = fix_and_exec(FLOAT16_SOURCE, "TL108", applicability=("numerics", "unsafe"), unsafe=True)
    bad, good = pair.functions("clamped_angle_loss")
    a, b = parallel_rows(torch.float16)
    _, grads = forward_backward(bad, a, b)
    assert not finite(*grads)
    value, grads = forward_backward(good, a, b)
    assert finite(value, *grads), pair.describe()
    assert float(torch.tensor(1 - 1e-6, dtype=torch.float32)) < 1.0
    assert float(torch.tensor(1 - 1e-6, dtype=torch.float16)) == 1.0, "why float16 needs its own margin"
