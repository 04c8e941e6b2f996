from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import STFT_RAISES_SINCE, effective_target
from torchlint.analysis.model.calls import add_keyword, positional_args
from torchlint.analysis.api.drift_fixes import api_reference
from torchlint.analysis.api.signatures import gives_keyword
from torchlint.analysis.values.kinds import is_tensor
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

# torch.stft(input, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided, return_complex)
RETURN_COMPLEX_POSITION = 9


class StftWithoutReturnComplex(Rule):
    """
    ## What it does
    Flags `torch.stft(x, ...)` and `x.stft(...)` (on a value known to be a
    tensor) without `return_complex`, when `target-torch-version` is 2.0 or
    later (with no target, the newest torch).

    ## Why is this bad?
    Since torch 2.0, `stft` of a real signal raises `RuntimeError: stft
    requires the return_complex parameter be given for real inputs`. Before,
    it returned the spectrum as real `(..., 2)` pairs (real and imaginary
    parts) with a deprecation warning; code written then fails on the
    first batch after an upgrade. A complex input still runs without the
    argument; audio and other signals are real.

    ## Example
    ```python
    spec = torch.stft(wave, n_fft=400, hop_length=160, window=window)
    power = spec.pow(2).sum(-1)
    ```

    ## Use instead
    ```python
    spec = torch.view_as_real(torch.stft(wave, n_fft=400, hop_length=160, window=window, return_complex=True))
    power = spec.pow(2).sum(-1)
    # or, better, keep it complex: torch.stft(..., return_complex=True).abs().pow(2)
    ```

    ## Fix safety
    Unsafe: the fix adds `return_complex=True` and wraps the call in
    `torch.view_as_real(...)`, which for a real input gives exactly the
    `(..., 2)` tensor the old default returned, so the code downstream keeps
    working. For a complex input (which ran without the argument and
    returned a complex tensor) the wrapped call returns real pairs instead:
    the fix cannot tell the two apart, so it is applied only with
    `--unsafe-fixes`. Calls with `**kwargs`, or with `return_complex`
    passed positionally, are not flagged; `torch.istft`, which since 2.0
    requires a complex input, is not checked.
    """

    code = "TL607"
    name = "stft-without-return-complex"
    message = "torch.stft of a real input without return_complex raises RuntimeError since torch 2.0"
    fix_applicability = Applicability.UNSAFE
    triggers = ("stft",)

    @classmethod
    def prepass(cls, scan):
        return scan.regions_where(lambda region: "stft" in region.calls) or None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified in ("torch.stft", "torch.functional.stft"):
            position = RETURN_COMPLEX_POSITION
        elif qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "stft" and is_tensor(self.context, func.value):
            position, qualified = RETURN_COMPLEX_POSITION - 1, "torch.Tensor.stft"  # the receiver is the input
        else:
            return
        if effective_target(self.context.settings.target_torch_version) < STFT_RAISES_SINCE:
            return
        if any(arg.star for arg in node.args) or len(positional_args(node)) > position:
            return
        if gives_keyword(qualified, node, "return_complex") or is_version_guarded(self.context):
            return
        self.report(node, fix=self._fix(node))

    def _fix(self, node: cst.Call) -> Optional[FixSpec]:
        found = api_reference(self.context, "torch.view_as_real")
        if found is None:
            return None
        wrapped = cst.Call(
            func=cst.parse_expression(found[0]),
            args=[cst.Arg(add_keyword(node, "return_complex", cst.Name("True")))],
        )
        return FixSpec(
            Applicability.UNSAFE,
            "Pass `return_complex=True` and keep the old real (..., 2) layout with `torch.view_as_real`",
            (Replacement(node, wrapped),),
            found[1],
        )
