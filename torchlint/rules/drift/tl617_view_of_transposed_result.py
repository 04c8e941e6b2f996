from __future__ import annotations

import ast
import re
from typing import List, Optional

import libcst as cst

from torchlint.analysis.api.api_drift import ELEMENTWISE_KEEPS_STRIDES_SINCE, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.calls import arguments_passed
from torchlint.analysis.model.dataflow import Site, site_of, sole_assignment
from torchlint.analysis.model.project_index import file_facts
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# Methods that make a new tensor laid out like their receiver (TensorIterator keeps the input's strides).
_ELEMENTWISE_METHODS = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "abs", "neg", "sign", "logical_not", "exp", "sigmoid",
})
# Casts keep the layout too, but return their receiver itself when the dtype already matches: no evidence of
# a new tensor, only passed through.
_CAST_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char", "type_as",
})
# Comparisons and arithmetic whose left operand is the layout the result keeps.
_ELEMENTWISE_OPERATORS = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
# Methods that lay a 2-D or larger tensor out transposed without copying.
_TRANSPOSING_METHODS = frozenset({"t", "transpose", "permute"})
_TRANSPOSED_ATTRIBUTES = frozenset({"T", "mT"})
_TRANSPOSING = _TRANSPOSING_METHODS | _TRANSPOSED_ATTRIBUTES
_MAX_HOPS = 6
_VIEW_CALL = re.compile(r"\.\s*view\s*\(")


class ViewOfTransposedResult(Rule):
    """
    ## What it does
    Flags `.view(n)` that flattens an elementwise result (a comparison such
    as `eq`, a dtype cast) of a transposed tensor (`.t()`, `.transpose()`,
    `.permute()`, `.T`), through basic slices and names assigned once:
    `pred = pred.t(); correct = pred.eq(target); correct[:k].view(-1)`.

    ## Why is this bad?
    Since torch 1.7 an elementwise op keeps its input's strides, so the
    result of a comparison on a transposed tensor is itself transposed.
    `.view` cannot flatten it and raises `RuntimeError: view size is not
    compatible with input tensor's size and stride (at least one dimension
    spans across two contiguous subspaces)` as soon as both dimensions hold
    more than one element: the top-k accuracy of the ImageNet example, copied
    into many repositories, dies in its first evaluation with `topk=(1, 5)`.
    Before 1.7 the comparison came out contiguous and the line worked.

    ## Example
    ```python
    _, pred = output.topk(5, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    correct_k = correct[:k].view(-1).float().sum(0)
    ```

    ## Use instead
    ```python
    correct_k = correct[:k].reshape(-1).float().sum(0)
    ```

    ## Fix safety
    Safe: `reshape` returns the same values; it is a view wherever `view`
    succeeded and a copy only where `view` raised. A direct
    `x.t().view(-1)` (no elementwise op between) is not flagged: it failed
    on every release, so code that keeps it runs with a dimension of size 1.
    Not flagged under a version guard or for a `target-torch-version`
    before 1.7.
    """

    code = "TL617"
    name = "view-of-transposed-result"
    message = "`.view()` of an elementwise result of a transposed tensor raises RuntimeError since torch 1.7: use `.reshape()`"
    fix_applicability = Applicability.SAFE
    triggers = ("view",)
    # The failure is certain from the code (the runtime test shows it), but no validation draw has been read
    # blind for this rule yet: shown below the default level until one has.
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. The form fails whenever both flattened dimensions hold more than one element "
        "(top-k accuracy with k > 1); its precision on users' code is unmeasured until a validation draw is read, "
        "and the level table moves it then (`bench/validate.py --calibrate`)."
    )

    @classmethod
    def prepass(cls, scan):
        # The flattened value is followed back to a transposing method or attribute the file writes.
        if not any(region.attributes & _TRANSPOSING for region in scan.regions):
            return None
        return scan.regions_whose_text_matches(_VIEW_CALL) or None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "view":
            return
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return  # flattening to one dimension merges the transposed ones whatever the sizes
        if effective_target(self.context.settings.target_torch_version) < ELEMENTWISE_KEEPS_STRIDES_SINCE:
            return
        site = site_of(self.context.ancestors)
        slices: List[cst.Slice] = []
        if not _transposed_through_elementwise(func.value, site, False, 0, slices):
            return
        if any(self._keeps_one_row(piece) for piece in slices):
            return
        if is_version_guarded(self.context):
            return
        self.report(
            node,
            f"`.view()` flattens an elementwise result of a transposed tensor: since torch "
            f"{version_text(ELEMENTWISE_KEEPS_STRIDES_SINCE)} that result keeps the transposed strides and `.view` "
            f"raises RuntimeError (view size is not compatible with input tensor's size and stride); use `.reshape()`",
            FixSpec(Applicability.SAFE, "Use `.reshape()`", (Replacement(func.attr, cst.Name("reshape")),)),
        )


    def _keeps_one_row(self, piece: cst.Slice) -> bool:
        """``x[:1]``, or ``x[:k]`` in ``for k in topk`` where every call of the function in the project passes
        (or leaves to the default) a literal ``topk`` of ints no larger than 1: one transposed row flattens."""
        upper = piece.upper
        if piece.lower is not None or piece.step is not None or upper is None:
            return False
        if isinstance(upper, cst.Integer):
            return int(upper.value) <= 1
        if not isinstance(upper, cst.Name):
            return False
        loop = next((found for node in reversed(self.context.ancestors) for found in _loops_of(node, upper.value)), None)
        function = self.context.enclosing(cst.FunctionDef)
        if loop is None or not isinstance(loop.iter, cst.Name) or function is None:
            return False
        if not any(statement is function for statement in self.context.module.body):
            return False  # a method or a nested function: its calls are not looked up
        facts = file_facts(self.context)
        defined = facts.functions.get(function.name.value) if facts is not None else None
        if defined is None:
            return False
        passed = arguments_passed(facts, defined, loop.iter.value)
        if not passed:
            return False
        for _, _, value in passed:
            try:
                sizes = ast.literal_eval(value)
            except ValueError:
                return False
            if not isinstance(sizes, (tuple, list)) or not all(isinstance(k, int) and k <= 1 for k in sizes):
                return False
        return True


def _loops_of(node: cst.CSTNode, name: str) -> List["cst.For | cst.CompFor"]:
    """The ``for name in ...`` of a for statement or a comprehension ``node`` (empty when it binds no such name)."""
    loops: List["cst.For | cst.CompFor"] = []
    if isinstance(node, cst.For):
        loops.append(node)
    elif isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
        part: Optional[cst.CompFor] = node.for_in
        while part is not None:
            loops.append(part)
            part = part.inner_for_in
    return [loop for loop in loops if isinstance(loop.target, cst.Name) and loop.target.value == name]


def _transposed_through_elementwise(
    node: cst.BaseExpression, site: Optional[Site], seen_elementwise: bool, hops: int, slices: List[cst.Slice]
) -> bool:
    """Whether ``node`` is an elementwise result of a transposed tensor: followed back through basic slices,
    elementwise methods and comparisons (their left operand), and names with one reaching assignment."""
    if hops > _MAX_HOPS:
        return False
    if isinstance(node, cst.Subscript):
        # ``x[:k]`` keeps every dimension (and the transposed strides); an integer index drops one.
        if all(isinstance(element.slice, cst.Slice) for element in node.slice):
            slices.append(node.slice[0].slice)
            return _transposed_through_elementwise(node.value, site, seen_elementwise, hops + 1, slices)
        return False
    if isinstance(node, cst.Attribute) and node.attr.value in _TRANSPOSED_ATTRIBUTES:
        return seen_elementwise
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in _TRANSPOSING_METHODS:
            return seen_elementwise
        if method in _ELEMENTWISE_METHODS:
            return _transposed_through_elementwise(node.func.value, site, True, hops + 1, slices)
        if method in _CAST_METHODS:
            return _transposed_through_elementwise(node.func.value, site, seen_elementwise, hops + 1, slices)
        return False
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and isinstance(
        node.comparisons[0].operator, _ELEMENTWISE_OPERATORS
    ):
        return _transposed_through_elementwise(node.left, site, True, hops + 1, slices)
    if isinstance(node, cst.Name):
        binding = sole_assignment(site, node.value)
        if binding is None or binding.value is None:
            return False
        return _transposed_through_elementwise(binding.value, binding.site, seen_elementwise, hops + 1, slices)
    return False

