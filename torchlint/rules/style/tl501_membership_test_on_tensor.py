from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.values.fused import as_receiver
from torchlint.analysis.model.ops import is_value_receiver
from torchlint.analysis.project.tracing import captures_graphs
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# Torch functions whose result is a boolean tensor.
MASK_FUNCTIONS = frozenset(
    "torch." + name
    for name in (
        "isnan", "isinf", "isfinite", "isposinf", "isneginf", "isreal", "isclose", "isin", "signbit",
        "eq", "ne", "gt", "ge", "lt", "le", "greater", "greater_equal", "less", "less_equal", "not_equal",
        "logical_and", "logical_or", "logical_not", "logical_xor",
    )
)
# Tensor methods that return a boolean tensor and have no namesake on lists, arrays or frames.
MASK_METHODS = frozenset({"isnan", "isinf", "isfinite", "isposinf", "isneginf", "logical_not", "logical_and", "logical_or", "logical_xor"})


class MembershipTestOnTensor(Rule):
    """
    ## What it does
    Flags a Python membership test of a boolean literal in a boolean tensor:
    `True in torch.isnan(x)`, `False in torch.isfinite(x)`,
    `True not in x.isinf()`, `True in torch.eq(a, b)`.

    ## Why is this bad?
    `Tensor.__contains__` evaluates `(True == mask).any().item()`: it builds a
    second full-size tensor only to compare it with `True`, and reads like
    a search through Python elements. It also does not compile:
    `torch.jit.script` rejects `True in torch.isnan(x)` ("Arguments for call
    are not valid"), while `bool(torch.isnan(x).any())` compiles. Measured
    with a dispatch trace on torch 2.13: the membership test runs
    `aten.eq.Scalar`, `aten.any`, `aten._local_scalar_dense`; the fix runs
    `aten.any` and `aten._local_scalar_dense`.

    ## Example
    ```python
    if True in torch.isnan(x):
        ...
    has_inf = False in torch.isfinite(x)
    ```

    ## Use instead
    ```python
    if torch.isnan(x).any():
        ...
    has_inf = not torch.isfinite(x).all()
    ```

    ## Fix safety
    Safe: the truth value is the same for every input, the empty tensor
    included. `True in m` becomes `m.any()`, `True not in m` `not m.any()`,
    `False in m` `not m.all()`, `False not in m` `m.all()`. Where the result is
    used as a value rather than a condition (assigned, returned, passed on),
    a tensor result is wrapped in `bool(...)` so that it stays a Python
    `bool`. Only masks the rule can see are flagged: results of torch's
    boolean functions and of the `isnan`/`isinf`/`isfinite`/`logical_*`
    methods; `True in (x > 0)` is not (it may be a NumPy array).
    """

    code = "TL501"
    name = "membership-test-on-tensor"
    message = "`True in tensor` builds a second full-size mask and does not compile under TorchScript; use `.any()` / `.all()`"
    fix_applicability = Applicability.SAFE
    triggers = ("True", "False")
    confidence_levels = (
        "`high` in a project that traces, scripts, exports or compiles a model (`torch.jit.trace`, "
        "`torch.jit.script`, `torch.onnx.export`, `torch.compile`), where the form is frozen into the graph or "
        "does not compile; `low` elsewhere, where it only costs time (analysis/project/tracing.py)."
    )

    @classmethod
    def prepass(cls, scan):
        return scan.regions_where(lambda region: region.bool_membership) or None

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1:
            return
        target = node.comparisons[0]
        negated = isinstance(target.operator, cst.NotIn)
        if not (negated or isinstance(target.operator, cst.In)):
            return
        if not (isinstance(node.left, cst.Name) and node.left.value in ("True", "False")):
            return
        if not self._is_mask(target.comparator):
            return
        self.report(node, fix=self._fix(node, node.left.value == "True", negated, target.comparator), confidence=Confidence.HIGH if captures_graphs(self.context) else Confidence.LOW)

    def _is_mask(self, node: cst.BaseExpression) -> bool:
        if not isinstance(node, cst.Call) or any(arg.star for arg in node.args):
            return False
        qualified = self.context.qualified_name(node.func)
        if qualified is not None:
            return qualified in MASK_FUNCTIONS
        func = node.func
        return isinstance(func, cst.Attribute) and func.attr.value in MASK_METHODS and is_value_receiver(self.context, func.value)

    def _fix(self, node: cst.Comparison, element: bool, negated: bool, mask: cst.BaseExpression) -> Optional[FixSpec]:
        # True in m: any; False in m: not all; "not in" flips the answer.
        reduction = "any" if element else "all"
        invert = (not element) != negated
        call: cst.BaseExpression = cst.Call(func=cst.Attribute(as_receiver(mask), cst.Name(reduction)))
        if invert:
            new: cst.BaseExpression = cst.UnaryOperation(cst.Not(), call)
        elif self._truth_context(node):
            new = call
        else:
            new = cst.Call(func=cst.Name("bool"), args=[cst.Arg(call)])
        if node.lpar and not isinstance(new, cst.Call):
            new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
        message = f"Replace with `{'not ' if invert else ''}mask.{reduction}()`"
        return FixSpec(Applicability.SAFE, message, (Replacement(node, new),))

    def _truth_context(self, node: cst.CSTNode) -> bool:
        """Whether only the truth of ``node``'s value is used (an ``if``/``while``/``assert`` test, under ``not``)."""
        child = node
        for parent in reversed(self.context.ancestors):
            if isinstance(parent, (cst.If, cst.While)) and parent.test is child:
                return True
            if isinstance(parent, cst.Assert) and parent.test is child:
                return True
            if isinstance(parent, cst.IfExp) and parent.test is child:
                return True
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
                return True
            if isinstance(parent, cst.BooleanOperation):
                child = parent
                continue
            return False
        return False
