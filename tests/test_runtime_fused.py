"""TL202-TL207 under torch: the bad snippet really breaks; the codemod's OWN output does not.

Every fixed function below comes from ``engine.fix_text`` at test time
(``runtime_support.fix_and_exec``), never typed by hand.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import math  # noqa: E402
import textwrap  # noqa: E402

from fixture_support import FIXTURES  # noqa: E402
from runtime_support import execute, fix_and_exec, forward_backward, settings_for  # noqa: E402
from torchlint import engine  # noqa: E402

ORDINARY_SEED = 0


def ordinary(*shape, dtype=torch.float32):
    generator = torch.Generator().manual_seed(ORDINARY_SEED)
    return torch.randn(*shape, generator=generator).to(dtype)


def assert_close(a, b, tol=1e-5):
    assert torch.allclose(a.float(), b.float(), atol=tol, rtol=tol), (a, b)


# -- TL202 log-of-sigmoid -------------------------------------------------------------------

TL202_SNIPPET = '''
import torch
import torch.nn as nn


def log_p(logits):
    return torch.log(torch.sigmoid(logits))


def log_not_p(logits):
    return torch.log(1 - logits.sigmoid())


def focal(logits, target, gamma=2.0):
    p = torch.sigmoid(logits)
    log_p = torch.log(p)
    log_not_p = torch.log(1 - p)
    return -(target * (1 - p) ** gamma * log_p + (1 - target) * p ** gamma * log_not_p)


def module_form(logits):
    return torch.log(nn.Sigmoid()(logits))
'''


@pytest.fixture(scope="module")
def tl202():
    return fix_and_exec(TL202_SNIPPET, "TL202", applicability="safe")


@pytest.mark.parametrize("name", ["log_p", "log_not_p", "module_form"])
def test_tl202_same_values_on_ordinary_inputs(tl202, name):
    bad, good = tl202.functions(name)
    x = ordinary(256)
    assert_close(bad(x), good(x))
    # float16: the fix is at least as close to the float64 truth as the original
    exact = good(x.double())
    half = x.half()
    assert (good(half).double() - exact).abs().max() <= (bad(half).double() - exact).abs().max()
    assert "logsigmoid" in tl202.fixed_source


@pytest.mark.parametrize(
    "name, edge, dtype",
    [
        ("log_p", -90.0, torch.float32),
        ("log_p", -20.0, torch.float16),
        ("log_not_p", 17.0, torch.float32),
        ("log_not_p", 10.0, torch.float16),
        ("module_form", -90.0, torch.float32),
    ],
)
def test_tl202_inf_and_nan_gradient_go_away(tl202, name, edge, dtype):
    bad, good = tl202.functions(name)
    x = torch.tensor([edge, 0.5], dtype=dtype)
    value, (grad,) = forward_backward(bad, x)
    assert torch.isinf(value[0]) and torch.isnan(grad[0])
    value, (grad,) = forward_backward(good, x)
    assert torch.isfinite(value).all() and torch.isfinite(grad).all()
    # the fixed value is the exact one: log(sigmoid(x)) -> x for x << 0, log(1 - sigmoid(x)) -> -x for x >> 0
    assert value[0].item() == pytest.approx(edge if name != "log_not_p" else -edge, rel=1e-3)


def test_tl202_focal_loss_through_a_variable(tl202):
    bad, good = tl202.functions("focal")
    target = (ordinary(32) > 0).float()
    x = ordinary(32) * 3
    assert_close(bad(x, target), good(x, target))
    confident = torch.tensor([30.0, -30.0, 1.0])
    labels = torch.tensor([1.0, 0.0, 1.0])
    _, (grad, _) = forward_backward(bad, confident, labels)
    assert torch.isnan(grad).any()
    value, (grad, _) = forward_backward(good, confident, labels)
    assert torch.isfinite(value).all() and torch.isfinite(grad).all()


def test_tl202_log_one_minus_tanh_squared_is_inf_past_9_and_the_exact_form_is_not():
    pair = fix_and_exec((FIXTURES / "TL202" / "fix" / "tanh_squared.in.py").read_text(encoding="utf-8"), "TL202", applicability="safe")
    assert pair.fixed_source == (FIXTURES / "TL202" / "fix" / "tanh_squared.out.py").read_text(encoding="utf-8")
    bad, good = execute(pair.source, "tanh_bad"), execute(pair.fixed_source, "tanh_good")
    u = ordinary(256).reshape(64, 4)
    prior = torch.zeros(64)
    assert_close(bad["squashed_log_prob"](u, prior)[1], good["squashed_log_prob"](u, prior)[1])
    w, b = torch.tensor(2.0), torch.tensor(0.5)
    # 1 - tanh**2 cancels as tanh nears 1: the exact form is at least as close to the float64 value
    exact = good["log_det"](u.double(), w.double(), b.double())
    assert_close(good["log_det"](u, w, b).double(), exact)
    assert (good["log_det"](u, w, b) - exact).abs().max() <= (bad["log_det"](u, w, b) - exact).abs().max()
    # tanh(x) rounds to 1 past x ~ 9 in float32 (~4.5 in float16): -inf and a NaN gradient; the exact form is
    # 2 * (log 2 - |x|) there, with the gradient -2 * tanh(x)
    for dtype, edge in ((torch.float32, 10.0), (torch.float16, 5.0)):
        z = torch.tensor([edge, -edge, 0.3], dtype=dtype)
        value, (grad,) = forward_backward(lambda t: bad["log_det"](t, torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype)), z)
        assert torch.isinf(value[:2]).all() and torch.isnan(grad[:2]).all()
        value, (grad,) = forward_backward(lambda t: good["log_det"](t, torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype)), z)
        assert torch.isfinite(value).all() and torch.isfinite(grad).all()
        assert value[0].item() == pytest.approx(2 * (math.log(2) - edge), rel=1e-2)
        assert grad[:2].tolist() == pytest.approx([-2.0, 2.0], rel=1e-2)


TL202_GUARDED_SNIPPET = '''
import torch


def bpr(pos_logits, neg_logits):
    return torch.log(torch.sigmoid(pos_logits) + 1e-24) + torch.log(1 - torch.sigmoid(neg_logits) + 1e-24)
'''


TL202_EXACT_SNIPPET = '''
import torch.nn.functional as F


def bpr(pos_logits, neg_logits):
    return F.logsigmoid(pos_logits) + F.logsigmoid(-neg_logits)
'''


def test_tl202_guarded_log_is_floored_where_the_exact_form_is_not():
    # reported without a fix (the floor may be meant); the exact form the message names, run beside it
    findings = engine.lint_text(textwrap.dedent(TL202_GUARDED_SNIPPET), "snippet.py", settings_for("TL202")).findings
    assert [f.code for f in findings] == ["TL202", "TL202"] and all(f.fix is None for f in findings)
    bad = execute(TL202_GUARDED_SNIPPET, "guarded")["bpr"]
    good = execute(TL202_EXACT_SNIPPET, "exact")["bpr"]
    x = ordinary(256)
    assert_close(bad(x, x), good(x, x))
    # past the floor (sigmoid(-80) << 1e-24, sigmoid(17) rounds to 1): the guarded loss is flat, its gradient gone
    pos, neg = torch.tensor([-80.0]), torch.tensor([17.0])
    value, grads = forward_backward(bad, pos, neg)
    assert torch.isfinite(value).all() and all(grad.abs().item() < 1e-6 for grad in grads)
    value, grads = forward_backward(good, pos, neg)
    assert value.item() == pytest.approx(-97.0, rel=1e-3)
    assert all(grad.abs().item() == pytest.approx(1.0, rel=1e-3) for grad in grads)


# -- TL203 log-sum-exp -----------------------------------------------------------------------

TL203_SNIPPET = '''
import torch


def lse_function(scores):
    return torch.log(torch.sum(torch.exp(scores), dim=1))


def lse_method(scores):
    return scores.exp().sum(-1, keepdim=True).log()


def lse_all(scores):
    return torch.log(torch.exp(scores).sum())


def lse_stored(scores):
    e = torch.exp(scores)
    return torch.log(e.sum(1))
'''


@pytest.fixture(scope="module")
def tl203():
    return fix_and_exec(TL203_SNIPPET, "TL203", applicability="safe")


@pytest.mark.parametrize("name", ["lse_function", "lse_method", "lse_all", "lse_stored"])
def test_tl203_same_values_and_no_overflow(tl203, name):
    bad, good = tl203.functions(name)
    x = ordinary(4, 5)
    assert bad(x).shape == good(x).shape
    assert_close(bad(x), good(x))
    for large, dtype in ((100.0, torch.float32), (12.0, torch.float16)):
        scores = torch.tensor([[large, 0.0, -1.0], [1.0, 2.0, 3.0]], dtype=dtype)
        value, (grad,) = forward_backward(bad, scores)
        assert torch.isinf(value).any() and torch.isnan(grad).any()
        value, (grad,) = forward_backward(good, scores)
        assert torch.isfinite(value).all() and torch.isfinite(grad).all()
    # every exponential underflows: the original is -inf, the fix the true value
    tiny = torch.full((2, 3), -110.0)
    assert torch.isinf(bad(tiny)).all()
    expected = -110.0 + torch.log(torch.tensor(3.0 if name != "lse_all" else 6.0))
    assert torch.allclose(good(tiny).flatten(), expected.expand_as(good(tiny).flatten()))


# -- TL204 x-log-x ---------------------------------------------------------------------------

TL204_SNIPPET = '''
import torch


def entropy(p):
    return -(p * torch.log(p)).sum(-1)


def entropy_method(p):
    return -(p * p.log()).sum(-1)


def softmax_entropy(logits):
    p = torch.softmax(logits, dim=-1)
    return -(p * torch.log(p)).sum(-1)


def entropy_from_log_probabilities(logits):
    logps = torch.log_softmax(logits, dim=-1)
    return -(torch.exp(logps) * logps).sum(-1)
'''


@pytest.fixture(scope="module")
def tl204():
    return fix_and_exec(TL204_SNIPPET, "TL204", applicability="safe")


@pytest.mark.parametrize("name", ["entropy", "entropy_method"])
def test_tl204_zero_probability_no_longer_nan(tl204, name):
    bad, good = tl204.functions(name)
    p = torch.softmax(ordinary(3, 5), -1)
    assert_close(bad(p), good(p))
    with_zero = torch.tensor([[0.0, 0.5, 0.5]])
    assert torch.isnan(bad(with_zero)).all()
    assert good(with_zero).item() == pytest.approx(0.6931472)  # log 2: the true entropy


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_tl204_the_gradient_at_exactly_zero_is_finite_where_bare_xlogy_leaves_nan(tl204, dtype):
    """xlogy(p, p) alone is 0 forward but NaN backward at 0 (its gradient reads log of its second argument);
    the fix floors that argument at the dtype's tiny, so the gradient there is log(tiny), finite, in every dtype."""
    bad, good = tl204.functions("entropy")
    p = torch.tensor([0.0, 0.5, 0.5], dtype=dtype)
    value, (grad,) = forward_backward(bad, p)
    assert torch.isnan(value) and torch.isnan(grad[0])
    _, (bare_grad,) = forward_backward(lambda q: -torch.xlogy(q, q).sum(-1), p)
    assert torch.isnan(bare_grad[0])  # measured: NaN with torch 2.13 on CPU
    value, (grad,) = forward_backward(good, p)
    assert value.item() == pytest.approx(0.6931472, rel=1e-2) and torch.isfinite(grad).all()
    assert grad[0].item() == pytest.approx(-math.log(torch.finfo(dtype).tiny), rel=1e-2)
    normal = torch.tensor([torch.finfo(dtype).tiny * 4, 0.25, 0.75], dtype=dtype)
    assert torch.equal(good(normal), -torch.xlogy(normal, normal).sum(-1))  # the same values where x is normal


def test_tl204_softmax_entropy_gets_a_finite_gradient(tl204):
    """A softmax stored in a name: the fix uses log_softmax, so even the gradient is finite."""
    bad, good = tl204.functions("softmax_entropy")
    assert "log_softmax" in tl204.fixed_source
    z = ordinary(3, 5)
    assert_close(bad(z), good(z))
    confident = torch.tensor([[-200.0, 0.0, 0.0]])  # exp(-200) underflows: p[0] == 0
    value, (grad,) = forward_backward(bad, confident)
    assert torch.isnan(value).all() and torch.isnan(grad).all()
    value, (grad,) = forward_backward(good, confident)
    assert value.item() == pytest.approx(0.6931472) and torch.isfinite(grad).all()


def test_tl204_masked_logits_no_longer_make_a_nan_entropy(tl204):
    """exp(logp) * logp at a masked logit (-inf) is 0 * -inf: the fix's xlogy(exp(l), floored exp(l)) is 0 there, and
    its gradient with respect to the logits is finite."""
    bad, good = tl204.functions("entropy_from_log_probabilities")
    assert "xlogy" in tl204.fixed_source
    z = ordinary(3, 5)
    assert_close(bad(z), good(z))
    masked = torch.tensor([[float("-inf"), 0.0, 0.0]])
    assert torch.isnan(bad(masked)).all()
    assert good(masked).item() == pytest.approx(0.6931472)
    value, (grad,) = forward_backward(good, masked)
    assert torch.isfinite(grad).all()


# -- TL205 expm1-log1p -----------------------------------------------------------------------

TL205_SNIPPET = '''
import torch


def log_one_plus(x):
    return torch.log(1 + x)


def exp_minus_one(x):
    return x.exp() - 1


def one_minus_exp(x):
    return 1 - torch.exp(-x)


def softplus_by_hand(x):
    return torch.log(1 + torch.exp(x))


def softplus_chained(x):
    return x.exp().add(1).log()


def softplus_log1p(x):
    return torch.log1p(torch.exp(x))


def rate(x):
    return (torch.exp(x) - 1) / x
'''


@pytest.fixture(scope="module")
def tl205():
    # log(1 + exp(x)) is TL203's softplus; the others are TL205's.
    return fix_and_exec(TL205_SNIPPET, ("TL203", "TL205"), applicability="safe")


@pytest.mark.parametrize(
    "name", ["log_one_plus", "exp_minus_one", "one_minus_exp", "softplus_by_hand", "softplus_chained", "softplus_log1p", "rate"]
)
def test_tl205_same_values_on_ordinary_inputs(tl205, name):
    bad, good = tl205.functions(name)
    x = ordinary(64).abs() + 0.1
    assert_close(bad(x), good(x))


@pytest.mark.parametrize("name, exact", [("log_one_plus", lambda x: x), ("exp_minus_one", lambda x: x), ("one_minus_exp", lambda x: x)])
def test_tl205_small_inputs_keep_their_digits(tl205, name, exact):
    bad, good = tl205.functions(name)
    for dtype, small in ((torch.float32, 1e-8), (torch.float16, 1e-4)):
        x = torch.tensor([small], dtype=dtype)
        assert bad(x).item() == 0.0 or abs(bad(x).item() - small) / small > 0.2
        assert good(x).item() == pytest.approx(x.item(), rel=1e-3)


def test_tl205_rate_is_one_not_zero_near_zero(tl205):
    bad, good = tl205.functions("rate")
    x = torch.tensor([1e-8])
    assert bad(x).item() == 0.0
    assert good(x).item() == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("name", ["softplus_by_hand", "softplus_chained", "softplus_log1p"])
def test_tl203_softplus_does_not_overflow(tl205, name):
    bad, good = tl205.functions(name)
    for large, dtype in ((100.0, torch.float32), (12.0, torch.float16)):
        x = torch.tensor([large, 1.0], dtype=dtype)
        value, (grad,) = forward_backward(bad, x)
        assert torch.isinf(value[0])
        value, (grad,) = forward_backward(good, x)
        assert torch.isfinite(value).all() and torch.isfinite(grad).all()
        assert value[0].item() == pytest.approx(large, rel=1e-3)


TL203_TWO_TERMS_SNIPPET = '''
import torch


def mixture_energy(a, b):
    return -torch.log(torch.exp(a) + torch.exp(b) + 1e-10)


def pair(a, b):
    return torch.log(a.exp() + b.exp())
'''


def test_tl203_two_terms_become_logaddexp_and_keep_value_and_gradient():
    pair = fix_and_exec(TL203_TWO_TERMS_SNIPPET, "TL203", applicability="safe")
    assert "logaddexp" in pair.fixed_source
    energy, fixed_energy = pair.functions("mixture_energy")
    plain, fixed_plain = pair.functions("pair")
    a, b = ordinary(64), ordinary(64)
    assert_close(plain(a, b), fixed_plain(a, b))
    assert_close(energy(a, b), fixed_energy(a, b), tol=1e-4)  # the eps moves the value by about 1e-10 / e^x
    # large terms: the original overflows to inf with a NaN gradient, logaddexp is finite
    big = torch.tensor([100.0]), torch.tensor([1.0])
    value, grads = forward_backward(plain, *big)
    assert torch.isinf(value).all() and any(torch.isnan(g).any() for g in grads)
    value, grads = forward_backward(fixed_plain, *big)
    assert torch.isfinite(value).all() and all(torch.isfinite(g).all() for g in grads)
    # a mixture's tail: both exponentials underflow, the guarded energy is flat at -log(1e-10) with no gradient
    tail = torch.tensor([-40.0]), torch.tensor([-60.0])
    value, grads = forward_backward(energy, *tail)
    assert value.item() == pytest.approx(23.03, rel=1e-3) and all(g.abs().item() < 1e-6 for g in grads)
    value, grads = forward_backward(fixed_energy, *tail)
    assert value.item() == pytest.approx(40.0, rel=1e-3) and grads[0].abs().item() == pytest.approx(1.0, rel=1e-3)


def test_tl203_one_plus_a_sum_of_exponentials_overflows():
    """log(1 + sum(exp(x))) is reported without a fix; the logsumexp with a 0 term the docs give agrees."""
    import torch.nn.functional as F

    def bad(x):
        return torch.log(1 + torch.exp(x).sum(-1))

    def good(x):
        return torch.logsumexp(F.pad(x, (1, 0)), dim=-1)

    x = ordinary(64).view(8, 8)
    assert_close(bad(x), good(x))
    large = torch.tensor([[100.0, 1.0]], requires_grad=True)
    assert torch.isinf(bad(large)).all()
    value = good(large)
    value.sum().backward()
    assert torch.isfinite(value).all() and torch.isfinite(large.grad).all()


# -- TL206 activation-before-loss -------------------------------------------------------------

TL206_SNIPPET = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def bce(logits, targets):
    return F.binary_cross_entropy(torch.sigmoid(logits), targets, reduction="sum")


def bce_module(logits, targets):
    return nn.BCELoss(reduction="none")(logits.sigmoid(), targets)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.criterion = nn.BCELoss()

    def forward(self, logits, y):
        return self.criterion(torch.sigmoid(logits).squeeze(-1), y)


def detector(logits, y):
    return Detector()(logits, y)


def double_softmax(logits, labels, weight):
    return F.cross_entropy(F.softmax(logits, dim=1), labels, weight=weight, ignore_index=2, reduction="sum")


def nll_on_probs(logits, labels):
    probs = torch.softmax(logits, dim=-1)
    return nn.NLLLoss()(probs, labels)
'''

TL206_RETURNS_PROBS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)
        self.loss_fct = nn.CrossEntropyLoss()

    def forward(self, x, labels):
        probs = F.softmax(self.fc(x), dim=-1)
        return self.loss_fct(probs, labels), probs


def classifier(x, labels):
    return Classifier()(x, labels)
'''


@pytest.fixture(scope="module")
def tl206():
    return fix_and_exec(TL206_SNIPPET, "TL206", applicability={"safe", "numerics"})


def true_cross_entropy(logits, labels, weight=None, ignore_index=None):
    """-log softmax(z)[y], summed, computed by hand in float64."""
    log_probs = logits.double() - logits.double().exp().sum(1, keepdim=True).log()
    picked = -log_probs[torch.arange(len(labels)), labels]
    if weight is not None:
        picked = picked * weight.double()[labels]
    if ignore_index is not None:
        picked = picked[labels != ignore_index]
    return picked.sum()


@pytest.mark.parametrize("name", ["bce", "bce_module", "detector"])
def test_tl206_bce_with_logits_same_values_and_no_saturation(tl206, name):
    bad, good = tl206.functions(name)
    shape = (8, 1) if name == "detector" else (8,)
    logits = ordinary(*shape) * 2
    targets = (ordinary(8) > 0).float()
    assert_close(bad(logits, targets), good(logits, targets))
    # confidently wrong: sigmoid rounds to exactly 1 / 0 and BCE clamps log at -100
    wrong = torch.tensor([20.0]).reshape((1, 1) if name == "detector" else (1,))
    label = torch.tensor([0.0])
    value, (grad, _) = forward_backward(bad, wrong, label)
    assert value.item() == pytest.approx(100.0)  # clamped, not the true 20
    assert (grad == 0).all()  # and no signal to correct the mistake
    value, (grad, _) = forward_backward(good, wrong, label)
    assert value.item() == pytest.approx(20.0, rel=1e-6)
    assert grad.item() == pytest.approx(1.0, rel=1e-6)


def test_tl206_double_softmax_becomes_the_true_cross_entropy(tl206):
    bad, good = tl206.functions("double_softmax")
    logits = ordinary(6, 3) * 4
    labels = torch.tensor([0, 1, 2, 1, 0, 2])
    weight = torch.tensor([1.0, 2.0, 0.5])
    expected = true_cross_entropy(logits, labels, weight, ignore_index=2)
    assert good(logits, labels, weight).item() == pytest.approx(expected.item(), rel=1e-5)
    assert abs(bad(logits, labels, weight).item() - expected.item()) > 0.1
    # the original cannot go below log(1 + (C - 1)/e) per sample, even when perfectly right
    perfect = torch.tensor([[50.0, 0.0, 0.0]])
    floor = torch.log(torch.tensor(1 + 2 / torch.e.__float__())).item()
    assert bad(perfect, torch.tensor([0]), torch.ones(3)).item() == pytest.approx(floor, rel=1e-5)
    assert good(perfect, torch.tensor([0]), torch.ones(3)).item() < 1e-6


def test_tl206_nll_on_probabilities_was_negative(tl206):
    bad, good = tl206.functions("nll_on_probs")
    logits = ordinary(5, 4)
    labels = torch.tensor([0, 1, 2, 3, 0])
    assert bad(logits, labels).item() < 0  # -mean(p[y]): not a cross-entropy at all
    expected = true_cross_entropy(logits, labels) / len(labels)
    assert good(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)


def test_tl206_unsafe_when_the_softmax_is_also_returned():
    # without --unsafe-fixes nothing is applied
    source = textwrap.dedent(TL206_RETURNS_PROBS).lstrip("\n")
    assert engine.fix_text(source, "snippet.py", settings_for("TL206"), unsafe=False).applied == 0
    pair = fix_and_exec(TL206_RETURNS_PROBS, "TL206", unsafe=True, applicability="unsafe")
    bad, good = pair.functions("classifier")
    x = ordinary(5, 4)
    labels = torch.tensor([0, 1, 2, 1, 0])
    bad_loss, bad_out = bad(x, labels)
    good_loss, good_out = good(x, labels)
    # the loss becomes the true cross-entropy of the model's scores...
    logits = good_out
    assert good_loss.item() == pytest.approx((true_cross_entropy(logits.detach(), labels) / 5).item(), rel=1e-5)
    # ...and what forward returns changes from probabilities to scores: why the fix is unsafe
    assert torch.allclose(bad_out.sum(-1), torch.ones(5))
    assert not torch.allclose(good_out.sum(-1), torch.ones(5))
    assert torch.allclose(torch.softmax(good_out, -1), bad_out, atol=1e-6)


# -- TL207 kl-div-probabilities ---------------------------------------------------------------

TL207_SNIPPET = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def r_drop(logits_a, logits_b):
    return F.kl_div(F.softmax(logits_a, -1), F.softmax(logits_b, -1), reduction="batchmean")


class Distiller(nn.Module):
    def __init__(self):
        super().__init__()
        self.kl = nn.KLDivLoss(reduction="batchmean")

    def forward(self, student, teacher):
        p = F.softmax(student, dim=-1)
        q = F.softmax(teacher, dim=-1)
        return self.kl(p, q)


def distill(student, teacher):
    return Distiller()(student, teacher)


def swapped(student, teacher):
    teacher_log = F.log_softmax(teacher, dim=1)
    student_probs = F.softmax(student, dim=1)
    return F.kl_div(student_probs, teacher_log, reduction="batchmean")
'''


@pytest.fixture(scope="module")
def tl207():
    return fix_and_exec(TL207_SNIPPET, "TL207", applicability="numerics")


def true_kl(student, teacher):
    """KL(q || p) = sum q * log(q / p), p = softmax(student), q = softmax(teacher), averaged over the batch."""
    p = torch.softmax(student.double(), -1)
    q = torch.softmax(teacher.double(), -1)
    return (q * (q / p).log()).sum() / student.shape[0]


@pytest.mark.parametrize("name", ["r_drop", "distill", "swapped"])
def test_tl207_kl_div_on_probabilities_is_wrong_and_the_fix_is_right(tl207, name):
    bad, good = tl207.functions(name)
    student, teacher = ordinary(4, 5) * 2, ordinary(4, 5).flip(0) * 2
    expected = true_kl(student, teacher).item()
    assert good(student, teacher).item() == pytest.approx(expected, rel=1e-5)
    # wrong by far, or NaN (the swapped form takes the log-probability target as probabilities: xlogy of negatives)
    assert not abs(bad(student, teacher).item() - expected) <= 0.1
    # identical distributions: the divergence is 0; the original says otherwise (a negative number, or NaN)
    assert abs(good(student, student).item()) < 1e-6
    assert not bad(student, student).item() >= -0.5
