from __future__ import annotations

import ast
from typing import List, Optional

import libcst as cst

from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.values.fused import bare, keyword, torch_function
from torchlint.analysis.project.tracing import captures_graphs
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# Constructors that copy a Python sequence into a tensor: an int range becomes int64.
TENSOR_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.LongTensor"})
# Keywords of those constructors that torch.arange accepts as well.
ARANGE_KEYWORDS = frozenset({"dtype", "device", "requires_grad"})


class TensorFromRange(Rule):
    """
    ## What it does
    Flags `torch.tensor(range(...))`, `torch.as_tensor(range(...))`,
    `torch.LongTensor(range(...))` and the same over `list(range(...))`.

    ## Why is this bad?
    The range is materialised as Python integers and copied element by
    element (about 0.7 s for a million elements on this machine, against
    0.04 s for `torch.arange`), on the CPU even when `device=` says CUDA.
    It also breaks exported models: `torch.jit.script` refuses it ("range
    cannot be used as a value"), and `torch.jit.trace` records the tensor as
    a constant, so labels built as `torch.tensor(range(scores.size(0)))` keep
    the traced batch size forever (traced at 4 rows, run at 8: 4 labels).
    `torch.arange` builds the tensor directly, on the target device, and
    traces with the dynamic size.

    ## Example
    ```python
    labels = torch.tensor(range(len(scores)), dtype=torch.long, device=scores.device)
    ```

    ## Use instead
    ```python
    labels = torch.arange(len(scores), dtype=torch.long, device=scores.device)
    ```

    ## Fix safety
    Safe: same values, dtype (int64 unless `dtype=` says otherwise) and
    device for every non-empty range; `range(a, b, step)` keeps its three
    arguments, and `dtype`, `device` and `requires_grad` are kept (a
    positional `dtype` of `as_tensor` becomes a keyword). One difference: an
    empty range without `dtype=` gave a float32 tensor and now gives an empty
    int64 one. Calls with `pin_memory=` or other arguments `arange` lacks are
    reported without a fix.
    """

    code = "TL502"
    name = "tensor-from-range"
    message = "torch.tensor(range(n)) copies Python ints one by one and is frozen into traced models; use torch.arange(n)"
    fix_applicability = Applicability.SAFE
    triggers = ("range",)
    confidence_levels = (
        "`high` in a project that traces, scripts, exports or compiles a model (`torch.jit.trace`, "
        "`torch.jit.script`, `torch.onnx.export`, `torch.compile`), where the form is frozen into the graph or "
        "does not compile; `low` elsewhere, where it only costs time (analysis/project/tracing.py)."
    )

    @classmethod
    def prepass(cls, scan):
        def from_range(call: ast.Call) -> bool:
            if scan.qualified(call.func).isdisjoint(TENSOR_CONSTRUCTORS):
                return False
            data = [k.value for k in call.keywords if k.arg == "data"] + call.args[:1]
            return any(_ast_range_call(value) for value in data)

        candidates = scan.regions_where(lambda r: "range" in r.calls and not r.qualified_calls.isdisjoint(TENSOR_CONSTRUCTORS))
        return frozenset(i for i in candidates if any(from_range(c) for c in scan.regions[i].callees)) or None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in TENSOR_CONSTRUCTORS or has_star_args(node):
            return
        data = argument(node, 0, "data")
        if data is None:
            return
        bounds = self._range_bounds(data.value)
        if bounds is None:
            return
        self.report(node, fix=self._fix(node, qualified, data, bounds), confidence=Confidence.HIGH if captures_graphs(self.context) else Confidence.LOW)

    def _range_bounds(self, node: cst.BaseExpression) -> Optional[List[cst.Arg]]:
        """The arguments of ``range(...)`` (also under ``list(...)``), when they are plain positionals."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "list" and len(node.args) == 1:
            if not self.context.binds_name("list") and not node.args[0].star and node.args[0].keyword is None:
                node = node.args[0].value
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range"):
            return None
        if self.context.binds_name("range") or self.context.imports.is_bound("range"):
            return None  # a user's own range
        if not 1 <= len(node.args) <= 3 or any(arg.star or arg.keyword is not None for arg in node.args):
            return None
        return list(node.args)

    def _fix(self, node: cst.Call, qualified: str, data: cst.Arg, bounds: List[cst.Arg]) -> Optional[FixSpec]:
        """``torch.arange`` with the range's bounds in place of the data, the other arguments as laid out."""
        positional = positional_args(node)
        if len(positional) > (3 if qualified == "torch.as_tensor" else 1):
            return None
        if keyword_arg(node, "data") is not None and positional:
            return None
        args: List[cst.Arg] = []
        for arg in node.args:
            if arg is data:
                separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                spread = [cst.Arg(bare(b.value), comma=separator) for b in bounds]
                spread[-1] = spread[-1].with_changes(comma=arg.comma, whitespace_after_arg=arg.whitespace_after_arg)
                args.extend(spread)
            elif arg.keyword is None:  # as_tensor(data, dtype, device)
                name = ("dtype", "device")[positional.index(arg) - 1]
                args.append(arg.with_changes(keyword=cst.Name(name), equal=keyword(name, arg.value).equal))
            elif arg.keyword.value in ARANGE_KEYWORDS:
                args.append(arg)
            else:
                return None
        func, imports = torch_function(self.context, "arange")
        call = node.with_changes(func=func, args=args)
        return FixSpec(Applicability.SAFE, "Replace with `torch.arange`", (Replacement(node, call),), imports)


def _ast_range_call(node: ast.expr) -> bool:
    """``range(...)`` or ``list(range(...))`` by name, over ``ast`` (the pre-pass's superset of _range_bounds)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list" and node.args:
        node = node.args[0]
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
