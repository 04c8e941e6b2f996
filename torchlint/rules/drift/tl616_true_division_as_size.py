from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

import libcst as cst

from torchlint.analysis.api.api_drift import INTEGER_TENSOR_TRUE_DIVISION_SINCE, ROUNDING_MODE_SINCE, effective_target, version_text
from torchlint.analysis.api.integer_arguments import BY_FUNCTION, BY_METHOD, IntegerArguments
from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.analysis.model.calls import argument, has_star_args
from torchlint.analysis.values.dtypes import integer_tensor
from torchlint.analysis.values.fused import as_receiver
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# A true division as written (``/`` that is not ``//`` nor ``/=``): where the rule can report.
_TRUE_DIVISION = re.compile(r"(?<![/])/(?![/=])")
# How far a name is followed to the division that bound it.
MAX_DEPTH = 3
# Operators through which a float stays a float (``(k - 1) / 2 + 1``).
_FLOAT_KEEPING = (cst.Add, cst.Subtract, cst.Multiply, cst.Modulo)
# Label-based indexers: a float is a label there (``series.loc[: 2.5]``).
_LABEL_INDEXERS = frozenset({"loc", "at"})
# NumPy's index tricks read a slice as a range of numbers: a float step or bound is meant (``np.mgrid[0:1:0.1]``).
_RANGE_INDEXERS = frozenset({"numpy.mgrid", "numpy.ogrid", "numpy.r_", "numpy.c_", "numpy.s_", "numpy.index_exp"})


class TrueDivisionAsSize(Rule):
    """
    ## What it does
    Flags a true division `a / b` passed where torch takes an int: a
    module's sizes (`nn.Conv2d(c, c / 2, k, padding=(k - 1) / 2)`,
    `nn.Linear(d / 2, n)`), a shape (`x.view(-1, c / g)`, `torch.zeros(n / 2)`),
    an interpolation size (`F.interpolate(x, size=(h / 4, w / 4))`), a
    dimension, a `k`, a chunk count, or a slice bound (`x[:, : n / 2]`).
    The division is written there, inside arithmetic (`(k - 1) / 2 + 1`),
    in a tuple of sizes, or in the one assignment of a name passed there
    (`h = x.size(2) / 4` ... `size=(h, w)`). The table of such arguments is
    data (`torchlint/analysis/api/integer_arguments.py`), each entry checked
    against torch 2.13 by a test.

    Also flags the true division of an integer tensor used as an index
    (`hidden[best_ids / vocab_size]`, `x.index_select(0, ids / 2)`,
    `torch.gather(x, 1, idx / n)`), written there or bound to a name first
    (`beams = best_ids / n` ... `hidden[beams]`). The numerator is an integer
    tensor where the code shows it: the indices of `topk`, `sort`,
    `max(x, dim)`, `argmax`, `argsort`, `nonzero`, a `.long()`, and
    arithmetic of those with ints (analysis/values/dtypes.py). At `medium`
    until a validation draw reads it.

    ## Why is this bad?
    Code written for Python 2 divided ints with `/` and got an int. On
    Python 3 `/` always returns a float (and on integer tensors since torch
    1.5 a float tensor), and torch refuses a float size: `TypeError:
    empty(): argument 'size' must be tuple of ints, but found element of type
    float` when the module is built, `conv2d() received an invalid
    combination of arguments` at the first forward for a float padding,
    `slice indices must be integers` for a slice. The model cannot be built
    or run. Between integer tensors `/` truncated until torch 1.5 and gives
    a float tensor since, and a float tensor cannot index: `IndexError:
    tensors used as indices must be long, int, byte or bool tensors`.

    ## Example
    ```python
    self.conv = nn.Conv2d(channels, channels / 2, kernel_size, padding=(kernel_size - 1) / 2)
    out = out.view(batch, groups, channels / groups, height, width)
    ```

    ## Use instead
    ```python
    self.conv = nn.Conv2d(channels, channels // 2, kernel_size, padding=(kernel_size - 1) // 2)
    out = out.view(batch, groups, channels // groups, height, width)
    ```

    ## Fix safety
    Safe where the division is written in the argument: `//` is what `/`
    computed on ints under Python 2 (both floor), and the line raises today.
    No fix for a division bound to a name first (`h = x.size(2) / 4`): the
    name may be read elsewhere as the float it is.

    Safe for an integer tensor's division written in the index: `a / b`
    becomes `a.div(b, rounding_mode="trunc")`, the truncating division `/`
    computed on integer tensors before torch 1.5 (not `//`, which floors
    negative quotients); no fix for a target before 1.8, which lacks the
    keyword.
    """

    code = "TL616"
    name = "true-division-as-size"
    message = "`/` gives a float on Python 3: torch takes an int here (TypeError); use `//`"
    fix_applicability = Applicability.SAFE
    triggers = ("/",)
    # Certain from the code (the runtime test shows each API raising), but no validation draw has read one yet.
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. The failure is certain where the line runs (a test calls every API of the "
        "table with a float), but its precision on users' code is what the level table says once blind readings "
        "exist (`bench/validate.py --calibrate`). The integer tensor used as an index is a form no draw has read "
        "blind yet: it stays at `medium`, out of the level table's reach, until one has."
    )

    @classmethod
    def prepass(cls, scan):
        """Regions where a true division (or a name one binds in the region or at the top level) is an argument
        of a call named like an API of the table or like an indexing call, a slice bound, or an index."""
        written = scan.regions_whose_text_matches(_TRUE_DIVISION)
        if not written:
            return None
        module_names = _names_bound_to_divisions(scan.tree.body)

        def may_report(region) -> bool:
            nodes = region.nodes
            divided = module_names | _names_bound_to_divisions(nodes)
            for node in nodes:
                if isinstance(node, ast.Call) and _called_name(node.func) in _CALLED_NAMES | _INDEXING_METHODS:
                    values = [arg for arg in node.args] + [keyword.value for keyword in node.keywords]
                elif isinstance(node, ast.Subscript):  # an index: the visit asks whether an integer tensor is divided
                    index = node.slice
                    values = [e for e in index.elts if not isinstance(e, ast.Slice)] if isinstance(index, ast.Tuple) else [index]
                elif isinstance(node, ast.Slice):
                    values = [bound for bound in (node.lower, node.upper, node.step) if bound is not None]
                else:
                    continue
                if any(_ast_float(value, divided) for value in values):
                    return True
            return False

        return frozenset(i for i in written if may_report(scan.regions[i])) or None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                self._judge_index(element.slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        if has_star_args(node):
            return
        index = self._index_argument(node)
        if index is not None:
            self._judge_index(index)
        arguments = self._integer_arguments(node)
        if arguments is None:
            return
        for position, arg in enumerate(arg for arg in node.args if arg.keyword is None):
            if arguments.takes_int(arguments.parameter_at(position)):
                self._judge(arg.value, "an int")
        for arg in node.args:
            if arg.keyword is not None and arguments.takes_int(arg.keyword.value):
                self._judge(arg.value, "an int")

    def visit_Slice(self, node: cst.Slice) -> None:
        subscript = next((n for n in reversed(self.context.ancestors) if isinstance(n, cst.Subscript)), None)
        if subscript is None or (isinstance(subscript.value, cst.Attribute) and subscript.value.attr.value in _LABEL_INDEXERS):
            return
        if self.context.qualified_name(subscript.value) in _RANGE_INDEXERS:
            return
        for bound in (node.lower, node.upper, node.step):
            if bound is not None:
                self._judge(bound, "an int slice bound")

    def _index_argument(self, node: cst.Call) -> Optional[cst.BaseExpression]:
        """The index tensor of ``x.index_select(dim, index)``/``x.gather(dim, index)`` and of their torch
        functions (the tensor first)."""
        qualified = self.context.qualified_name(node.func)
        if qualified in _INDEXING_FUNCTIONS:
            given = argument(node, 2, "index")
        elif qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in _INDEXING_METHODS:
            given = argument(node, 1, "index")
        else:
            return None
        return given.value if given is not None else None

    def _judge_index(self, item: cst.BaseExpression) -> None:
        """An index that is the true division of an integer tensor (written there, or bound to a name first):
        a float tensor since torch 1.5, which cannot index."""
        if effective_target(self.context.settings.target_torch_version) < INTEGER_TENSOR_TRUE_DIVISION_SINCE:
            return
        divisions = [d for d in _true_divisions(item) if integer_tensor(self.context, d.left)]
        if divisions:
            fix = self._index_fix(divisions) if len(divisions) == 1 else None
            # A form no validation draw has read blind yet: out of the level table's reach until one has.
            self.report(item, self._index_message(), fix, confidence=Confidence.MEDIUM, unmeasured=True)
            return
        bound = self._bound_division(item, lambda division, ancestors: integer_tensor(self.context, division.left, ancestors))
        if bound is not None:
            message = self._index_message(f"`{item.value}` holds the float tensor of `{bound}`")
            self.report(item, message, confidence=Confidence.MEDIUM, unmeasured=True)

    def _index_message(self, through: str = "") -> str:
        where = f"{through}: " if through else ""
        return (
            f"{where}`/` on an integer tensor gives a float tensor since torch "
            f"{version_text(INTEGER_TENSOR_TRUE_DIVISION_SINCE)}, and a float tensor cannot index: IndexError when the "
            "line runs; use `.div(..., rounding_mode=\"trunc\")`"
        )

    def _index_fix(self, divisions) -> Optional[FixSpec]:
        """``a / b`` -> ``a.div(b, rounding_mode="trunc")``: the truncating division ``/`` computed on integer
        tensors before torch 1.5 (the keyword exists since 1.8)."""
        target = self.context.settings.target_torch_version
        if target is not None and target < ROUNDING_MODE_SINCE:
            return None
        (division,) = divisions
        truncated = cst.Call(
            func=cst.Attribute(value=as_receiver(division.left), attr=cst.Name("div")),
            args=[
                cst.Arg(value=division.right, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(
                    keyword=cst.Name("rounding_mode"), value=cst.SimpleString('"trunc"'),
                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
                ),
            ],
        )
        return FixSpec(
            Applicability.SAFE,
            "Use `.div(..., rounding_mode=\"trunc\")` (what `/` gave on integer tensors before torch 1.5)",
            (Replacement(division, truncated.with_changes(lpar=division.lpar, rpar=division.rpar)),),
        )

    def _integer_arguments(self, node: cst.Call) -> Optional[IntegerArguments]:
        qualified = self.context.qualified_name(node.func)
        if qualified is not None and qualified in BY_FUNCTION:
            return BY_FUNCTION[qualified]
        if isinstance(node.func, cst.Attribute) and (qualified is None or qualified.startswith("torch.Tensor.")):
            return BY_METHOD.get(node.func.attr.value)
        return None

    def _judge(self, value: cst.BaseExpression, wanted: str) -> None:
        elements = value.elements if isinstance(value, (cst.Tuple, cst.List)) else None
        for item in ([e.value for e in elements] if elements is not None else [value]):
            if any(True for _ in _true_divisions(item)):
                self.report(item, self._message(wanted), self._fix(item))
                continue
            bound = self._bound_division(item)
            if bound is not None:
                self.report(item, self._message(wanted, f"`{item.value}` holds the float of `{bound}`"))

    def _bound_division(self, item: cst.BaseExpression, counts=None) -> Optional[str]:
        """The true division (as written) that the one assignment reaching ``item`` (a name) binds it to,
        followed through names up to :data:`MAX_DEPTH`; None when there is none. ``counts(division, ancestors)``:
        which divisions count (by default every one)."""
        ancestors = self.context.ancestors
        for _ in range(MAX_DEPTH):
            if not isinstance(item, cst.Name):
                return None
            definition = reaching_definition(ancestors, item.value)
            if definition is None:
                return None
            division = next(
                (d for d in _true_divisions(definition.value) if counts is None or counts(d, definition.ancestors)), None
            )
            if division is not None:
                return cst.Module([]).code_for_node(division)
            item, ancestors = definition.value, definition.ancestors
        return None

    def _message(self, wanted: str, through: str = "") -> str:
        where = f"{through}: " if through else ""
        return (
            f"{where}`/` gives a float on Python 3 (a float tensor on integer tensors since torch 1.5), and torch "
            f"takes {wanted} here: TypeError when the line runs; use `//`"
        )

    @staticmethod
    def _fix(item: cst.BaseExpression) -> FixSpec:
        return FixSpec(Applicability.SAFE, "Use `//` (what `/` gave on ints under Python 2)", (Replacement(item, _floored(item)),))


def _floored(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` with every true division of its float chain made a floor division (``(a / b) / c`` whole)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, *_FLOAT_KEEPING)):
        operator = node.operator
        if isinstance(operator, cst.Divide):
            operator = cst.FloorDivide(whitespace_before=operator.whitespace_before, whitespace_after=operator.whitespace_after)
        return node.with_changes(left=_floored(node.left), operator=operator, right=_floored(node.right))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return node.with_changes(expression=_floored(node.expression))
    return node


# Calls whose ``index`` argument must be an integer tensor (the method's second argument, the function's third).
_INDEXING_METHODS = frozenset({"index_select", "gather"})
_INDEXING_FUNCTIONS = frozenset({"torch.index_select", "torch.gather"})

# The last word of every call the table names (``Conv2d``, ``zeros``, ``view``): the pre-pass's cheap filter.
_CALLED_NAMES = frozenset({name.rpartition(".")[2] for name in BY_FUNCTION} | set(BY_METHOD))


def _called_name(func: ast.expr) -> Optional[str]:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _ast_float(node: ast.expr, divided) -> bool:
    """``ast``'s reading of :func:`_true_divisions` (a tuple of sizes: any element), a name in ``divided`` too."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_ast_float(element, divided) for element in node.elts)
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Div):
            return True
        return isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Mod)) and (_ast_float(node.left, divided) or _ast_float(node.right, divided))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _ast_float(node.operand, divided)
    return isinstance(node, ast.Name) and node.id in divided


def _names_bound_to_divisions(nodes) -> frozenset:
    """Names some plain assignment among ``nodes`` binds to a true division (followed through one more name)."""
    bound = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = node.value
    divided = {name for name, value in bound.items() if _ast_float(value, frozenset())}
    return frozenset(divided | {name for name, value in bound.items() if _ast_float(value, divided)})


def _true_divisions(node: cst.BaseExpression) -> Iterator[cst.BinaryOperation]:
    """The true divisions whose float ``node`` is: ``node`` itself, or one under ``+ - * %`` or a sign, in
    parentheses or not (a call, ``int(a / b)`` or ``math.ceil``, makes an int: nothing under it counts)."""
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Divide):
            yield node
        elif isinstance(node.operator, _FLOAT_KEEPING):
            yield from _true_divisions(node.left)
            yield from _true_divisions(node.right)
    elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        yield from _true_divisions(node.expression)
