"""Runtime proofs for TL301-TL304 (autograd graph): the bug happens under torch, the codemod's output does not have it.

Every fixed version is the codemod's own output (``fix_and_exec`` runs
``engine.fix_text`` at test time).
"""
from __future__ import annotations

import time
import warnings

import pytest

torch = pytest.importorskip("torch")

from fixture_support import FIXTURES  # noqa: E402
from runtime_support import fix_and_exec  # noqa: E402

# -- TL301 graph-break-tensor-from-list ----------------------------------------------------------

SPAN_HEAD = """
import torch
import torch.nn as nn


class SpanHead(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc = nn.Linear(hidden, 1)

    def forward(self, feature, spans):
        pred = []
        for src, end in spans:
            embedding = feature[src:end + 1].mean(0, keepdim=True)
            logit = self.fc(embedding)
            pred.append(logit)
        return torch.as_tensor(pred, device=feature.device)
"""


def _span_batch():
    torch.manual_seed(0)
    return torch.randn(12, 8), [(0, 2), (3, 5), (6, 11)], torch.randn(3)


def _parameters_with_grad(model):
    return [name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0]


def test_tl301_seed_forward_cuts_the_graph_and_the_fix_trains():
    pair = fix_and_exec(SPAN_HEAD, "TL301", unsafe=True, applicability="unsafe")
    assert "torch.stack(pred).flatten().to(feature.device)" in pair.fixed_source, pair.describe()
    bad_cls, good_cls = pair.functions("SpanHead")
    feature, spans, target = _span_batch()
    torch.manual_seed(1)
    bad = bad_cls(8)
    good = good_cls(8)
    good.load_state_dict(bad.state_dict())

    with warnings.catch_warnings():  # torch warns (once per place) about grad tensors made scalars
        warnings.simplefilter("ignore", UserWarning)
        bad_out = bad(feature, spans)
    assert bad_out.requires_grad is False
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.nn.functional.mse_loss(bad_out, target).backward()

    good_out = good(feature, spans)
    assert good_out.requires_grad is True
    assert good_out.shape == bad_out.shape == (3,)
    torch.testing.assert_close(good_out.detach(), bad_out)
    torch.nn.functional.mse_loss(good_out, target).backward()
    assert sorted(_parameters_with_grad(good)) == ["fc.bias", "fc.weight"]


def test_tl301_grad_scaler_records_no_inf_checks_before_the_fix():
    """Seed 000/001: with the loss forced to require grad, GradScaler finds no gradient to unscale."""
    pair = fix_and_exec(SPAN_HEAD, "TL301", unsafe=True)
    bad_cls, good_cls = pair.functions("SpanHead")
    feature, spans, target = _span_batch()

    for cls, should_fail in ((bad_cls, True), (good_cls, False)):
        torch.manual_seed(1)
        model = cls(8)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        assert scaler.is_enabled()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(feature, spans)
        loss = torch.nn.functional.mse_loss(out.float(), target)
        if not loss.requires_grad:
            loss.requires_grad_(True)  # the usual "fix" for "does not require grad"
        scaler.scale(loss).backward()
        if should_fail:
            with pytest.raises(AssertionError, match="No inf checks were recorded for this optimizer"):
                scaler.step(optimizer)
            assert _parameters_with_grad(model) == []
        else:
            before = model.fc.weight.detach().clone()
            scaler.step(optimizer)
            scaler.update()
            assert not torch.equal(before, model.fc.weight.detach())


# Each element shape with the fix the rule picks; the shapes were measured with torch 2.13.
SHAPE_CASES = {
    # 0-d elements: as_tensor -> (n,), stack -> (n,)
    "scalar": ("self.fc(c).sum()", "torch.stack(parts)", "safe"),
    # (1,) elements: as_tensor -> (n,), cat -> (n,), stack would give (n, 1)
    "one": ("self.fc(c).mean().unsqueeze(0)", "torch.cat(parts)", "safe"),
    "flatten": ("self.fc(c[:1]).flatten()", "torch.cat(parts)", "safe"),
    # (1, 1) elements, shape unknown to the linter: as_tensor -> (n,), stack().flatten() -> (n,)
    "unknown": ("self.fc(c[:1])", "torch.stack(parts).flatten()", "unsafe"),
}

SHAPE_SNIPPET = """
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, chunks):
        parts = []
        for c in chunks:
            parts.append(ELEMENT)
        return CONVERTER(parts)
"""


@pytest.mark.parametrize("converter", ["torch.as_tensor", "torch.tensor", "torch.Tensor", "torch.FloatTensor"])
@pytest.mark.parametrize("case", sorted(SHAPE_CASES))
def test_tl301_fix_keeps_the_original_shape_and_dtype(case, converter):
    element, expected_call, applicability = SHAPE_CASES[case]
    source = SHAPE_SNIPPET.replace("ELEMENT", element).replace("CONVERTER", converter)
    pair = fix_and_exec(source, "TL301", unsafe=True, applicability=applicability)
    assert expected_call in pair.fixed_source, pair.describe()
    bad_cls, good_cls = pair.functions("Head")
    torch.manual_seed(0)
    bad = bad_cls()
    good = good_cls()
    good.load_state_dict(bad.state_dict())
    chunks = [torch.randn(3, 4) for _ in range(5)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bad_out = bad(chunks)
    good_out = good(chunks)
    assert bad_out.requires_grad is False and good_out.requires_grad is True
    assert good_out.shape == bad_out.shape == (5,)
    assert good_out.dtype == bad_out.dtype
    torch.testing.assert_close(good_out.detach(), bad_out)
    good_out.sum().backward()
    assert good.fc.weight.grad is not None and good.fc.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("converter", ["torch.Tensor", "torch.tensor", "torch.as_tensor"])
def test_tl301_a_list_wrapped_in_a_literal_is_stacked_then_given_its_leading_dimension(converter):
    """d46: SRGAN's ``torch.Tensor([losses])`` makes a (1, n) tensor; the fix must not pass the list itself to
    ``torch.stack`` (a TypeError), so it stacks the list and restores the leading dimension."""
    fixture = (FIXTURES / "TL301" / "fix" / "nested_list.in.py").read_text(encoding="utf-8")
    source = fixture.replace("torch.Tensor([losses])", f"{converter}([losses])")
    pair = fix_and_exec(source, "TL301", unsafe=True, applicability="safe")
    assert "torch.stack(losses).unsqueeze(0)" in pair.fixed_source, pair.describe()
    with pytest.raises(TypeError):
        torch.stack([[torch.zeros(())]])  # what the earlier fix wrote
    bad_cls, good_cls = pair.functions("ContentLoss")
    bad, good = bad_cls(), good_cls()
    good.load_state_dict(bad.state_dict())
    sr, gt = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bad_out = bad(sr, gt)
    good_out = good(sr, gt)
    assert bad_out.requires_grad is False and good_out.requires_grad is True
    assert good_out.shape == bad_out.shape == (1, 3) and good_out.dtype == bad_out.dtype
    torch.testing.assert_close(good_out.detach(), bad_out)
    good_out.sum().backward()
    assert good.fc.weight.grad.abs().sum() > 0


def test_tl301_measured_shapes_behind_the_mapping():
    """The facts the fix's choice rests on (documented in the rule)."""
    for shape, stacked, catted in (((), (4,), None), ((1,), (4, 1), (4,)), ((1, 1), (4, 1, 1), (4, 1))):
        parts = [torch.ones(shape, requires_grad=True) * 2 for _ in range(4)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            assert torch.as_tensor(parts).shape == (4,)
        assert torch.stack(parts).shape == stacked
        assert torch.stack(parts).flatten().shape == (4,)
        if catted is None:
            with pytest.raises(RuntimeError):
                torch.cat(parts)
        else:
            assert torch.cat(parts).shape == catted
    with pytest.raises(ValueError, match="only one element tensors"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.as_tensor([torch.ones(3, requires_grad=True) * 2 for _ in range(2)])


# -- TL302 graph-break-detach ----------------------------------------------------------------------

REWRAP = """
import torch
import torch.nn.functional as F


def train_step(model, x, y, optimizer):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
    return loss.item()
"""

DETACHED_FORWARD = """
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        return self.out(self.body(x)).detach()
"""


def test_tl302_rewrapped_loss_trains_nothing_until_the_fix():
    pair = fix_and_exec(REWRAP, "TL302", unsafe=True, applicability="unsafe")
    assert "requires_grad=True" not in pair.fixed_source, pair.describe()  # the re-wrapping line is gone
    bad_step, good_step = pair.functions("train_step")
    torch.manual_seed(0)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    losses = {}
    for label, step in (("bad", bad_step), ("good", good_step)):
        torch.manual_seed(1)
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        before = [p.detach().clone() for p in model.parameters()]
        losses[label] = step(model, x, y, optimizer)
        grads = [p.grad for p in model.parameters()]
        if label == "bad":
            assert all(g is None for g in grads), pair.describe()
            assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
        else:
            assert all(g is not None and g.abs().sum() > 0 for g in grads), pair.describe()
            assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert losses["bad"] == pytest.approx(losses["good"])  # same forward value


def test_tl302_detached_forward_freezes_the_model_until_the_fix():
    pair = fix_and_exec(DETACHED_FORWARD, "TL302", unsafe=True)
    bad_cls, good_cls = pair.functions("Regressor")
    torch.manual_seed(0)
    bad = bad_cls()
    good = good_cls()
    good.load_state_dict(bad.state_dict())
    x = torch.randn(8, 4)
    bad_out, good_out = bad(x), good(x)
    torch.testing.assert_close(good_out.detach(), bad_out)
    assert not bad_out.requires_grad
    (good_out ** 2).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in good.parameters())
    assert all(p.grad is None for p in bad.parameters())


# -- TL303 backward-twice ---------------------------------------------------------------------------

TWO_HEADS = """
import torch.nn.functional as F


def two_heads(model, x, y_a, y_b):
    out = model(x)
    loss_a = F.mse_loss(out[:, 0], y_a)
    loss_b = F.l1_loss(out[:, 1], y_b)
    loss_a.backward()
    loss_b.backward()
"""

PAIRWISE = """
import torch.nn as nn


def pairwise(model, x, pairs, target):
    criterion = nn.MarginRankingLoss(margin=0.5)
    scores = model(x).squeeze(-1)
    for i, j in pairs:
        loss = criterion(scores[i:i + 1], scores[j:j + 1], target)
        loss.backward()
"""


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


INLINE_HEADS = """
import torch.nn.functional as F


def two_heads(model, x, y_a, y_b):
    out = model(x)
    F.mse_loss(out[:, 0], y_a).backward()
    F.l1_loss(out[:, 1], y_b).backward()
"""


@pytest.mark.parametrize(
    "source, expected",
    [(TWO_HEADS, "(loss_a + loss_b).backward()"), (INLINE_HEADS, "F.mse_loss(out[:, 0], y_a).backward(retain_graph=True)")],
    ids=["summed", "retained"],
)
def test_tl303_two_losses_of_one_forward_pass(source, expected):
    pair = fix_and_exec(source, "TL303", unsafe=True, applicability="unsafe")
    assert expected in pair.fixed_source, pair.describe()
    bad, good = pair.functions("two_heads")
    torch.manual_seed(0)
    x, y_a, y_b = torch.randn(6, 4), torch.randn(6), torch.randn(6)
    model = _mlp()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        bad(model, x, y_a, y_b)

    model.zero_grad(set_to_none=True)
    good(model, x, y_a, y_b)
    fixed = _grads(model)
    model.zero_grad(set_to_none=True)
    out = model(x)
    (torch.nn.functional.mse_loss(out[:, 0], y_a) + torch.nn.functional.l1_loss(out[:, 1], y_b)).backward()
    for got, summed in zip(fixed, _grads(model)):
        torch.testing.assert_close(got, summed)


def test_tl303_pairwise_ranking_loss_in_a_loop():
    pair = fix_and_exec(PAIRWISE, "TL303", unsafe=True)
    bad, good = pair.functions("pairwise")
    torch.manual_seed(0)
    x, pairs, target = torch.randn(5, 4), [(0, 1), (2, 3), (4, 0)], torch.ones(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        bad(model, x, pairs, target)

    model.zero_grad(set_to_none=True)
    good(model, x, pairs, target)
    fixed = _grads(model)
    model.zero_grad(set_to_none=True)
    criterion = torch.nn.MarginRankingLoss(margin=0.5)
    scores = model(x).squeeze(-1)
    sum(criterion(scores[i:i + 1], scores[j:j + 1], target) for i, j in pairs).backward()
    for got, summed in zip(fixed, _grads(model)):
        torch.testing.assert_close(got, summed)


# -- TL304 anomaly-detection-left-on ----------------------------------------------------------------

ANOMALY = """
import torch
import torch.nn.functional as F


def train(model, batches, optimizer):
    torch.autograd.set_detect_anomaly(True)
    for x, y in batches:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()
"""


@pytest.fixture
def anomaly_mode_restored():
    before = torch.is_anomaly_enabled()
    yield
    torch.autograd.set_detect_anomaly(before)


def _run_timed(train, seed, batches):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(32, 32), torch.nn.GELU())])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = time.perf_counter()
    loss = train(model, batches, optimizer)
    return time.perf_counter() - start, loss


def test_tl304_anomaly_mode_slows_training_and_the_fix_gates_it(monkeypatch, anomaly_mode_restored):
    monkeypatch.delenv("DETECT_ANOMALY", raising=False)
    pair = fix_and_exec(ANOMALY, "TL304", unsafe=True, applicability="unsafe")
    bad, good = pair.functions("train")
    torch.manual_seed(0)
    batches = [(torch.randn(8, 32), torch.randn(8, 32)) for _ in range(10)]

    for train in (bad, good):  # warm-up: first calls pay one-time costs (lazy init, allocator)
        _run_timed(train, 1, batches[:2])
    ratios = []
    # A burst of load from other processes can hide the slowdown in one round; it shows in one of three.
    for _ in range(3):
        slow, fast = [], []
        for _ in range(5):  # interleaved, so that load from other processes hits both alike
            torch.autograd.set_detect_anomaly(False)
            elapsed, bad_loss = _run_timed(bad, 1, batches)
            assert torch.is_anomaly_enabled()
            slow.append(elapsed)
            torch.autograd.set_detect_anomaly(False)
            elapsed, good_loss = _run_timed(good, 1, batches)
            assert not torch.is_anomaly_enabled()
            fast.append(elapsed)
            assert good_loss == pytest.approx(bad_loss)  # same training, only slower
        ratios.append(min(slow) / min(fast))
        if ratios[-1] > 1:
            break
    print(f"anomaly mode slowdown (min of 5 runs, 10 steps of a 12-layer MLP), by round: {ratios}")
    assert max(ratios) > 1

    monkeypatch.setenv("DETECT_ANOMALY", "1")
    torch.autograd.set_detect_anomaly(False)
    _run_timed(good, 1, batches[:2])
    assert torch.is_anomaly_enabled()  # still available on demand
