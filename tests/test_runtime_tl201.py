"""TL201 under torch: log(softmax(x)) gives a NaN gradient; the codemod's own output does not."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from runtime_support import fix_and_exec, forward_backward  # noqa: E402

SNIPPET = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def function_form(logits):
    return torch.log(F.softmax(logits, dim=-1))


def torch_softmax_form(logits):
    return torch.log(torch.softmax(logits, -1))


def method_form(logits):
    return logits.softmax(-1).log()


def module_form(logits):
    return torch.log(nn.Softmax(dim=-1)(logits))


def upcast_form(logits):
    # softmax in float32 for half inputs: the positional dtype must survive the fix.
    return torch.log(torch.softmax(logits, -1, torch.float32))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, logits):
        return torch.log(self.softmax(logits))


def classifier_form(logits):
    return Classifier()(logits)
'''

FORMS = ["function_form", "torch_softmax_form", "method_form", "module_form", "upcast_form", "classifier_form"]
CONFIDENT = [100.0, 0.0, -100.0]


@pytest.fixture(scope="module")
def pair():
    return fix_and_exec(SNIPPET, "TL201", applicability="safe")


def nll_of_class_0(log_probs):
    """The usual classification loss, for a confident and CORRECT prediction."""
    return F.nll_loss(log_probs.reshape(-1, log_probs.shape[-1]).float(), torch.zeros(log_probs.numel() // log_probs.shape[-1], dtype=torch.long))


def test_every_form_is_fixed_to_log_softmax(pair):
    assert pair.applied == len(FORMS)
    assert "log_softmax" in pair.fixed_source
    assert "torch.log(" not in pair.fixed_source and ".log()" not in pair.fixed_source, pair.describe()


@pytest.mark.parametrize("form", FORMS)
def test_float32_nan_gradient_is_gone(pair, form):
    bad, good = pair.functions(form)
    logits = torch.tensor([CONFIDENT])

    out, (grad,) = forward_backward(bad, logits)
    assert out[0, 2] == float("-inf")  # exp(-200) underflows to 0 in float32
    assert torch.isnan(grad).any(), grad
    # Summed, the loss itself is -inf; the usual NLL loss of the right class is a
    # harmless-looking 0.0 and the gradient is NaN all the same.
    assert torch.isneginf(bad(logits).sum())
    assert nll_of_class_0(bad(logits)).item() == 0.0
    _, (grad,) = forward_backward(bad, logits, loss=nll_of_class_0)
    assert torch.isnan(grad).all(), grad

    out, (grad,) = forward_backward(good, logits)
    assert torch.isfinite(out).all() and torch.isfinite(grad).all(), (out, grad)
    torch.testing.assert_close(out, torch.tensor([[0.0, -100.0, -200.0]]))
    _, (grad,) = forward_backward(good, logits, loss=nll_of_class_0)
    assert torch.isfinite(grad).all(), grad


@pytest.mark.parametrize("form", FORMS)
def test_float32_forward_and_gradient_agree_on_ordinary_logits(pair, form):
    bad, good = pair.functions(form)
    logits = torch.randn(16, 10, generator=torch.Generator().manual_seed(2))
    bad_out, (bad_grad,) = forward_backward(bad, logits, loss=nll_of_class_0)
    good_out, (good_grad,) = forward_backward(good, logits, loss=nll_of_class_0)
    assert good_out.dtype == bad_out.dtype == torch.float32
    torch.testing.assert_close(good_out, bad_out, rtol=0, atol=1e-6)
    torch.testing.assert_close(good_grad, bad_grad, rtol=0, atol=1e-6)


# (dtype, the mildest logits tried here that break the original in that dtype)
HALF_CASES = [
    # float16's smallest subnormal is ~6e-8: exp(-20) = 2e-9 already underflows.
    (torch.float16, [10.0, 0.0, -10.0]),
    # bfloat16 has float32's exponent range but fewer subnormals: exp(-100) underflows.
    (torch.bfloat16, CONFIDENT),
]


@pytest.mark.parametrize("dtype, logits", HALF_CASES, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("form", [f for f in FORMS if f != "upcast_form"])
def test_half_precision_nan_gradient_is_gone(pair, form, dtype, logits):
    bad, good = pair.functions(form)
    logits = torch.tensor([logits], dtype=dtype)
    out, (grad,) = forward_backward(bad, logits, loss=nll_of_class_0)
    assert out.dtype == dtype
    assert torch.isneginf(out).any() and torch.isnan(grad).all(), (out, grad)
    out, (grad,) = forward_backward(good, logits, loss=nll_of_class_0)
    assert out.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(grad).all(), (out, grad)


def test_float16_logits_that_float32_handles(pair):
    # The same logits are harmless in float32: float16 breaks at much milder confidence.
    bad, _ = pair.functions("function_form")
    _, (grad,) = forward_backward(bad, torch.tensor([[10.0, 0.0, -10.0]]), loss=nll_of_class_0)
    assert torch.isfinite(grad).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("form", [f for f in FORMS if f != "upcast_form"])
def test_half_precision_forward_agrees_on_ordinary_logits(pair, form, dtype):
    bad, good = pair.functions(form)
    logits = torch.randn(16, 10, generator=torch.Generator().manual_seed(3)).to(dtype)
    bad_out, _ = forward_backward(bad, logits, loss=nll_of_class_0)
    good_out, _ = forward_backward(good, logits, loss=nll_of_class_0)
    eps = torch.finfo(dtype).eps
    # A couple of units in the last place of the dtype: the two compute in different orders.
    torch.testing.assert_close(good_out.float(), bad_out.float(), rtol=2 * eps, atol=eps)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_upcast_form_keeps_its_dtype(pair, dtype):
    bad, good = pair.functions("upcast_form")
    # Inside float32, [10, 0, -10] is fine and stays fine; the confident logits break the original.
    logits = torch.tensor([CONFIDENT], dtype=dtype)
    out, (grad,) = forward_backward(bad, logits, loss=nll_of_class_0)
    assert out.dtype == torch.float32 and torch.isnan(grad).all()
    out, (grad,) = forward_backward(good, logits, loss=nll_of_class_0)
    assert out.dtype == torch.float32, pair.describe()
    assert torch.isfinite(out).all() and torch.isfinite(grad).all()
    ordinary = torch.randn(16, 10, generator=torch.Generator().manual_seed(4)).to(dtype)
    torch.testing.assert_close(good(ordinary), bad(ordinary), rtol=0, atol=1e-6)


EPS_SNIPPET = '''
import torch
import torch.nn.functional as F


def with_eps(logits):
    return torch.log(F.softmax(logits, dim=-1) + 1e-8)
'''


def test_eps_form_clips_the_loss_and_the_fix_does_not():
    # The eps hides the -inf, so the gradient is finite, but it caps -log p at -log(1e-8) = 18.4:
    # the model gets no signal to fix a prediction that is wrong by more than that.
    bad, good = fix_and_exec(EPS_SNIPPET, "TL201", applicability="safe").functions("with_eps")
    logits = torch.tensor([CONFIDENT])
    bad_out, (bad_grad,) = forward_backward(bad, logits)
    assert torch.isfinite(bad_grad).all()
    assert abs(bad_out[0, 2].item() - torch.log(torch.tensor(1e-8)).item()) < 1e-3
    good_out, (good_grad,) = forward_backward(good, logits)
    assert good_out[0, 2].item() == -200.0 and torch.isfinite(good_grad).all()
    # On ordinary logits the two differ by about eps / p.
    ordinary = torch.randn(16, 10, generator=torch.Generator().manual_seed(5))
    probabilities = F.softmax(ordinary, dim=-1)
    difference = (bad(ordinary) - good(ordinary)).abs()
    assert (difference <= 1.5e-8 / probabilities + 1e-6).all()
