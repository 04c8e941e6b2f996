"""TL306 (clip-before-backward) under torch: the step a misplaced clip is meant for uses unclipped gradients.

Each snippet is run as the user wrote it and as the codemod rewrote it (``fix_and_exec``: the fixed code
is the codemod's own output). An optimizer that records the gradients it is handed shows what each
step used: above ``max_norm`` with the clip before the backward (or after the step), at most
``max_norm`` once the clip sits between them, while the forward values (the loss of the same weights
on the same batch) are those of the original code.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec  # noqa: E402

MAX_NORM = 0.5

CLIP_BEFORE_BACKWARD = """
import torch
import torch.nn.functional as F


def train_step(model, x, y, optimizer, max_norm):
    optimizer.zero_grad()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()
"""

CLIP_WITHOUT_ZERO_GRAD = """
import torch
import torch.nn.functional as F


def train(model, batches, optimizer, max_norm):
    losses = []
    for x, y in batches:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses
"""

CLIP_AFTER_STEP = """
import torch
import torch.nn.functional as F


def train(model, batches, optimizer, max_norm):
    losses = []
    for x, y in batches:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses
"""

UNSCALED_BEFORE_BACKWARD = """
import torch
import torch.nn.functional as F


def train_step(model, x, y, optimizer, scaler, max_norm):
    optimizer.zero_grad(ZERO_GRAD_ARGS)
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    loss = F.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
"""


class RecordingSGD(torch.optim.SGD):
    """SGD that keeps the total gradient norm, and the gradients, each step is handed."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.norms = []
        self.grads = []

    def step(self, closure=None):
        grads = [p.grad.detach().clone() for group in self.param_groups for p in group["params"] if p.grad is not None]
        self.grads.append(grads)
        self.norms.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item())
        return super().step(closure)


def _parts(seed=0, batches=3):
    """A model, its recording optimizer, and batches whose gradients are far above MAX_NORM."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    data = [(torch.randn(8, 4) * 3, torch.randn(8, 2) * 10) for _ in range(batches)]
    return model, RecordingSGD(model.parameters(), lr=0.01), data


def _unclipped_norm(seed=0):
    """What backward() gives on the first batch, clipped by nobody."""
    model, _, data = _parts(seed)
    x, y = data[0]
    torch.nn.functional.mse_loss(model(x), y).backward()
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()


def test_the_batches_give_gradients_far_above_max_norm():
    assert _unclipped_norm() > 10 * MAX_NORM


def test_clip_after_zero_grad_leaves_the_step_unclipped_until_the_fix():
    pair = fix_and_exec(CLIP_BEFORE_BACKWARD, "TL306", unsafe=True, applicability="unsafe")
    assert "loss.backward()\n    torch.nn.utils.clip_grad_norm_" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("train_step")

    model, optimizer, data = _parts()
    x, y = data[0]
    loss_bad = bad(model, x, y, optimizer, MAX_NORM)
    assert optimizer.norms[0] == pytest.approx(_unclipped_norm(), rel=1e-5)  # the clip did nothing
    assert optimizer.norms[0] > MAX_NORM

    model, optimizer, data = _parts()
    loss_good = good(model, x, y, optimizer, MAX_NORM)
    assert optimizer.norms[0] <= MAX_NORM * (1 + 1e-5)
    assert optimizer.norms[0] == pytest.approx(MAX_NORM, rel=1e-4)  # clipped to max_norm, not zeroed
    assert loss_good == loss_bad  # the forward pass is the same


def test_without_zero_grad_the_clip_rescales_the_previous_steps_leftovers():
    pair = fix_and_exec(CLIP_WITHOUT_ZERO_GRAD, "TL306", unsafe=True, applicability="unsafe")
    bad, good = pair.functions("train")

    model, optimizer, data = _parts()
    losses_bad = bad(model, data, optimizer, MAX_NORM)
    assert all(norm > MAX_NORM for norm in optimizer.norms), optimizer.norms

    model, optimizer, data = _parts()
    losses_good = good(model, data, optimizer, MAX_NORM)
    assert all(norm <= MAX_NORM * (1 + 1e-5) for norm in optimizer.norms), optimizer.norms
    assert losses_good[0] == losses_bad[0]  # same weights, same batch: the same forward value
    assert losses_good[1:] != losses_bad[1:]  # after that, what is trained differs: the fix is unsafe


def test_clip_after_the_step_leaves_the_step_unclipped_until_the_fix():
    pair = fix_and_exec(CLIP_AFTER_STEP, "TL306", unsafe=True, applicability="unsafe")
    assert pair.findings[0].message.startswith("gradients clipped after optimizer.step()")
    bad, good = pair.functions("train")

    model, optimizer, data = _parts()
    losses_bad = bad(model, data, optimizer, MAX_NORM)
    assert all(norm > MAX_NORM for norm in optimizer.norms), optimizer.norms

    model, optimizer, data = _parts()
    before = [p.detach().clone() for p in model.parameters()]
    losses_good = good(model, data, optimizer, MAX_NORM)
    assert all(norm <= MAX_NORM * (1 + 1e-5) for norm in optimizer.norms), optimizer.norms
    assert losses_good[0] == losses_bad[0]
    # the fixed first step is exactly SGD on the clipped gradients
    model_check, _, _ = _parts()
    x, y = data[0]
    torch.nn.functional.mse_loss(model_check(x), y).backward()
    torch.nn.utils.clip_grad_norm_(model_check.parameters(), MAX_NORM)
    expected = [w - 0.01 * p.grad for w, p in zip(before, model_check.parameters())]
    first_step = [w - 0.01 * g for w, g in zip(before, optimizer.grads[0])]
    for want, got in zip(expected, first_step):
        torch.testing.assert_close(got, want)


def _warm_scaler(scale):
    """A GradScaler that has scaled before (an earlier step of the run)."""
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    scaler.scale(torch.zeros(()))
    return scaler


@pytest.mark.parametrize("set_to_none", [True, False], ids=["set_to_none", "zeros"])
def test_unscale_before_the_backward_fails_or_steps_with_scaled_gradients_until_the_fix(set_to_none):
    source = UNSCALED_BEFORE_BACKWARD.replace("ZERO_GRAD_ARGS", "" if set_to_none else "set_to_none=False")
    pair = fix_and_exec(source, "TL306", unsafe=True, applicability="unsafe")
    assert "backward()\n    scaler.unscale_(optimizer)\n    torch.nn.utils.clip_grad_norm_" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("train_step")
    scale = 1024.0

    model, optimizer, data = _parts()
    x, y = data[0]
    # a fresh scaler has no scale to divide by before its first scale(): the first step raises
    with pytest.raises(AssertionError, match="unscale_ but _scale is None"):
        bad(model, x, y, optimizer, torch.amp.GradScaler("cpu", init_scale=scale), MAX_NORM)
    model, optimizer, data = _parts()
    if set_to_none:
        # unscale_ finds no gradient to check, and the step refuses to run
        with pytest.raises(AssertionError, match="No inf checks were recorded"):
            bad(model, x, y, optimizer, _warm_scaler(scale), MAX_NORM)
        loss_bad = torch.nn.functional.mse_loss(_parts()[0](x), y).item()
    else:
        # gradient tensors an earlier step left (zero_grad(set_to_none=False) keeps them): unscale_ divides
        # the zeros, and the step takes the scaled gradients, neither unscaled nor clipped
        for parameter in model.parameters():
            parameter.grad = torch.zeros_like(parameter)
        loss_bad = bad(model, x, y, optimizer, _warm_scaler(scale), MAX_NORM)
        assert optimizer.norms[0] == pytest.approx(scale * _unclipped_norm(), rel=1e-4)

    for scaler in (torch.amp.GradScaler("cpu", init_scale=scale), _warm_scaler(scale)):
        model, optimizer, data = _parts()
        loss_good = good(model, x, y, optimizer, scaler, MAX_NORM)
        assert optimizer.norms[0] == pytest.approx(MAX_NORM, rel=1e-4)
        assert loss_good == loss_bad
