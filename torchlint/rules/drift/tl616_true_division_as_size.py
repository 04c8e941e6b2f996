from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

import libcst as cst

from torchlint.analysis.api.integer_arguments import BY_FUNCTION, BY_METHOD, IntegerArguments
from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.analysis.model.calls import has_star_args
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

    ## Why is this bad?
    Code written for Python 2 divided ints with `/` and got an int. On
    Python 3 `/` always returns a float (and on integer tensors since torch
    1.5 a float tensor), and torch refuses a float size: `TypeError:
    empty(): argument 'size' must be tuple of ints, but found element of type
    float` when the module is built, `conv2d() received an invalid
    combination of arguments` at the first forward for a float padding,
    `slice indices must be integers` for a slice. The model cannot be built
    or run.

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
        "table with a float), but no validation draw has held one to read blind, so its precision on users' code "
        "is unmeasured; the level table moves it once blind readings exist (`bench/validate.py --calibrate`)."
    )

    @classmethod
    def prepass(cls, scan):
        """Regions where a true division (or a name one binds in the region or at the top level) is an argument
        of a call named like an API of the table, or a slice bound."""
        written = scan.regions_whose_text_matches(_TRUE_DIVISION)
        if not written:
            return None
        module_names = _names_bound_to_divisions(scan.tree.body)

        def may_report(region) -> bool:
            nodes = region.nodes
            divided = module_names | _names_bound_to_divisions(nodes)
            for node in nodes:
                if isinstance(node, ast.Call) and _called_name(node.func) in _CALLED_NAMES:
                    values = [arg for arg in node.args] + [keyword.value for keyword in node.keywords]
                elif isinstance(node, ast.Slice):
                    values = [bound for bound in (node.lower, node.upper, node.step) if bound is not None]
                else:
                    continue
                if any(_ast_float(value, divided) for value in values):
                    return True
            return False

        return frozenset(i for i in written if may_report(scan.regions[i])) or None

    def visit_Call(self, node: cst.Call) -> None:
        if has_star_args(node):
            return
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

    def _bound_division(self, item: cst.BaseExpression) -> Optional[str]:
        """The true division (as written) that the one assignment reaching ``item`` (a name) binds it to,
        followed through names up to :data:`MAX_DEPTH`; None when there is none."""
        ancestors = self.context.ancestors
        for _ in range(MAX_DEPTH):
            if not isinstance(item, cst.Name):
                return None
            definition = reaching_definition(ancestors, item.value)
            if definition is None:
                return None
            division = next(_true_divisions(definition.value), None)
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
