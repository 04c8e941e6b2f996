from __future__ import annotations

import re

import libcst as cst

from torchlint.analysis.api.api_drift import DOTTED_MODULE_NAME_REFUSED_SINCE, Status, version_text
from torchlint.analysis.flow.module_evidence import defines_a_method
from torchlint.analysis.model.calls import argument
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement
from torchlint.rules.drift.api_uses import ApiUseRule, api_use_regions
from torchlint.source import LEGACY_ASYNC_STAND_IN

_STAND_IN = re.compile(re.escape(LEGACY_ASYNC_STAND_IN))


class RemovedTorchApi(ApiUseRule):
    """
    ## What it does
    Flags a call, a reference or an import of a torch API that is gone on
    the `target-torch-version` (with no target, on the newest torch):

    - functions torch removed but still defines only to raise: `torch.solve`
      (removed in 1.12), `torch.lstsq`, `torch.eig`, `torch.matrix_rank` (1.13)
      and `torch.symeig` (2.0), and the tensor methods `.solve()`, `.lstsq()`,
      `.eig()`, `.symeig()` where the receiver is known to be a tensor;
    - names that no longer exist: the LAPACK-style functions removed in
      1.2/1.3 (`torch.gesv`, `torch.potrf`, `torch.trtrs`, `torch.btrifact`,
      `torch.gels`, ...), the modules `torch._six` (2.0), `torch.utils.ffi`
      and `torch.legacy` (1.0), and every name the table generated from
      torch's own releases (1.11 onwards) shows gone by the target;
    - torchvision's names that its releases removed: `transforms.Scale`,
      `transforms.RandomSizedCrop` and `transforms.functional.scale` (gone
      in torchvision 0.12, which pairs with torch 1.11), and any other name
      torchvision's table (generated from its wheels 0.2.2 to 0.28 by
      `tools/gen_package_api.py`) shows gone by the target;
    - torchtext's: the legacy API (`torchtext.data.Field`, `BucketIterator`,
      `TabularDataset`, moved to `torchtext.legacy` in 0.9 and removed in
      0.12), and from torch 2.4 every name of it: its last release, 0.18, is
      built for torch 2.3 and its library does not load on a later torch
      (`OSError: Could not load this library`), so the import fails (its
      table comes from its wheels 0.3.1 to 0.18).

    Names are resolved through the file's imports: a function of your own
    called `solve`, `np.linalg.qr`, `scipy.linalg.solve` or `.solve()` on an
    object not known to be a tensor is not torch's. A use under a version
    or feature guard (`if torch.__version__ ...`, `hasattr(torch, ...)`, a
    `try` that catches `ImportError`/`AttributeError`) is compatibility code
    and is not flagged.

    ## Why is this bad?
    The line fails the first time it runs on that torch: `torch.solve(B, A)`
    raises `RuntimeError: This function was deprecated since version 1.9
    and is now removed`; `torch.gesv` raises `AttributeError`;
    `from torch._six import inf` raises `ModuleNotFoundError` at import time.

    ## Example
    ```python
    from torch._six import inf
    X, _ = torch.solve(B, A)
    w = torch.symeig(A)[0]
    r = torch.matrix_rank(A)
    ```

    ## Use instead
    ```python
    from math import inf
    X = torch.linalg.solve(A, B)
    w = torch.linalg.eigvalsh(A, UPLO="U")
    r = torch.linalg.matrix_rank(A)
    ```

    ## Fix safety
    Safe: each rewrite computes what the removed API computed on the
    releases that still had it, and is offered only where that holds.

    - `torch.solve(B, A)` returned `(solution, LU)`; `torch.linalg.solve(A, B)`
      (arguments swapped) returns the solution. Rewritten only where the
      program reads the solution alone: `torch.solve(B, A)[0]`,
      `.solution`, or `X, _ = torch.solve(B, A)`.
    - `torch.symeig(A, eigenvectors=True, upper=u)` becomes
      `torch.linalg.eigh(A, UPLO="U" if u else "L")` (symeig read the upper
      triangle by default, eigh reads the lower); without eigenvectors, and
      where only the eigenvalues are read, `torch.linalg.eigvalsh(A, UPLO=...)`.
    - `torch.matrix_rank(A, tol, symmetric)` becomes
      `torch.linalg.matrix_rank(A, atol=tol, rtol=0, hermitian=symmetric)`.
    - `from torch._six import inf`, `nan`, `container_abcs`, `int_classes`
      becomes an import of the same object (`from math import inf`, `from
      collections import abc as container_abcs`, `from builtins import int as
      int_classes`) when one module serves the whole statement; a reference
      `torch._six.X` becomes what it held: `math.inf`, `math.nan`,
      `collections.abc`, `int`, and `(str, bytes)` for `string_classes` (not
      `str`: it matched bytes too). An import of `string_classes` has no
      importable twin and keeps no fix.

    - `transforms.Scale`, `transforms.RandomSizedCrop` and
      `transforms.functional.scale` become `Resize`, `RandomResizedCrop` and
      `resize`: the old names were a subclass (a function) that passed its
      arguments on unchanged, so the new call computes what the old one did.

    No fix for `torch.lstsq` (its solution had `max(m, n)` rows with the QR
    factors below; `torch.linalg.lstsq(A, B).solution` has `n`), `torch.eig`
    (real `(n, 2)` pairs; `torch.linalg.eig` returns complex tensors, so the
    code reading them must change), the APIs removed before 1.3 (their
    successors were themselves replaced: the message names today's), and
    names the generated table reports gone (the table knows that a name
    left, not what replaced it).

    Also flagged: `x.cuda(async=True)` (torch 0.3 and before), a syntax error
    since Python 3.7 made `async` a reserved word, so nothing in the file
    runs (nor did any other rule read it). The file is read with a stand-in
    name of the same length; the fix renames the keyword `non_blocking`, the
    name torch 0.4 gave it (safe: the same argument), in `.cuda(...)` calls
    only: a function of the project with a parameter named `async` (its
    `def` is reported too, without a fix) would refuse the new name. Other
    fixes that would write the stand-in are not offered, and `--fix` writes
    nothing that does not parse. flake8 reports such a file as E999 and runs
    no plugin on it: `torchlint check --fix` renames the keywords once.

    Also flagged, at `medium` until a validation draw reads it:
    `module.add_module("norm.1", layer)`, a literal module name holding "."
    (the layout of torchvision's DenseNet before torch 0.4, copied into many
    repositories), which raises `KeyError: module name can't contain "."`
    since torch 0.4; not when a class of the project defines an `add_module`
    of its own. No fix: the name is the layer's key in every state_dict the
    code saves or loads, so the new name is the user's choice.

    Not seen: keywords a torch API dropped (TL405 flags keywords the newest
    torch rejects), APIs reached through `getattr` or a name rebound by
    assignment, and methods of values not known to be tensors.
    """

    code = "TL601"
    name = "removed-torch-api"
    message = "this torch API was removed: the line raises (AttributeError, ImportError or RuntimeError) on the target torch"
    fix_applicability = Applicability.SAFE
    status = Status.REMOVED
    triggers = ("torch", LEGACY_ASYNC_STAND_IN)

    @classmethod
    def prepass(cls, scan):
        wanted = frozenset(api_use_regions(scan, cls.known)) | scan.regions_where(lambda region: "add_module" in region.attributes)
        if LEGACY_ASYNC_STAND_IN in scan.source:
            wanted = frozenset(wanted) | scan.regions_whose_text_matches(_STAND_IN)
        return wanted or None

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_module":
            self._dotted_module_name(node)

    def _dotted_module_name(self, node: cst.Call) -> None:
        """``self.add_module("norm.1", layer)``: a literal name holding "." (nn.Module is torch's only class with the
        method; a class of the project may define its own). No fix: the name is the layer's key in every
        state_dict, so renaming it is the user's choice, with the checkpoints' keys."""
        if self.context.qualified_name(node.func) is not None or self.target < DOTTED_MODULE_NAME_REFUSED_SINCE:
            return
        name = argument(node, 0, "name")
        if name is None or not isinstance(name.value, cst.SimpleString):
            return
        text = name.value.evaluated_value
        if not isinstance(text, str) or "." not in text or defines_a_method(self.context, "add_module") or self.guarded():
            return
        self.report(
            name.value,
            f"`add_module({name.value.value}, ...)`: a module name holding \".\" raises KeyError since torch "
            f"{version_text(DOTTED_MODULE_NAME_REFUSED_SINCE)} (dotted names would collide in the state_dict); rename it",
            None,
            # Certain from the code (the runtime test shows the error), but no validation draw has read one blind
            # yet: below the default level until one has, and out of the level table's reach.
            confidence=Confidence.MEDIUM,
            unmeasured=True,
        )

    def visit_Param(self, node: cst.Param) -> None:
        """``def load(self, async=False)``: a parameter of that name does not parse either; no fix (its callers
        would need the same rename)."""
        if node.name.value == LEGACY_ASYNC_STAND_IN:
            self.report(
                node.name,
                "`async` has been a reserved word since Python 3.7: this parameter makes the whole file fail to import; rename it (and its callers' keyword)",
                at_compile_time=True,
            )

    def visit_Arg(self, node: cst.Arg) -> None:
        """``x.cuda(async=True)``: the file was read with a stand-in for ``async`` (torchlint/source.py)."""
        if node.keyword is None or node.keyword.value != LEGACY_ASYNC_STAND_IN:
            return
        # Renamed only in a ``.cuda(...)`` call: torch's argument. A function of the project with a parameter named
        # ``async`` (also a finding, on its ``def``) would refuse ``non_blocking=``: both must change together.
        call = self.context.ancestors[-1] if self.context.ancestors else None
        is_cuda = isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda"
        fix = (
            FixSpec(Applicability.SAFE, "Rename `async=` to `non_blocking=`", (Replacement(node.keyword, cst.Name("non_blocking")),))
            if is_cuda else None
        )
        self.report(
            node.keyword,
            "`async=` has been a syntax error since Python 3.7 (`async` is a reserved word): the whole file fails to "
            "import; torch 0.4 renamed the argument `non_blocking`",
            fix,
            at_compile_time=True,
        )
