from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import FULL_INFERS_DTYPE_SINCE, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.calls import add_keyword, argument, has_star_args, keyword_arg
from torchlint.analysis.model.dataflow import Binding, bindings, site_of
from torchlint.analysis.values.losses import LOSS_FUNCTIONS, LOSS_MODULES, match_loss
from torchlint.rule import WHOLE_FILE, Applicability, Confidence, FixSpec, Replacement, Rule

MAX_DEPTH = 4
_FULL_CALLS = frozenset({"torch.full", "torch.full_like"})
# The losses that refuse an int64 target.
_FLOAT_TARGET_LOSSES = frozenset({"bce", "bce_logits"})
# Methods that keep the dtype of the tensor they are called on (moves, shape steps, in-place fills).
_DTYPE_KEEPING = frozenset(
    {"to", "cuda", "cpu", "view", "reshape", "unsqueeze", "squeeze", "expand", "expand_as", "view_as", "clone", "detach",
     "fill_", "contiguous"}
)
# The functional losses and the loss modules' constructors of those losses.
_BCE_CALLS = frozenset(name for table in (LOSS_FUNCTIONS, LOSS_MODULES) for name, kind in table.items() if kind in _FLOAT_TARGET_LOSSES)


class IntegerFilledBceTarget(Rule):
    """
    ## What it does
    Flags `torch.full(size, fill)` (and `torch.full_like`) with an integer
    fill value and no `dtype=`, whose tensor is the target of a binary
    cross-entropy loss (`nn.BCELoss`, `nn.BCEWithLogitsLoss`,
    `F.binary_cross_entropy`, `F.binary_cross_entropy_with_logits`): the GAN
    labels `label = torch.full((b,), real_label, device=device)` with
    `real_label = 1`. The tensor is followed through names bound once,
    moves (`.to(device)`) and in-place fills (`label.fill_(fake_label)`).

    ## Why is this bad?
    Since torch 1.7 `torch.full` gives the fill value's dtype: an `int`
    makes an `int64` tensor (torch 1.5 and 1.6 warned and made a float one).
    The binary cross-entropy losses refuse an `int64` target: `RuntimeError:
    Found dtype Long but expected Float` (`result type Float can't be cast
    to the desired output type Long` with logits). Old DCGAN-style code
    dies at its first loss.

    ## Example
    ```python
    real_label = 1
    label = torch.full((batch_size,), real_label, device=device)
    loss = criterion(netD(real), label)  # criterion = nn.BCELoss()
    ```

    ## Use instead
    ```python
    label = torch.full((batch_size,), real_label, dtype=torch.float, device=device)
    ```

    ## Fix safety
    Unsafe: the tensor becomes `float32` (a literal fill `1` becomes
    `1.0`; a named fill gets `dtype=torch.float`), which is what the loss
    needs; another use of the same tensor that wanted integers (an index)
    would change too.
    """

    code = "TL618"
    name = "integer-filled-bce-target"
    message = (
        "torch.full with an integer fill makes an int64 tensor since torch 1.7, and binary cross-entropy refuses "
        "an int64 target (RuntimeError: Found dtype Long but expected Float): fill with a float"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("full",)
    # Certain from the code and proven at run time, but no validation draw has read one blind yet.
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. The loss raises on the target torch (the runtime test shows it), but no "
        "validation draw has read one blind yet, so its precision on users' code is unmeasured."
    )

    @classmethod
    def prepass(cls, scan):
        # A report is at a ``torch.full``/``torch.full_like`` call that reaches a binary cross-entropy the file
        # calls or builds (a functional loss, or a loss module's constructor); both may be anywhere in it.
        if scan.regions_calling_qualified(_FULL_CALLS) and scan.regions_calling_qualified(_BCE_CALLS):
            return WHOLE_FILE
        return None

    def visit_Call(self, node: cst.Call) -> None:
        loss = match_loss(self.context, node)
        if loss is None or loss.kind not in _FLOAT_TARGET_LOSSES or loss.target is None:
            return
        if effective_target(self.context.settings.target_torch_version) < FULL_INFERS_DTYPE_SINCE or is_version_guarded(self.context):
            return
        site = site_of(list(self.context.ancestors))
        full = self._integer_full(loss.target.value, site, 0)
        if full is None:
            return
        call, fill = full
        message = (
            f"torch.full with an integer fill makes an int64 tensor since torch {version_text(FULL_INFERS_DTYPE_SINCE)}, "
            "and this binary cross-entropy refuses an int64 target (RuntimeError: Found dtype Long but expected "
            "Float): fill with a float"
        )
        self.report(call, message, self._fix(call, fill))

    def _integer_full(self, value: cst.BaseExpression, site, depth: int):
        """(the ``torch.full`` call, its fill) when ``value`` is an int-filled ``torch.full`` without ``dtype=``."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(value, cst.Name):
            reaching = bindings(site, value.value)
            if len(reaching) != 1 or reaching[0].kind != "assign" or reaching[0].value is None:
                return None
            return self._integer_full(reaching[0].value, reaching[0].site, depth + 1)
        if not isinstance(value, cst.Call) or has_star_args(value):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in _DTYPE_KEEPING and self.context.qualified_name(func) is None:
            if func.attr.value == "to" and (value.args and not _is_device(value.args[0].value, site)):
                return None  # ``.to(torch.float)`` (or a name the code shows nothing of) may change the dtype
            return self._integer_full(func.value, site, depth + 1)
        qualified = self.context.qualified_name(func)
        if qualified not in _FULL_CALLS or keyword_arg(value, "dtype") is not None:
            return None
        fill = argument(value, 1, "fill_value")
        if fill is None or not _is_integer(fill.value, site):
            return None
        return value, fill

    def _fix(self, call: cst.Call, fill: cst.Arg) -> Optional[FixSpec]:
        if isinstance(fill.value, cst.Integer):
            return FixSpec(Applicability.UNSAFE, "Fill with a float", (Replacement(fill.value, cst.Float(f"{int(fill.value.value)}.0")),))
        torch_text, requirement = self.context.reference("torch", "torch")
        typed = add_keyword(call, "dtype", cst.parse_expression(f"{torch_text}.float"))
        return FixSpec(Applicability.UNSAFE, "Make the tensor float", (Replacement(call, typed),), (requirement,) if requirement else ())


def _is_device(value: cst.BaseExpression, site, depth: int = 0) -> bool:
    """What a move takes, not a dtype: a string (``"cuda"``), ``x.device``, ``torch.device(...)``, a choice
    between such, or a name bound once to one (a name the code shows nothing of may hold a dtype)."""
    if isinstance(value, cst.SimpleString):
        return True
    if isinstance(value, cst.Attribute):
        return value.attr.value == "device"
    if isinstance(value, cst.Call):
        func = value.func
        return (isinstance(func, cst.Attribute) and func.attr.value == "device") or (isinstance(func, cst.Name) and func.value == "device")
    if isinstance(value, cst.IfExp):
        return _is_device(value.body, site, depth) and _is_device(value.orelse, site, depth)
    if isinstance(value, cst.Name) and depth < MAX_DEPTH:
        reaching = bindings(site, value.value)
        return len(reaching) == 1 and reaching[0].value is not None and reaching[0].kind in ("assign", "module") and _is_device(
            reaching[0].value, reaching[0].site, depth + 1
        )
    return False


def _is_integer(value: cst.BaseExpression, site) -> bool:
    """An int literal, or a name bound once, in the function or at the module's top level, to one."""
    if isinstance(value, cst.Integer):
        return True
    if isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer):
        return True
    if isinstance(value, cst.Name):
        reaching = bindings(site, value.value)
        return len(reaching) == 1 and _binds_integer(reaching[0])
    return False


def _binds_integer(binding: Binding) -> bool:
    return binding.kind in ("assign", "module") and isinstance(binding.value, cst.Integer)
