from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchlint.analysis.api.api_drift import (
    MASK_METHODS,
    UINT8_INVERT_IS_BITWISE_SINCE,
    UINT8_MASK_DEPRECATED_SINCE,
    UINT8_MASK_RAISES_ON,
    VARIABLE_CLASSES,
    effective_target,
    version_text,
)
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.flow.callers import arguments_from_callers
from torchlint.analysis.model.dataflow import bindings, path_to, reaching_definition
from torchlint.analysis.model.calls import argument, has_star_args, keyword_arg
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.fused import as_receiver
from torchlint.analysis.values.kinds import value_kind
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

MAX_DEPTH = 8
# Methods that keep their receiver's dtype (shape steps, moves between devices, in-place fills that return it).
_DTYPE_KEEPING = frozenset(
    {"unsqueeze", "squeeze", "view", "reshape", "expand", "expand_as", "transpose", "permute", "contiguous", "t", "flatten",
     "repeat", "clone", "detach", "cuda", "cpu", "zero_", "fill_"}
)
_UINT8_NAMES = frozenset({"torch.uint8"})
_BYTE_TENSORS = frozenset({"torch.ByteTensor", "torch.cuda.ByteTensor"})


class Uint8Mask(Rule):
    """
    ## What it does
    Flags a mask of dtype `uint8` passed to `masked_fill`, `masked_fill_`,
    `masked_scatter`, `masked_scatter_` or `masked_select` (as a tensor method
    or `torch.masked_fill`/`torch.masked_select`), used as an index
    (`x[mask]`, `x[mask] = 0`), or as the condition of the three-argument
    `torch.where(mask, a, b)`. The mask is known to be `uint8` when the code
    makes it so in the same function: `.byte()`, `.type(torch.uint8)`,
    `.type(torch.ByteTensor)`, `.to(torch.uint8)`, a torch factory called with
    `dtype=torch.uint8`, `torch.ByteTensor(...)`, possibly followed by shape
    steps (`.unsqueeze(1)`, `.expand_as(x)`), moves (`.cuda()`), a
    `Variable(...)` around it, or indexing (`mask[t]`), on every path that
    reaches the use (`if prob.is_cuda: mask = mask.cuda()` keeps it `uint8`;
    a branch that makes it `bool` does not).

    Also flags `~mask` of such a mask (at `medium` until a validation draw
    reads it): `~` of a 0/1 `uint8` mask was its logical NOT until torch
    1.2 and is a bitwise NOT since (0 becomes 255, 1 becomes 254), so the
    inverted mask selects every entry.

    ## Why is this bad?
    Since torch 1.2 masks are `bool` and a `uint8` mask is deprecated. On
    torch 2.13 the masked ops refuse it: `RuntimeError: masked_fill_ only
    supports boolean masks, but got mask with dtype unsigned char` (and
    `masked_select: expected BoolTensor for mask`). Indexing with it still
    works with a warning, but `x[mask] = 0` goes through `masked_fill_` and
    raises. `torch.where` with a `uint8` condition warns ("where received a
    uint8 condition tensor. This behavior is deprecated and will be removed
    in a future version of PyTorch"), once per process.

    ## Example
    ```python
    pad = (tokens == PAD).byte()
    scores = scores.masked_fill(pad, float("-inf"))
    ```

    ## Use instead
    ```python
    pad = tokens == PAD
    scores = scores.masked_fill(pad, float("-inf"))
    ```

    ## Fix safety
    Safe: the old ops read a `uint8` mask as "non-zero is selected", which
    is what `.bool()` makes of it. A mask built inline gets `.bool()` in
    place of the conversion to `uint8` (`.byte()`, `.type(torch.uint8)`,
    `.to(torch.uint8)`), or `dtype=torch.bool` in place of
    `dtype=torch.uint8`; a mask held in a variable gets `.bool()` where it
    is used, since other uses of the variable (`~mask`, `1 - mask`,
    `mask.sum()`) mean something else on a `bool` tensor. `~mask` becomes
    `~mask.bool()`, what `~` computed on a 0/1 mask before torch 1.2.
    """

    code = "TL613"
    name = "uint8-mask"
    message = "a uint8 mask: masked_fill/masked_select raise RuntimeError on torch 2.13 (deprecated since 1.2); use a bool mask"
    fix_applicability = Applicability.SAFE
    triggers = ("byte", "uint8", "ByteTensor")

    @classmethod
    def prepass(cls, scan):
        return scan.regions_where(
            lambda region: not region.attributes.isdisjoint({"byte", "uint8", "ByteTensor"})
            or "ByteTensor" in region.uses
            or "uint8" in region.uses
        ) or None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if has_star_args(node):
            return
        if self.context.qualified_name(func) == "torch.where" and len(node.args) == 3:
            # where(cond) alone is nonzero(); the three-argument form warns of a uint8 condition
            condition = argument(node, 0, "condition")
            if condition is not None:
                self._judge(condition.value, "`torch.where`", raises=False, since=False)
            return
        if not isinstance(func, cst.Attribute) or func.attr.value not in MASK_METHODS:
            return
        qualified = self.context.qualified_name(func)
        if qualified is None:
            mask = argument(node, MASK_METHODS[func.attr.value], "mask")
        elif qualified in ("torch.masked_fill", "torch.masked_select", "torch.masked_scatter"):
            mask = argument(node, 1, "mask")
        else:
            return
        if mask is not None:
            self._judge(mask.value, f"`{func.attr.value}`", raises=True)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        parent = self.context.parent
        assigned = isinstance(parent, cst.AssignTarget) and parent.target is node
        statement = self.context.ancestors[-2] if assigned and len(self.context.ancestors) >= 2 else None
        # x[mask] = 0 goes through masked_fill_ (raises); x[mask] = tensor through index_put_ (warns).
        number = isinstance(statement, cst.Assign) and value_kind(self.context, statement.value, site_of(self.context.ancestors)) == "number"
        self._judge(node.slice[0].slice.value, "indexing", raises=number)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        """``~mask`` of a uint8 mask: a bitwise NOT since torch 1.2, where it was the logical NOT of a 0/1 mask."""
        if not isinstance(node.operator, cst.BitInvert):
            return
        if self._uint8_conversion(node.expression, self.context.ancestors, 0) is None:
            return
        if effective_target(self.context.settings.target_torch_version) < UINT8_INVERT_IS_BITWISE_SINCE or is_version_guarded(self.context):
            return
        inverted = node.with_changes(
            expression=cst.Call(func=cst.Attribute(value=as_receiver(node.expression), attr=cst.Name("bool")))
        )
        self.report(
            node,
            f"`~` of a uint8 mask is a bitwise NOT since torch {version_text(UINT8_INVERT_IS_BITWISE_SINCE)} (0 becomes "
            "255, 1 becomes 254: every entry stays non-zero), not the logical NOT it was: use a bool mask",
            FixSpec(Applicability.SAFE, "Invert the mask as bool (`~mask.bool()`)", (Replacement(node, inverted),)),
            # A form no validation draw has read blind yet: out of the level table's reach until one has.
            confidence=Confidence.MEDIUM,
            unmeasured=True,
        )

    def _judge(self, mask: cst.BaseExpression, where: str, raises: bool, since: bool = True) -> None:
        self._through_joined_paths = False
        found = self._uint8_conversion(mask, self.context.ancestors, 0)
        if found is None:
            return
        target = effective_target(self.context.settings.target_torch_version)
        if target < UINT8_MASK_DEPRECATED_SINCE or is_version_guarded(self.context):
            return
        inline = found[0] is not None
        if raises and target >= UINT8_MASK_RAISES_ON:
            effect = f"raises RuntimeError on torch {version_text(UINT8_MASK_RAISES_ON)} (only boolean masks)"
        elif since:
            effect = f"is deprecated since torch {version_text(UINT8_MASK_DEPRECATED_SINCE)} (warns)"
        else:
            effect = "is deprecated (torch warns that it will be removed)"
        # Read through joined paths: a form no validation draw has read blind yet, shown below the default level.
        joined = self._through_joined_paths
        self.report(
            mask,
            f"a uint8 mask in {where} {effect}: use a bool mask",
            self._fix(mask, found) if inline else self._use_site_fix(mask),
            confidence=Confidence.MEDIUM if joined else None,
            unmeasured=joined,
        )

    def _uint8_conversion(
        self, node: cst.BaseExpression, ancestors, depth: int
    ) -> Optional[Tuple[Optional[cst.CSTNode], Optional[cst.BaseExpression]]]:
        """(the node to rewrite, its replacement) when ``node`` is made uint8 inline; (None, None) when it
        is a name bound to such a mask; None when it is not known to be uint8."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Name):
            definition = reaching_definition(ancestors, node.value)
            joined = self._joined_assignments(ancestors, node.value) if definition is None else None
            if joined:
                # Branches joined (``m = m.byte()``, then ``if cuda: m = m.cuda()``): uint8 when every value is
                both = all(self._uint8_conversion(value, where, depth + 1) is not None for value, where in joined)
                self._through_joined_paths = self._through_joined_paths or both
                return (None, None) if both else None
            if definition is None:
                # A parameter: uint8 when every caller in the file passes a uint8 mask.
                passed = arguments_from_callers(self.context, ancestors, node.value)
                if not passed or any(self._uint8_conversion(value, where, depth + 1) is None for value, where in passed):
                    return None
                return (None, None)
            inner = self._uint8_conversion(definition.value, definition.ancestors, depth + 1)
            return (None, None) if inner is not None else None
        if isinstance(node, cst.Subscript):
            # ``mask[i]``, ``mask[:, t]``: an element or a slice keeps the dtype
            return self._uint8_conversion(node.value, ancestors, depth + 1)
        if not isinstance(node, cst.Call):
            return None
        func = node.func
        qualified = self.context.qualified_name(func)
        if qualified in _BYTE_TENSORS:
            return (None, None)  # torch.ByteTensor(data): no inline rewrite
        if qualified in VARIABLE_CLASSES and node.args and node.args[0].keyword is None:
            # ``Variable(mask)`` wraps the very tensor: its dtype stays, and the rewrite goes inside
            return self._uint8_conversion(node.args[0].value, ancestors, depth + 1)
        dtype = keyword_arg(node, "dtype")
        if qualified is not None and qualified.startswith("torch.") and dtype is not None:
            if self.context.qualified_name(dtype.value) in _UINT8_NAMES:
                return dtype.value, self._bool_dtype(dtype.value)
            return None
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        bool_call = cst.Call(func=func.with_changes(attr=cst.Name("bool")))
        if method == "byte" and not node.args:
            return node, bool_call
        if method in ("type", "to") and len(node.args) == 1:
            given = node.args[0].value
            named = given.evaluated_value if isinstance(given, cst.SimpleString) else self.context.qualified_name(given)
            keyword = node.args[0].keyword
            if (keyword is None or keyword.value == "dtype") and named in _UINT8_NAMES | _BYTE_TENSORS:
                return node, bool_call
            if method == "type" or (named or "").startswith("torch.") or (keyword is not None and keyword.value == "dtype"):
                return None  # another dtype
            # .to(device): the dtype stays
        elif method not in _DTYPE_KEEPING:
            return None
        return self._uint8_conversion(func.value, ancestors, depth + 1)

    def _joined_assignments(self, ancestors, name: str) -> Optional[List[Tuple[cst.BaseExpression, Tuple[cst.CSTNode, ...]]]]:
        """The values of the plain assignments of ``name`` that may reach the use, with the nodes enclosing each, when
        nothing else binds it (a parameter, an unpacking, an update); else None.  Asked where the strict
        :func:`reaching_definition` (made for fixes) answers None: branches joined, or a use inside a compound
        statement that rebinds the name; a dtype is the same question on every path."""
        reaching = [binding for binding in bindings(site_of(ancestors), name) if binding.kind != "masked"]
        if not reaching or any(binding.kind not in ("assign", "conditional") or binding.value is None for binding in reaching):
            return None
        found = []
        for binding in reaching:
            path = path_to(self.context.module, binding.value)
            if path is None:
                return None
            found.append((binding.value, path))
        return found

    def _bool_dtype(self, node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.Attribute):
            return node.with_changes(attr=cst.Name("bool"))
        return cst.parse_expression("torch.bool")

    @staticmethod
    def _fix(mask: cst.BaseExpression, found) -> FixSpec:
        old, new = found
        return FixSpec(Applicability.SAFE, "Build the mask as bool", (Replacement(old, new),))

    @staticmethod
    def _use_site_fix(mask: cst.BaseExpression) -> Optional[FixSpec]:
        if not isinstance(mask, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            return None
        return FixSpec(
            Applicability.SAFE,
            "Convert the mask with `.bool()` where it is used",
            (Replacement(mask, cst.Call(func=cst.Attribute(value=mask, attr=cst.Name("bool")))),),
        )
