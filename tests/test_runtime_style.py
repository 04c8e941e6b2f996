"""TL501 and TL502 under torch: what the original costs or breaks, and that the codemod's OWN output keeps the values.

The fixed code comes from ``engine.fix_text`` at test time (``runtime_support``).
TorchScript needs source files, so those checks import both versions from files.
"""
from __future__ import annotations

import importlib.util
import warnings

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec  # noqa: E402


def import_file(path, source):
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AtenTrace(torch.utils._python_dispatch.TorchDispatchMode):
    """The aten operators a piece of code runs."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


# -- TL501 membership-test-on-tensor ----------------------------------------------------------

TL501_SNIPPET = '''
import torch


def check_nan(x: torch.Tensor) -> bool:
    checker = False
    if True in torch.isnan(x):
        checker = True
    return checker


def has_nan(x: torch.Tensor) -> bool:
    return True in torch.isnan(x)


def not_all_finite(x: torch.Tensor) -> bool:
    return False in torch.isfinite(x)


def no_inf(x: torch.Tensor) -> bool:
    return True not in x.isinf()


def all_finite(x: torch.Tensor) -> bool:
    return False not in torch.isfinite(x)
'''

TL501_FUNCTIONS = ["check_nan", "has_nan", "not_all_finite", "no_inf", "all_finite"]
TL501_INPUTS = [
    torch.tensor([1.0, 2.0, 3.0]),
    torch.tensor([1.0, float("nan"), 3.0]),
    torch.tensor([float("nan")] * 3),
    torch.tensor([1.0, float("inf"), -float("inf")]),
    torch.tensor([]),
    torch.zeros(2, 3),
]


@pytest.fixture(scope="module")
def tl501():
    return fix_and_exec(TL501_SNIPPET, "TL501", applicability="safe")


@pytest.mark.parametrize("name", TL501_FUNCTIONS)
def test_tl501_same_answer_and_type_for_every_input(tl501, name):
    bad, good = tl501.functions(name)
    for x in TL501_INPUTS:
        assert bad(x) == bool(good(x)), (name, x)
        assert type(good(x)) is bool  # value contexts get bool(...), not a tensor


def test_tl501_membership_builds_a_second_mask(tl501):
    bad, good = tl501.functions("has_nan")
    x = torch.randn(1000)
    with AtenTrace() as trace:
        bad(x)
    assert "aten.eq.Scalar" in trace.ops  # (True == mask): a second full-size tensor
    with AtenTrace() as trace:
        good(x)
    assert "aten.eq.Scalar" not in trace.ops and "aten.any.default" in trace.ops


def test_tl501_only_the_fixed_code_compiles_under_torchscript(tl501, tmp_path):
    original = import_file(tmp_path / "tl501_original.py", tl501.source)
    fixed = import_file(tmp_path / "tl501_fixed.py", tl501.fixed_source)
    with pytest.raises(RuntimeError):
        torch.jit.script(original.has_nan)
    for name in TL501_FUNCTIONS:
        scripted = torch.jit.script(getattr(fixed, name))
        for x in TL501_INPUTS:
            assert scripted(x) == getattr(original, name)(x)


# -- TL502 tensor-from-range -----------------------------------------------------------------

TL502_SNIPPET = '''
import torch


def labels_for(scores):
    return torch.tensor(
        range(scores.size(0)),
        dtype=torch.long,
        device=scores.device,
    )


def plain(n: int):
    return torch.tensor(range(n))


def stepped(start: int, stop: int, step: int):
    return torch.as_tensor(range(start, stop, step), dtype=torch.float64)


def from_list(n: int):
    return torch.LongTensor(list(range(n)))
'''


@pytest.fixture(scope="module")
def tl502():
    return fix_and_exec(TL502_SNIPPET, "TL502", applicability="safe")


def same_tensor(a, b):
    return a.dtype == b.dtype and a.device == b.device and a.shape == b.shape and torch.equal(a, b)


def test_tl502_same_values_dtype_and_device(tl502):
    for name, argument_sets in {
        "plain": [(1,), (7,), (1000,)],
        "stepped": [(0, 10, 3), (5, -5, -2), (2, 3, 1)],
        "from_list": [(1,), (9,)],
    }.items():
        bad, good = tl502.functions(name)
        for arguments in argument_sets:
            assert same_tensor(bad(*arguments), good(*arguments)), (name, arguments)
    bad, good = tl502.functions("labels_for")
    scores = torch.randn(6, 6)
    assert same_tensor(bad(scores), good(scores))


def test_tl502_empty_range_without_dtype_is_the_documented_difference(tl502):
    bad, good = tl502.functions("plain")
    assert bad(0).dtype == torch.float32 and good(0).dtype == torch.int64
    assert bad(0).numel() == good(0).numel() == 0


def test_tl502_traced_labels_follow_the_batch_size_only_after_the_fix(tl502):
    bad, good = tl502.functions("labels_for")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced_bad = torch.jit.trace(bad, torch.randn(4, 4))
        traced_good = torch.jit.trace(good, torch.randn(4, 4))
    batch = torch.randn(8, 8)
    assert traced_bad(batch).shape == (4,)  # frozen at the traced batch: 4 labels for 8 rows
    assert same_tensor(traced_good(batch), torch.arange(8))


def test_tl502_only_the_fixed_code_compiles_under_torchscript(tl502, tmp_path):
    original = import_file(tmp_path / "tl502_original.py", tl502.source)
    fixed = import_file(tmp_path / "tl502_fixed.py", tl502.fixed_source)
    with pytest.raises(RuntimeError):
        torch.jit.script(original.plain)
    assert same_tensor(torch.jit.script(fixed.plain)(5), original.plain(5))
