"""TL307 (parameter-moved-after-wrapping) under torch: a Parameter converted right after it is made is a copy
the module does not register, so training never changes it; the codemod's own output registers it.

On this CPU-only machine a dtype change (``.double()``) makes the copy that ``.to(device)`` makes on a
GPU; the rule flags both the same way.
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec  # noqa: E402

MOVED_AFTER_WRAPPING = """
import torch
import torch.nn as nn


class Scaled(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), 2.0)).double()
        self.bias = nn.Parameter(torch.zeros(dim)).to(torch.float64)

    def forward(self, x):
        return x * self.scale + self.bias


def train(dim, steps):
    torch.manual_seed(0)
    model = Scaled(dim)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1) if list(model.parameters()) else None
    x = torch.randn(8, dim, dtype=torch.float64)
    first = model(x).detach().clone()
    for _ in range(steps):
        loss = ((model(x) - 1.0) ** 2).mean()
        loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad()
    return model, first, model(x).detach()


def optimise_directly(dim):
    return torch.optim.SGD([nn.Parameter(torch.ones(dim)).double()], lr=0.1)
"""


@pytest.fixture(scope="module")
def pair():
    return fix_and_exec(MOVED_AFTER_WRAPPING, "TL307", unsafe=True, applicability="unsafe")


def test_the_moved_parameter_is_not_registered_and_never_trained(pair):
    model, first, last = pair.original["train"](3, 5)
    assert [name for name, _ in model.named_parameters()] == []
    assert "scale" not in model.state_dict() and not model.scale.is_leaf
    assert torch.equal(first, last), "nothing was trained"


def test_the_fix_registers_it_and_training_moves_it(pair):
    model, first, last = pair.fixed["train"](3, 5)
    assert sorted(name for name, _ in model.named_parameters()) == ["bias", "scale"]
    assert model.scale.dtype == torch.float64 and model.scale.is_leaf
    assert not torch.equal(first, last), "the registered parameters were trained"


def test_forward_values_agree_before_training(pair):
    _, bad_first, _ = pair.original["train"](3, 0)
    _, good_first, _ = pair.fixed["train"](3, 0)
    assert torch.equal(bad_first, good_first)


def test_an_optimizer_refuses_the_copy_and_takes_the_fixed_parameter(pair):
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        pair.original["optimise_directly"](3)
    optimizer = pair.fixed["optimise_directly"](3)
    assert optimizer.param_groups[0]["params"][0].dtype == torch.float64


def test_a_move_the_tensor_already_had_returns_the_parameter_itself():
    """Why fixtures/TL307/checker/good_moved_parameter.py's AdaptiveAdjacency stays silent: ``.to`` of a tensor
    already there (device and dtype) returns that tensor, so the Parameter is registered and trained."""
    torch.manual_seed(0)
    device = "cpu"
    first = torch.nn.Parameter(torch.randn(3, 2).to(device), requires_grad=True)
    second = torch.nn.Parameter(torch.randn(2, 3, device=device))
    assert first.to(device) is first and second.to(device) is second
    # while a move elsewhere copies (the finding): here a dtype change stands for another device
    assert first.to(torch.float64) is not first and not first.to(torch.float64).is_leaf
