from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchlint.analysis.api.api_drift import (
    ELEMENTWISE_MEAN,
    ELEMENTWISE_MEAN_DEPRECATED_SINCE,
    ELEMENTWISE_MEAN_RAISES,
    LEGACY_REDUCTION_KEYWORDS,
    LEGACY_REDUCTION_SINCE,
    accepts_keyword,
    effective_target,
    legacy_reduction,
    version_text,
)
from torchlint.analysis.model.calls import add_keyword, has_star_args, keyword_arg, literal_bool, literal_value, without_args
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.rule import Applicability, FixSpec, Replacement, Rule


class LegacyLossReduction(Rule):
    """
    ## What it does
    Flags `size_average=` and `reduce=` in calls of torch's losses, as modules
    (`nn.MSELoss(size_average=False)`) or functions
    (`F.cross_entropy(x, y, reduce=False)`): every torch API that still
    takes them (the table generated from torch's releases says which).

    Also flags `reduction="elementwise_mean"`, the torch 0.4.1 name of
    `"mean"`, in the same calls.

    ## Why is this bad?
    Both were replaced by `reduction=` in torch 0.4.1. They still work, with a
    warning at every construction or call, and they silently override a
    `reduction=` given in the same call: `nn.L1Loss(size_average=False,
    reduction="mean")` sums. Their combinations are easy to misread:
    `reduce=False` means no reduction whatever `size_average` says.

    `"elementwise_mean"` was renamed `"mean"` in torch 1.0: most losses warn
    `reduction='elementwise_mean' is deprecated` at every call and compute the
    mean; `F.poisson_nll_loss`, `F.gaussian_nll_loss`,
    `F.multilabel_soft_margin_loss`, `F.triplet_margin_with_distance_loss` and
    their modules check the string themselves and raise `ValueError`.

    ## Example
    ```python
    criterion = nn.MSELoss(size_average=False)
    per_sample = F.cross_entropy(logits, y, reduce=False)
    loss = F.l1_loss(x, y, reduction="elementwise_mean")
    ```

    ## Use instead
    ```python
    criterion = nn.MSELoss(reduction="sum")
    per_sample = F.cross_entropy(logits, y, reduction="none")
    loss = F.l1_loss(x, y, reduction="mean")
    ```

    ## Fix safety
    Safe: the fix removes both keywords and writes the `reduction=` torch
    derives from them (`torch.nn._reduction.legacy_get_string`): `reduce`
    false gives `"none"`; otherwise `size_average` false gives `"sum"`, and
    `"mean"` else (a missing or `None` flag counts as true). A `reduction=`
    already in the call is replaced, since the legacy flags won over it.
    Offered when the flags are literals (`True`, `False`, `None`); a flag
    held in a variable is reported without a fix, as is a call with
    `*args`/`**kwargs` or with the flags passed positionally (which is not
    flagged: the position differs from loss to loss).

    `"elementwise_mean"` becomes `"mean"` (safe: torch maps the old name to
    the same reduction, and where it raises, `"mean"` is what the name
    meant). Not flagged for a `target-torch-version` below 1.0, where it was
    the current name.
    """

    code = "TL605"
    name = "legacy-loss-reduction"
    message = "`size_average=`/`reduce=`/`reduction=\"elementwise_mean\"` are deprecated: they warn (or raise) and `size_average=`/`reduce=` silently override `reduction=`"
    fix_applicability = Applicability.SAFE
    triggers = ("size_average", "reduce", ELEMENTWISE_MEAN)

    @classmethod
    def prepass(cls, scan):
        def may_report(region) -> bool:
            return any(
                not set(LEGACY_REDUCTION_KEYWORDS + ("reduction",)).isdisjoint(written) for _, written in region.keyword_calls
            )

        return scan.regions_where(may_report) or None

    def visit_Call(self, node: cst.Call) -> None:
        self._elementwise_mean(node)
        given = {name: keyword_arg(node, name) for name in LEGACY_REDUCTION_KEYWORDS}
        given = {name: arg for name, arg in given.items() if arg is not None}
        if not given:
            return
        qualified = self.context.qualified_name(node.func)
        if not all(accepts_keyword(qualified, name) for name in given) or not accepts_keyword(qualified, "reduction"):
            return
        if effective_target(self.context.settings.target_torch_version) < LEGACY_REDUCTION_SINCE:
            return
        if is_version_guarded(self.context):
            return
        legacy = " and ".join(f"`{name}=`" for name in given)
        flags = _literal_flags(given)
        if flags is None or has_star_args(node):
            self.report(node, f"{legacy}: legacy flags, deprecated since torch 0.4, that warn and override `reduction=`; use `reduction=`")
            return
        if all(value is None for value in flags.values()):
            # torch reads the legacy pair only when a flag is not None: reduction= stays in charge.
            self.report(node, f"{legacy}: legacy flags, deprecated since torch 0.4, with no effect here; remove them", self._fix(node, given, None))
            return
        reduction = legacy_reduction(flags.get("size_average"), flags.get("reduce"))
        self.report(
            node,
            f"{legacy}: legacy flags, deprecated since torch 0.4, that warn and override `reduction=`; "
            f"they mean `reduction=\"{reduction}\"`",
            self._fix(node, given, reduction),
        )

    def _elementwise_mean(self, node: cst.Call) -> None:
        reduction = keyword_arg(node, "reduction")
        if reduction is None or literal_value(reduction.value) != ELEMENTWISE_MEAN:
            return
        qualified = self.context.qualified_name(node.func)
        if not accepts_keyword(qualified, "reduction"):
            return
        if effective_target(self.context.settings.target_torch_version) < ELEMENTWISE_MEAN_DEPRECATED_SINCE or is_version_guarded(self.context):
            return
        if keyword_arg(node, "size_average") is not None or keyword_arg(node, "reduce") is not None:
            return  # the legacy flags override it: their finding rewrites reduction= as a whole
        since = version_text(ELEMENTWISE_MEAN_DEPRECATED_SINCE)
        effect = "raises ValueError" if qualified in ELEMENTWISE_MEAN_RAISES else "is deprecated and warns at every call"
        quote = reduction.value.value[-1]
        fix = FixSpec(
            Applicability.SAFE,
            'Use `reduction="mean"`',
            (Replacement(reduction.value, cst.SimpleString(f"{quote}mean{quote}")),),
        )
        self.report(reduction, f'`reduction="elementwise_mean"`, renamed `"mean"` in torch {since}, {effect} here; use `reduction="mean"`', fix)

    def _fix(self, node: cst.Call, given: Dict[str, cst.Arg], reduction: Optional[str]) -> FixSpec:
        """Drop the legacy flags; with ``reduction``, write it (replacing a ``reduction=`` they overrode)."""
        dropped: List[cst.Arg] = list(given.values())
        if reduction is not None:
            dropped += [arg for arg in node.args if _is_keyword(arg, "reduction")]
        call = without_args(node, dropped)
        if reduction is None:
            return FixSpec(Applicability.SAFE, "Remove the ineffective legacy flags", (Replacement(node, call),))
        call = add_keyword(call, "reduction", cst.SimpleString(f'"{reduction}"'))
        return FixSpec(Applicability.SAFE, f"Use `reduction=\"{reduction}\"`", (Replacement(node, call),))


def _is_keyword(arg: cst.Arg, name: str) -> bool:
    return arg.keyword is not None and arg.keyword.value == name


def _literal_flags(given: Dict[str, cst.Arg]) -> Optional[Dict[str, Optional[bool]]]:
    """Each legacy flag's literal value (``None``: not set), or None when one is not a literal."""
    flags: Dict[str, Optional[bool]] = {}
    for name, arg in given.items():
        if isinstance(arg.value, cst.Name) and arg.value.value == "None":
            flags[name] = None
        elif literal_bool(arg.value) is not None:
            flags[name] = literal_bool(arg.value)
        else:
            return None
    return flags
