"""TL401 under torch: a checkpoint saved on a GPU does not load here without map_location;
the codemod's own output loads it and restores the same tensors."""
from __future__ import annotations

import argparse

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, save_as_if_on_cuda, storage_locations  # noqa: E402

CUDA_ERROR = "Attempting to deserialize object on a CUDA device"

SAFE_SNIPPET = '''
import torch


def restore(model, path):
    model.load_state_dict(torch.load(path))
    return model


def restore_weights_only(model, path):
    model.load_state_dict(torch.load(path, weights_only=True))
    return model


def restore_entry(model, path):
    model.load_state_dict(torch.load(path, weights_only=False)["model"])
    return model


def restore_with_default_location(model, path):
    model.load_state_dict(torch.load(path, map_location=None))
    return model
'''

UNSAFE_SNIPPET = '''
import torch

device = torch.device("cpu")


def load_weights(path):
    weights = torch.load(path)
    return weights.to(device)
'''


def make_model():
    return torch.nn.Linear(3, 2)


@pytest.fixture(scope="module")
def safe_pair():
    return fix_and_exec(SAFE_SNIPPET, "TL401", applicability="safe")


@pytest.fixture
def gpu_checkpoint(tmp_path):
    """A state dict saved as on a GPU machine, and the tensors it holds."""
    model = make_model()
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    path = tmp_path / "model.pt"
    save_as_if_on_cuda(model.state_dict(), path)
    return path, state


def assert_state_equal(model, state):
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    for name, tensor in state.items():
        assert loaded[name].device.type == "cpu"
        assert torch.equal(loaded[name], tensor), name


def test_the_checkpoint_really_says_cuda(gpu_checkpoint):
    path, state = gpu_checkpoint
    assert not torch.cuda.is_available(), "this proof is about a machine without CUDA"
    assert storage_locations(path) == ["cuda:0"] * len(state)


@pytest.mark.parametrize("name", ["restore", "restore_with_default_location"])  # map_location=None is the default
def test_original_fails_and_fixed_loads(safe_pair, gpu_checkpoint, name):
    path, state = gpu_checkpoint
    bad, good = safe_pair.functions(name)
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        bad(make_model(), path)
    # A plain torch.load(path) in this very process fails the same way: the snippet is not special.
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        torch.load(path)
    assert_state_equal(good(make_model(), path), state)


def test_fix_composes_with_weights_only(safe_pair, gpu_checkpoint, tmp_path):
    assert "torch.load(path, weights_only=True, map_location=\"cpu\")" in safe_pair.fixed_source, safe_pair.describe()
    assert "map_location=None" not in safe_pair.fixed_source and safe_pair.fixed_source.count("map_location") == 4
    path, state = gpu_checkpoint
    bad, good = safe_pair.functions("restore_weights_only")
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        bad(make_model(), path)
    assert_state_equal(good(make_model(), path), state)

    # weights_only=True is still in force after the fix: an object outside the
    # allow-list (an argparse Namespace, as many training scripts save) is refused.
    with_args = tmp_path / "with_args.pt"
    save_as_if_on_cuda({**make_model().state_dict(), "args": argparse.Namespace(lr=0.1)}, with_args)
    with pytest.raises(Exception, match="Weights only load failed"):
        good(make_model(), with_args)


def test_fix_through_a_subscript(safe_pair, tmp_path):
    model = make_model()
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    path = tmp_path / "trainer.pt"
    save_as_if_on_cuda({"model": model.state_dict(), "epoch": 7, "args": argparse.Namespace(lr=0.1)}, path)
    bad, good = safe_pair.functions("restore_entry")
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        bad(make_model(), path)
    assert_state_equal(good(make_model(), path), state)


def test_unsafe_fix_uses_the_device_in_scope(tmp_path):
    # Off the load_state_dict path the fix moves tensors: it is unsafe, applied only on request.
    pair = fix_and_exec(UNSAFE_SNIPPET, "TL401", unsafe=True, applicability="unsafe")
    # (the code moves what it loads to `device` itself: loading it there keeps the program's meaning)
    assert "torch.load(path, map_location=device)" in pair.fixed_source, pair.describe()
    weights = torch.randn(4, 4)
    path = tmp_path / "weights.pt"
    save_as_if_on_cuda(weights, path)
    bad, good = pair.functions("load_weights")
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        bad(path)
    loaded = good(path)
    assert loaded.device == torch.device("cpu") and torch.equal(loaded, weights)


def test_unsafe_fix_is_not_applied_by_plain_fix():
    with pytest.raises(AssertionError, match="no fix was applied"):
        fix_and_exec(UNSAFE_SNIPPET, "TL401", unsafe=False)


CUDA_LOCATION_SNIPPET = '''
import torch

cuda = torch.cuda.is_available()
device = torch.device("cuda" if cuda else "cpu")


def restore(model, path):
    model.load_state_dict(torch.load(path, map_location="cuda"))
    return model.to(device)
'''


def test_a_cuda_map_location_fails_without_cuda_and_the_fix_loads_the_same_weights(tmp_path):
    """Even a checkpoint saved on the CPU fails to load onto "cuda" here; the fix loads it to the CPU and
    load_state_dict copies it onto the model's device."""
    pair = fix_and_exec(CUDA_LOCATION_SNIPPET, "TL401", applicability="safe")
    assert 'map_location="cpu"' in pair.fixed_source, pair.describe()
    model = make_model()
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    path = tmp_path / "cpu_saved.pt"
    torch.save(model.state_dict(), path)
    bad, good = pair.functions("restore")
    with pytest.raises(RuntimeError, match=CUDA_ERROR):
        bad(make_model(), path)
    assert_state_equal(good(make_model(), path), state)
