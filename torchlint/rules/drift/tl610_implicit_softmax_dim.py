from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import IMPLICIT_SOFTMAX_DIM_SINCE, SOFTMAX_FAMILY, accepts_keyword, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.calls import add_keyword, argument, has_star_args
from torchlint.analysis.values.ranks import known_rank, sequential_rank_before
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

_SEQUENTIAL = frozenset({"torch.nn.Sequential", "torch.nn.modules.container.Sequential"})


class ImplicitSoftmaxDim(Rule):
    """
    ## What it does
    Flags `F.softmax(x)`, `F.log_softmax(x)` and `F.softmin(x)` without `dim`
    (or with `dim=None`), and the modules `nn.Softmax()`, `nn.LogSoftmax()` and
    `nn.Softmin()` built without one.

    ## Why is this bad?
    Since torch 0.3 the call warns `Implicit dimension choice for softmax has
    been deprecated` every time it runs, and the dimension torch picks depends
    on the input's rank (`_get_softmax_dim`): dimension 0 for a 0-D, 1-D or 3-D
    input, 1 otherwise. A 3-D input `(batch, seq, classes)` is normalised over
    the batch, not over the classes; the same line gives a different answer
    when the batch gains or loses a dimension.

    ## Example
    ```python
    head = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.Softmax())
    probs = F.softmax(logits)
    ```

    ## Use instead
    ```python
    head = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.Softmax(dim=1))
    probs = F.softmax(logits, dim=-1)  # the dimension you mean
    ```

    ## Fix safety
    Safe where offered: `dim=1` is added only where the code shows a 2-D
    input, for which torch picks dimension 1 itself, so the values do not
    change. The code shows it when the input comes from `x.view(n, -1)`,
    `x.reshape(a, b)`, `torch.flatten(x, 1)` or `nn.Flatten()`, possibly
    through layers that keep the rank (`nn.Linear`, activations, dropout),
    inside an `nn.Sequential` or through local names and `self.` modules.
    `nn.Linear` alone proves nothing: it keeps every leading dimension, so a
    3-D input stays 3-D and torch picks dimension 0 there. Elsewhere the
    finding has no fix: only you know which dimension holds the classes, and
    where torch picks dimension 0 (a 1-D or 3-D input) it is rarely the one
    you mean.
    """

    code = "TL610"
    name = "implicit-softmax-dim"
    message = "softmax without `dim` warns on every call and picks the dimension from the input's rank (0 for a 3-D input)"
    fix_applicability = Applicability.SAFE
    triggers = ("softmax", "Softmax", "softmin", "Softmin")

    @classmethod
    def prepass(cls, scan):
        """Regions calling one of the family without a dimension (or with ``dim=None``): a call that
        passes one needs no LibCST."""
        names = {name.rsplit(".", 1)[1] for name in SOFTMAX_FAMILY}

        def without_dim(call: ast.Call) -> bool:
            family = [name for name in scan.qualified(call.func) if name in SOFTMAX_FAMILY]
            if not family:
                return False
            for keyword in call.keywords:
                if keyword.arg == "dim":
                    return isinstance(keyword.value, ast.Constant) and keyword.value.value is None
            module = family[0].rsplit(".", 1)[1][0].isupper()
            position = 0 if module else 1
            if any(isinstance(arg, ast.Starred) for arg in call.args) or len(call.args) <= position:
                return True
            given = call.args[position]
            return isinstance(given, ast.Constant) and given.value is None

        return frozenset(
            i for i in scan.regions_calling(names) if any(without_dim(call) for call in scan.regions[i].callees)
        ) or None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        kind = SOFTMAX_FAMILY.get(qualified or "")
        if kind is None or has_star_args(node):
            return
        module = qualified.split(".")[-1][0].isupper()
        dim = argument(node, 0 if module else 1, "dim")
        if dim is not None and not (isinstance(dim.value, cst.Name) and dim.value.value == "None"):
            return
        if any(arg.keyword is not None and not accepts_keyword(qualified, arg.keyword.value) for arg in node.args):
            return  # a keyword torch rejects: the call raises TypeError first (TL405)
        if effective_target(self.context.settings.target_torch_version) < IMPLICIT_SOFTMAX_DIM_SINCE or is_version_guarded(self.context):
            return
        rank = self._module_input_rank(node) if module else self._function_input_rank(node)
        shown = qualified.replace("torch.nn.functional.", "F.").replace("torch.nn.modules.activation.", "nn.").replace("torch.nn.", "nn.")
        head = (
            f"`{shown}` without `dim` warns on every call (deprecated since torch {version_text(IMPLICIT_SOFTMAX_DIM_SINCE)}) "
            f"and picks the dimension from the input's rank"
        )
        if rank == 2:
            self.report(node, f"{head}: the input is 2-D here, where torch picks `dim=1`", self._fix(node, dim))
        elif rank is not None:
            self.report(node, f"{head}: the input is {rank}-D here, where torch picks dimension 0; pass the dimension you mean")
        else:
            self.report(node, f"{head} (0 for 1-D and 3-D inputs, 1 otherwise), which is not known here; pass the dimension you mean")

    def _function_input_rank(self, node: cst.Call) -> Optional[int]:
        given = argument(node, 0, "input")
        return known_rank(self.context, given.value) if given is not None else None

    def _module_input_rank(self, node: cst.Call) -> Optional[int]:
        parent = self.context.parent
        if isinstance(parent, cst.Call) and parent.func is node and len(parent.args) == 1 and parent.args[0].keyword is None:
            return known_rank(self.context, parent.args[0].value)  # nn.Softmax()(x)
        ancestors = self.context.ancestors
        if isinstance(parent, cst.Arg) and parent.keyword is None and len(ancestors) >= 2:
            sequential = ancestors[-2]
            if isinstance(sequential, cst.Call) and self.context.qualified_name(sequential.func) in _SEQUENTIAL:
                position = next(i for i, arg in enumerate(sequential.args) if arg is parent)
                return sequential_rank_before(self.context, sequential, position)
        return None

    @staticmethod
    def _fix(node: cst.Call, dim: Optional[cst.Arg]) -> FixSpec:
        one = cst.Integer("1")
        call = node.deep_replace(dim.value, one) if dim is not None else add_keyword(node, "dim", one)
        return FixSpec(Applicability.SAFE, "Pass `dim=1`, the dimension torch picks for this 2-D input", (Replacement(node, call),))
