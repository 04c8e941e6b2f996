from __future__ import annotations

import libcst as cst

from torchlint.analysis.api.api_drift import (
    VARIABLE_CLASSES,
    VOLATILE_REMOVED_IN,
    effective_target,
)
from torchlint.analysis.model.calls import keyword_arg
from torchlint.analysis.model.calls import literal_bool
from torchlint.rule import Rule


class VolatileHasNoEffect(Rule):
    """
    ## What it does
    Flags `Variable(x, volatile=True)` (`torch.autograd.Variable`) and any
    `volatile=` flag that is not literally `False`.

    ## Why is this bad?
    `volatile` was torch 0.3's way to say "no gradients through anything
    computed from this value". torch 0.4 removed it: the flag is accepted,
    a warning says it "has no effect", and autograd records the graph as
    usual. Inference code written with it builds a graph through the
    model's parameters on every batch: the outputs require grad, and the
    memory of every intermediate activation is held until they are freed,
    which is how evaluation loops from the 0.3 era run out of memory.

    ## Example
    ```python
    for x, y in loader:
        x = Variable(x.cuda(), volatile=True)
        scores = model(x)
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        for x, y in loader:
            scores = model(x.cuda())
    ```

    ## Fix safety
    No automatic fix: the replacement is a `with torch.no_grad():` block
    around the computation that used the value, and where that computation
    ends (the loop, the function, a single call) is the program's intent,
    not something a rewrite of this line can know. Dropping the flag alone
    would silence the warning and keep the graph.
    """

    code = "TL606"
    name = "volatile-has-no-effect"
    message = "`volatile=True` has no effect since torch 0.4: autograd still records the graph; use `with torch.no_grad():`"
    triggers = ("volatile",)

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling_qualified(VARIABLE_CLASSES) or None

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualified_name(node.func) not in VARIABLE_CLASSES:
            return
        flag = keyword_arg(node, "volatile")
        if flag is None or literal_bool(flag.value) is False:
            return
        if effective_target(self.context.settings.target_torch_version) < VOLATILE_REMOVED_IN:
            return
        self.report(flag)
