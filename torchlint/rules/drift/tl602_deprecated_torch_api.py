from __future__ import annotations

from torchlint.analysis.api_drift import Status
from torchlint.rule import Applicability
from torchlint.rules.drift.api_uses import ApiUseRule


class DeprecatedTorchApi(ApiUseRule):
    """
    ## What it does
    Flags a call, a reference or an import of a torch API that is deprecated
    on the `target-torch-version` (with no target, on the newest torch) and
    not yet removed there:

    - linear algebra superseded by `torch.linalg`: `torch.qr`,
      `torch.cholesky`, `torch.chain_matmul`, `torch.lu`, `torch.lu_solve`,
      `torch.triangular_solve`, `torch.svd`, `torch.norm`, `torch.ger`;
    - `torch.range`, `torch.set_default_tensor_type`,
      `torch.testing.assert_allclose`, `torch.nn.utils.weight_norm`,
      `torch.nn.utils.clip_grad_norm`, the initialisers without a trailing
      underscore (`nn.init.xavier_uniform`, `nn.init.normal`, ...),
      `torch.backends.cuda.sdp_kernel`, `torch.utils._pytree._register_pytree_node`;
    - `F.upsample`, `F.upsample_nearest`, `F.upsample_bilinear`,
      `nn.UpsamplingNearest2d`, `nn.UpsamplingBilinear2d`, `F.sigmoid`, `F.tanh`;
    - `torch.cuda.amp.autocast`, `GradScaler`, `custom_fwd`, `custom_bwd`
      and `torch.cpu.amp.autocast`/`GradScaler` (2.4 moved them to `torch.amp`);
    - `functorch.vmap`, `grad`, `jacrev`, ... (2.0 moved them to `torch.func`);
      torchvision's `transforms.v2.ToTensor`;
    - every name the table generated from torch's releases marks deprecated.

    An API deprecated after the target is not flagged (on torch 2.2,
    `torch.cuda.amp.autocast` is the documented spelling). Names resolve
    through the file's imports (`np.linalg.qr` and a local `range` are not
    torch's); uses under a version or feature guard are not flagged.

    ## Why is this bad?
    A deprecated API warns on every call (most of these do) and goes away in
    a later release: the code that runs today raises `AttributeError` or
    `RuntimeError` after an upgrade, as `torch.solve` and `torch.symeig` did.
    Several replacements also differ in ways worth knowing before that day:
    `torch.range` includes its end, `torch.arange` does not.

    ## Example
    ```python
    L = torch.cholesky(A, upper=True)
    Q, R = torch.qr(A, some=False)
    P = torch.chain_matmul(A, B, C)
    idx = torch.range(0, n - 1)
    with torch.cuda.amp.autocast(True, torch.bfloat16):
        y = F.upsample(x, scale_factor=2)
    ```

    ## Use instead
    ```python
    L = torch.linalg.cholesky(A, upper=True)
    Q, R = torch.linalg.qr(A, mode="complete")
    P = torch.linalg.multi_dot([A, B, C])
    idx = torch.arange(0, n, dtype=torch.get_default_dtype())
    with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):
        y = F.interpolate(x, scale_factor=2)
    ```

    ## Fix safety
    Safe where a rewrite is offered: the replacement computes the same
    values (most deprecated functions call their replacement themselves).

    - drop-in renames: `torch.ger` to `torch.outer`, `F.upsample` to
      `F.interpolate`, `F.sigmoid`/`F.tanh` to `torch.sigmoid`/`torch.tanh`,
      `nn.init.X` to `nn.init.X_`, `clip_grad_norm` to `clip_grad_norm_`,
      `functorch.X` to `torch.func.X` (an import `from functorch import vmap`
      is rewritten to import from `torch.func`);
    - `torch.cholesky(A, upper=u)` to `torch.linalg.cholesky(A, upper=u)`;
      `torch.qr(A, some=s)` to `torch.linalg.qr(A, mode=...)`;
      `torch.chain_matmul(A, B, ...)` (two matrices or more) to
      `torch.linalg.multi_dot([A, B, ...])`; `torch.lu(A, get_infos=...)` to
      `torch.linalg.lu_factor`/`lu_factor_ex`; `torch.lu_solve(b, LU, piv)`
      to `torch.linalg.lu_solve(LU, piv, b)`; `torch.triangular_solve(b, A)`
      read for its solution to `torch.linalg.solve_triangular(A, b, upper=...)`;
      `torch.svd(A)` read for its singular values to `torch.linalg.svdvals(A)`;
    - `torch.norm(x, p, dim, keepdim, dtype=...)` with a numeric `p` or the
      default Frobenius norm to `torch.linalg.vector_norm` (torch.norm calls
      it itself); `nuc`, a `p` held in a variable and `out=` keep no fix;
    - `F.upsample_nearest`/`_bilinear` and `nn.UpsamplingNearest2d`/
      `Bilinear2d` to `interpolate`/`nn.Upsample` with the `mode=` (and
      `align_corners=True`) they used;
    - `torch.cuda.amp.autocast(...)` / `GradScaler(...)` to
      `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`
      (positional arguments become keywords: the new first parameter is the
      device; the old autocast passed `dtype=torch.float16` explicitly, the
      new one takes the autocast dtype, float16 unless the program changed
      it with `torch.set_autocast_dtype`); `custom_fwd`/`custom_bwd` get
      `device_type="cuda"`;
    - `torch.backends.cuda.sdp_kernel(...)` with literal flags to
      `torch.nn.attention.sdpa_kernel([...])` listing the backends the flags
      enabled (sdp_kernel is implemented that way);
    - `torch.set_default_tensor_type(torch.FloatTensor | DoubleTensor)` to
      `torch.set_default_dtype(torch.float32 | float64)`.

    Unsafe: `torch.range(start, end, step)` becomes `torch.arange(start,
    end + step, step, dtype=torch.get_default_dtype())` (range includes its
    end and always returns the default float dtype); that is exact when
    `end - start` is a whole number of steps, which is only known for integer
    literals (then the fix is safe).

    No fix: `torch.testing.assert_allclose` (assert_close checks dtypes and
    uses another float16 tolerance), `torch.nn.utils.weight_norm` (the
    parametrized version stores other `state_dict` keys: checkpoints stop
    loading), a CUDA tensor type in `set_default_tensor_type` (it also moved
    tensor factories to the GPU), `torch.svd` whose `U`/`V` are read (it
    returns `V`, `torch.linalg.svd` returns `Vh`), `transforms.v2.ToTensor`
    (the replacement returns a `tv_tensors.Image`), and an import of a name
    whose replacement is not a drop-in (`from torch.cuda.amp import
    autocast`: its calls are fixed, the import is left for you to remove).
    """

    code = "TL602"
    name = "deprecated-torch-api"
    message = "this torch API is deprecated: it warns today and breaks when torch removes it"
    # The least safe of its fixes (torch.range with a non-literal end); the others are safe.
    fix_applicability = Applicability.UNSAFE
    status = Status.DEPRECATED
    confidence_levels = """
- **high**: an API that warns at run time on the target (`torch.qr`, `torch.cuda.amp.autocast`, `nn.init.xavier_uniform`):
  torch has announced that it goes.
- **low**: an API deprecated only in torch's documentation, which neither warns nor has a removal date
  (`torch.norm`, `torch.svd`, `torch.ger`, `F.sigmoid`, `F.tanh`, `nn.UpsamplingNearest2d`), and names the
  generated table marks deprecated: the code is dated, but nothing says it breaks soon.
"""
