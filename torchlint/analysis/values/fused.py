"""Recognising the pieces of the numerically fused ops: sigmoid, exp, sum, ``1 ± x``, shape-only wrappers.

Rules ask these helpers (and ``analysis/ops`` for log and softmax); they never
match call shapes themselves.  A matcher takes any node and returns a small
record or None.  ``activation_of`` also follows a local name back to the
softmax/sigmoid assigned to it a few lines earlier (``analysis/bindings``).
Building ``F.log_softmax`` from a softmax in any form lives here too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.dataflow import Definition, reaching_definition
from torchlint.analysis.model.dataflow import bindings, site_of
from torchlint.analysis.model.calls import argument, has_star_args, positional_args
from torchlint.analysis.model.ops import (
    SoftmaxCall,
    UnaryOp,
    is_value_receiver,
    match_softmax,
    match_unary,
    module_constructor,
    number_value,
)
from torchlint.analysis.values.domain import structurally_equal
from torchlint.findings import ImportRequirement
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

LOG_FUNCTIONS: FrozenSet[str] = frozenset({"torch.log"})
LOG1P_FUNCTIONS: FrozenSet[str] = frozenset({"torch.log1p", "torch.special.log1p"})
EXP_FUNCTIONS: FrozenSet[str] = frozenset({"torch.exp"})
SUM_FUNCTIONS: FrozenSet[str] = frozenset({"torch.sum"})
SIGMOID_FUNCTIONS: FrozenSet[str] = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})
SIGMOID_MODULES: FrozenSet[str] = frozenset({"torch.nn.Sigmoid", "torch.nn.modules.activation.Sigmoid"})
TANH_FUNCTIONS: FrozenSet[str] = frozenset({"torch.tanh", "torch.nn.functional.tanh"})
POW_FUNCTIONS: FrozenSet[str] = frozenset({"torch.pow"})
SQUARE_FUNCTIONS: FrozenSet[str] = frozenset({"torch.square"})
# Tensor methods that only move or relabel elements: an elementwise activation commutes with them.
SHAPE_METHODS: FrozenSet[str] = frozenset(
    {
        "squeeze", "unsqueeze", "view", "reshape", "flatten", "contiguous", "permute", "transpose",
        "float", "double", "half", "bfloat16", "to", "type_as", "view_as", "reshape_as", "t",
    }
)


def match_log(context: "FileContext", node: cst.CSTNode) -> Optional[UnaryOp]:
    """``torch.log(x)`` or ``x.log()``."""
    return match_unary(context, node, LOG_FUNCTIONS, "log")


def match_log1p(context: "FileContext", node: cst.CSTNode) -> Optional[UnaryOp]:
    """``torch.log1p(x)`` or ``x.log1p()``."""
    return match_unary(context, node, LOG1P_FUNCTIONS, "log1p")


def match_exp(context: "FileContext", node: cst.CSTNode) -> Optional[UnaryOp]:
    """``torch.exp(x)`` or ``x.exp()``."""
    return match_unary(context, node, EXP_FUNCTIONS, "exp")


@dataclass(frozen=True)
class SigmoidCall:
    """A sigmoid: "function" (``torch.sigmoid(x)``, ``F.sigmoid``, ``torch.special.expit``),
    "method" (``x.sigmoid()``) or "module" (``nn.Sigmoid()(x)``, also through ``self.``)."""

    node: cst.Call
    form: str
    input: cst.BaseExpression


def match_sigmoid(context: "FileContext", node: cst.CSTNode) -> Optional[SigmoidCall]:
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    qualified = context.qualified_name(func)
    if qualified in SIGMOID_FUNCTIONS:
        given = argument(node, 0, "input")
        if given is None or len(node.args) != 1:
            return None  # out= or a malformed call: nothing to rebuild from
        return SigmoidCall(node, "function", given.value)
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "sigmoid":
        if is_value_receiver(context, func.value) and not node.args:
            return SigmoidCall(node, "method", func.value)
        return None
    constructor = module_constructor(context, func)
    if constructor is not None and context.qualified_name(constructor.func) in SIGMOID_MODULES:
        if len(node.args) == 1 and node.args[0].keyword is None:
            return SigmoidCall(node, "module", node.args[0].value)
    return None


@dataclass(frozen=True)
class SumCall:
    """``torch.sum(x, d, keepdim=k)`` or ``x.sum(d, keepdim=k)``."""

    node: cst.Call
    operand: cst.BaseExpression
    method: bool
    dim: Optional[cst.Arg]
    keepdim: Optional[cst.Arg]
    # ``dtype=`` (or anything else logsumexp has no parameter for).
    other_args: bool


def match_sum(context: "FileContext", node: cst.CSTNode) -> Optional[SumCall]:
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    qualified = context.qualified_name(func)
    if qualified in SUM_FUNCTIONS:
        operand = argument(node, 0, "input")
        if operand is None:
            return None
        dim, keepdim = argument(node, 1, "dim"), argument(node, 2, "keepdim")
        known = {id(a) for a in (operand, dim, keepdim) if a is not None}
        return SumCall(node, operand.value, False, dim, keepdim, any(id(a) not in known for a in node.args))
    if qualified is None and isinstance(func, cst.Attribute) and func.attr.value == "sum" and is_value_receiver(context, func.value):
        dim, keepdim = argument(node, 0, "dim"), argument(node, 1, "keepdim")
        known = {id(a) for a in (dim, keepdim) if a is not None}
        return SumCall(node, func.value, True, dim, keepdim, any(id(a) not in known for a in node.args))
    return None


def is_one(node: cst.BaseExpression) -> bool:
    """The literal ``1`` or ``1.0`` (parenthesised or not)."""
    return number_value(node) == 1.0 and not isinstance(node, cst.UnaryOperation)


def one_plus(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x`` for ``1 + x``, ``x + 1`` or ``x.add(1)``, else None."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        if is_one(node.left):
            return node.right
        if is_one(node.right):
            return node.left
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "add"
        and len(node.args) == 1
        and node.args[0].keyword is None
        and not node.args[0].star
        and is_one(node.args[0].value)
    ):
        return node.func.value
    return None


def one_minus(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x`` for ``1 - x``, else None."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Subtract) and is_one(node.left):
        return node.right
    return None


def peel_shape_ops(context: "FileContext", node: cst.BaseExpression) -> cst.BaseExpression:
    """The expression under shape-only wrappers: ``sigmoid(z)`` in ``sigmoid(z).squeeze(-1).float()`` or ``sigmoid(z)[:, 0]``."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in SHAPE_METHODS
            and is_value_receiver(context, node.func.value)
            and not has_star_args(node)
        ):
            node = node.func.value
        else:
            return node


def is_pure(node: cst.CSTNode) -> bool:
    """An expression without calls, lambdas or walruses: evaluating it twice gives the same value for free."""
    finder = _Impure()
    visit(node, finder)
    return not finder.found


class _Impure(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        self.found = True
        return False

    def visit_Await(self, node: cst.Await) -> bool:
        self.found = True
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self.found = True
        return False

    def visit_Yield(self, node: cst.Yield) -> bool:
        self.found = True
        return False


# -- activations fed to something, directly or through a local name -----------------


@dataclass(frozen=True)
class Activation:
    """A softmax or sigmoid that reaches an argument, inline or through a local variable.

    ``argument`` is the expression as written at the use (``probs`` or
    ``F.softmax(z, -1).view(-1, c)``); ``call`` is the activation call itself
    (in the argument, or in the earlier assignment ``definition``).
    """

    kind: str  # "softmax" or "sigmoid"
    call: cst.Call
    input: cst.BaseExpression
    softmax: Optional[SoftmaxCall]
    argument: cst.BaseExpression
    definition: Optional[Definition] = None


def activation_of(context: "FileContext", expression: cst.BaseExpression, kinds=("softmax", "sigmoid")) -> Optional[Activation]:
    """The softmax/sigmoid that ``expression`` is (under shape-only wrappers), or that the local name it is was assigned."""
    peeled = peel_shape_ops(context, expression)
    definition = None
    if isinstance(peeled, cst.Name):
        definition = reaching_definition(context.ancestors, peeled.value)
        if definition is None:
            return None
        peeled = peel_shape_ops(context, definition.value)
    if "softmax" in kinds:
        softmax = match_softmax(context, peeled)
        if softmax is not None and softmax.input is not None:
            return Activation("softmax", softmax.node, softmax.input, softmax, expression, definition)
    if "sigmoid" in kinds:
        sigmoid = match_sigmoid(context, peeled)
        if sigmoid is not None:
            return Activation("sigmoid", sigmoid.node, sigmoid.input, None, expression, definition)
    return None


# -- building replacements ---------------------------------------------------------------


def functional(context: "FileContext", function: str) -> Tuple[cst.BaseExpression, Tuple[ImportRequirement, ...]]:
    """``F.<function>`` with the import it needs, if any."""
    reference, requirement = context.reference("torch.nn.functional", "F")
    return cst.parse_expression(f"{reference}.{function}"), tuple(r for r in (requirement,) if r)


def torch_function(context: "FileContext", function: str) -> Tuple[cst.BaseExpression, Tuple[ImportRequirement, ...]]:
    """``torch.<function>`` (or ``T.<function>`` under ``import torch as T``) with the import it needs, if any."""
    reference, requirement = context.reference("torch", "torch")
    return cst.parse_expression(f"{reference}.{function}"), tuple(r for r in (requirement,) if r)


def keyword(name: str, value: cst.BaseExpression, comma: bool = False) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if comma else cst.MaybeSentinel.DEFAULT,
    )


def positional(value: cst.BaseExpression, comma: bool = False) -> cst.Arg:
    return cst.Arg(value=value, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if comma else cst.MaybeSentinel.DEFAULT)


def negated(node: cst.BaseExpression) -> cst.BaseExpression:
    """``-x`` for a name, attribute, call or subscript; ``-(a + b)`` otherwise; ``x`` for ``-x``."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and not node.lpar:
        return node.expression
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)) or node.lpar:
        return cst.UnaryOperation(cst.Minus(), node)
    return cst.UnaryOperation(cst.Minus(), node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))


def as_receiver(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` ready to take ``.method()``: parenthesised unless it is atomic."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def log_softmax_call(context: "FileContext", softmax: SoftmaxCall) -> Optional[Tuple[cst.Call, Tuple[ImportRequirement, ...]]]:
    """The ``log_softmax`` call equivalent to ``softmax`` (same input, dim and dtype), with imports.

    ``x.softmax(d)`` -> ``x.log_softmax(d)``; ``F.softmax(x, d, dtype=t)`` ->
    ``F.log_softmax(x, d, dtype=t)``; ``torch.softmax(x, d, t)`` ->
    ``F.log_softmax(x, d, dtype=t)``; ``nn.Softmax(d)(x)`` -> ``F.log_softmax(x, dim=d)``.
    """
    node = softmax.node
    if softmax.form == "method":
        return cst.Call(func=node.func.with_changes(attr=cst.Name("log_softmax")), args=node.args), ()
    if softmax.form == "function" and softmax.qualified in ("torch.nn.functional.softmax", "torch.special.softmax"):
        if isinstance(node.func, cst.Attribute):
            return node.with_changes(func=node.func.with_changes(attr=cst.Name("log_softmax"))), ()
        reference, requirement = context.reference(softmax.qualified.rsplit(".", 1)[0], "F")
        return node.with_changes(func=cst.parse_expression(f"{reference}.log_softmax")), tuple(r for r in (requirement,) if r)
    func, imports = functional(context, "log_softmax")
    if softmax.form == "function":  # torch.softmax(input, dim, dtype=None): dtype may be positional
        args: List[cst.Arg] = list(node.args)
        given = positional_args(node)
        if len(given) > 3:
            return None
        if len(given) == 3:
            index = args.index(given[2])
            args[index] = given[2].with_changes(
                keyword=cst.Name("dtype"), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
            )
        return cst.Call(func=func, args=args), imports
    dim = argument(softmax.constructor, 0, "dim") if softmax.constructor is not None else None
    if dim is None:
        return cst.Call(func=func, args=[positional(softmax.input)]), imports
    return cst.Call(func=func, args=[positional(softmax.input, comma=True), keyword("dim", dim.value)]), imports


__all__ = [
    "Activation",
    "SigmoidCall",
    "SumCall",
    "activation_of",
    "as_receiver",
    "functional",
    "is_one",
    "is_pure",
    "keyword",
    "log_softmax_call",
    "match_exp",
    "match_log",
    "match_sigmoid",
    "match_sum",
    "negated",
    "one_minus",
    "one_plus",
    "peel_shape_ops",
    "positional",
    "torch_function",
]


# -- log(sum(exp(x))) ------------------------------------------------------------------------


@dataclass(frozen=True)
class SumOfExp:
    """``sum(exp(x), d)`` in any form, possibly through local names (``e = x.exp()`` ... ``e.sum(1)``)."""

    sum: SumCall
    exp: UnaryOp
    # Assignments followed on the way: the exponent read from them must still be valid at the use.
    definitions: Tuple[Definition, ...]


def _follow(context: "FileContext", node: cst.BaseExpression, seen: List[Definition]) -> cst.BaseExpression:
    if isinstance(node, cst.Name):
        if seen and not seen[-1].unchanged_at_use(node):
            return node  # rebound since the previous assignment used it: its value there is unknown
        definition = reaching_definition(context.ancestors, node.value)
        if definition is not None:
            seen.append(definition)
            return definition.value
    return node


def match_sum_of_exp(context: "FileContext", node: cst.BaseExpression) -> Optional[SumOfExp]:
    """``torch.sum(torch.exp(x), d)``, ``x.exp().sum(d)``, ``torch.exp(x).sum()``; names bound to either part are followed."""
    definitions: List[Definition] = []
    summed = match_sum(context, _follow(context, node, definitions))
    if summed is None:
        return None
    exp = match_exp(context, _follow(context, summed.operand, definitions))
    if exp is None:
        return None
    return SumOfExp(summed, exp, tuple(definitions))


MAX_FUNCTIONS: FrozenSet[str] = frozenset({"torch.max", "torch.amax"})


def is_max_shifted(context: "FileContext", exponent: cst.BaseExpression) -> bool:
    """``x - x.max(d, keepdim=True).values`` / ``x - m`` with ``m`` bound to a max (``m, _ = torch.max(x, d)`` too),
    or a name bound to such a difference: the stable, shifted form."""
    if isinstance(exponent, cst.Name):
        definition = reaching_definition(context.ancestors, exponent.value)
        if definition is None:
            return False
        exponent = definition.value
    if not (isinstance(exponent, cst.BinaryOperation) and isinstance(exponent.operator, cst.Subtract)):
        return False
    shift = exponent.right
    if isinstance(shift, cst.Name):
        reaching = bindings(site_of(list(context.ancestors)), shift.value)
        if len(reaching) != 1 or reaching[0].value is None or reaching[0].kind not in ("assign", "unpack"):
            return False
        shift = reaching[0].value
    finder = _MaxFinder(context)
    visit(shift, finder)
    return finder.found


class _MaxFinder(cst.CSTVisitor):
    def __init__(self, context: "FileContext") -> None:
        super().__init__()
        self.context = context
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if self.context.qualified_name(func) in MAX_FUNCTIONS:
            self.found = True
        elif isinstance(func, cst.Attribute) and func.attr.value in ("max", "amax") and is_value_receiver(self.context, func.value):
            self.found = True


# -- x * log(x) ------------------------------------------------------------------------------


def same_expression(context: "FileContext", a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Whether two expressions are written the same, ignoring whitespace and parentheses."""
    return _compact(context, a) == _compact(context, b)


def _compact(context: "FileContext", node: cst.CSTNode) -> str:
    text = context.module.code_for_node(node)
    return "".join(text.split()).strip("()") if text.startswith("(") and text.endswith(")") else "".join(text.split())


@dataclass(frozen=True)
class XLogX:
    """``x * log(x)`` (either order, ``x.log()`` too); ``negated`` for ``-x * log(x)``;
    ``factor`` for ``w * x * log(x)`` (parsed as ``(w * x) * log(x)``)."""

    node: cst.BinaryOperation
    x: cst.BaseExpression
    log: UnaryOp
    negated: bool = False
    factor: Optional[cst.BaseExpression] = None


def match_x_log_x(context: "FileContext", node: cst.CSTNode) -> Optional[XLogX]:
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    for other, maybe_log in ((node.left, node.right), (node.right, node.left)):
        log = match_log(context, maybe_log)
        if log is None:
            continue
        if same_expression(context, other, log.operand):
            return XLogX(node, log.operand, log)
        if (
            other is node.left
            and isinstance(other, cst.UnaryOperation)
            and isinstance(other.operator, cst.Minus)
            and same_expression(context, other.expression, log.operand)
        ):
            return XLogX(node, log.operand, log, negated=True)
        if (
            other is node.left
            and isinstance(other, cst.BinaryOperation)
            and isinstance(other.operator, cst.Multiply)
            and not other.lpar
            and same_expression(context, other.right, log.operand)
        ):
            return XLogX(node, log.operand, log, factor=other.left)
    return None


@dataclass(frozen=True)
class ExpTimesExponent:
    """``torch.exp(l) * l`` (either order, ``l.exp()`` too): ``p * log(p)`` written from ``l = log(p)``."""

    node: cst.BinaryOperation
    exp: UnaryOp
    exponent: cst.BaseExpression


def match_exp_times_exponent(context: "FileContext", node: cst.CSTNode) -> Optional[ExpTimesExponent]:
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    for other, maybe_exp in ((node.left, node.right), (node.right, node.left)):
        exp = match_exp(context, maybe_exp)
        if exp is not None and same_expression(context, other, exp.operand):
            return ExpTimesExponent(node, exp, exp.operand)
    return None


def bare(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` without its own grouping parentheses (for use as a call argument)."""
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


def in_place_of(original: cst.BaseExpression, replacement: cst.BaseExpression) -> cst.BaseExpression:
    """``replacement`` with the parentheses ``original`` had, unless it is atomic and needs none."""
    if isinstance(replacement, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)):
        return replacement
    return replacement.with_changes(lpar=original.lpar, rpar=original.rpar)


@dataclass(frozen=True)
class TanhSquare:
    """``tanh(x) ** 2`` (or ``.pow(2)``, ``torch.square``, ``t * t``), the tanh inline or in a local name."""

    tanh: cst.Call
    input: cst.BaseExpression
    definition: Optional[Definition] = None


def _squared_base(context: "FileContext", node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``t`` for ``t ** 2``, ``t * t``, ``t.pow(2)``, ``torch.pow(t, 2)``, ``torch.square(t)``, ``t.square()``."""
    if isinstance(node, cst.BinaryOperation):
        if isinstance(node.operator, cst.Power) and number_value(node.right) == 2:
            return node.left
        if isinstance(node.operator, cst.Multiply) and structurally_equal(node.left, node.right):
            return node.left
        return None
    square = match_unary(context, node, SQUARE_FUNCTIONS, "square")
    if square is not None and not square.extra_args:
        return square.operand
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    qualified = context.qualified_name(node.func)
    if qualified in POW_FUNCTIONS:
        args = positional_args(node)
        if len(args) == 2 and not any(arg.keyword for arg in node.args) and number_value(args[1].value) == 2:
            return args[0].value
        return None
    if qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value == "pow":
        args = node.args
        if len(args) == 1 and args[0].keyword is None and number_value(args[0].value) == 2 and is_value_receiver(context, node.func.value):
            return node.func.value
    return None


def tanh_squared(context: "FileContext", node: cst.BaseExpression) -> Optional[TanhSquare]:
    """The tanh whose square ``node`` is (``1 - tanh(x) ** 2`` is the derivative of tanh, ``sech(x) ** 2``)."""
    base = _squared_base(context, node)
    if base is None:
        return None
    definition = None
    if isinstance(base, cst.Name):
        definition = reaching_definition(context.ancestors, base.value)
        if definition is None:
            return None
        base = definition.value
    tanh = match_unary(context, base, TANH_FUNCTIONS, "tanh")
    if tanh is None or tanh.extra_args:
        return None
    return TanhSquare(tanh.call, tanh.operand, definition)
