from __future__ import annotations

from torchlint.analysis.api.api_drift import Status
from torchlint.rule import Applicability
from torchlint.rules.drift.api_uses import ApiUseRule


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
      torch's own releases (1.11 onwards) shows gone by the target.

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

    No fix for `torch.lstsq` (its solution had `max(m, n)` rows with the QR
    factors below; `torch.linalg.lstsq(A, B).solution` has `n`), `torch.eig`
    (real `(n, 2)` pairs; `torch.linalg.eig` returns complex tensors, so the
    code reading them must change), the APIs removed before 1.3 (their
    successors were themselves replaced: the message names today's), and
    names the generated table reports gone (the table knows that a name
    left, not what replaced it).

    Not seen: keywords a torch API dropped (TL405 flags keywords the newest
    torch rejects), APIs reached through `getattr` or a name rebound by
    assignment, and methods of values not known to be tensors.
    """

    code = "TL601"
    name = "removed-torch-api"
    message = "this torch API was removed: the line raises (AttributeError, ImportError or RuntimeError) on the target torch"
    fix_applicability = Applicability.SAFE
    status = Status.REMOVED
