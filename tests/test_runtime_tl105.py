"""TL105 under torch: the measured limits behind the rule, and the codemod's own output at the domain edge."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torchlint import config, engine  # noqa: E402
from torchlint.analysis.values import precision  # noqa: E402

SETTINGS = config.Settings(enabled=frozenset({"TL105"}))

# A float16 training file: the markers put TL105 in float16 mode.
HALF_SOURCE = '''\
import torch

scaler = torch.cuda.amp.GradScaler()


def row_norm(x):
    return torch.sqrt((x * x).sum(-1) + 1e-10)


def log_prob(p):
    return torch.log(p.clamp(min=1e-12))


def distribution(w):
    return w / (w.sum(-1, keepdim=True) + 1e-10)


def root(x, eps=1e-9):
    return (x + eps).sqrt()


def log_density(p):
    return torch.log(p + 1e-10)
'''

# Plain float32 code with guards below what float32 can use for the op.
FLOAT32_SOURCE = '''\
import torch


def log_likelihood(p):
    return torch.log(p + 1e-45)


def inverse(d):
    return 1.0 / (d + 1e-40)
'''


def fixed(source):
    result = engine.fix_text(source, "snippet.py", SETTINGS)
    assert result.result.diagnostics == []
    return result


def load(source):
    namespace = {}
    exec(compile(source, "snippet.py", "exec"), namespace)
    return namespace


def boundary_gradient(fn, dtype, reduce="sum", n=1024, width=8):
    """Gradient of fn at an all-zero input (the domain edge)."""
    x = torch.zeros(n, width, dtype=dtype, requires_grad=True)
    out = fn(x)
    (out.sum() if reduce == "sum" else out.mean()).backward()
    return out.detach(), x.grad


def ordinary(dtype, low=1.0, high=4.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (low + (high - low) * torch.rand(64, 8, generator=generator)).to(dtype)


# -- the measured limits in torchlint/analysis/values/precision.py ----------------------------


def test_float16_rounds_at_half_its_smallest_subnormal():
    limit = precision.FLOAT16_ZERO_LIMIT
    assert torch.tensor(limit, dtype=torch.float16).item() == 0.0
    assert torch.tensor(limit * 1.001, dtype=torch.float16).item() == 2.0 ** -24
    for literal in (1e-8, 1e-10, 1e-12, 2.98e-8):
        assert torch.tensor(literal, dtype=torch.float16).item() == 0.0
        zeros = torch.zeros(4, dtype=torch.float16)
        assert (zeros + literal).eq(0).all() and zeros.clamp_min(literal).eq(0).all()
    assert torch.tensor(1e-6, dtype=torch.float16).item() > 0  # the default eps survives


def test_bfloat16_and_float32_keep_tiny_eps():
    for dtype in (torch.bfloat16, torch.float32):
        for literal in (1e-10, 1e-20, 1e-38):
            assert (torch.zeros(4, dtype=dtype) + literal).gt(0).all()


def test_float32_limits():
    assert torch.tensor(precision.FLOAT32_ZERO_LIMIT, dtype=torch.float32).item() == 0.0
    assert torch.tensor(precision.FLOAT32_ZERO_LIMIT * 1.01, dtype=torch.float32).item() > 0.0

    def log_grad(eps):
        x = torch.zeros(1, requires_grad=True)
        torch.log(x + eps).sum().backward()
        return x.grad.item()

    def inverse_grad(eps):
        d = torch.zeros(1, requires_grad=True)
        (1.0 / (d + eps)).sum().backward()
        return d.grad.item()

    def normalise_grad(eps):
        w = torch.zeros(1, 4, requires_grad=True)
        (w / (w.sum(-1, keepdim=True) + eps)).sum().backward()
        return w.grad.abs().max().item()

    limit = precision.FLOAT32_RECIPROCAL_LIMIT
    assert log_grad(limit * 0.5) == float("inf")
    assert abs(log_grad(limit * 2)) < float("inf")
    assert normalise_grad(limit * 0.5) == float("inf")
    assert normalise_grad(limit * 2) < float("inf")
    # Why 1e-20 in a divisor is not flagged: w / (w.sum() + 1e-20) keeps a finite gradient at w = 0;
    # -a / eps**2 overflows only for a numerator that is not 0 where the divisor is.
    assert normalise_grad(1e-20) < float("inf")
    assert inverse_grad(1e-20) == float("-inf")


# -- the codemod's own output --------------------------------------------------------


def test_half_file_is_fixed_to_the_configured_eps():
    result = fixed(HALF_SOURCE)
    assert result.applied == 5
    assert result.result.findings == []
    assert "1e-10" not in result.text and "1e-12" not in result.text and "1e-9" not in result.text
    assert result.text.count("1e-6") == 5


@pytest.mark.parametrize("name", ["row_norm", "log_prob", "distribution", "root", "log_density"])
def test_float16_guard_vanishes_and_the_fix_restores_it(name):
    before = load(HALF_SOURCE)[name]
    after = load(fixed(HALF_SOURCE).text)[name]
    # A loss is a mean over the batch: the upstream gradient is 1/N, as in training.
    out, grad = boundary_gradient(before, torch.float16, reduce="mean")
    assert not torch.isfinite(grad).all() or not torch.isfinite(out).all()
    out, grad = boundary_gradient(after, torch.float16, reduce="mean")
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    # Ordinary inputs: float16 cannot even see the change.
    x = ordinary(torch.float16)
    assert torch.equal(before(x), after(x))


def test_float16_sqrt_is_finite_even_with_a_sum():
    after = load(fixed(HALF_SOURCE).text)["row_norm"]
    _, grad = boundary_gradient(after, torch.float16, reduce="sum")
    assert torch.isfinite(grad).all()


def test_float16_log_of_1e6_overflows_with_an_upstream_gradient_of_one():
    # The documented limit of eps = 1e-6 in float16: 1/1.013e-6 > 65504.
    # (The clamp form has no such limit: below its bound the gradient is 0.)
    after = load(fixed(HALF_SOURCE).text)["log_density"]
    _, grad = boundary_gradient(after, torch.float16, reduce="sum")
    assert not torch.isfinite(grad).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("name", ["row_norm", "log_prob", "distribution", "root", "log_density"])
def test_bfloat16_and_float32_keep_the_original_guard(name, dtype):
    # Why bfloat16-only code is not flagged: the same literal guards fine there.
    before = load(HALF_SOURCE)[name]
    out, grad = boundary_gradient(before, dtype, reduce="mean")
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()


@pytest.mark.parametrize("name", ["row_norm", "log_prob", "distribution", "root", "log_density"])
def test_float32_forward_values_agree(name):
    before = load(HALF_SOURCE)[name]
    after = load(fixed(HALF_SOURCE).text)[name]
    x = ordinary(torch.float32, low=2.0)  # log near 1 is near 0, where no relative bound holds
    torch.testing.assert_close(after(x), before(x), rtol=1e-6, atol=0)


def test_float32_file_fix():
    result = fixed(FLOAT32_SOURCE)
    assert result.applied == 2 and result.result.findings == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["log_likelihood", "inverse"])
def test_float32_useless_guard_and_fix(name, dtype):
    before = load(FLOAT32_SOURCE)[name]
    after = load(fixed(FLOAT32_SOURCE).text)[name]
    _, grad = boundary_gradient(before, dtype)
    assert not torch.isfinite(grad).all()
    out, grad = boundary_gradient(after, dtype)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    x = ordinary(dtype, low=2.0)
    rtol = 1e-6 if dtype == torch.float32 else 0
    torch.testing.assert_close(after(x), before(x), rtol=rtol, atol=0)


def test_configured_eps_is_used_and_a_vanishing_one_is_never_written():
    larger = config.Settings(enabled=frozenset({"TL105"}), eps=1e-3)
    result = engine.fix_text(HALF_SOURCE, "snippet.py", larger)
    assert result.applied == 5 and result.text.count("0.001") == 5
    tiny = config.Settings(enabled=frozenset({"TL105"}), eps=1e-8)
    result = engine.lint_text(HALF_SOURCE, "snippet.py", tiny)
    assert len(result.findings) == 5 and all(f.fix is None for f in result.findings)


# The seed's bug: eps = 1e-10 under float16 autocast, and a zero embedding makes sim 0/0.
SIMILARITY_SOURCE = '''\
import torch
import torch.nn as nn


class Similarity(nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-10

    def forward(self, a, b):
        with torch.autocast("cuda", dtype=torch.float16):
            norms = a.norm(dim=-1, keepdim=True) * b.norm(dim=-1).unsqueeze(0)
            return a @ b.T / (norms + self.eps)
'''


def _similarity_run(source):
    module = load(source)["Similarity"]()
    # On CPU the CUDA autocast region is inactive: feed float16 tensors, as autocast would produce.
    a = torch.randn(4, 8, generator=torch.Generator().manual_seed(6)).half()
    b = torch.randn(3, 8, generator=torch.Generator().manual_seed(7)).half()
    a[0] = 0  # an all-zero embedding (a padded row)
    leaf = a.requires_grad_(True)
    out = module(leaf, b)
    out.sum().backward()
    return out.detach(), leaf.grad


def test_seed_similarity_in_float16():
    result = fixed(SIMILARITY_SOURCE)
    assert result.applied == 1 and "self.eps = 1e-6" in result.text
    out_bad, grad_bad = _similarity_run(SIMILARITY_SOURCE)
    out_good, grad_good = _similarity_run(result.text)
    assert torch.isnan(out_bad[0]).all() and torch.isnan(grad_bad[0]).all()
    assert torch.isfinite(out_good).all()
    assert torch.equal(out_good[1:], out_bad[1:])
    # The documented limit of eps = 1e-6 in float16: d(a @ b.T / 1e-6)/da = b / 1e-6 overflows 65504.
    assert not torch.isfinite(grad_good[0]).all()
    # With [tool.torchlint] eps = 1e-3 the gradient is finite too.
    larger = engine.fix_text(SIMILARITY_SOURCE, "snippet.py", config.Settings(enabled=frozenset({"TL105"}), eps=1e-3))
    out_large, grad_large = _similarity_run(larger.text)
    assert torch.isfinite(out_large).all() and torch.isfinite(grad_large).all()
