from __future__ import annotations

import libcst as cst

from torchlint.analysis.api.api_drift import (
    CHECKPOINT_DEFAULT_REENTRANT,
    CHECKPOINT_FUNCTIONS,
    CHECKPOINT_WARNS_SINCE,
    effective_target,
    version_text,
)
from torchlint.analysis.model.calls import add_keyword, positional_args
from torchlint.analysis.api.signatures import gives_keyword
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.rule import Applicability, FixSpec, Replacement, Rule


class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` and
    `torch.utils.checkpoint.checkpoint_sequential(...)` called without
    `use_reentrant`, when `target-torch-version` is 2.1 or later (with no
    target, the newest torch).

    ## Why is this bad?
    Since torch 2.1 the call warns on every step ("the use_reentrant
    parameter should be passed explicitly ... calling checkpoint without
    use_reentrant will raise an exception") and then runs the *reentrant*
    variant, which torch documents as the one to move away from: it does
    not record a graph for inputs that do not require grad (a checkpointed
    first layer whose input is the data trains nothing unless that input
    requires grad), does not support `torch.autograd.grad` or keyword
    arguments, and recomputes whole segments. Which variant a program
    gets should be written down before torch stops choosing for it.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(self.block, h)
    ```

    ## Use instead
    ```python
    h = checkpoint(self.block, h, use_reentrant=True)   # what runs today, now stated
    h = checkpoint(self.block, h, use_reentrant=False)  # what torch recommends: check the training still matches
    ```

    ## Fix safety
    Safe: the fix adds `use_reentrant=True`, the value torch uses when the
    argument is missing (torch/utils/checkpoint.py), so the program computes
    exactly what it computed before, without the warning. Moving to
    `use_reentrant=False` is the better end state but can change behaviour
    (gradients now flow to inputs that do not require grad, RNG and
    in-place semantics of the recomputation differ), so it is left to you.
    A call with `**kwargs` is not flagged (the keyword may be in it), nor
    is a call under a version guard.
    """

    code = "TL603"
    name = "checkpoint-without-use-reentrant"
    message = "checkpoint without use_reentrant warns on every call and runs the reentrant variant torch is moving away from"
    fix_applicability = Applicability.SAFE
    triggers = ("checkpoint",)

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling_qualified(CHECKPOINT_FUNCTIONS) or None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in CHECKPOINT_FUNCTIONS:
            return
        if effective_target(self.context.settings.target_torch_version) < CHECKPOINT_WARNS_SINCE:
            return
        if any(arg.star == "**" for arg in node.args) or gives_keyword(qualified, node, "use_reentrant"):
            return
        position = CHECKPOINT_FUNCTIONS[qualified]
        if any(arg.star == "*" for arg in node.args) and position >= 0:
            return  # a positional use_reentrant may be in *args
        if 0 <= position < len(positional_args(node)):
            return
        if is_version_guarded(self.context):
            return
        value = "True" if CHECKPOINT_DEFAULT_REENTRANT else "False"
        self.report(
            node,
            f"{qualified.rsplit('.', 1)[1]} without use_reentrant warns on every call since torch "
            f"{version_text(CHECKPOINT_WARNS_SINCE)} and runs the reentrant variant; pass use_reentrant "
            f"({value} keeps today's behaviour, False is what torch recommends)",
            FixSpec(
                Applicability.SAFE,
                f"Add `use_reentrant={value}` (today's behaviour)",
                (Replacement(node, add_keyword(node, "use_reentrant", cst.Name(value))),),
            ),
        )
