from __future__ import annotations

import ast
from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis.api.api_drift import ZERO_DIM_CAT_RAISES_SINCE, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.model.calls import argument, has_star_args, literal_value
from torchlint.analysis.values.ranks import (
    appended_elements,
    backward_shows_one_element,
    known_rank,
    without_shape_keeping_reads,
)
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

_CATS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})
# The dimension old code joined its 1-element losses along (``torch.stack`` of 0-dim tensors gives that vector).
_FIRST_DIM = 0


def _along_the_first_dimension(call: cst.Call) -> bool:
    """No ``dim``, or ``dim=0``: how old code joined its 1-element losses (along dimension 1 their 1-element forms
    failed too, and ``-1`` joins features in today's code)."""
    dim = argument(call, 1, "dim")
    return dim is None or literal_value(dim.value) == _FIRST_DIM


def _ast_along_the_first_dimension(call: ast.Call) -> bool:
    """:func:`_along_the_first_dimension` read with ``ast`` (a dimension given by a name may be 0: kept)."""
    given = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "dim"), None)
    if given is None or not isinstance(given, (ast.Constant, ast.UnaryOp)):
        return True
    try:
        return ast.literal_eval(given) == _FIRST_DIM
    except ValueError:
        return True


def _appends_to(nodes, listed: ast.expr) -> bool:
    """Whether ``nodes`` hold ``<listed>.append(...)`` or ``.extend(...)`` (``listed`` a name or ``self.name``)."""
    wanted = ast_dotted_name(listed)
    return wanted is not None and any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend")
        and ast_dotted_name(node.func.value) == wanted
        for node in nodes
    )


class CatOfZeroDimTensors(Rule):
    """
    ## What it does
    Flags `torch.cat` (`torch.concat`) along the first dimension (no `dim`,
    or `dim=0`) of tensors the code shows to be 0-dimensional: the list it
    concatenates is a display or comprehension of them, or a list (a local
    name, or `self.name` of the class) that `append`s one. An element is 0-dim when it is (through `.data`,
    `.detach()`, `.cpu()`) what TL611 reads as 0-dim: the output of a torch
    loss with a reducing `reduction`, a full reduction (`x.sum()`,
    `x.mean()`), a name bound to one. A name the same function calls
    `.backward()` on with no gradient holds one element too (autograd
    refuses any other without one); that is shown with an unsafe fix, since
    a tensor built with the shape `(1,)` would pass both.

    ## Why is this bad?
    Up to torch 0.3 a loss was a 1-element tensor, and training loops kept
    them in a list to `torch.cat` at the end of the epoch. Since 0.4 losses
    and full reductions are 0-dim, and `torch.cat` refuses them:
    `RuntimeError: zero-dimensional tensor (at position 0) cannot be
    concatenated`. The epoch ends in a crash after all its batches ran.

    ## Example
    ```python
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        losses.append(loss.data)
    epoch_loss = torch.cat(losses).mean()
    ```

    ## Use instead
    ```python
    epoch_loss = torch.stack(losses).mean()
    ```

    ## Fix safety
    Safe where every element the finding rests on is shown 0-dim (the
    concatenation runs along dimension 0):
    `torch.stack` of n 0-dim tensors is the vector of length n that `cat`
    of their 1-element forms gave. Unsafe where only `.backward()` shows
    one element: a `(1,)` tensor stacks into an `(n, 1)` matrix.
    """

    code = "TL619"
    name = "cat-of-zero-dim-tensors"
    message = (
        "torch.cat of 0-dim tensors (losses, full reductions) raises RuntimeError since torch 0.4 "
        "(zero-dimensional tensor cannot be concatenated): use torch.stack"
    )
    fix_applicability = Applicability.SAFE
    triggers = ("cat",)
    # Certain from the code where the elements are shown 0-dim, proven at run time; no validation draw has
    # read one blind yet.
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. The call raises on the target torch (the runtime test shows it), but no "
        "validation draw has read one blind yet, so its precision on users' code is unmeasured."
    )

    @classmethod
    def prepass(cls, scan):
        """Regions calling ``torch.cat`` on a display or comprehension with a computed element, or on a list
        that some region appends to: a local name appended in the same region; ``self.name`` appended in a
        region of the same class (those regions too: the elements are read there); a top-level name appended
        at the top level (those regions too)."""
        seeds = set()
        for index in scan.regions_calling_qualified(_CATS):
            region = scan.regions[index]
            for call in region.callees:
                if not call.args or _CATS.isdisjoint(scan.qualified(call.func)):
                    continue
                listed = call.args[0]
                if not _ast_along_the_first_dimension(call):
                    continue
                if isinstance(listed, ast.ListComp) or (
                    isinstance(listed, (ast.List, ast.Tuple)) and any(isinstance(e, (ast.Call, ast.Name, ast.Attribute, ast.BinOp)) for e in listed.elts)
                ):
                    seeds.add(index)
                    continue
                in_function = isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef))
                if isinstance(listed, ast.Name) and in_function:
                    if _appends_to(region.nodes, listed):
                        seeds.add(index)
                    continue
                if isinstance(listed, ast.Name) or (
                    isinstance(listed, ast.Attribute) and isinstance(listed.value, ast.Name) and listed.value.id == "self"
                ):
                    # the regions that may feed it: the same class's members, or the top level's statements
                    feeding = [
                        other for other, candidate in enumerate(scan.regions)
                        if (candidate.enclosing_class == region.enclosing_class if isinstance(listed, ast.Attribute)
                            else candidate.enclosing_class is None and not isinstance(candidate.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
                        and _appends_to(candidate.nodes, listed)
                    ]
                    if feeding:
                        seeds.update(feeding)
                        seeds.add(index)
        return frozenset(seeds) or None

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualified_name(node.func) not in _CATS or has_star_args(node):
            return
        listed = argument(node, 0, "tensors")
        if listed is None or not _along_the_first_dimension(node):
            return
        evidence = self._zero_dim_element(listed.value, node)
        if evidence is None:
            return
        target = effective_target(self.context.settings.target_torch_version)
        if target < ZERO_DIM_CAT_RAISES_SINCE or is_version_guarded(self.context):
            return
        element, shown = evidence
        code = self.context.module.code_for_node(element)
        what = f"a 0-dim tensor (`{code}`)" if shown else f"`{code}`, a loss `.backward()` runs on without a gradient (0-dim unless built with the shape (1,))"
        self.report(
            node,
            f"torch.cat of {what} raises RuntimeError since torch "
            f"{version_text(ZERO_DIM_CAT_RAISES_SINCE)} (zero-dimensional tensor cannot be concatenated): use torch.stack",
            self._fix(node, shown),
        )

    def _zero_dim_element(self, listed: cst.BaseExpression, call: cst.Call) -> Optional[Tuple[cst.BaseExpression, bool]]:
        """An element of ``listed`` shown 0-dim (with True), else one ``.backward()`` shows to hold one element
        (with False), else None."""
        ancestors = list(self.context.ancestors)
        if isinstance(listed, (cst.List, cst.Tuple)):
            elements: List[Tuple[cst.BaseExpression, List[cst.CSTNode]]] = [
                (e.value, ancestors) for e in listed.elements if not isinstance(e, cst.StarredElement)
            ]
        elif isinstance(listed, cst.ListComp):
            elements = [(listed.elt, ancestors + [call, listed])]
        else:
            elements = appended_elements(listed, ancestors, before=call)
        one_element = None
        for element, above in elements:
            value = without_shape_keeping_reads(element)
            rank = known_rank(self.context, value, above)
            if rank == 0:
                return element, True
            if rank is None and one_element is None and isinstance(value, cst.Name) and backward_shows_one_element(self.context, value.value, above):
                one_element = element
        return (one_element, False) if one_element is not None else None

    @staticmethod
    def _fix(node: cst.Call, shown: bool) -> Optional[FixSpec]:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return None  # ``from torch import cat``: the file may bind no name to reach ``stack`` through
        stack = func.with_changes(attr=cst.Name("stack"))
        applicability = Applicability.SAFE if shown else Applicability.UNSAFE
        why = "" if shown else " (unsafe: a `(1,)` element would stack into an `(n, 1)` matrix)"
        return FixSpec(applicability, f"Use torch.stack, which makes the vector cat made of 1-element losses{why}", (Replacement(func, stack),))
