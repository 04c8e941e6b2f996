"""Runtime proofs for the TL6xx API-drift rules under torch 2.13.

For a removed API the original snippet really fails (RuntimeError from the stub torch keeps,
AttributeError, ModuleNotFoundError) and the codemod's OWN output (``engine.fix_text`` at test
time) computes what the old API computed.  For a deprecated API, which still runs on 2.13, the
original warns and the fixed code computes the same values without the warning.  The recorded
facts themselves (analysis/api/api_drift.py) are checked against the installed torch too.
"""
from __future__ import annotations

import importlib
import inspect
import json
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

from runtime_support import SNIPPET_PATH, execute  # noqa: E402

from fixture_support import FIXTURES  # noqa: E402

from torchlint import config, engine, registry  # noqa: E402
from torchlint.analysis.api import api_drift  # noqa: E402
from torchlint.rule import Confidence  # noqa: E402


def settings(codes, target=None) -> config.Settings:
    return config.Settings(
        enabled=frozenset(registry.expand_selectors([codes])), target_torch_version=target, confidence_floor=Confidence.LOW
    )


def fixed(source: str, code: str, *, unsafe: bool = False, target=None, remaining_ok: bool = False) -> str:
    """The codemod's own output for ``source`` (dedented), with ``code`` selected."""
    source = textwrap.dedent(source).lstrip("\n")
    result = engine.fix_text(source, SNIPPET_PATH, settings(code, target), unsafe=unsafe)
    assert not result.result.diagnostics, result.result.diagnostics
    assert result.applied > 0, f"the codemod changed nothing:\n{source}"
    if not remaining_ok:
        assert not result.result.findings, [(f.code, f.location.line, f.message) for f in result.result.findings]
    return result.text


def run(source: str):
    return execute(textwrap.dedent(source).lstrip("\n"), "snippet")


def quietly(function, *args):
    """Call ``function`` and return (result, the warnings it emitted).  torch's own deprecations warn once
    per process unless told otherwise: here every call warns, so the result does not depend on test order."""
    previous = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = function(*args)
    finally:
        torch.set_warn_always(previous)
    return result, [str(w.message) for w in caught]


def well_conditioned(n: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=generator, dtype=torch.float64) + n * torch.eye(n, dtype=torch.float64)


def symmetric_positive(n: int, seed: int = 0) -> torch.Tensor:
    a = well_conditioned(n, seed)
    return a @ a.mT + torch.eye(n, dtype=torch.float64)


# -- TL601 removed-torch-api ---------------------------------------------------------------------

SOLVE = """
import torch

def systems(A, B):
    X, _ = torch.solve(B, A)
    Y = torch.solve(B, A)[0]
    return X, Y

def by_method(n):
    A = torch.eye(n, dtype=torch.float64) * 2
    B = torch.ones(n, 1, dtype=torch.float64)
    X, _ = B.solve(A)
    return X
"""


def test_tl601_solve_raises_on_2_13_and_the_rewrite_solves_the_same_system():
    A, B = well_conditioned(4), torch.randn(4, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="deprecated since version 1.9 and is now removed"):
        run(SOLVE)["systems"](A, B)
    with pytest.raises(RuntimeError, match="now removed"):
        run(SOLVE)["by_method"](3)
    after = fixed(SOLVE, "TL601")
    assert "X = torch.linalg.solve(A, B)" in after and "Y = torch.linalg.solve(A, B)" in after
    X, Y = run(after)["systems"](A, B)
    # torch.solve(B, A) solved A X = B: the swapped arguments solve the same system.
    assert torch.allclose(A @ X, B) and torch.equal(X, Y)
    assert torch.allclose(run(after)["by_method"](3), torch.full((3, 1), 0.5, dtype=torch.float64))


SYMEIG = """
import torch

def spectrum(A):
    values, vectors = torch.symeig(A, eigenvectors=True)
    smallest = torch.symeig(A)[0]
    return values, vectors, smallest
"""


def test_tl601_symeig_rewrite_keeps_reading_the_upper_triangle():
    S = symmetric_positive(5)
    # What symeig saw: only the upper triangle. Put garbage below the diagonal.
    A = torch.triu(S) + torch.tril(torch.randn(5, 5, dtype=torch.float64), -1)
    with pytest.raises(RuntimeError, match="now removed"):
        run(SYMEIG)["spectrum"](A)
    after = fixed(SYMEIG, "TL601")
    values, vectors, smallest = run(after)["spectrum"](A)
    expected = torch.linalg.eigvalsh(S)
    assert torch.allclose(values, expected) and torch.allclose(smallest, expected)
    assert torch.allclose(S @ vectors, vectors * values)
    # Without UPLO="U" the rewrite would read the garbage: linalg's default is the lower triangle.
    assert not torch.allclose(torch.linalg.eigvalsh(A), expected)


MATRIX_RANK = """
import torch

def ranks(A):
    return torch.matrix_rank(A), torch.matrix_rank(A, 1e-5)
"""


def test_tl601_matrix_rank_rewrite_counts_the_same_singular_values():
    U, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    A = U @ torch.diag(torch.tensor([3.0, 1e-3, 1e-7, 0.0], dtype=torch.float64)) @ V.mT
    with pytest.raises(RuntimeError, match="now removed"):
        run(MATRIX_RANK)["ranks"](A)
    default, tolerant = run(fixed(MATRIX_RANK, "TL601"))["ranks"](A)
    singular = torch.linalg.svdvals(A)
    # The old defaults: tol = largest singular value * max(m, n) * eps; an explicit tol is absolute.
    assert default.item() == int((singular > singular.max() * 4 * torch.finfo(torch.float64).eps).sum()) == 3
    assert tolerant.item() == int((singular > 1e-5).sum()) == 2


SIX = """
from torch._six import inf
from torch._six import container_abcs

def cap(x):
    return min(x, inf), isinstance({}, container_abcs.Mapping)
"""


def test_tl601_torch_six_import_fails_and_the_rewrite_binds_the_same_values():
    with pytest.raises(ModuleNotFoundError, match="torch._six"):
        run(SIX)
    after = fixed(SIX, "TL601")
    assert "from math import inf" in after and "from collections import abc as container_abcs" in after
    assert run(after)["cap"](5.0) == (5.0, True)


def test_tl601_torch_six_references_become_what_the_module_held():
    source = (FIXTURES / "TL601" / "fix" / "six_references.in.py").read_text(encoding="utf-8")
    with pytest.raises(ModuleNotFoundError, match="torch._six"):
        run(source)
    without_import = source.replace("from torch._six import int_classes\n", "int_classes = int\n")
    with pytest.raises(AttributeError, match="_six"):
        run(without_import)["describe"]("a")
    after = fixed(source, "TL601")
    assert after == (FIXTURES / "TL601" / "fix" / "six_references.out.py").read_text(encoding="utf-8")
    describe = run(after)["describe"]
    # torch 1.13's torch/_six.py: string_classes = (str, bytes), int_classes = int, inf = math.inf.
    assert describe("a") == describe(b"a") == "text"
    assert describe(3) == "count" and describe({}) == "other" and describe(float("inf")) == "other"
    assert describe(2.5) == 2

def test_tl601_long_gone_names_raise_attribute_error():
    namespace = run("import torch\ndef factor(A):\n    return torch.potrf(A)\n")
    with pytest.raises(AttributeError, match="potrf"):
        namespace["factor"](symmetric_positive(3))


def test_tl601_recorded_removals_hold_on_2_13():
    """Every recorded removal is true of the installed torch: a stub that raises when called, or a name that is gone."""
    for change in api_drift.recorded_changes():
        if change.removed is None or not change.name.startswith("torch."):
            continue
        owner_name, _, last = change.name.rpartition(".")
        try:
            owner = torch.Tensor if owner_name == "torch.Tensor" else importlib.import_module(owner_name)
        except ImportError:
            owner = None
        present = owner is not None and hasattr(owner, last)
        if change.raises_when_called:
            assert present, change.name
            function = getattr(torch.eye(2), last) if owner is torch.Tensor else getattr(owner, last)
            required = [p for p in inspect.signature(function).parameters.values() if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
            with pytest.raises(RuntimeError, match="removed"):
                function(*[torch.eye(2)] * len(required))
        else:
            module_gone = importlib.util.find_spec(change.name) is None if owner is not None else True
            assert not present and module_gone, change.name


def _exists_in_installed_torch(name: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading a deprecated attribute warns
        return _has_attribute_path(name)


def _has_attribute_path(name: str) -> bool:
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_tl601_reports_gone_only_what_the_installed_torch_lacks():
    """TL601's verdict "gone, AttributeError/ImportError" for every name of the generated table and the
    records, checked against torch 2.13: a name it still has (other than a stub that raises) would be a
    false crash report."""
    from importlib import resources

    table = json.loads(resources.files("torchlint").joinpath("data/torch_api.json").read_text(encoding="utf-8"))
    newest = api_drift.newest_version()
    names = set(table["apis"]) | {change.name for change in api_drift.recorded_changes()}
    wrongly_gone = []
    for name in sorted(names):
        change = api_drift.change_of(name)
        if change is None or change.status_at(newest) is not api_drift.Status.REMOVED or change.raises_when_called:
            continue
        if name.startswith("torch.") and _exists_in_installed_torch(name):
            wrongly_gone.append(name)
    assert not wrongly_gone, f"reported as removed by {newest} yet present in torch {torch.__version__}: {wrongly_gone}"


def test_recorded_renames_exist_on_2_13():
    for change in api_drift.recorded_changes():
        if change.rename_to and change.rename_to.startswith("torch."):
            module, _, last = change.rename_to.rpartition(".")
            owner = torch.Tensor if module == "torch.Tensor" else importlib.import_module(module)
            assert hasattr(owner, last), change.rename_to


# -- TL602 deprecated-torch-api --------------------------------------------------------------------

LINALG = """
import torch

def factorizations(A, B, C, b, S, upper):
    L = torch.cholesky(S)
    U = torch.cholesky(S, upper=True)
    V = torch.cholesky(S, upper)
    Q, R = torch.qr(A)
    Qc, Rc = torch.qr(A, some=False)
    P = torch.chain_matmul(A, B, C)
    LU, piv = torch.lu(A)
    LU2, piv2, info = torch.lu(A, get_infos=True)
    X = torch.lu_solve(b, LU, piv)
    Y, _ = torch.triangular_solve(b, torch.triu(A), upper=True)
    s = torch.svd(A)[1]
    o = torch.ger(b[:, 0], b[:, 0])
    return L, U, V, Q, R, Qc, Rc, P, LU, piv, LU2, piv2, info, X, Y, s, o

def norms(x):
    return torch.norm(x), torch.norm(x, dim=1), torch.norm(x, 1, 1, True), torch.norm(x, p=float("inf"), dim=(0, 1))
"""


def test_tl602_linalg_rewrites_compute_what_the_deprecated_functions_compute():
    A, B, C = well_conditioned(4, 1), well_conditioned(4, 2), well_conditioned(4, 3)
    S, b = symmetric_positive(4), torch.randn(4, 2, dtype=torch.float64)
    after = fixed(LINALG, "TL602")
    for name in ("torch.linalg.cholesky", "torch.linalg.qr", "torch.linalg.multi_dot", "torch.linalg.lu_factor",
                 "torch.linalg.lu_factor_ex", "torch.linalg.lu_solve", "torch.linalg.solve_triangular",
                 "torch.linalg.svdvals", "torch.outer", "torch.linalg.vector_norm"):
        assert name in after, name
    old, old_warnings = quietly(run(LINALG)["factorizations"], A, B, C, b, S, False)
    new, new_warnings = quietly(run(after)["factorizations"], A, B, C, b, S, False)
    assert any("deprecated" in w for w in old_warnings) and not new_warnings
    for before, now in zip(old, new):
        assert torch.allclose(before.to(torch.float64), now.to(torch.float64)), (before, now)
    # upper passed through a variable is kept as linalg.cholesky's own upper=.
    upper_old, _ = quietly(run(LINALG)["factorizations"], A, B, C, b, S, True)
    upper_new = run(after)["factorizations"](A, B, C, b, S, True)
    assert torch.allclose(upper_old[2], upper_new[2]) and torch.allclose(upper_new[2], torch.triu(upper_new[2]))
    x = torch.randn(3, 5, dtype=torch.float64)
    for before, now in zip(run(LINALG)["norms"](x), run(after)["norms"](x)):
        assert torch.equal(before, now)


def test_tl602_tensor_method_rewrites_compute_what_the_methods_compute():
    source = (FIXTURES / "TL602" / "fix" / "tensor_methods.in.py").read_text(encoding="utf-8")
    after = (FIXTURES / "TL602" / "fix" / "tensor_methods.out.py").read_text(encoding="utf-8")
    for upper in (False, True):
        torch.manual_seed(0)
        old, old_warnings = quietly(run(source)["factorizations"], 4, upper)
        torch.manual_seed(0)
        new, new_warnings = quietly(run(after)["factorizations"], 4, upper)
        assert any("deprecated" in w for w in old_warnings) and not new_warnings
        for before, now in zip(old, new):
            assert torch.allclose(before, now), (before, now)


def test_tl602_non_inplace_resize_warns():
    _, caught = quietly(lambda: torch.zeros(2, 3).resize(6))
    assert any("non-inplace resize is deprecated" in w for w in caught)


def test_tl602_typed_storages_warn_and_frombuffer_reads_the_same_bytes():
    """The typed storages' records (``torch.ByteStorage.from_buffer``, ``torch.FloatStorage(...)``): every one
    warns on 2.13, and the untyped route gives the same tensor without a warning."""
    kinds = [name for name in dir(torch) if name.endswith("Storage") and name not in ("UntypedStorage", "TypedStorage")]
    recorded = {change.name.split(".")[1] for change in api_drift.recorded_changes() if change.name.endswith("Storage")}
    assert set(kinds) >= recorded and "ByteStorage" in recorded
    # torch warns of typed storages once per process unless told to warn every time
    storage = importlib.import_module("torch.storage")
    storage._set_always_warn_typed_storage_removal(True)
    for kind in sorted(recorded):
        _, caught = quietly(lambda: getattr(torch, kind)(2))
        assert any("TypedStorage is deprecated" in w for w in caught), kind
    data = b"\x01\x02\x03"
    old, caught = quietly(lambda: torch.ByteTensor(torch.ByteStorage.from_buffer(data)))
    assert any("TypedStorage is deprecated" in w for w in caught)
    new, caught = quietly(lambda: torch.frombuffer(bytearray(data), dtype=torch.uint8))
    storage._set_always_warn_typed_storage_removal(False)
    assert not caught and torch.equal(old, new)
    found = engine.lint_text("import torch\ns = torch.ByteStorage.from_buffer(b'ab')\n", SNIPPET_PATH, settings("TL602")).findings
    assert [f.code for f in found] == ["TL602"] and "TypedStorage" not in found[0].message


RANGE = """
import torch

def positions(n):
    return torch.range(0, 9), torch.range(0, n - 1), torch.range(10, 0, -2)
"""


def test_tl602_cuda_tensor_types_fail_without_cuda_and_warn_with_it():
    recorded = [change.name for change in api_drift.recorded_changes() if change.name.startswith("torch.cuda.") and change.name.endswith("Tensor") and ".sparse." not in change.name]
    assert len(recorded) == 10
    for name in recorded:
        constructor = getattr(torch.cuda, name.rpartition(".")[2])
        if not torch.cuda.is_available():
            with pytest.raises(TypeError, match="not available"):
                constructor(2, 3)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            made = constructor(2, 3)
        assert made.is_cuda and made.shape == (2, 3)
        # torch warns once per process: the first constructor called shows it
        assert any("no longer recommended" in str(w.message) for w in caught) or name != recorded[0]


def test_tl602_torchscript_entry_points_warn_on_2_13(tmp_path):
    recorded = {change.name for change in api_drift.recorded_changes() if change.name.startswith("torch.jit.")}
    assert len(recorded) == 12

    def double(x):
        return x * 2

    model = torch.nn.Linear(2, 2).eval()
    path = str(tmp_path / "traced.pt")
    calls = {
        "torch.jit.script": lambda: torch.jit.script(double),
        "torch.jit.trace": lambda: torch.jit.trace(model, torch.randn(1, 2)),
        "torch.jit.save": lambda: torch.jit.save(torch.jit.trace(model, torch.randn(1, 2)), path),
        "torch.jit.load": lambda: torch.jit.load(path),
        "torch.jit.freeze": lambda: torch.jit.freeze(torch.jit.script(model)),
        "torch.jit.fork": lambda: torch.jit.fork(double, torch.ones(1)),
        "torch.jit.wait": lambda: torch.jit.wait(torch.jit.fork(double, torch.ones(1))),
    }
    for name, call in calls.items():
        assert name in recorded
        _, caught = quietly(call)
        assert any(f"`{name}` is deprecated" in message for message in caught), name


def test_tl602_range_rewrite_keeps_the_end_and_the_float_dtype():
    after = fixed(RANGE, "TL602", unsafe=True)
    for dtype in (torch.float32, torch.float64):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            old, warned = quietly(run(RANGE)["positions"], 7)
            new, silent = quietly(run(after)["positions"], 7)
        finally:
            torch.set_default_dtype(previous)
        assert warned and not silent
        for before, now in zip(old, new):
            assert before.dtype == now.dtype == dtype and torch.equal(before, now)
    # The rewrite without dtype= would change the type to int64; with a step that does not divide
    # end - start, end + step overshoots: why a non-literal range is an unsafe fix.
    assert torch.arange(0, 10).dtype == torch.int64
    assert len(quietly(torch.range, 0, 5, 2)[0]) == 3 and len(torch.arange(0, 7, 2)) == 4


RESAMPLING = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def resample(x):
    a = F.upsample(x, scale_factor=2, mode="nearest")
    b = F.upsample_bilinear(x, scale_factor=2)
    c = F.upsample_nearest(x, size=(5, 7))
    d = nn.UpsamplingNearest2d(scale_factor=3)(x)
    e = nn.UpsamplingBilinear2d(None, 2)(x)
    return a, b, c, d, e
"""


def test_tl602_upsampling_rewrites_give_equal_values():
    x = torch.randn(2, 3, 4, 6)
    after = fixed(RESAMPLING, "TL602")
    assert "F.interpolate" in after and "nn.Upsample(" in after
    old, warned = quietly(run(RESAMPLING)["resample"], x)
    new, silent = quietly(run(after)["resample"], x)
    assert warned and not silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)


INIT = """
import torch
import torch.nn as nn

def initialise(weight, model):
    torch.manual_seed(0)
    nn.init.xavier_uniform(weight)
    nn.init.constant(model.bias, 0.5)
    return torch.nn.utils.clip_grad_norm(model.parameters(), 0.1)
"""


def test_tl602_init_and_clip_renames_are_the_underscore_functions():
    def fresh():
        model = torch.nn.Linear(3, 2)
        model(torch.ones(1, 3)).sum().backward()
        return torch.empty(4, 5), model

    after = fixed(INIT, "TL602")
    (w1, m1), (w2, m2) = fresh(), fresh()
    m2.load_state_dict(m1.state_dict())
    m2.weight.grad, m2.bias.grad = m1.weight.grad.clone(), m1.bias.grad.clone()
    norm_old, warned = quietly(run(INIT)["initialise"], w1, m1)
    norm_new, silent = quietly(run(after)["initialise"], w2, m2)
    assert warned and not silent
    assert torch.equal(w1, w2) and torch.equal(m1.bias, m2.bias) and torch.equal(norm_old, norm_new)
    assert torch.equal(m1.weight.grad, m2.weight.grad)


AMP = """
import torch

def contexts(x):
    scaler = torch.cuda.amp.GradScaler(2.0**10)
    gpu = torch.cuda.amp.autocast(True, torch.bfloat16)
    with torch.cpu.amp.autocast():
        y = x @ x
    return scaler, gpu, y
"""


def test_tl602_amp_rewrites_construct_the_same_objects_on_a_cpu_only_machine():
    after = fixed(AMP, "TL602")
    assert 'torch.amp.GradScaler("cuda", init_scale=2.0**10)' in after
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16)' in after
    x = torch.randn(4, 4)
    (scaler_old, gpu_old, y_old), warned = quietly(run(AMP)["contexts"], x)
    (scaler_new, gpu_new, y_new), _ = quietly(run(after)["contexts"], x)
    assert any("deprecated" in w for w in warned)
    assert scaler_old.is_enabled() == scaler_new.is_enabled()
    assert (gpu_old.device, gpu_old.fast_dtype, gpu_old._enabled) == (gpu_new.device, gpu_new.fast_dtype, gpu_new._enabled)
    assert y_old.dtype == y_new.dtype == torch.bfloat16 and torch.equal(y_old, y_new)


SCALER_GIVEN_ITS_DEVICE = """
import torch

def scaler():
    return torch.cuda.amp.GradScaler("cuda")
"""


def test_tl602_a_scaler_given_its_device_string_keeps_the_device_not_a_string_scale():
    # The old class takes its first argument for init_scale: a scaler holding the string "cuda" as its scale
    # fails at its first step (shown on the CPU device, which enables a scaler on this machine). The rewrite
    # passes the device only, and builds what the original builds here.
    import inspect

    assert list(inspect.signature(torch.cuda.amp.GradScaler.__init__).parameters)[1] == "init_scale"
    with pytest.raises(TypeError):
        torch.amp.GradScaler("cpu", init_scale="cuda").scale(torch.ones((), requires_grad=True))
    after = fixed(SCALER_GIVEN_ITS_DEVICE, "TL602")
    assert 'torch.amp.GradScaler("cuda")' in after and "init_scale" not in after
    old, _ = quietly(run(SCALER_GIVEN_ITS_DEVICE)["scaler"])
    new, _ = quietly(run(after)["scaler"])
    assert old.is_enabled() == new.is_enabled()
    assert float(torch.amp.GradScaler("cpu").scale(torch.ones((), requires_grad=True))) == 65536.0


CUSTOM_FWD = """
import torch

class Double(torch.autograd.Function):
    @staticmethod
    @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @torch.cuda.amp.custom_bwd
    def backward(ctx, grad):
        return grad * 2

def apply(x):
    return Double.apply(x)
"""


def test_tl602_custom_fwd_rewrite_runs_the_function_the_same_way():
    after = fixed(CUSTOM_FWD, "TL602")
    assert '@torch.amp.custom_bwd(device_type="cuda")' in after
    # The decorators warn when the class is defined.
    original, warned = quietly(run, CUSTOM_FWD)
    rewritten, silent = quietly(run, after)
    assert any("deprecated" in w for w in warned) and not silent
    x_old = torch.randn(3, requires_grad=True)
    x_new = x_old.detach().clone().requires_grad_(True)
    y_old, _ = quietly(original["apply"], x_old)
    y_new, _ = quietly(rewritten["apply"], x_new)
    y_old.sum().backward()
    y_new.sum().backward()
    assert torch.equal(y_old, y_new) and torch.equal(x_old.grad, x_new.grad)


DEFAULT_TYPE = """
import torch

def use_double():
    torch.set_default_tensor_type(torch.DoubleTensor)
    return torch.get_default_dtype(), torch.Tensor(2).dtype, torch.zeros(1).dtype
"""


def test_tl602_set_default_tensor_type_rewrite_sets_the_same_defaults():
    after = fixed(DEFAULT_TYPE, "TL602")
    assert "torch.set_default_dtype(torch.float64)" in after
    try:
        old, warned = quietly(run(DEFAULT_TYPE)["use_double"])
        torch.set_default_dtype(torch.float32)
        new, silent = quietly(run(after)["use_double"])
    finally:
        torch.set_default_dtype(torch.float32)
    assert old == new == (torch.float64, torch.float64, torch.float64)
    assert warned and not silent


SDP = """
import torch

def flags():
    with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True, enable_mem_efficient=False):
        return (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled(),
                torch.backends.cuda.mem_efficient_sdp_enabled(), torch.backends.cuda.cudnn_sdp_enabled())
"""


def test_tl602_sdp_kernel_rewrite_enables_the_same_backends():
    after = fixed(SDP, "TL602")
    assert "sdpa_kernel([torch.nn.attention.SDPBackend.MATH, torch.nn.attention.SDPBackend.CUDNN_ATTENTION])" in after
    old, warned = quietly(run(SDP)["flags"])
    new, silent = quietly(run(after)["flags"])
    assert old == new == (False, True, False, True)
    assert warned and not silent


FUNCTORCH = """
import torch
from functorch import vmap, grad

def per_sample(x):
    return vmap(grad(lambda v: (v ** 2).sum()))(x)
"""


def test_tl602_functorch_import_rewrite_uses_torch_func():
    after = fixed(FUNCTORCH, "TL602")
    assert "from torch.func import vmap, grad" in after
    x = torch.randn(4, 3)
    old, warned = quietly(run(FUNCTORCH)["per_sample"], x)
    new, silent = quietly(run(after)["per_sample"], x)
    assert torch.equal(old, new) and torch.equal(new, 2 * x)
    assert warned and not silent


PYTREE = """
import torch.utils._pytree as pytree

class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

pytree._register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda values, context: Pair(*values))

def leaves(a, b):
    return pytree.tree_flatten(Pair(a, b))[0]
"""


def test_tl602_register_pytree_node_rename_registers_the_same_way():
    after = fixed(PYTREE, "TL602")
    assert "pytree.register_pytree_node(Pair" in after
    assert run(after)["leaves"](1, 2) == [1, 2]


def test_tl602_confidence_follows_the_runtime_warning():
    source = "import torch\ndef f(x, A):\n    return torch.norm(x), torch.qr(A)\n"
    levels = {f.message.split("`")[1]: f.confidence for f in engine.lint_text(source, SNIPPET_PATH, settings("TL602")).findings}
    assert levels == {"torch.norm": Confidence.LOW, "torch.qr": Confidence.HIGH}
    # What the levels stand for: torch.qr warns at run time, torch.norm does not.
    _, warned = quietly(torch.qr, torch.eye(2))
    _, silent = quietly(torch.norm, torch.eye(2))
    assert warned and not silent


# -- TL603 checkpoint-without-use-reentrant ---------------------------------------------------------------

CHECKPOINT = """
import torch
from torch.utils.checkpoint import checkpoint

def step(layer, x):
    y = checkpoint(layer, x)
    y.sum().backward() if y.requires_grad else None
    return y
"""


def test_tl603_use_reentrant_true_keeps_todays_behaviour_without_the_warning():
    after = fixed(CHECKPOINT, "TL603")
    assert "checkpoint(layer, x, use_reentrant=True)" in after
    for input_requires_grad in (True, False):
        results = []
        for source in (CHECKPOINT, after):
            torch.manual_seed(0)
            layer = torch.nn.Linear(3, 3)
            x = torch.randn(2, 3, requires_grad=input_requires_grad)
            y, caught = quietly(run(source)["step"], layer, x)
            results.append((y.detach(), layer.weight.grad, caught))
        (y_old, grad_old, warned), (y_new, grad_new, silent) = results
        assert any("use_reentrant" in w for w in warned) and not any("use_reentrant" in w for w in silent)
        assert torch.equal(y_old, y_new)
        assert (grad_old is None) == (grad_new is None) and (grad_old is None or torch.equal(grad_old, grad_new))
    # What the implicit default costs: with a data input that does not require grad, the reentrant
    # variant trains nothing inside the checkpoint; the recommended variant does.
    layer = torch.nn.Linear(3, 3)
    torch.utils.checkpoint.checkpoint(layer, torch.randn(2, 3), use_reentrant=False).sum().backward()
    assert layer.weight.grad is not None


# -- TL605 legacy-loss-reduction ---------------------------------------------------------------------------

LOSSES = """
import torch.nn as nn
import torch.nn.functional as F

def losses(x, y, t):
    a = nn.MSELoss(size_average=False)(x, y)
    b = F.cross_entropy(x, t, reduce=False)
    c = nn.L1Loss(size_average=False, reduction="mean")(x, y)
    d = F.mse_loss(x, y, size_average=True, reduce=True)
    return a, b, c, d
"""


def test_tl605_reduction_rewrite_gives_the_same_losses():
    x, y, t = torch.randn(4, 3), torch.randn(4, 3), torch.tensor([0, 2, 1, 1])
    after = fixed(LOSSES, "TL605")
    assert 'nn.L1Loss(reduction="sum")' in after
    old, warned = quietly(run(LOSSES)["losses"], x, y, t)
    new, silent = quietly(run(after)["losses"], x, y, t)
    assert warned and not silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)
    # The legacy flag wins over reduction= given beside it: "mean" was silently a sum.
    assert torch.equal(old[2], (x - y).abs().sum())


def test_legacy_reduction_table_matches_torch():
    from torch.nn import _reduction

    for size_average in (None, True, False):
        for reduce in (None, True, False):
            if size_average is None and reduce is None:
                continue
            assert api_drift.legacy_reduction(size_average, reduce) == _reduction.legacy_get_string(size_average, reduce, emit_warning=False)


ELEMENTWISE_MEAN = """
import torch.nn as nn
import torch.nn.functional as F

def losses(x, y, t):
    a = F.l1_loss(x, y, reduction="elementwise_mean")
    b = nn.CrossEntropyLoss(reduction='elementwise_mean')(x, t)
    return a, b

def poisson(x, y):
    return F.poisson_nll_loss(x, y, reduction="elementwise_mean")
"""


def test_tl605_elementwise_mean_warns_or_raises_and_mean_is_the_same_reduction():
    x, y, t = torch.randn(4, 3), torch.rand(4, 3), torch.tensor([0, 2, 1, 1])
    after = fixed(ELEMENTWISE_MEAN, "TL605")
    assert "elementwise_mean" not in after
    old, warned = quietly(run(ELEMENTWISE_MEAN)["losses"], x, y, t)
    new, silent = quietly(run(after)["losses"], x, y, t)
    assert "reduction='elementwise_mean' is deprecated. Please use reduction='mean' instead." in warned
    assert not any("elementwise_mean" in w for w in silent)
    for before, now in zip(old, new):
        assert torch.equal(before, now)
    # Some losses check the string themselves: the old name raises there.
    with pytest.raises(ValueError, match="elementwise_mean is not a valid value for reduction"):
        run(ELEMENTWISE_MEAN)["poisson"](x, y)
    assert torch.equal(run(after)["poisson"](x, y), torch.nn.functional.poisson_nll_loss(x, y))


def test_elementwise_mean_raising_losses_match_torch():
    import torch.nn.functional as F

    x, y = torch.rand(4, 3), torch.rand(4, 3)
    calls = {
        "poisson_nll_loss": lambda r: F.poisson_nll_loss(x, y, reduction=r),
        "gaussian_nll_loss": lambda r: F.gaussian_nll_loss(x, y, torch.ones(4, 3), reduction=r),
        "multilabel_soft_margin_loss": lambda r: F.multilabel_soft_margin_loss(x, (y > 0.5).float(), reduction=r),
        "triplet_margin_with_distance_loss": lambda r: F.triplet_margin_with_distance_loss(x, y, y.flip(0), reduction=r),
        "mse_loss": lambda r: F.mse_loss(x, y, reduction=r),
    }
    for name, call in calls.items():
        raises = f"torch.nn.functional.{name}" in api_drift.ELEMENTWISE_MEAN_RAISES
        try:
            quietly(call, "elementwise_mean")
        except ValueError:
            assert raises, name
        else:
            assert not raises, name

# -- TL606 volatile-has-no-effect -------------------------------------------------------------------------

VOLATILE = """
import torch
from torch.autograd import Variable

def evaluate(model, x):
    x = Variable(x, volatile=True)
    return model(x)
"""


def test_tl606_volatile_leaves_autograd_recording():
    findings = engine.lint_text(textwrap.dedent(VOLATILE), SNIPPET_PATH, settings("TL606")).findings
    assert [f.code for f in findings] == ["TL606"] and findings[0].fix is None
    model = torch.nn.Linear(3, 1)
    out, caught = quietly(run(VOLATILE)["evaluate"], model, torch.randn(2, 3))
    assert out.requires_grad and out.grad_fn is not None  # the graph through the weights is built
    assert any("volatile" in w for w in caught)
    with torch.no_grad():
        assert not model(torch.randn(2, 3)).requires_grad


# -- TL607 stft-without-return-complex ---------------------------------------------------------------------

STFT = """
import torch

def power(wave, window):
    spec = torch.stft(wave, 64, hop_length=16, window=window)
    return spec.pow(2).sum(-1)
"""


def test_tl607_stft_raises_and_the_rewrite_returns_the_old_real_layout():
    wave, window = torch.randn(800), torch.hann_window(64)
    with pytest.raises(RuntimeError, match="return_complex"):
        run(STFT)["power"](wave, window)
    after = fixed(STFT, "TL607", unsafe=True)
    assert "torch.view_as_real(torch.stft(wave, 64, hop_length=16, window=window, return_complex=True))" in after
    power = run(after)["power"](wave, window)
    expected = torch.stft(wave, 64, hop_length=16, window=window, return_complex=True).abs().pow(2)
    assert torch.allclose(power, expected, rtol=1e-5, atol=1e-5)


def test_tl607_fix_is_unsafe_because_a_complex_input_changes_type():
    wave, window = torch.randn(800, dtype=torch.complex64), torch.hann_window(64)
    assert torch.stft(wave, 64, window=window).is_complex()  # a complex input runs without the argument
    assert not torch.view_as_real(torch.stft(wave, 64, window=window, return_complex=True)).is_complex()
    findings = engine.lint_text(textwrap.dedent(STFT), SNIPPET_PATH, settings("TL607")).findings
    assert findings[0].fix.applicability.value == "unsafe"


# -- TL608 private-torch-alias -----------------------------------------------------------------------------

PRIVATE = """
import torch
from torch.utils.data._utils.collate import default_collate

def batch(samples):
    return default_collate(samples)
"""


def test_tl608_public_name_is_the_same_function():
    from torch.utils.data import _utils

    assert torch.utils.data.default_collate is _utils.collate.default_collate
    after = fixed(PRIVATE, "TL608")
    assert "from torch.utils.data import default_collate" in after
    samples = [torch.tensor([1, 2]), torch.tensor([3, 4])]
    assert torch.equal(run(PRIVATE)["batch"](samples), run(after)["batch"](samples))


def test_tl602_keywords_the_table_says_warn_do_warn_and_those_it_says_are_gone_raise():
    from torchlint.analysis.api.api_table import keyword_removed_in, keyword_warns

    # Deprecated and still taken by 2.13: passing it warns.
    assert keyword_warns("torch.nn.functional.gumbel_softmax", "eps")
    _, caught = quietly(lambda: torch.nn.functional.gumbel_softmax(torch.randn(2, 5), eps=1e-8))
    assert any("deprecated" in w for w in caught)
    # Gone by 2.13 (TL405's TypeError): the table dates the removal.
    assert keyword_removed_in("torch.optim.lr_scheduler.StepLR", "verbose") == (2, 7)
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(TypeError, match="verbose"):
        torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, verbose=True)


def test_tl602_keyword_fixes_compute_the_same_without_the_warnings():
    source = (FIXTURES / "TL602" / "fix" / "keywords.in.py").read_text(encoding="utf-8")
    after = (FIXTURES / "TL602" / "fix" / "keywords.out.py").read_text(encoding="utf-8")
    assert "only_inputs" not in after and "eps=" not in after and "min_val=-2.0" in after
    critic = torch.nn.Linear(3, 1)
    real, fake = torch.randn(4, 3), torch.randn(4, 3)
    old_grad, _ = quietly(run(source)["penalty"], critic, real, fake)
    new_grad, _ = quietly(run(after)["penalty"], critic, real, fake)
    assert torch.equal(old_grad, new_grad)
    logits, x = torch.randn(2, 5), torch.linspace(-4, 4, 9)
    torch.manual_seed(0)
    (old_clip, old_sample), old_warnings = quietly(run(source)["clipped_sample"], logits, x)
    torch.manual_seed(0)
    (new_clip, new_sample), new_warnings = quietly(run(after)["clipped_sample"], logits, x)
    assert any("deprecated" in w for w in old_warnings) and not any("deprecated" in w for w in new_warnings)
    assert torch.equal(old_clip, new_clip) and torch.equal(old_sample, new_sample)


# -- TL609 number-first-overload --------------------------------------------------------------------------

NUMBER_FIRST = """
import torch

def adam_step(param, grad, beta1=0.9, beta2=0.999):
    exp_avg = torch.zeros_like(param)
    exp_avg_sq = torch.zeros_like(param)
    exp_avg.mul_(beta1).add_(1 - beta1, grad)
    exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
    denom = exp_avg_sq.sqrt().add_(1e-8)
    update = torch.zeros_like(param)
    update.addcdiv_(-0.01, exp_avg, denom)
    return update, torch.add(param, -1, grad), torch.addcmul(param, 0.5, grad, grad), update.sub(2, grad)
"""


def test_tl609_number_first_overloads_warn_and_the_keyword_form_computes_the_same_bits():
    param, grad = torch.randn(5, 3), torch.randn(5, 3)
    after = fixed(NUMBER_FIRST, "TL609")
    assert "add_(grad, alpha=1 - beta1)" in after and "addcmul_(grad, grad, value=1 - beta2)" in after
    old, warned = quietly(run(NUMBER_FIRST)["adam_step"], param, grad)
    new, silent = quietly(run(after)["adam_step"], param, grad)
    for method in ("add_", "addcmul_", "addcdiv_", "add", "addcmul", "sub"):
        assert any(w.startswith(f"This overload of {method} is deprecated") for w in warned), (method, warned)
    assert not any("deprecated" in w for w in silent), silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)


SCALED_PRODUCT_FIRST = """
import torch

def distances(x, y, scores):
    dist = torch.pow(x, 2).sum(1, keepdim=True) + torch.pow(y, 2).sum(1, keepdim=True).t()
    dist.addmm_(1, -2, x, y.t())
    shifted = torch.ones_like(dist)
    shifted.addmm_(0.5, x, y.t())
    scores.addmv_(1, -1, x, y[0])
    return dist, shifted, scores
"""


def test_tl609_beta_and_alpha_first_overloads_warn_and_the_keyword_form_computes_the_same_bits():
    x, y = torch.randn(4, 3), torch.randn(5, 3)
    after = fixed(SCALED_PRODUCT_FIRST, "TL609")
    assert "addmm_(x, y.t(), beta=1, alpha=-2)" in after and "addmm_(x, y.t(), beta=0.5)" in after
    old, warned = quietly(run(SCALED_PRODUCT_FIRST)["distances"], x, y, torch.zeros(4))
    new, silent = quietly(run(after)["distances"], x, y, torch.zeros(4))
    for method in ("addmm_", "addmv_"):
        assert any(w.startswith(f"This overload of {method} is deprecated") for w in warned), (method, warned)
    assert not any("deprecated" in w for w in silent), silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)


# -- TL610 implicit-softmax-dim ----------------------------------------------------------------------------

SOFTMAX_2D = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 3)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64, 10), nn.ReLU(), nn.Softmax())

    def forward(self, x):
        h = self.conv(x)
        h = h.view(h.size(0), -1)
        probs = F.softmax(self.fc(h))
        log_probs = F.log_softmax(torch.flatten(x, 1), dim=None)
        least = nn.Softmin()(h.reshape(h.shape[0], -1))
        return probs, log_probs, self.head(x), least
"""


def test_tl610_implicit_dim_warns_and_dim_1_is_what_torch_picks_for_2d_inputs():
    after = fixed(SOFTMAX_2D, "TL610")
    assert "nn.Softmax(dim=1)" in after and "F.softmax(self.fc(h), dim=1)" in after and "nn.Softmin(dim=1)" in after
    torch.manual_seed(0)
    old_model = run(SOFTMAX_2D)["Classifier"]()
    new_model = run(after)["Classifier"]()
    new_model.load_state_dict(old_model.state_dict())
    x = torch.randn(5, 1, 8, 8)
    old, warned = quietly(old_model, x)
    new, silent = quietly(new_model, x)
    for name in ("softmax", "log_softmax", "softmin"):
        assert f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument." in warned
    assert not any("Implicit dimension" in w for w in silent), silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)


def test_tl610_gives_no_fix_where_torch_would_pick_dimension_0():
    source = "import torch.nn as nn\nhead = nn.Sequential(nn.Linear(16, 4), nn.Softmax())\n"
    findings = engine.lint_text(source, SNIPPET_PATH, settings("TL610")).findings
    assert [f.code for f in findings] == ["TL610"] and findings[0].fix is None
    # nn.Linear keeps the leading dimensions: a (batch, seq, features) input is 3-D, and torch normalises over dim 0.
    head = run(source)["head"]
    x = torch.randn(2, 3, 16)
    probs, _ = quietly(head, x)
    assert torch.allclose(probs.sum(0), torch.ones(3, 4)) and not torch.allclose(probs.sum(-1), torch.ones(2, 3))


LEGACY_SPARSE = """
import torch

def adjacency(edges, weights, n):
    i = torch.LongTensor(edges)
    v = torch.FloatTensor(weights)
    a = torch.sparse.FloatTensor(i, v, torch.Size([n, n]))
    b = torch.sparse.LongTensor(i, v.double(), (n, n))
    c = torch.sparse.DoubleTensor(i, v)
    d = torch.sparse.HalfTensor(3, 4)
    return a, b, c, d
"""


def test_tl602_legacy_sparse_constructors_warn_and_sparse_coo_tensor_builds_the_same_tensors():
    after = fixed(LEGACY_SPARSE, "TL602")
    assert "torch.sparse.LongTensor" not in after and "torch.sparse_coo_tensor((3, 4), dtype=torch.float16)" in after
    assert "dtype" not in after.split("d = ")[0]  # the values give the dtype: none is added
    edges, weights = [[0, 1, 1], [1, 0, 2]], [1.0, 2.0, 3.0]
    old, warned = quietly(run(LEGACY_SPARSE)["adjacency"], edges, weights, 3)
    new, silent = quietly(run(after)["adjacency"], edges, weights, 3)
    assert any(w.startswith("torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated") for w in warned)
    assert not any("SparseTensor" in w for w in silent), silent
    for before, now in zip(old, new):
        assert before.layout == now.layout == torch.sparse_coo
        assert before.dtype == now.dtype and before.shape == now.shape and before.is_coalesced() == now.is_coalesced()
        assert torch.equal(before.to_dense(), now.to_dense())
    # The type's name does not fix the dtype of a tensor built from values: a "LongTensor" of float64 values.
    assert old[1].dtype == torch.float64


def test_tl602_cuda_sparse_constructors_fail_on_a_cpu_build_and_get_no_fix():
    source = "import torch\n\ndef build(i, v):\n    return torch.cuda.sparse.FloatTensor(i, v, (2, 2))\n"
    findings = engine.lint_text(source, SNIPPET_PATH, settings("TL602")).findings
    assert [f.code for f in findings] == ["TL602"] and findings[0].fix is None
    if not torch.cuda.is_available():
        with pytest.raises(TypeError, match="not available"):
            run(source)["build"](torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]))


# -- TL611 zero-dim-index ----------------------------------------------------------------------------------

ZERO_DIM = """
import torch
import torch.nn as nn
import torch.nn.functional as F

criterion = nn.CrossEntropyLoss()

def logged(output, y, weights):
    w = torch.as_tensor(weights)
    loss = criterion(output, y)
    total = loss.data[0]
    summed = F.mse_loss(output, output.detach() * 2, reduction="sum")[0]
    size = w.norm()[0]
    mean = w.abs().mean().data[0]
    return total, summed, size, mean
"""


def test_tl611_indexing_a_0_dim_tensor_raises_and_item_reads_the_same_number():
    output, y, w = torch.randn(4, 3), torch.tensor([0, 2, 1, 1]), torch.randn(3, 4)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor. Use `tensor.item\\(\\)`"):
        run(ZERO_DIM)["logged"](output, y, w)
    after = fixed(ZERO_DIM, "TL611", unsafe=True)
    assert "loss.item()" in after and "w.norm().item()" in after and "[0]" not in after
    total, summed, size, mean = run(after)["logged"](output, y, w)
    assert total == torch.nn.functional.cross_entropy(output, y).item()
    assert summed == torch.nn.functional.mse_loss(output, output * 2, reduction="sum").item()
    assert size == w.norm().item() and mean == w.abs().mean().item()
    assert all(isinstance(value, float) for value in (total, summed, size, mean))


LOSS_METHODS = """
import torch
import torch.nn as nn

class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Linear(4, 1)
        self.generator = nn.Linear(2, 4)

    def generator_loss(self, z):
        return -self.critic(self.generator(z)).mean()

    def critic_loss(self, x, z, return_fake=False):
        fake = self.generator(z)
        gap = -(self.critic(x).mean() - self.critic(fake).mean())
        return (gap, fake) if return_fake else gap

def logged(pair, x, z):
    g_loss = pair.generator_loss(z)
    c_loss, fake = pair.critic_loss(x, z, return_fake=True)
    return g_loss.data[0], -c_loss.data[0]
"""


def test_tl611_a_loss_a_method_returns_raises_when_indexed_and_item_reads_it():
    torch.manual_seed(0)
    names = run(LOSS_METHODS)
    pair, x, z = names["Pair"](), torch.randn(3, 4), torch.randn(3, 2)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        names["logged"](pair, x, z)
    after = fixed(LOSS_METHODS, "TL611", unsafe=True)
    assert "g_loss.item()" in after and "-c_loss.item()" in after
    fixed_names = run(after)
    pair_after = fixed_names["Pair"]()
    pair_after.load_state_dict(pair.state_dict())
    g_value, c_value = fixed_names["logged"](pair_after, x, z)
    assert g_value == pair.generator_loss(z).item()
    assert c_value == -pair.critic_loss(x, z).item()


LOSS_MODULE_OF_THE_FILE = """
import torch
import torch.nn.functional as F

class CrossEntropyLoss2d(torch.nn.Module):
    def __init__(self, weight=None):
        super().__init__()
        self.loss = torch.nn.NLLLoss(weight)

    def forward(self, outputs, targets):
        return self.loss(F.log_softmax(outputs, dim=1), targets)

def logged(outputs, targets):
    criterion = CrossEntropyLoss2d()
    loss = criterion(outputs, targets)
    return loss.data[0]
"""


def test_tl611_a_loss_module_of_the_file_returns_a_0_dim_loss_and_item_reads_it():
    outputs, targets = torch.randn(2, 3, 4, 4), torch.randint(0, 3, (2, 4, 4))
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        run(LOSS_MODULE_OF_THE_FILE)["logged"](outputs, targets)
    after = fixed(LOSS_MODULE_OF_THE_FILE, "TL611")  # safe: ``.data[0]`` read a number
    assert "loss.item()" in after
    assert run(after)["logged"](outputs, targets) == torch.nn.functional.cross_entropy(outputs, targets).item()


def test_tl611_fix_without_data_is_unsafe_because_item_leaves_the_graph():
    findings = engine.lint_text(textwrap.dedent(ZERO_DIM).lstrip("\n"), SNIPPET_PATH, settings("TL611")).findings
    classes = {f.location.line: f.fix.applicability.value for f in findings}
    assert sorted(classes.values()) == ["safe", "safe", "unsafe", "unsafe"]
    loss = torch.nn.functional.mse_loss(torch.randn(3, requires_grad=True), torch.zeros(3))
    assert loss.dim() == 0 and loss.requires_grad and not isinstance(loss.item(), torch.Tensor)


MOVED_AFTER_DATA = """
import torch.nn.functional as F

def logged(out, y):
    loss = F.mse_loss(out, y)
    return loss.data.cpu()[0], loss.detach().cpu()[0]
"""


def test_tl611_a_loss_read_through_data_then_moved_is_found_and_its_fix_is_safe():
    # d42: deep_Mahalanobis_detector's loss.data.cpu()[0] (the move after .data hid the 0-dim loss)
    out, y = torch.randn(4, requires_grad=True), torch.zeros(4)
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        run(MOVED_AFTER_DATA)["logged"](out, y)
    after = fixed(MOVED_AFTER_DATA, "TL611")  # safe fixes only
    assert "loss.data.cpu().item()" in after and "loss.detach().cpu().item()" in after
    first, second = run(after)["logged"](out, y)
    assert first == second == torch.nn.functional.mse_loss(out, y).item()


READ_AS_AN_ARRAY = """
import torch.nn.functional as F

def logged(out, y):
    loss = F.cross_entropy(out, y)
    return loss.data.cpu().numpy()[0]
"""


def test_tl611_a_loss_read_as_a_numpy_array_is_a_0_d_array_and_item_reads_its_number():
    # d45: pytorch-maml's loss.data.cpu().numpy()[0] (numpy() keeps the 0 dimensions of the loss)
    out, y = torch.randn(4, 3, requires_grad=True), torch.tensor([0, 2, 1, 0])
    with pytest.raises(IndexError, match="0-dimensional"):
        run(READ_AS_AN_ARRAY)["logged"](out, y)
    after = fixed(READ_AS_AN_ARRAY, "TL611")  # safe: numpy() reads a value out of the graph
    assert "loss.data.cpu().numpy().item()" in after
    assert run(after)["logged"](out, y) == torch.nn.functional.cross_entropy(out, y).item()


SUMMED_OVER_STEPS = """
import torch.nn as nn

def logged(model, x, y):
    criterion = nn.CrossEntropyLoss()
    loss = 0
    for t in range(x.size(0)):
        loss += criterion(model(x[t]), y[t])
    per_step = loss.sum() / len(x)
    return loss.data[0], per_step.data[0]
"""


def test_tl611_a_loss_summed_from_0_and_its_mean_are_0_dim_too():
    model, x, y = torch.nn.Linear(3, 2), torch.randn(4, 5, 3), torch.randint(0, 2, (4, 5))
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        run(SUMMED_OVER_STEPS)["logged"](model, x, y)
    after = fixed(SUMMED_OVER_STEPS, "TL611")
    assert after.count(".item()") == 2 and "[0]" not in after.replace("x[t]", "").replace("y[t]", "")
    total, per_step = run(after)["logged"](model, x, y)
    expected = sum(torch.nn.functional.cross_entropy(model(x[t]), y[t]) for t in range(4))
    assert total == pytest.approx(expected.item()) and per_step == pytest.approx(expected.item() / 4)


PASSED_CRITERION_WITH_ASYNC = """
import torch
import torch.nn as nn

def train(batches, model, criterion, optimizer):
    logged = []
    for x, y in batches:
        if torch.cuda.is_available():
            x, y = x.cuda(), y.cuda(async=True)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        logged.append(loss.data[0])
    return logged

def main(batches, model):
    criterion = nn.CrossEntropyLoss()
    return train(batches, model, criterion, torch.optim.SGD(model.parameters(), lr=0.1))
"""


def test_tl601_tl611_a_torch_0_3_loop_does_not_parse_and_the_fixes_make_it_run():
    """``y.cuda(async=True)`` is a syntax error since Python 3.7: the file never runs. Read with a stand-in, the
    file's other hazards are found too (a loss module main passes, indexed as ``.data[0]``); with both fixes the
    loop runs and logs what ``.item()`` of each loss reads."""
    source = textwrap.dedent(PASSED_CRITERION_WITH_ASYNC).lstrip("\n")
    with pytest.raises(SyntaxError):
        compile(source, "snippet.py", "exec")
    found = engine.lint_text(source, SNIPPET_PATH, settings("TL6")).findings
    assert sorted((f.code, f.location.line) for f in found) == [("TL601", 8), ("TL611", 13)]
    after = fixed(PASSED_CRITERION_WITH_ASYNC, "TL6", unsafe=True)
    assert "y.cuda(non_blocking=True)" in after and "loss.item()" in after and "async" not in after
    assert "non_blocking" in (torch.Tensor.cuda.__doc__ or ""), "torch 0.4 renamed async= to non_blocking="
    torch.manual_seed(0)
    model, batches = torch.nn.Linear(3, 2), [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    logged = run(after)["main"](batches, model)
    assert len(logged) == 3 and all(isinstance(value, float) for value in logged)


# -- TL612 renamed-dataset-attribute -----------------------------------------------------------------------


def _torchvision():
    """torchvision, where it imports (it is not a test dependency: PyPI's wheel needs the CUDA build of torch)."""
    try:
        import torchvision.datasets
    except Exception as error:  # ImportError, or a wheel that does not match this torch build
        pytest.skip(f"torchvision does not import here: {type(error).__name__}: {error}")
    return torchvision


def _fake_mnist(root, images, labels):
    """The raw files torchvision's MNIST checks for and reads (big-endian IDX), under root/MNIST/raw; the test
    split gets the same images."""
    import struct

    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    n, h, w = images.shape
    for split in ("train", "t10k"):
        (raw / f"{split}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, n, h, w) + bytes(images.flatten().tolist()))
        (raw / f"{split}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, n) + bytes(labels.tolist()))


DATASET_ATTRIBUTES = """
import torch
from torchvision import datasets

def read(root):
    train_set = datasets.MNIST(root, train=True)
    return train_set.train_data.float() / 255, torch.bincount(train_set.train_labels, minlength=10)
"""


def test_tl612_mnist_aliases_warn_and_data_targets_hold_the_same_tensors(tmp_path):
    torchvision = _torchvision()
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (6, 4, 4), dtype=torch.uint8, generator=generator)
    labels = torch.tensor([3, 1, 4, 1, 5, 9], dtype=torch.uint8)
    _fake_mnist(tmp_path, images, labels)
    after = fixed(DATASET_ATTRIBUTES, "TL612")
    assert "train_set.data.float()" in after and "train_set.targets" in after
    old, warned = quietly(run(DATASET_ATTRIBUTES)["read"], str(tmp_path))
    new, silent = quietly(run(after)["read"], str(tmp_path))
    assert "train_data has been renamed data" in warned and "train_labels has been renamed targets" in warned
    assert not any("renamed" in w for w in silent), silent
    for before, now in zip(old, new):
        assert torch.equal(before, now)
    assert torch.equal(new[0], images.float() / 255)
    # CIFAR dropped the old names: reading one raises AttributeError.
    cifar = object.__new__(torchvision.datasets.CIFAR10)
    cifar.data, cifar.targets = [], [0, 1]
    with pytest.raises(AttributeError, match="train_labels"):
        cifar.train_labels


def test_tl602_saved_variables_warns_and_saved_tensors_gives_the_same_gradient():
    source = (FIXTURES / "TL602" / "fix" / "saved_variables.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL602")
    assert after == (FIXTURES / "TL602" / "fix" / "saved_variables.out.py").read_text(encoding="utf-8")

    def gradient(namespace):
        x = torch.linspace(-2, 2, 5, requires_grad=True)
        namespace["Square"].apply(x).sum().backward()
        return x.grad

    old, warned = quietly(gradient, run(source))
    new, silent = quietly(gradient, run(after))
    assert "'saved_variables' is deprecated; use 'saved_tensors'" in warned
    assert not any("saved_variables" in w for w in silent)
    assert torch.equal(old, new) and torch.equal(new, 2 * torch.linspace(-2, 2, 5))


# -- TL613 uint8-mask --------------------------------------------------------------------------------------


def test_tl613_uint8_masks_raise_and_bool_masks_select_the_same_elements():
    source = (FIXTURES / "TL613" / "fix" / "uint8_mask.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL613")
    assert after == (FIXTURES / "TL613" / "fix" / "uint8_mask.out.py").read_text(encoding="utf-8")
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 5, generator=generator) * 20
    tokens = torch.tensor([[1, 2, 0, 0, 0], [3, 0, 0, 0, 0], [4, 5, 6, 0, 0]])
    lengths = torch.tensor([2, 0, 3])
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"):
        run(source)["attend"](scores, tokens, lengths, 0)
    filled, picked, inverted, _ = run(after)["attend"](scores, tokens, lengths, 0)
    # What the uint8 masks meant: non-zero is selected.
    pad = tokens == 0
    expected = scores.masked_fill(pad, -1e9) * (lengths > 0).unsqueeze(1).float()
    assert torch.equal(picked, expected[expected > 0])
    expected[expected < -10] = -10.0
    assert torch.equal(filled, expected.masked_fill(torch.tensor([[True], [False], [True]]), 0.0))
    assert torch.equal(inverted, 1 - pad.byte())  # the variable kept its dtype: its other uses mean what they meant
    _, warned = quietly(lambda: scores[(scores > 1).byte()])
    assert any("indexing with dtype torch.uint8 is now deprecated" in w for w in warned)
    # The mask joined from two paths (moved to the GPU or not): the fix at the use selects what uint8 meant.
    prob, target = torch.rand(4, 3, generator=generator), torch.tensor([2, 0, 1, 2])
    with pytest.raises(RuntimeError, match="masked_select"):
        run(source)["select_on_either_device"](prob, target)
    assert torch.equal(run(after)["select_on_either_device"](prob, target), prob[torch.arange(4), target])


def test_tl613_inverting_a_uint8_mask_selects_everything_and_the_bool_inversion_selects_the_rest():
    """``~`` of a 0/1 uint8 mask is a bitwise NOT on torch 2.13 (0 -> 255, 1 -> 254), so ``conf[~has_obj]``
    selects every cell (with a deprecation warning); the fix's ``~has_obj.bool()`` selects the cells without an
    object, what ``1 - has_obj`` selected before torch 1.2."""
    source = (FIXTURES / "TL613" / "fix" / "inverted_mask.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL613")
    assert after == (FIXTURES / "TL613" / "fix" / "inverted_mask.out.py").read_text(encoding="utf-8")
    mask = torch.tensor([1, 0, 0], dtype=torch.uint8)
    assert (~mask).tolist() == [254, 255, 255]
    conf, targets = torch.tensor([0.9, 0.2, 0.4]), torch.tensor([0])
    bad, _ = quietly(run(source)["no_object_loss"], conf, targets)
    good = run(after)["no_object_loss"](conf, targets)
    old_semantics = conf[(1 - mask).bool()].pow(2).sum()  # the cells without an object
    assert torch.isclose(good, old_semantics) and not torch.isclose(bad, old_semantics)
    assert torch.isclose(bad, conf.pow(2).sum())  # every cell, the object's too


def test_tl613_a_uint8_condition_of_where_warns_and_the_bool_one_selects_the_same_values():
    source = (FIXTURES / "TL613" / "fix" / "where_condition.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL613")
    assert after == (FIXTURES / "TL613" / "fix" / "where_condition.out.py").read_text(encoding="utf-8")
    generator = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]]) > 0  # (time, batch)
    score, next_score = torch.randn(3, 4, generator=generator), torch.randn(3, 4, generator=generator)
    indices = torch.randint(0, 3, (3, 4), generator=generator)
    oor = torch.full((3, 4), 7)
    old, warned = quietly(run(source)["viterbi_step"], score, next_score, indices, oor, mask, 1)
    assert any("where received a uint8 condition tensor" in w for w in warned), warned
    new, warned = quietly(run(after)["viterbi_step"], score, next_score, indices, oor, mask, 1)
    assert not any("uint8" in w for w in warned), warned
    assert all(torch.equal(a, b) for a, b in zip(old, new))
    assert new[2].dtype == torch.uint8  # the variable keeps its dtype: only the conditions change


# -- TL614 autograd-function-instance-call -----------------------------------------------------------------


def test_tl614_instance_calls_raise_and_apply_computes_the_same_values_and_gradients():
    source = (FIXTURES / "TL614" / "fix" / "instance_call.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL614")
    assert after == (FIXTURES / "TL614" / "fix" / "instance_call.out.py").read_text(encoding="utf-8")
    x = torch.linspace(-1, 1, 7, requires_grad=True)
    # Legacy classes and a class with static methods alike: calling an instance is the legacy path.
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        run(source)["run"](x)
    namespace = run(source)
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        quietly(namespace["Double"](), x)
    outputs, warned = quietly(run(after)["run"], x)
    assert not any("instantiated" in w for w in warned), warned
    square, shifted, clamped, doubled = outputs
    assert torch.equal(square, x * x) and torch.equal(shifted, (x + 1) * (x + 1))
    assert torch.equal(clamped, x.clamp(-0.5, 0.5)) and torch.equal(doubled, x * 2)
    # backward runs the legacy methods with the context as `self`: what forward stored there is found.
    (grad,) = torch.autograd.grad((square + shifted + clamped + doubled).sum(), x)
    expected = 2 * x + 2 * (x + 1) + (x.abs() <= 0.5).float() + 2
    assert torch.allclose(grad, expected.detach())


def test_tl614_settings_move_into_apply_and_the_padding_and_blend_compute_the_same_values_and_gradients():
    source = (FIXTURES / "TL614" / "fix" / "settings.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL614", unsafe=True)
    assert after == (FIXTURES / "TL614" / "fix" / "settings.out.py").read_text(encoding="utf-8")
    x = torch.linspace(-1, 1, 6).reshape(2, 3).requires_grad_()
    y = torch.linspace(2, 3, 6).reshape(2, 3).requires_grad_()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward method is deprecated"):
        run(source)["constant_pad_1d"](x, 5, 1, 0.5, True)
    namespace, warned = quietly(run, after)
    padded, warned = quietly(namespace["constant_pad_1d"], x, 5, 1, 0.5, True)
    blended, more = quietly(namespace["blend"], x, y, 0.25)
    assert not any("instantiated" in w or "deprecated" in w for w in warned + more), warned + more
    # the same values as torch's own padding and arithmetic
    assert torch.equal(padded, torch.nn.functional.pad(x, (2, 0), value=0.5))
    assert torch.equal(blended, x * 0.25 + y * 0.75)
    # backward reads the settings forward stored on the context; the settings get no gradient
    grad_x, grad_y = torch.autograd.grad((padded * 3).sum() + blended.sum(), (x, y))
    assert torch.equal(grad_x, torch.full_like(x, 3.25)) and torch.equal(grad_y, torch.full_like(y, 0.75))
    right, _ = quietly(namespace["constant_pad_1d"], x, 4, 1)
    assert torch.equal(right, torch.nn.functional.pad(x, (0, 1)))


# -- TL619 cat-of-zero-dim-tensors ------------------------------------------------------------------------


def test_tl619_cat_of_collected_losses_raises_and_the_stacked_vector_is_what_cat_of_one_element_losses_gave():
    source = (FIXTURES / "TL619" / "fix" / "collected_losses.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL619", unsafe=True)
    assert after == (FIXTURES / "TL619" / "fix" / "collected_losses.out.py").read_text(encoding="utf-8")
    batches = [(torch.randn(4, 3), torch.randn(4, 2)) for _ in range(3)]

    def train(code, name, *extra):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        return run(code)[name](model, batches, optimizer, *extra), model

    for name, extra in (("train_epoch", ()), ("backward_only", (torch.nn.functional.mse_loss,))):
        with pytest.raises(RuntimeError, match="zero-dimensional tensor .* cannot be concatenated"):
            train(source, name, *extra)
    (mean, vector), model = train(after, "train_epoch")
    history, _ = train(after, "backward_only", torch.nn.functional.mse_loss)
    # what torch 0.3 gave: cat of the 1-element forms of the same losses, trained the same way
    torch.manual_seed(0)
    reference = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(reference(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().reshape(1))
    expected = torch.cat(losses)
    assert vector.shape == history.shape == (3,)
    assert torch.equal(vector, expected) and torch.equal(history, expected) and torch.equal(mean, expected.mean())
    assert torch.equal(model.weight, reference.weight)


# -- TL618 integer-filled-bce-target -----------------------------------------------------------------------


def test_tl618_integer_labels_crash_binary_cross_entropy_and_the_fix_trains_as_float_labels_do():
    source = (FIXTURES / "TL618" / "fix" / "integer_labels.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL618", unsafe=True)
    assert after == (FIXTURES / "TL618" / "fix" / "integer_labels.out.py").read_text(encoding="utf-8")
    torch.manual_seed(0)
    netD = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 1), torch.nn.Sigmoid())
    netG = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(2, 4))
    batches = [torch.randn(3, 4)]
    with pytest.raises(RuntimeError, match="Found dtype Long but expected Float"):
        run(source)["train"](netD, netG, batches, "cpu", 2)
    torch.manual_seed(1)
    real_loss, fake_loss, loss, mask = run(after)["train"](netD, netG, batches, "cpu", 2)
    # the same losses as with float labels written by hand
    torch.manual_seed(1)
    data = batches[0]
    expected_real = torch.nn.BCELoss()(netD(data).view(-1), torch.ones(3))
    fake = netG(torch.randn(3, 2, 1, 1))
    expected_fake = torch.nn.BCELoss()(netD(fake.detach()).view(-1), torch.zeros(3))
    assert torch.equal(real_loss, expected_real) and torch.equal(fake_loss, expected_fake)
    assert torch.equal(loss, torch.nn.functional.binary_cross_entropy(netD(data), torch.ones(3, 1)))
    assert mask.dtype == torch.int64  # the mask the loss never takes keeps its integers


# -- TL615 iterator-next-method -----------------------------------------------------------------------------


def test_tl615_next_method_raises_on_a_loader_iterator_and_the_builtin_gives_the_same_batches():
    source = (FIXTURES / "TL615" / "fix" / "iterator_next.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL615")
    assert after == (FIXTURES / "TL615" / "fix" / "iterator_next.out.py").read_text(encoding="utf-8")
    features, targets = torch.randn(12, 3), torch.arange(12)
    with pytest.raises(AttributeError, match="has no attribute 'next'"):
        run(source)["first_batches"](features, targets)
    images, labels, second, again = run(after)["first_batches"](features, targets)
    # unshuffled batches of 4; a fresh iterator starts again: its second batch is rows 4-7
    assert torch.equal(images, features[:4]) and torch.equal(labels, targets[:4])
    assert torch.equal(second[0], features[4:8]) and torch.equal(again[0], features[:4])


def test_tl615_the_recorded_release_still_has_no_next_on_loader_iterators():
    loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2)
    assert not hasattr(iter(loader), "next")
    assert api_drift.LOADER_ITERATOR_NEXT_REMOVED_IN <= tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


# -- TL602 Variable(...) ------------------------------------------------------------------------------------


def test_tl602_variable_is_a_detached_alias_and_the_rewrite_is_the_same_alias():
    source = (FIXTURES / "TL602" / "fix" / "variable.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL602")
    assert after == (FIXTURES / "TL602" / "fix" / "variable.out.py").read_text(encoding="utf-8")
    encoder = torch.nn.Linear(3, 2)
    x, w = torch.randn(4, 3), torch.randn(2)
    results = [run(text)["features"](encoder, x, w) for text in (source, after)]
    for codes, weights in results:
        # no gradient reaches the encoder through the wrapped output; the weights are a new leaf
        assert codes.grad_fn is None and not codes.requires_grad
        assert weights.is_leaf and weights.requires_grad and weights.grad_fn is None
    (codes_before, weights_before), (codes_after, weights_after) = results
    assert torch.equal(codes_before, codes_after) and torch.equal(weights_before, weights_after)


# -- torchvision's removed names and keywords (TL601, TL405; its table: tools/gen_package_api.py) ------------

TORCHVISION_OLD_CODE = """
import torch
import torchvision.transforms as T
from torchvision.utils import make_grid

def pipeline():
    return T.Compose([T.Scale(8), T.RandomAffine(0, resample=0, fillcolor=0)])

def grid(x):
    return make_grid(x, nrow=2, normalize=True, range=(-1, 1))
"""


def test_torchvision_removed_names_and_keywords_raise_and_the_renames_compute_the_same():
    _torchvision()
    namespace = run(TORCHVISION_OLD_CODE)
    with pytest.raises(AttributeError, match="Scale"):
        namespace["pipeline"]()
    x = torch.linspace(-1, 1, 4 * 3 * 4 * 4).reshape(4, 3, 4, 4)
    with pytest.raises(TypeError, match="range"):
        namespace["grid"](x)
    after = fixed(fixed(TORCHVISION_OLD_CODE, "TL601"), "TL405")
    assert "T.Resize(8)" in after and "interpolation=0" in after and "fill=0" in after and "value_range=(-1, 1)" in after
    new = run(after)
    image = torch.rand(3, 16, 16)
    # Scale was Resize under another name; a rotation by 0 degrees with nearest interpolation keeps the pixels.
    assert torch.equal(new["pipeline"]()(image), T_resize(image, 8))
    reference = (x.clamp(-1, 1) + 1) / 2  # make_grid's normalize over value_range, before tiling
    assert torch.allclose(new["grid"](x)[:, 2:6, 2:6], reference[0])


def T_resize(image, size):
    import torchvision.transforms as T

    return T.Resize(size)(image)


SAMPLER_WITH_DATA_SOURCE = """
from torch.utils.data import Sampler

class RatioSampler(Sampler):
    def __init__(self, ratios):
        super().__init__(data_source=None)
        self.ratios = ratios

    def __iter__(self):
        return iter(sorted(range(len(self.ratios)), key=self.ratios.__getitem__))

    def __len__(self):
        return len(self.ratios)

def order(ratios):
    return list(RatioSampler(ratios))
"""


def test_tl405_a_sampler_passing_data_source_to_its_base_raises_and_the_fix_iterates_the_same():
    with pytest.raises(TypeError):
        run(SAMPLER_WITH_DATA_SOURCE)["order"]([0.5, 2.0, 1.0])
    after = fixed(SAMPLER_WITH_DATA_SOURCE, "TL405")
    assert "super().__init__()" in after
    assert run(after)["order"]([0.5, 2.0, 1.0]) == [0, 2, 1]


# -- TL616 true-division-as-size ----------------------------------------------------------------------------


def test_tl616_python2_sizes_raise_and_the_floor_division_builds_and_runs_the_block():
    source = (FIXTURES / "TL616" / "fix" / "true_division_as_size.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL616")
    assert after == (FIXTURES / "TL616" / "fix" / "true_division_as_size.out.py").read_text(encoding="utf-8")
    with pytest.raises(TypeError, match="must be tuple of ints"):
        run(source)["Block"](8, 3, 2)
    block = run(after)["Block"](8, 3, 2)
    # the sizes Python 2 computed with ints: 8/2 = 4 channels, padding (3-1)/2 = 1, (8/2)/2 + 1 = 3 features
    assert block.conv.out_channels == 4 and block.conv.padding == (1, 1) and block.fc.in_features == 3
    x = torch.randn(2, 8, 5, 5)
    out = block(x)
    assert torch.equal(out, x.view(2, 2, 4, 5, 5)[:, :, :2])
    assert block.conv(x).shape == (2, 4, 5, 5)  # padding 1 keeps the size, as the author meant


def test_tl616_an_integer_tensor_divided_with_slash_cannot_index_and_the_truncating_div_indexes_as_before_1_5():
    """Each flagged line of the checker fixture raises; the fix's ``div(..., rounding_mode="trunc")`` is the
    truncating division ``/`` computed on integer tensors before torch 1.5, and it indexes."""
    bad = (FIXTURES / "TL616" / "checker" / "bad_integer_tensor_division_as_index.py").read_text(encoding="utf-8")
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        run(bad)
    source = (FIXTURES / "TL616" / "fix" / "integer_tensor_division_as_index.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL616")
    assert after == (FIXTURES / "TL616" / "fix" / "integer_tensor_division_as_index.out.py").read_text(encoding="utf-8")
    scores, hidden = torch.randn(3, 6, generator=torch.Generator().manual_seed(0)), torch.randn(18, 5)
    with pytest.raises(IndexError):
        run(source)["reorder"](scores, hidden, 6)
    reordered, words = run(after)["reorder"](scores, hidden, 6)
    best_ids = scores.view(-1).topk(4)[1]
    beams = torch.tensor([int(i) // 6 for i in best_ids.tolist()])  # integer division, as Python 2 and torch 1.4 did
    assert torch.equal(reordered, hidden[beams]) and torch.equal(words, best_ids % 6)
    assert torch.equal(torch.tensor([-7]).div(2, rounding_mode="trunc"), torch.tensor([-3]))  # truncates, like C


def _holds_int(value) -> bool:
    if isinstance(value, tuple):
        return any(_holds_int(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _float_of(value):
    """``value`` with its ints made floats (a tuple of sizes: each element)."""
    if isinstance(value, tuple):
        return tuple(_float_of(v) for v in value)
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


# A call of each API of analysis/api/integer_arguments.py that works with ints: positional arguments, keywords.
_X = (2, 4, 8, 8)
_INTEGER_CALLS = {
    "torch.nn.Conv2d": ((4, 8, 3, 1, 1, 1, 2), {}),
    "torch.nn.ConvTranspose2d": ((4, 8, 3, 1, 1, 0, 2, True, 1), {}),
    "torch.nn.Linear": ((8, 3), {}),
    "torch.nn.Bilinear": ((8, 8, 3), {}),
    "torch.nn.BatchNorm2d": ((4,), {}),
    "torch.nn.Embedding": ((10, 3), {}),
    "torch.nn.LSTM": ((8, 6, 2), {}),
    "torch.nn.GRUCell": ((8, 6), {}),
    "torch.nn.MaxPool2d": ((2, 2, 1), {}),
    "torch.nn.AvgPool2d": ((2, 2, 1), {}),
    "torch.nn.AdaptiveAvgPool2d": ((4,), {}),
    "torch.nn.PixelShuffle": ((2,), {}),
    "torch.nn.PixelUnshuffle": ((2,), {}),
    "torch.nn.Upsample": ((), {"size": (16, 16)}),
    "torch.nn.MultiheadAttention": ((8, 2), {}),
    "torch.nn.functional.interpolate": (("x", (16, 16)), {}),
    "torch.nn.functional.pad": (("x", (1, 1)), {}),
    "torch.nn.functional.max_pool2d": (("x", 2, 2, 1), {}),
    "torch.nn.functional.adaptive_avg_pool2d": (("x", 4), {}),
    "torch.nn.functional.pixel_shuffle": (("x", 2), {}),
    "torch.nn.functional.one_hot": (("labels", 4), {}),
    "torch.zeros": ((2, 3), {}),
    "torch.full": (((2, 3), 1.0), {}),
    "torch.eye": ((3, 2), {}),
    "torch.randperm": ((5,), {}),
    "torch.randint": ((0, 5, (3,)), {}),
    "torch.reshape": (("x", (2, -1)), {}),
    "torch.narrow": (("x", 1, 0, 2), {}),
    "torch.chunk": (("x", 2, 1), {}),
    "torch.split": (("x", 2, 1), {}),
    "torch.topk": (("x", 2, 1), {}),
    "torch.unsqueeze": (("x", 1), {}),
    "torch.transpose": (("x", 1, 2), {}),
    "torch.permute": (("x", (0, 2, 1, 3)), {}),
}
_METHOD_CALLS = {
    "view": (2, -1), "reshape": (2, -1), "expand": (2, 4, 8, 8), "repeat": (1, 2, 1, 1), "permute": (0, 2, 1, 3),
    "new_zeros": (2, 3), "new_ones": (2,), "new_empty": (2,), "new_full": ((2,), 1.0), "narrow": (1, 0, 2),
    "unfold": (2, 2, 1), "chunk": (2, 1), "split": (2, 1), "topk": (2, 1), "unsqueeze": (1,), "squeeze": (1,),
    "transpose": (1, 2), "size": (1,),
}


def _call_with(function, args, kwargs):
    x, labels = torch.randn(*_X), torch.tensor([1, 2])
    real = tuple(x if a == "x" else labels if a == "labels" else a for a in args)
    made = function(*real, **kwargs)
    if isinstance(made, torch.nn.Module) and not isinstance(made, (torch.nn.RNNBase, torch.nn.RNNCellBase, torch.nn.MultiheadAttention, torch.nn.Bilinear, torch.nn.Linear, torch.nn.Embedding)):
        made(torch.randn(*_X))  # a pooling size or a padding is read at the first forward
    return made


def test_tl616_every_integer_argument_of_the_table_refuses_a_float():
    from torchlint.analysis.api.integer_arguments import BY_FUNCTION, BY_METHOD

    shown = {name for name in BY_FUNCTION if name in _INTEGER_CALLS}
    # every kind of entry is exercised: one dimension of each family stands for its siblings
    assert len(shown) == len(_INTEGER_CALLS) and set(_METHOD_CALLS) == set(BY_METHOD)
    for name, (args, kwargs) in _INTEGER_CALLS.items():
        module, _, attribute = name.rpartition(".")
        function = getattr(importlib.import_module(module), attribute)
        _call_with(function, args, kwargs)  # ints work
        entry = BY_FUNCTION[name]
        for position, value in enumerate(args):
            if entry.takes_int(entry.parameter_at(position)) and _holds_int(value):
                changed = args[:position] + (_float_of(value),) + args[position + 1:]
                with pytest.raises(TypeError):
                    _call_with(function, changed, kwargs)
        for keyword, value in kwargs.items():
            if entry.takes_int(keyword):
                with pytest.raises(TypeError):
                    _call_with(function, args, {**kwargs, keyword: _float_of(value)})
    for method, args in _METHOD_CALLS.items():
        x = torch.randn(*_X)
        getattr(x, method)(*args)
        entry = BY_METHOD[method]
        for position, value in enumerate(args):
            if entry.takes_int(entry.parameter_at(position)) and _holds_int(value):
                with pytest.raises(TypeError):
                    getattr(x, method)(*(args[:position] + (_float_of(value),) + args[position + 1:]))


# -- TL617 view-of-transposed-result ------------------------------------------------------------------------


def test_tl617_top_k_accuracy_raises_on_a_transposed_comparison_and_the_reshape_gives_the_counts():
    source = (FIXTURES / "TL617" / "fix" / "view_of_transposed_result.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL617")
    assert after == (FIXTURES / "TL617" / "fix" / "view_of_transposed_result.out.py").read_text(encoding="utf-8")
    torch.manual_seed(0)
    output = torch.randn(16, 10)
    target = torch.randint(0, 10, (16,))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        run(source)["accuracy"](output, target, topk=(1, 5))
    top1, top5 = run(after)["accuracy"](output, target, topk=(1, 5))
    ranks = output.argsort(dim=1, descending=True)
    expected = [(ranks[:, :k] == target[:, None]).any(dim=1).float().mean() * 100 for k in (1, 5)]
    assert torch.allclose(top1, expected[0].reshape(1)) and torch.allclose(top5, expected[1].reshape(1))
    # with k = 1 only, the view worked: the fix gives the same value there
    assert torch.equal(run(source)["accuracy"](output, target)[0], run(after)["accuracy"](output, target)[0])


# -- TL602 scheduler.step(epoch) ----------------------------------------------------------------------------


def test_tl602_a_scheduler_stepped_with_its_epoch_warns_and_a_plateau_scheduler_given_its_metric_does_not():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    optimizer.step()
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
        scheduler.step(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler.step()
        plateau.step(0.5)
    source = (FIXTURES / "TL602" / "checker" / "bad_scheduler_step_epoch.py").read_text(encoding="utf-8")
    result = engine.fix_text(source, SNIPPET_PATH, settings("TL602", None), unsafe=True)
    assert result.applied == 0 and result.text == source  # no fix: step() counts from the scheduler's own epoch
    assert [f.location.line for f in result.result.findings] == [9, 18, 27, 38]


# -- TL602 scheduler.get_lr() ------------------------------------------------------------------------------


def test_tl602_get_lr_outside_step_warns_and_reads_another_rate_and_the_fix_reads_the_rate_in_use():
    """StepLR(step_size=2, gamma=0.1) after three steps: get_lr warns and gives 0.001 while the optimizer uses
    0.01; the fix's get_last_lr gives the optimizer's rates, silently, at every step."""
    source = (FIXTURES / "TL602" / "fix" / "scheduler_get_lr.in.py").read_text(encoding="utf-8")
    after = fixed(source, "TL602", unsafe=True)
    assert after == (FIXTURES / "TL602" / "fix" / "scheduler_get_lr.out.py").read_text(encoding="utf-8")
    before_space, before_warnings = quietly(run, source)
    assert any("get_last_lr()" in message for message in before_warnings)
    after_space, after_warnings = quietly(run, after)
    assert not [message for message in after_warnings if "get_last_lr" in message]
    in_use = [1.0, 0.1, 0.1, 0.01]  # the optimizer's rate after each of the four steps
    assert after_space["rates"] == pytest.approx(in_use)
    assert before_space["rates"][3] == pytest.approx(0.001)  # decayed once more than the rate in use
    assert after_space["optimizer"].param_groups[0]["lr"] == pytest.approx(after_space["rates"][-1])
    # the plateau scheduler computes no rate: its get_lr raises, so it is left alone
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1))
    with pytest.raises(NotImplementedError):
        plateau.get_lr()


# -- TL602 Module.register_backward_hook -------------------------------------------------------------------------


def test_tl602_a_non_full_backward_hook_warns_on_a_module_of_several_nodes_and_a_full_hook_does_not():
    """Documented deprecated on 2.13; on a Sequential (several autograd nodes) torch warns at backward and the
    hook sees the last node's gradients only. The full hook receives the module's input gradient, silently."""
    assert "deprecated" in torch.nn.Module.register_backward_hook.__doc__
    block = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU())
    seen = []
    block.register_backward_hook(lambda module, grad_in, grad_out: seen.append([g.shape for g in grad_in if g is not None]))
    x = torch.randn(2, 3, requires_grad=True)
    _, caught = quietly(lambda: block(x).sum().backward())
    assert any("non-full backward hook" in w for w in caught)
    assert seen == [[torch.Size([2, 5])]]  # the ReLU node's input gradient, not the module's input (2, 3)
    full = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU())
    inputs = []
    full.register_full_backward_hook(lambda module, grad_in, grad_out: inputs.append(grad_in[0]))
    _, caught = quietly(lambda: full(x).sum().backward())
    assert not any("backward hook" in w for w in caught) and inputs[0].shape == x.shape
    source = (FIXTURES / "TL602" / "checker" / "bad_backward_hook.py").read_text(encoding="utf-8")
    result = engine.fix_text(source, SNIPPET_PATH, settings("TL602", None), unsafe=True)
    assert result.applied == 0 and result.text == source  # no fix: a full hook's gradients differ
    assert [f.location.line for f in result.result.findings] == [11, 21]


# -- TL601 add_module with a dotted name -------------------------------------------------------------------------


def test_tl601_a_dotted_module_name_raises_and_the_fixture_lines_are_the_ones_reported():
    with pytest.raises(KeyError, match="module name can.*contain"):
        torch.nn.Sequential().add_module("norm.1", torch.nn.ReLU())
    layers = torch.nn.Sequential()
    layers.add_module("norm1", torch.nn.ReLU())  # the name without the dot is a key like any other
    assert list(layers.state_dict()) == [] and list(dict(layers.named_children())) == ["norm1"]
    source = (FIXTURES / "TL601" / "checker" / "bad_dotted_module_name.py").read_text(encoding="utf-8")
    result = engine.fix_text(source, SNIPPET_PATH, settings("TL601", None), unsafe=True)
    assert result.applied == 0 and result.text == source  # no fix: the name is the layer's state_dict key
    assert [f.location.line for f in result.result.findings] == [9, 10, 15]


DETERMINISM = """
import torch

def seed_everything(seed):
    torch.manual_seed(seed)
    torch.set_deterministic(True)
    return torch.is_deterministic()
"""


def test_tl601_determinism_switches_are_gone_and_their_renames_do_the_same():
    with pytest.raises(AttributeError, match="set_deterministic"):
        run(DETERMINISM)["seed_everything"](0)
    after = fixed(DETERMINISM, "TL601")
    assert "torch.use_deterministic_algorithms(True)" in after and "torch.are_deterministic_algorithms_enabled()" in after
    try:
        assert run(after)["seed_everything"](0) is True
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
