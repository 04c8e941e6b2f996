"""What torch changed, and when: the facts behind the API-drift rules (TL6xx).

Two sources, one answer (:func:`change_of`):

- the table generated from torch's own wheels (analysis/api/api_table.py, 1.11 onwards): when a
  name stopped existing or started to be documented as deprecated;
- the records below, for what that table cannot see: APIs removed before 1.11 (the wheels it reads
  start there), APIs torch still defines only to raise (``torch.solve`` has raised RuntimeError
  since 1.12 and still exists as an attribute), warnings emitted at run time, and what replaces
  each API. Every record names its source (release notes, the pull request, the warning text).

Versions are ``(major, minor)`` torch releases. ``target-torch-version`` decides the verdict
(:meth:`ApiChange.status_at`): an API removed at or before the target breaks there; one deprecated at or
before the target warns there; with no target the newest torch the table knows is assumed.

Facts for the single-purpose drift rules (checkpoint's ``use_reentrant``, the loss modules'
``size_average``/``reduce``, ``Variable(volatile=True)``, ``torch.stft``'s ``return_complex``,
torchvision's ``pretrained``, torch's private aliases) live here too, so that every "since when"
is in one place.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, FrozenSet, Optional, Tuple

from torchlint.analysis.api import api_table
from torchlint.analysis.api.signatures import accepted_keywords

Version = Tuple[int, int]

# The packages whose APIs the records and the generated table describe.
WATCHED_PACKAGES: FrozenSet[str] = frozenset({"torch", "functorch", "torchvision", "torchtext"})


def in_watched_package(name: str) -> bool:
    """``torch.solve`` is; ``torchmetrics.Metric`` is not (a prefix of the spelling is not a package)."""
    return name.split(".", 1)[0] in WATCHED_PACKAGES


def newest_version() -> Version:
    """The newest torch release the generated table was made from: what "no target" means."""
    return tuple(api_table.VERSIONS[-1])  # type: ignore[return-value]


def effective_target(target: Optional[Tuple[int, int]]) -> Version:
    """The torch release the code is checked for: the configured target, else the newest known."""
    return tuple(target) if target is not None else newest_version()  # type: ignore[return-value]


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def deprecated_since_text(version: Version) -> str:
    """``since torch 2.2``; for the oldest release of the table, which may only be the first one it saw,
    ``since torch 1.11 or earlier``."""
    earlier = " or earlier" if tuple(version) == api_table.VERSIONS[0] else ""
    return f"since torch {version_text(version)}{earlier}"


class Status(str, enum.Enum):
    REMOVED = "removed"  # using it fails on the target
    DEPRECATED = "deprecated"  # it works on the target and warns or is documented to go


@dataclass(frozen=True)
class ApiChange:
    """What torch did to one API, under the name users reach it by (``torch.solve``, ``torch.Tensor.solve``)."""

    name: str
    deprecated: Optional[Version] = None
    removed: Optional[Version] = None
    # What to write instead (for the message), e.g. "torch.linalg.solve(A, B)".
    replacement: str = ""
    # A drop-in replacement with the same arguments and result: a fix renames every use to it.
    rename_to: Optional[str] = None
    # Still defined after removal only to raise RuntimeError when called: importing it works.
    raises_when_called: bool = False
    # Warns at run time (else deprecated in the documentation only).
    warns: bool = True
    # Only calling it changed (a legacy constructor): a reference such as ``isinstance(t, torch.sparse.FloatTensor)``
    # is not reported.
    calls_only: bool = False
    source: str = ""

    def status_at(self, target: Version) -> Optional[Status]:
        if self.removed is not None and target >= self.removed:
            return Status.REMOVED
        if self.deprecated is not None and target >= self.deprecated:
            return Status.DEPRECATED
        return None


def _change(name: str, **facts) -> ApiChange:
    return ApiChange(name, **facts)


# The legacy sparse tensor types and the dtype each one gives a tensor built from a shape alone.
LEGACY_SPARSE_DTYPES: Dict[str, str] = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Byte": "uint8",
    "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
}

_LINALG_STUB = "torch/_linalg_utils.py keeps a function that raises RuntimeError"
_CUDA_AMP = "torch 2.4 release notes; the warning names torch.amp as the replacement"

# The records, grouped by what happened.  Tensor methods are named ``torch.Tensor.<method>``.
_RECORDS: Tuple[ApiChange, ...] = (
    # Removed in 1.12-2.0 after deprecation in 1.9; kept as functions that raise (the table of wheels dates them).
    *(
        _change(name, deprecated=(1, 9), removed=removed, replacement=replacement, raises_when_called=True,
                source=f"{source}; {_LINALG_STUB}")
        for name, removed, replacement, source in (
            ("torch.solve", (1, 12), "torch.linalg.solve(A, B) (arguments swapped; returns the solution only)", "pytorch#70986"),
            ("torch.Tensor.solve", (1, 12), "torch.linalg.solve(A, B) (arguments swapped; returns the solution only)", "pytorch#70986"),
            ("torch.lstsq", (1, 13), "torch.linalg.lstsq(A, B).solution (arguments swapped; shape (n, k), not (max(m, n), k))", "pytorch#70980"),
            ("torch.Tensor.lstsq", (1, 13), "torch.linalg.lstsq(A, B).solution (arguments swapped; shape (n, k), not (max(m, n), k))", "pytorch#70980"),
            ("torch.eig", (1, 13), "torch.linalg.eig (complex results) or torch.linalg.eigvals", "pytorch#70982"),
            ("torch.Tensor.eig", (1, 13), "torch.linalg.eig (complex results) or torch.linalg.eigvals", "pytorch#70982"),
            ("torch.matrix_rank", (1, 13), "torch.linalg.matrix_rank", "pytorch#70981"),
            ("torch.symeig", (2, 0), "torch.linalg.eigh(A, UPLO=\"U\") / torch.linalg.eigvalsh(A, UPLO=\"U\")", "pytorch#70988"),
            ("torch.Tensor.symeig", (2, 0), "torch.linalg.eigh(A, UPLO=\"U\") / torch.linalg.eigvalsh(A, UPLO=\"U\")", "pytorch#70988"),
        )
    ),
    # Removed in 1.2 (pytorch#22841) and 1.3 (gels, pytorch#26480) after their renames in 1.0/1.1.
    *(
        _change(name, deprecated=(1, 0), removed=removed, replacement=replacement, source=source)
        for name, removed, replacement, source in (
            ("torch.gesv", (1, 2), "torch.linalg.solve(A, B) (arguments swapped)", "pytorch#22841"),
            ("torch.potrf", (1, 2), "torch.linalg.cholesky", "pytorch#22841"),
            ("torch.potrs", (1, 2), "torch.cholesky_solve", "pytorch#22841"),
            ("torch.potri", (1, 2), "torch.cholesky_inverse", "pytorch#22841"),
            ("torch.pstrf", (1, 2), "torch.linalg.cholesky", "pytorch#22841"),
            ("torch.trtrs", (1, 2), "torch.linalg.solve_triangular", "pytorch#22841"),
            ("torch.btrifact", (1, 2), "torch.linalg.lu_factor", "pytorch#22841"),
            ("torch.btrifact_with_info", (1, 2), "torch.linalg.lu_factor_ex", "pytorch#22841"),
            ("torch.btrisolve", (1, 2), "torch.linalg.lu_solve", "pytorch#22841"),
            ("torch.btriunpack", (1, 2), "torch.lu_unpack", "pytorch#22841"),
            ("torch.gels", (1, 3), "torch.linalg.lstsq", "pytorch#26480"),
        )
    ),
    # Modules removed without a deprecation period.
    _change("torch.utils.ffi", removed=(1, 0), replacement="torch.utils.cpp_extension", source="torch 1.0 release notes"),
    _change("torch.legacy", removed=(1, 0), replacement="torch.nn", source="torch 1.0 release notes"),
    # (``torch.utils.serialization`` itself exists on torch 2.13 again, holding the ``config`` of torch.save/load.)
    _change("torch.utils.serialization.load_lua", removed=(1, 0), replacement="the torchfile package (torchfile.load) to read Lua Torch .t7 files",
            source="torch 1.0 release notes: load_lua removed"),
    # Renamed in 1.8 (beta in 1.7), removed in 1.10 (pytorch#62158); no release the table dumps (1.11 on) has them.
    _change("torch.set_deterministic", deprecated=(1, 8), removed=(1, 10), rename_to="torch.use_deterministic_algorithms",
            source="pytorch#58096, pytorch#62158: set_deterministic(d) became use_deterministic_algorithms(mode)"),
    _change("torch.is_deterministic", deprecated=(1, 8), removed=(1, 10), rename_to="torch.are_deterministic_algorithms_enabled",
            source="pytorch#58096, pytorch#62158"),
    _change("torch._six", removed=(2, 0), replacement="the standard library (math.inf, collections.abc, str)",
            source="torch 2.0: the module is gone (ModuleNotFoundError)"),
    # Deprecated in favour of torch.linalg; still working, with a warning.
    _change("torch.qr", deprecated=(1, 9), replacement="torch.linalg.qr(A, mode=\"reduced\"|\"complete\")", source="pytorch#57745; warns"),
    _change("torch.cholesky", deprecated=(1, 9), replacement="torch.linalg.cholesky(A, upper=...)", source="pytorch#57725; warns"),
    _change("torch.chain_matmul", deprecated=(1, 9), replacement="torch.linalg.multi_dot([...])", source="pytorch#57735; warns"),
    _change("torch.lu", deprecated=(1, 13), replacement="torch.linalg.lu_factor / torch.linalg.lu_factor_ex", source="pytorch#73804; warns"),
    _change("torch.lu_solve", deprecated=(1, 13), replacement="torch.linalg.lu_solve(LU, pivots, B) (arguments reordered)", source="pytorch#73806; warns"),
    _change("torch.triangular_solve", deprecated=(1, 11), replacement="torch.linalg.solve_triangular(A, B, upper=...) (arguments swapped; returns the solution only)", source="torch docs; warns"),
    # The same deprecations reached as tensor methods (``A.qr()``): torch 2.13 warns for each.
    _change("torch.Tensor.qr", deprecated=(1, 9), replacement="torch.linalg.qr(A, mode=\"reduced\"|\"complete\")", source="warns as torch.qr"),
    _change("torch.Tensor.cholesky", deprecated=(1, 9), replacement="torch.linalg.cholesky(A, upper=...)", source="warns as torch.cholesky"),
    _change("torch.Tensor.lu", deprecated=(1, 13), replacement="torch.linalg.lu_factor / torch.linalg.lu_factor_ex", source="warns as torch.lu"),
    _change("torch.Tensor.lu_solve", deprecated=(1, 13), replacement="torch.linalg.lu_solve(LU, pivots, B) (arguments reordered)", source="warns as torch.lu_solve"),
    _change("torch.Tensor.triangular_solve", deprecated=(1, 11), replacement="torch.linalg.solve_triangular(A, B, upper=...) (arguments swapped; returns the solution only)", source="warns as torch.triangular_solve"),
    _change("torch.Tensor.resize", replacement="Tensor.reshape (same number of elements) or the in-place Tensor.resize_", source="warns: non-inplace resize is deprecated"),
    _change("torch.Tensor.resize_as", replacement="Tensor.reshape_as (same number of elements) or the in-place Tensor.resize_as_", source="warns: non-inplace resize_as is deprecated"),
    _change("torch.Tensor.svd", deprecated=(1, 9), warns=False, replacement="torch.linalg.svd (returns Vh, not V) or torch.linalg.svdvals", source="torch docs"),
    _change("torch.Tensor.ger", deprecated=(1, 8), warns=False, rename_to="torch.Tensor.outer", source="torch docs: ger is an alias of outer"),
    _change("torch.svd", deprecated=(1, 9), warns=False, replacement="torch.linalg.svd (returns Vh, not V) or torch.linalg.svdvals", source="torch docs"),
    _change("torch.norm", deprecated=(1, 9), warns=False, replacement="torch.linalg.vector_norm / matrix_norm", source="torch docs"),
    _change("torch.ger", deprecated=(1, 8), warns=False, rename_to="torch.outer", source="torch docs: ger is an alias of outer"),
    _change("torch.range", deprecated=(0, 4), replacement="torch.arange(start, end + step, step) (end excluded; float dtype kept explicitly)", source="warns: inconsistent with Python's range"),
    _change("torch.set_default_tensor_type", deprecated=(2, 1), replacement="torch.set_default_dtype / torch.set_default_device", source="the warning: deprecated as of PyTorch 2.1"),
    _change("torch.testing.assert_allclose", deprecated=(1, 12), replacement="torch.testing.assert_close (stricter dtype check, other float16 tolerance)", source="the warning: deprecated since 1.12"),
    _change("torch.nn.utils.weight_norm", deprecated=(2, 1), replacement="torch.nn.utils.parametrizations.weight_norm (new state_dict keys)", source="pytorch#103001; warns"),
    _change("torch.backends.cuda.sdp_kernel", deprecated=(2, 3), replacement="torch.nn.attention.sdpa_kernel([SDPBackend...])", source="pytorch#114689; warns"),
    _change("torch.utils._pytree._register_pytree_node", deprecated=(2, 2), replacement="torch.utils._pytree.register_pytree_node", source="pytorch#112111; warns"),
    # The typed storages: every use warns "TypedStorage is deprecated" since 2.0 (pytorch#82085).
    *(
        _change(f"torch.{kind}Storage", deprecated=(2, 0), replacement="torch.UntypedStorage / tensor.untyped_storage() (torch.frombuffer for bytes)", source="pytorch#82085; warns: TypedStorage is deprecated")
        for kind in ("Byte", "Char", "Short", "Int", "Long", "Half", "Float", "Double", "BFloat16", "Bool", "ComplexFloat", "ComplexDouble")
    ),
    _change("torch.nn.UpsamplingNearest2d", deprecated=(1, 0), warns=False, replacement="torch.nn.Upsample(..., mode=\"nearest\")", source="torch docs"),
    _change("torch.nn.UpsamplingBilinear2d", deprecated=(1, 0), warns=False, replacement="torch.nn.Upsample(..., mode=\"bilinear\", align_corners=True)", source="torch docs"),
    # torch.nn.functional: deprecated since 0.4.1.
    _change("torch.nn.functional.upsample", deprecated=(0, 4), rename_to="torch.nn.functional.interpolate", source="warns; calls interpolate with the same arguments"),
    _change("torch.nn.functional.upsample_nearest", deprecated=(0, 4), replacement="torch.nn.functional.interpolate(..., mode=\"nearest\")", source="warns"),
    _change("torch.nn.functional.upsample_bilinear", deprecated=(0, 4), replacement="torch.nn.functional.interpolate(..., mode=\"bilinear\", align_corners=True)", source="warns"),
    # F.sigmoid and F.tanh warned in 0.4 but were un-deprecated (pytorch#65909): neither the table nor torch
    # 2.13's documentation marks them, so they are not recorded.
    # The in-place initialisers replaced these in 0.4; the old names warn and call them.
    *(
        _change(f"torch.nn.init.{name}", deprecated=(0, 4), rename_to=f"torch.nn.init.{name}_", source="warns: deprecated in favor of the _ form")
        for name in ("uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                     "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse")
    ),
    _change("torch.nn.utils.clip_grad_norm", deprecated=(0, 4), rename_to="torch.nn.utils.clip_grad_norm_", source="warns"),
    # Automatic mixed precision moved to torch.amp with an explicit device type in 2.4.
    _change("torch.cuda.amp.autocast", deprecated=(2, 4), replacement="torch.amp.autocast(\"cuda\", ...)", source=_CUDA_AMP),
    _change("torch.cuda.amp.GradScaler", deprecated=(2, 4), replacement="torch.amp.GradScaler(\"cuda\", ...)", source=_CUDA_AMP),
    _change("torch.cuda.amp.custom_fwd", deprecated=(2, 4), replacement="torch.amp.custom_fwd(device_type=\"cuda\", ...)", source=_CUDA_AMP),
    _change("torch.cuda.amp.custom_bwd", deprecated=(2, 4), replacement="torch.amp.custom_bwd(device_type=\"cuda\")", source=_CUDA_AMP),
    _change("torch.cpu.amp.autocast", deprecated=(2, 4), replacement="torch.amp.autocast(\"cpu\", ...)", source=_CUDA_AMP),
    _change("torch.cpu.amp.GradScaler", deprecated=(2, 4), replacement="torch.amp.GradScaler(\"cpu\", ...)", source=_CUDA_AMP),
    # functorch became torch.func in 2.0; the old entry points warn.
    *(
        _change(f"functorch.{name}", deprecated=(2, 0), rename_to=f"torch.func.{name}", source="warns: functorch is deprecated as of PyTorch 2.0")
        for name in ("vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize")
    ),
    # The legacy sparse constructors: construction warns since pytorch#94850 (February 2023, after 2.0's branch
    # cut); torch 2.13 builds the tensor with torch.sparse_coo_tensor(indices, values[, size]), the values giving
    # the dtype and the device, whatever the type's name says.
    *(
        _change(f"{module}.{kind}Tensor", deprecated=(2, 1), calls_only=True,
                replacement="torch.sparse_coo_tensor(indices, values, size) (dtype and device come from the values)",
                source="pytorch#94850; warns: torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated")
        for module in ("torch.sparse", "torch.cuda.sparse")
        for kind in LEGACY_SPARSE_DTYPES
    ),
    # TorchScript: torch's documentation marks it deprecated since 2.5 ("please use torch.compile instead"); each
    # entry point warns when called in 2.11 (public test logs) and 2.13 (torch/jit/_script.py, _trace.py,
    # _serialization.py, _freeze.py), the release recorded here.  No rename: torch.compile and torch.export
    # work otherwise (no scripted archive to save or load).
    *(
        _change(f"torch.jit.{name}", deprecated=(2, 11), replacement=replacement,
                source="torch docs: TorchScript is deprecated (2.5); warns when called since 2.11 at the latest")
        for name, replacement in (
            ("script", "torch.compile (or torch.export to ship a model)"),
            ("trace", "torch.compile (or torch.export to ship a model)"),
            ("trace_module", "torch.export"),
            ("script_method", "torch.compile"),
            ("interface", "torch.compile"),
            ("save", "torch.export.save of an exported program (or the state_dict)"),
            ("load", "torch.export.load of an exported program (or the state_dict)"),
            ("freeze", "torch.compile"),
            ("optimize_for_inference", "torch.compile"),
            ("fork", "torch.compile"),
            ("wait", "torch.compile"),
            ("set_fusion_strategy", "torch.compile"),
        )
    ),
    # The legacy CUDA tensor types: constructing one warns since 2.1 (torch/csrc/tensor/python_tensor.cpp; torch's
    # test_dtypetensor_warnings), and fails on a machine without CUDA.  A reference (``x.type(torch.cuda.FloatTensor)``,
    # ``isinstance``) does not warn.  No fix: ``(2, 3)`` is a shape and ``([2, 3])`` data.
    *(
        _change(f"torch.cuda.{kind}Tensor", deprecated=(2, 1), calls_only=True,
                replacement=f"torch.tensor(data, dtype=torch.{dtype}, device=\"cuda\") or torch.empty(size, dtype=torch.{dtype}, device=\"cuda\")",
                source="warns: The torch.cuda.*DtypeTensor constructors are no longer recommended")
        for kind, dtype in {**LEGACY_SPARSE_DTYPES, "Bool": "bool"}.items()
    ),
    # torchvision (its releases pair with torch's: 0.16 with 2.1).  Removals and keywords come from its table
    # (tools/gen_package_api.py); these records add what replaces a name.  Scale and RandomSizedCrop were
    # subclasses of Resize and RandomResizedCrop taking the same arguments (0.2.2-0.11), so a rename is exact.
    _change("torchvision.transforms.Scale", deprecated=(1, 0), rename_to="torchvision.transforms.Resize",
            source="torchvision 0.2.2-0.11: class Scale(Resize) passes its arguments on; removed in 0.12"),
    _change("torchvision.transforms.RandomSizedCrop", deprecated=(1, 0), rename_to="torchvision.transforms.RandomResizedCrop",
            source="torchvision 0.2.2-0.11: class RandomSizedCrop(RandomResizedCrop) passes its arguments on; removed in 0.12"),
    _change("torchvision.transforms.functional.scale", deprecated=(1, 0), rename_to="torchvision.transforms.functional.resize",
            source="torchvision 0.2.2-0.11: scale(*args, **kwargs) returns resize(*args, **kwargs); removed in 0.12"),
    _change("torchvision.transforms.v2.ToTensor", deprecated=(2, 1),
            replacement="torchvision.transforms.v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])",
            source="torchvision 0.16; warns"),
)

_BY_NAME: Dict[str, ApiChange] = {record.name: record for record in _RECORDS}


def recorded_changes() -> Tuple[ApiChange, ...]:
    return _RECORDS


def _from_table(name: str) -> Optional[ApiChange]:
    removed = api_table.removed_in(name)
    deprecated = api_table.deprecated_in(name)
    if removed is None and deprecated is None:
        return None
    entry = api_table.api_entry(name)
    replacement = (getattr(entry, "replacement", None) or "") if entry is not None else ""
    # The table sees names come and go, not warnings: a deprecation it reports is not known to warn.
    return ApiChange(
        name,
        deprecated=deprecated,
        removed=removed,
        replacement=replacement,
        raises_when_called=api_table.raises_when_called(name),
        warns=False,
        source="table of torch's releases",
    )


@lru_cache(maxsize=4096)
def change_of(name: str) -> Optional[ApiChange]:
    """What torch did to API ``name``, or to the module or class it belongs to (``torch._six.inf``: the
    module ``torch._six`` was removed), or None when nothing is known."""
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        found = _change_of_exactly(".".join(parts[:end]))
        if found is not None:
            if end < len(parts) and found.raises_when_called:
                # A name below a function kept only to raise is in the submodule of that name, which the
                # function shadows as an attribute only: ``from torch.autograd.variable import Variable`` works.
                return None
            return found
    return None


def _change_of_exactly(name: str) -> Optional[ApiChange]:
    own = _BY_NAME.get(name)
    table = _from_table(name)
    if own is None:
        return table
    if table is None:
        return own
    # The wheels know the releases better than notes do, but a name already deprecated in the oldest
    # release dumped shows that release: then the recorded, earlier one is kept.  The records know
    # what replaces an API, which removed names torch keeps as raising stubs, and removals older
    # than the oldest wheel.
    deprecated = table.deprecated
    oldest = api_table.VERSIONS[0]
    if deprecated is None or (deprecated <= oldest and own.deprecated is not None):
        deprecated = own.deprecated if deprecated is None else min(deprecated, own.deprecated)
    return ApiChange(
        own.name,
        deprecated=deprecated,
        removed=table.removed or own.removed,
        replacement=own.replacement or table.replacement,
        rename_to=own.rename_to,
        raises_when_called=own.raises_when_called or table.raises_when_called,
        warns=own.warns,
        calls_only=own.calls_only,
        source=own.source,
    )


def tensor_method_names() -> FrozenSet[str]:
    """Methods of ``torch.Tensor`` with a recorded change (checked where the receiver is a tensor)."""
    prefix = "torch.Tensor."
    return frozenset(name[len(prefix):] for name in _BY_NAME if name.startswith(prefix))


# -- torch._six: what its names were, for code that imported them ------------------------------

# The same objects elsewhere (torch 1.13's torch/_six.py), importable: ``from torch._six import int_classes``
# becomes ``from builtins import int as int_classes``.  string_classes = (str, bytes) has no importable twin.
SIX_TWINS: Dict[str, str] = {
    "torch._six.inf": "math.inf",
    "torch._six.nan": "math.nan",
    "torch._six.container_abcs": "collections.abc",
    "torch._six.int_classes": "builtins.int",
}
# What an attribute reference ``torch._six.X`` becomes: a dotted name reached through the imports, or an
# expression of builtins (string_classes was (str, bytes), not str: it matched bytes too).
SIX_VALUES: Dict[str, str] = {
    "torch._six.inf": "math.inf",
    "torch._six.nan": "math.nan",
    "torch._six.container_abcs": "collections.abc",
    "torch._six.int_classes": "int",
    "torch._six.string_classes": "(str, bytes)",
}


# -- facts for the single-purpose drift rules ---------------------------------------------------

# torch.utils.checkpoint: without use_reentrant the call warns since 2.1 and runs the reentrant variant.
CHECKPOINT_FUNCTIONS: Dict[str, int] = {
    # qualified name -> position of use_reentrant when passed positionally (-1: keyword only)
    "torch.utils.checkpoint.checkpoint": -1,
    "torch.utils.checkpoint.checkpoint_sequential": 3,
}
CHECKPOINT_WARNS_SINCE: Version = (2, 1)
CHECKPOINT_DEFAULT_REENTRANT = True  # what the call does today when use_reentrant is not given

# size_average= / reduce= on losses: deprecated since 0.4.1 in favour of reduction=.
LEGACY_REDUCTION_KEYWORDS: Tuple[str, ...] = ("size_average", "reduce")
LEGACY_REDUCTION_SINCE: Version = (0, 4)


# reduction="elementwise_mean": the 0.4.1 spelling of "mean", renamed in torch 1.0 (pytorch#13419).  Most losses
# warn "reduction='elementwise_mean' is deprecated" (torch.nn._reduction.get_enum) and compute the mean; those
# that check the string themselves raise ValueError (torch 2.13).
ELEMENTWISE_MEAN = "elementwise_mean"
ELEMENTWISE_MEAN_DEPRECATED_SINCE: Version = (1, 0)
ELEMENTWISE_MEAN_RAISES: FrozenSet[str] = frozenset(
    {f"torch.nn.functional.{name}" for name in (
        "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss", "triplet_margin_with_distance_loss")}
    | {f"{module}.{name}" for module in ("torch.nn", "torch.nn.modules.loss") for name in (
        "PoissonNLLLoss", "GaussianNLLLoss", "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss")}
)


def legacy_reduction(size_average: Optional[bool], reduce: Optional[bool]) -> str:
    """The ``reduction=`` that torch derives from the legacy pair (None: not given, which counts as True)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


# Variable(..., volatile=True): the flag was removed in 0.4 (release notes: "volatile flag is now
# deprecated and has no effect"); torch only warns that it is ignored.
VARIABLE_CLASSES: FrozenSet[str] = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
VOLATILE_REMOVED_IN: Version = (0, 4)

# torch.stft of a real input without return_complex: a warning since 1.8, RuntimeError since 2.0.
STFT_FUNCTIONS: FrozenSet[str] = frozenset({"torch.stft", "torch.functional.stft", "torch.Tensor.stft"})
STFT_RAISES_SINCE: Version = (2, 0)

# torchvision's pretrained= / pretrained_backbone= (0.13, which pairs with torch 1.12): warn, weights= replaces them.
PRETRAINED_DEPRECATED_SINCE: Version = (1, 12)

# Tensor.add(Number alpha, Tensor other) and its kin: the overloads that take the Number first warn since
# torch 1.5 ("This overload of add_ is deprecated", pytorch#32861); torch implements each by calling the
# keyword form (tools/autograd/deprecated.yaml).  Method name (without the trailing underscore) -> (the keyword
# the Number moves to, how many tensors follow it).
NUMBER_FIRST_OVERLOADS: Dict[str, Tuple[str, int]] = {
    "add": ("alpha", 1),
    "sub": ("alpha", 1),
    "addcmul": ("value", 2),
    "addcdiv": ("value", 2),
}
NUMBER_FIRST_WARNS_SINCE: Version = (1, 5)
# Of those methods, the ones no other common library's objects define (NumPy, pandas, sets and lists have an
# ``add`` but no in-place ``add_``): on these a call with the overload's count of positional arguments is the
# overload or a TypeError, whatever the receiver's type is shown to be.
NUMBER_FIRST_TORCH_ONLY = frozenset({"add_", "sub_", "addcmul", "addcmul_", "addcdiv", "addcdiv_"})
# ``beta * self + alpha * (mat1 @ mat2)`` methods whose deprecated overloads take ``beta`` (and ``alpha``) first
# as numbers: ``x.addmm_(1, -2, a, b)``, ``x.addmm_(1, a, b)`` ("This overload of addmm_ is deprecated",
# torch 2.13 warns for each); the supported call takes two positional tensors and ``beta=``/``alpha=``.
SCALED_PRODUCT_OVERLOADS = frozenset({"addmm", "addmv", "addr", "baddbmm", "addbmm"})
# ``addr`` is also a common name of other objects' methods (an address); its in-place form is torch's alone.
SCALED_PRODUCT_TORCH_ONLY = frozenset(
    {name + "_" for name in SCALED_PRODUCT_OVERLOADS} | {name for name in SCALED_PRODUCT_OVERLOADS if name != "addr"}
)

# Softmax without dim: "Implicit dimension choice for softmax has been deprecated" since torch 0.3 (the
# warning of torch.nn.functional._get_softmax_dim, which picks 0 for 0-, 1- and 3-D inputs, 1 otherwise).
# Qualified name -> the name torch's warning uses.
SOFTMAX_FAMILY: Dict[str, str] = {
    **{f"torch.nn.functional.{name}": name for name in ("softmax", "log_softmax", "softmin")},
    **{f"{module}.{cls}": name for module in ("torch.nn", "torch.nn.modules.activation")
       for cls, name in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Softmin", "softmin"))},
}
IMPLICIT_SOFTMAX_DIM_SINCE: Version = (0, 3)

# Indexing a 0-dim tensor (``loss.data[0]``): torch 0.4 made losses and full reductions 0-dim and warned at such an
# index; since 0.5 it raises "IndexError: invalid index of a 0-dim tensor. Use `tensor.item()`".
ZERO_DIM_INDEX_WARNS_SINCE: Version = (0, 4)
ZERO_DIM_INDEX_RAISES_SINCE: Version = (0, 5)

# torchvision's datasets renamed train_data/test_data to data and train_labels/test_labels to targets in 0.2.2
# (pairs with torch 1.0; vision#578, vision#742).  The MNIST family keeps the old names as properties that warn
# ("train_labels has been renamed targets", torchvision 0.28's mnist.py) and have no setter; CIFAR10/CIFAR100
# dropped them (AttributeError).  Old attribute -> new one.
DATASET_ATTRIBUTE_RENAMES: Dict[str, str] = {
    "train_data": "data", "test_data": "data", "train_labels": "targets", "test_labels": "targets",
}
DATASET_RENAMES_SINCE: Version = (1, 0)
_MNIST_FAMILY = ("MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST")
_CIFAR = ("CIFAR10", "CIFAR100")
# Qualified dataset class -> whether the old names still exist there (as warning aliases).
RENAMED_DATASETS: Dict[str, bool] = {
    **{f"torchvision.datasets.{name}": True for name in _MNIST_FAMILY},
    **{f"torchvision.datasets.mnist.{name}": True for name in _MNIST_FAMILY},
    **{f"torchvision.datasets.{name}": False for name in _CIFAR},
    **{f"torchvision.datasets.cifar.{name}": False for name in _CIFAR},
}

# ctx.saved_variables in an autograd Function: "'saved_variables' is deprecated; use 'saved_tensors'" (a
# DeprecationWarning, in torch by its 1.0 release); it returns what saved_tensors returns.
SAVED_VARIABLES_DEPRECATED_SINCE: Version = (1, 0)

# A uint8 mask: deprecated since torch 1.2 (bool tensors; "masked_fill_ received a mask with dtype torch.uint8,
# this behavior is now deprecated").  On torch 2.13 masked_fill/masked_fill_/masked_scatter/masked_select raise
# RuntimeError ("masked_fill_ only supports boolean masks"); indexing with one still only warns, and assigning a
# number through it raises (masked_fill_).  Which release turned the warnings into errors is not established
# here: the messages name 2.13, where it was run.
# torch.full infers its dtype from the fill value since 1.7 (an int fill makes int64; 1.5-1.6 warned and made
# float), and the binary cross-entropy losses refuse an int64 target ("Found dtype Long but expected Float").
FULL_INFERS_DTYPE_SINCE: Version = (1, 7)
UINT8_MASK_DEPRECATED_SINCE: Version = (1, 2)
UINT8_MASK_RAISES_ON: Version = (2, 13)
# ``~mask`` of a uint8 mask: the logical NOT of a 0/1 mask (``1 - mask``) until torch 1.2, a bitwise NOT since
# (0 -> 255, 1 -> 254: every entry stays non-zero, so the inverted mask selects everything; measured on 2.13).
UINT8_INVERT_IS_BITWISE_SINCE: Version = (1, 2)
# Tensor method -> position of the mask among the arguments (the torch function takes the input first).
MASK_METHODS: Dict[str, int] = {"masked_fill": 0, "masked_fill_": 0, "masked_scatter": 0, "masked_scatter_": 0, "masked_select": 0}

# Calling an instance of a torch.autograd.Function subclass (``MyFn()(x)``): the legacy, pre-0.4 way.  It warned
# ("Legacy autograd function with non-static forward method is deprecated and will be removed in 1.3") in 1.2
# and raises RuntimeError since 1.5, for a class with static methods too (Function.__call__ is the legacy path;
# measured on 2.13).  ``MyFn.apply(x)`` calls forward and backward with the context as their first argument,
# static or not.
FUNCTION_INSTANCE_CALL_WARNS_SINCE: Version = (1, 2)
FUNCTION_INSTANCE_CALL_RAISES_SINCE: Version = (1, 5)

# Elementwise results (``eq``, comparisons, dtype casts) of a transposed tensor keep its strides since torch 1.7
# (before, they came out contiguous): ``pred.t().eq(...)[:k].view(-1)``, the top-k accuracy of the ImageNet
# example copied into countless repositories, raises "view size is not compatible with input tensor's size and
# stride" since then (measured on 2.13).
ELEMENTWISE_KEEPS_STRIDES_SINCE: Version = (1, 7)

# ``torch.cat`` of 0-dim tensors: torch 0.4 made losses and full reductions 0-dim, and cat refuses them
# ("RuntimeError: zero-dimensional tensor (at position 0) cannot be concatenated"; measured on 2.13).  Old code
# collected the 1-element losses of 0.3 in a list and concatenated them; ``torch.stack`` gives the same vector.
ZERO_DIM_CAT_RAISES_SINCE: Version = (0, 4)

# ``module.add_module("norm.1", layer)``: a name holding "." raises KeyError since torch 0.4 ("module name can't
# contain \".\"", pytorch/pytorch#6639: dotted names could overwrite each other in a state_dict); torchvision's
# own DenseNet used such names until then, and the code copied from it still does.
DOTTED_MODULE_NAME_REFUSED_SINCE: Version = (0, 4)

# ``module.register_backward_hook(hook)``: deprecated in torch's documentation since 1.8, when
# ``register_full_backward_hook`` came; on a module whose forward runs several autograd nodes the hook sees the
# last node's gradients only, and torch warns ("Using a non-full backward hook when the forward contains multiple
# autograd Nodes is deprecated"; measured on 2.13).  nn.Module is the only torch class with this method.
NON_FULL_BACKWARD_HOOK_DEPRECATED_SINCE: Version = (1, 8)

# ``scheduler.step(epoch)``: an LR scheduler's ``step`` warns of its epoch argument since torch 1.4 ("The epoch
# parameter in `scheduler.step()` was not necessary and is being deprecated"; measured on 2.13).
# ReduceLROnPlateau's ``step(metrics)`` takes a value on purpose; the composite schedulers take none at all.
SCHEDULER_STEP_EPOCH_DEPRECATED_SINCE: Version = (1, 4)
SCHEDULERS_STEPPED_WITH_AN_ARGUMENT = frozenset({
    "torch.optim.lr_scheduler.ReduceLROnPlateau", "torch.optim.lr_scheduler.SequentialLR",
    "torch.optim.lr_scheduler.ChainedScheduler",
})

# ``scheduler.get_lr()`` outside the scheduler's own ``step``: since torch 1.4 (when ``get_last_lr`` came) it warns
# ("To get the last learning rate computed by the scheduler, please use `get_last_lr()`") and gives the chainable
# form's next value, not the rate in use: StepLR(step_size=2) after three steps reads 0.001 where the optimizer
# uses 0.01 (measured on 2.13).  The plateau and composite schedulers compute no rate: get_lr raises there.
SCHEDULER_GET_LR_WARNS_SINCE: Version = (1, 4)
SCHEDULERS_WITHOUT_GET_LR = frozenset({
    "torch.optim.lr_scheduler.ReduceLROnPlateau", "torch.optim.lr_scheduler.SequentialLR",
    "torch.optim.lr_scheduler.ChainedScheduler",
})

# ``ids / n`` on an integer tensor: truncating division until torch 1.5, true division (a float tensor) since; a
# float tensor used as an index raises IndexError ("tensors used as indices must be long, int, byte or bool
# tensors"). ``div(..., rounding_mode="trunc")`` (since 1.8) computes what ``/`` did.
INTEGER_TENSOR_TRUE_DIVISION_SINCE: Version = (1, 5)
ROUNDING_MODE_SINCE: Version = (1, 8)

# ``it.next()`` on a DataLoader iterator: its Python 2 ``next`` alias of ``__next__`` is gone since torch 1.13
# (AttributeError: '_SingleProcessDataLoaderIter' object has no attribute 'next').
LOADER_ITERATOR_NEXT_REMOVED_IN: Version = (1, 13)

# Private names with a public twin (the same object): private paths move between releases unannounced.
PUBLIC_TWINS: Dict[str, Tuple[str, Version]] = {
    # private name -> (public name, first release where the public name exists)
    "torch.utils.data._utils.collate.default_collate": ("torch.utils.data.default_collate", (1, 11)),
    "torch.utils.data._utils.collate.default_convert": ("torch.utils.data.default_convert", (1, 11)),
}


def accepts_keyword(qualified: Optional[str], keyword: str) -> bool:
    """Whether torch API ``qualified`` takes ``keyword`` (the generated table's keywords, else TL405's signatures)."""
    if qualified is None:
        return False
    entry = api_table.api_entry(qualified)
    keywords = entry.keywords if entry is not None else None
    if keywords is None:
        keywords = accepted_keywords(qualified)
    return keywords is not None and keyword in keywords
