"""TL107 under torch: a NaN filter after the op leaves the gradient NaN; the codemod's guarded input does not."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, forward_backward  # noqa: E402
from torchlint.rules.numerics.tl107_after_the_fact_nan_filter import OUTPUT_SAVING_OPS  # noqa: E402

SNIPPET = '''
import torch


def distance(sq):
    return torch.nan_to_num(torch.sqrt(sq))


def log_likelihood(p):
    return torch.log(p).nan_to_num(neginf=0.0)


def log_terms(p):
    log_p = torch.log(p)
    log_p[torch.isinf(log_p)] = 0
    return log_p


def root(x):
    r = torch.sqrt(x)
    r[torch.isnan(r)] = 0
    return r


def inverse_root(x):
    out = torch.rsqrt(x)
    return out.masked_fill(torch.isinf(out), 0.0)


def norm_ratio(x):
    n = x.norm(dim=-1)
    ratio = x.sum(-1) / n
    ratio = torch.nan_to_num(ratio)
    return ratio


def self_compared(x):
    r = x.sum(-1) / x.norm(dim=-1)
    r[r != r] = 0
    return r


def masked_average(x, mask):
    return torch.nan_to_num((x * mask).sum(-1) / mask.sum(-1))


def log_probability(logits, eps=1e-6):
    p = logits.sigmoid()
    p[p < eps] = eps
    return p.log()


def normalise(x):
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    n[n <= 1e-8] = 1e-8
    return x / n
'''

UNARY = ["distance", "log_likelihood", "log_terms", "root", "inverse_root", "norm_ratio", "self_compared"]
# In-place filters on the output of an op whose backward reads that output (sqrt, rsqrt, norms):
# the original does not even back-propagate, on any input.
BROKEN_BACKWARD = {"root", "normalise"}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def pair():
    return fix_and_exec(SNIPPET, "TL107", applicability="numerics")


def test_every_filter_is_replaced_by_a_guard(pair):
    assert pair.applied == 10, pair.describe()
    assert "nan_to_num" not in pair.fixed_source and "isnan" not in pair.fixed_source, pair.describe()
    assert "isinf" not in pair.fixed_source and "] = " not in pair.fixed_source, pair.describe()


def test_nan_to_num_does_not_clean_the_gradient():
    x = torch.tensor([0.0, -1.0, 4.0], requires_grad=True)
    torch.nan_to_num(torch.sqrt(x)).sum().backward()
    assert torch.isinf(x.grad[0]) and torch.isnan(x.grad[1]) and x.grad[2] == 0.25


def _edge(dtype):
    return torch.tensor([[0.0, -1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]], dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_gradient_at_the_edge_is_finite_after_the_fix(pair, name, dtype):
    if name in ("norm_ratio", "self_compared") and dtype == torch.float16:
        pytest.skip("1 / 1e-6 overflows float16's 65504 (the eps limit documented in TL105)")
    bad, good = pair.functions(name)
    if name in BROKEN_BACKWARD:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            forward_backward(bad, _edge(dtype))
    else:
        _, (grad,) = forward_backward(bad, _edge(dtype))
        assert not torch.isfinite(grad).all(), pair.describe()
    out, (grad,) = forward_backward(good, _edge(dtype))
    assert torch.isfinite(out).all() and torch.isfinite(grad).all(), pair.describe()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY + ["normalise"])
def test_values_agree_on_ordinary_inputs(pair, name, dtype):
    bad, good = pair.functions(name)
    x = (0.5 + torch.rand(16, 8, generator=torch.Generator().manual_seed(3))).to(dtype)
    out_good, (grad_good,) = forward_backward(good, x)
    assert torch.isfinite(grad_good).all()
    if name in BROKEN_BACKWARD:
        with torch.no_grad():
            torch.testing.assert_close(out_good, bad(x), rtol=1e-6, atol=0)
        return
    out_bad, (grad_bad,) = forward_backward(bad, x)
    torch.testing.assert_close(out_good, out_bad, rtol=1e-6, atol=0)
    torch.testing.assert_close(grad_good, grad_bad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_average_with_an_empty_row(pair, dtype):
    bad, good = pair.functions("masked_average")
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4)).to(dtype)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=dtype)
    out_bad, (grad_bad, _) = forward_backward(bad, x, mask)
    assert torch.isnan(grad_bad[1]).all()  # 0 * (1 / 0) in the empty row
    out_good, (grad_good, _) = forward_backward(good, x, mask)
    assert torch.isfinite(grad_good).all()
    torch.testing.assert_close(out_good, out_bad, rtol=0, atol=0)  # nan_to_num gave 0, the guard gives 0 / 1
    torch.testing.assert_close(grad_good[[0, 2]], grad_bad[[0, 2]], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["log_probability", "normalise"])
def test_masked_clamp_breaks_backward_and_the_fix_does_not(pair, name, dtype):
    if name == "normalise" and dtype == torch.float16:
        pytest.skip("its 1e-8 rounds to 0 in float16: TL105's finding in a float16 file")
    bad, good = pair.functions(name)
    x = torch.tensor([[-30.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=dtype)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        forward_backward(bad, x)
    out_good, (grad,) = forward_backward(good, x)
    assert torch.isfinite(out_good).all() and torch.isfinite(grad).all()
    with torch.no_grad():  # the forward values are the same, edge included
        torch.testing.assert_close(out_good, bad(x), rtol=0, atol=0)


_OPS = {
    "exp": torch.exp, "exp2": torch.exp2, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "softmax": lambda a: a.softmax(-1), "log_softmax": lambda a: a.log_softmax(-1), "relu": torch.relu,
    "sqrt": lambda a: torch.sqrt(a.abs()), "rsqrt": lambda a: torch.rsqrt(a.abs() + 1),
    "norm": lambda a: a.norm(dim=-1), "vector_norm": lambda a: torch.linalg.vector_norm(a, dim=-1),
    "std": lambda a: a.std(-1), "cdist": lambda a: torch.cdist(a, a),
}


def _masked_clamp_then_backward(op):
    a = torch.randn(4, 5, generator=torch.Generator().manual_seed(5), requires_grad=True)
    x = op(a)
    x[x <= 1e-3] = 1e-3
    torch.log(x).sum().backward()


@pytest.mark.parametrize("name", sorted(OUTPUT_SAVING_OPS))
def test_output_saving_ops_are_measured(name):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _masked_clamp_then_backward(_OPS[name])


@pytest.mark.parametrize("op", [lambda a: a.pow(2).sum(-1), torch.abs, lambda a: a.var(-1), lambda a: a @ a.T])
def test_ops_that_do_not_save_their_output_are_not_flagged(op):
    _masked_clamp_then_backward(op)  # no error: TL107 stays silent on these
