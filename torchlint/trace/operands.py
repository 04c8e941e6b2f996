"""The expression a numerics or fused-op finding is about, recomputed from the node at the finding's position.

A finding gives the span of the node its rule reported (a ``torch.sqrt`` call, a division, a
``torch.where``, a loss call).  ``site_plans`` parses each file with findings once, finds that node
and asks the same analysis the rules ask (``match_domain_op``, ``added_guard``, ``is_nan_filter``,
``match_loss``...) which sub-expression reaches the op's edge: a root's or log's operand, a divisor,
the tensor an eps is added to, the probabilities a loss receives.  The answer is a
:class:`~torchlint.trace.plan.SitePlan` of spans, which the traced process turns back into its own
``ast`` nodes.  The rules are not changed and no field is added to the findings.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint import source
from torchlint.analysis.model.calls import argument, positional_args
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.model.ops import call_parts
from torchlint.analysis.values.domain import DIV, DomainOp
from torchlint.analysis.flow.domain_match import find_domain_ops, match_domain_op
from torchlint.analysis.values.fused import match_exp, match_log, match_x_log_x, one_plus
from torchlint.analysis.values.losses import match_loss
from torchlint.analysis.project.owners import is_nan_filter
from torchlint.analysis.values.precision import (
    added_guard,
    clamp_lower_bound,
    clamp_upper_bound,
    one_minus_term,
)
from torchlint.config import Settings
from torchlint.analysis.model.project_index import file_context
from torchlint.rule import Finding
from torchlint.rules.numerics.tl105_vanishing_epsilon import (
    ONE_MINUS_FLOAT16_MESSAGE,
    ONE_MINUS_FLOAT32_MESSAGE,
)
from torchlint.trace import plan as edges
from torchlint.trace.plan import SitePlan, Span

# The numerics and fused-op families: the findings trace instruments.
TRACED_PREFIXES = ("TL1", "TL2")
# Names of ops with a domain edge, for a finding whose op the analysis no longer matches on its own.
_DOMAIN_CALLS = frozenset({"sqrt", "rsqrt", "log", "log2", "log10", "pow", "div", "divide", "true_divide"})
_DIVISIONS = frozenset({"div", "divide", "true_divide"})


class _File:
    """One parsed file: its nodes by position, their parents, and the context the analysis asks."""

    def __init__(self, path: str, text: str, settings: Settings) -> None:
        self.module = cst.parse_module(text)
        self.context = file_context(path, text, self.module, settings)
        positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        self.positions = positions
        self.by_span: Dict[Span, List[cst.CSTNode]] = {}
        for node, where in positions.items():
            key = (where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)
            self.by_span.setdefault(key, []).append(node)
        self.parents: Dict[int, cst.CSTNode] = {}
        file = self

        class _Parents(cst.CSTVisitor):
            def __init__(self) -> None:
                self.stack: List[cst.CSTNode] = []

            def on_visit(self, node: cst.CSTNode) -> bool:
                if self.stack:
                    file.parents[id(node)] = self.stack[-1]
                self.stack.append(node)
                return True

            def on_leave(self, original_node: cst.CSTNode) -> None:
                self.stack.pop()

        self.module.visit(_Parents())

    def node_at(self, span: Span) -> Optional[cst.CSTNode]:
        """The expression (else the statement) the finding at ``span`` reported."""
        found = self.by_span.get(span, [])
        for wanted in (cst.BaseExpression, cst.BaseSmallStatement):
            for node in found:
                if isinstance(node, wanted):
                    return node
        return None

    def ancestors(self, node: cst.CSTNode) -> List[cst.CSTNode]:
        chain = []
        parent = self.parents.get(id(node))
        while parent is not None:
            chain.append(parent)
            parent = self.parents.get(id(parent))
        return chain[::-1]

    def span(self, node: Optional[cst.CSTNode]) -> Optional[Span]:
        if node is None:
            return None
        where = self.positions.get(node)
        if where is None:
            return None
        return (where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)


def site_plans(
    findings: Sequence[Finding], settings: Settings, texts: Optional[Dict[str, str]] = None
) -> Tuple[Dict[int, SitePlan], Dict[int, str]]:
    """The site of each numerics/fused-op finding (by its index in ``findings``), and why others have none.
    ``texts``: the source of findings' paths that are no files (a notebook cell run in process)."""
    plans: Dict[int, SitePlan] = {}
    missing: Dict[int, str] = {}
    by_path: Dict[str, List[int]] = {}
    for index, finding in enumerate(findings):
        if finding.code.startswith(TRACED_PREFIXES):
            if finding.cell is not None:
                missing[index] = "a notebook cell: notebooks are not imported"
            else:
                by_path.setdefault(finding.path, []).append(index)
    for path, indices in by_path.items():
        try:
            if texts is not None and path in texts:
                text = texts[path]
            else:
                with open(path, "rb") as handle:
                    text = source.decode(handle.read()).text
            file = _File(path, text, settings)
        except Exception as exc:  # unreadable since the check, or LibCST cannot parse it: report, go on
            for index in indices:
                missing[index] = f"cannot read the file again: {type(exc).__name__}"
            continue
        for index in indices:
            finding = findings[index]
            location = finding.location
            node = file.node_at((location.line, location.column, location.end_line, location.end_column))
            planner = _PLANNERS.get(finding.code)
            if planner is None:
                missing[index] = "this rule has no run-time check"
                continue
            planned = None
            if node is not None:
                try:
                    planned = planner(file, node, finding)
                except Exception as exc:  # one odd site must not stop the run
                    missing[index] = f"cannot work out the operand: {type(exc).__name__}: {exc}"
                    continue
            if planned is None:
                missing[index] = "no operand found at this position"
                continue
            edge, operand, partner, gradient = planned
            operand_span = file.span(operand)
            if operand_span is None:
                missing[index] = "no operand found at this position"
                continue
            before = isinstance(node, cst.AugAssign) and operand is node.target
            plans[index] = SitePlan(
                index, finding.code, edge, operand_span, file.span(partner), file.span(gradient), before
            )
    return plans, missing


# Each planner returns (edge, operand node, partner node or None, op node whose gradient to watch or None).
Planned = Optional[Tuple[str, cst.CSTNode, Optional[cst.CSTNode], Optional[cst.CSTNode]]]


def _domain_op(file: _File, node: cst.CSTNode) -> Optional[DomainOp]:
    ancestors = file.ancestors(node)
    file.context.ancestors = ancestors
    return match_domain_op(file.context, node, site_of(ancestors))


def _plain_operand(node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The operand of a flagged op read from its form alone, for when the analysis no longer matches it:
    a root's or log's input, a power's base, a divisor."""
    if isinstance(node, cst.AugAssign):
        return node.value if isinstance(node.operator, cst.DivideAssign) else node.target
    if isinstance(node, cst.BinaryOperation):
        return node.right if isinstance(node.operator, cst.Divide) else node.left
    if isinstance(node, cst.Call) and isinstance(node.func, (cst.Name, cst.Attribute)):
        name = node.func.value if isinstance(node.func, cst.Name) else node.func.attr.value
        args = positional_args(node)
        method = isinstance(node.func, cst.Attribute) and not any(a.keyword and a.keyword.value == "input" for a in node.args)
        if name in _DIVISIONS:
            # torch.div(a, d) has two operands, a.div(d) one.
            if len(args) >= 2:
                return args[1].value
            other = argument(node, 0 if method else 1, "other")
            return other.value if other is not None else None
        if name == "pow":
            return args[0].value if len(args) >= 2 else (node.func.value if method else None)
        if args:
            return args[0].value
        return node.func.value if method else None
    return None


def _unguarded(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL101-TL104: the op's operand (a divisor for TL104, with its numerator)."""
    op = _domain_op(file, node)
    operand = op.operand if op is not None else _plain_operand(node)
    if operand is None:
        return None
    gradient = None if isinstance(node, cst.AugAssign) else node
    if finding.code == "TL104":
        numerator = op.numerator if op is not None and not isinstance(node, cst.AugAssign) else None
        return edges.ZERO, operand, numerator, gradient
    if finding.code == "TL103" and op is not None and op.exponent is not None:
        return edges.POWER, operand, op.exponent, gradient  # the exponent's value decides the edge
    return edges.NONPOSITIVE, operand, None, gradient


def _vanishing_eps(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL105: the tensor the eps meets, and the eps (or the bound ``1 - eps``)."""
    context = file.context
    context.ancestors = file.ancestors(node)
    if isinstance(node, cst.AugAssign):
        return edges.EPS, node.target, node.value, None
    found = added_guard(context, node)
    if found is not None:
        return edges.EPS, found[0], found[1], None
    if isinstance(node, cst.Call):
        upper = clamp_upper_bound(context, node)
        if upper is not None and one_minus_term(context, upper[1]) is not None and finding.message in (ONE_MINUS_FLOAT32_MESSAGE, ONE_MINUS_FLOAT16_MESSAGE):
            return edges.UPPER_BOUND, upper[0], upper[1], None
        lower = clamp_lower_bound(context, node)
        if lower is not None:
            return edges.EPS, lower[0], lower[1], None
    return None


def _edge_of(op_node: cst.CSTNode, op: Optional[DomainOp]) -> str:
    if op is not None:
        return edges.ZERO if op.kind == DIV else edges.NONPOSITIVE
    divides = isinstance(op_node, cst.BinaryOperation) and isinstance(op_node.operator, cst.Divide)
    divides = divides or (isinstance(op_node, cst.Call) and isinstance(op_node.func, cst.Attribute) and op_node.func.attr.value in _DIVISIONS)
    return edges.ZERO if divides else edges.NONPOSITIVE


def _first_domain_op(file: _File, expressions: Sequence[cst.CSTNode]) -> Optional[Tuple[cst.CSTNode, Optional[DomainOp]]]:
    """The outermost op with a domain edge in ``expressions`` (the analysis's match, else one read from its name)."""
    for expression in expressions:
        ancestors = file.ancestors(expression)
        file.context.ancestors = ancestors
        ops = find_domain_ops(file.context, expression, site_of(ancestors + [expression]))
        if ops:
            return ops[0].node, ops[0]
    for expression in expressions:
        named = _first_op_by_name(expression)
        if named is not None:
            return named, None
    return None


def _first_op_by_name(expression: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The outermost ``**``, ``/`` or call of a root, log, power or division in ``expression``."""
    found: List[cst.CSTNode] = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if found:
                return False
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Power, cst.Divide)):
                found.append(node)
            elif isinstance(node, cst.Call):
                func = node.func
                name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
                if name in _DOMAIN_CALLS:
                    found.append(node)
            return not found

    expression.visit(_Find())
    return found[0] if found else None


def _where(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL106: the operand of the op inside the ``torch.where`` branch."""
    if not isinstance(node, cst.Call):
        return None
    args = positional_args(node)
    found = _first_domain_op(file, [arg.value for arg in args[1:3]])
    if found is None:
        return None
    op_node, op = found
    operand = op.operand if op is not None else _plain_operand(op_node)
    if operand is None:
        return None
    edge = _edge_of(op_node, op)
    numerator = op.numerator if op is not None and edge == edges.ZERO else None
    return edge, operand, numerator, op_node


def _nan_filter(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL107: the values the filter cleans (or the mask a masked assignment writes through)."""
    if isinstance(node, cst.Assign):
        target = node.targets[0].target
        if isinstance(target, cst.Subscript) and isinstance(target.slice[0].slice, cst.Index):
            return edges.MASK, target.slice[0].slice.value, None, None
        return None
    file.context.ancestors = file.ancestors(node)
    cleaned = is_nan_filter(file.context, node)
    if cleaned is None:
        return None
    inner = _first_domain_op(file, [cleaned])
    if inner is not None:
        # The op under the filter: confirmed where it meets its own edge, not where Inf/NaN from
        # elsewhere passes through it.
        op_node, op = inner
        operand = op.operand if op is not None else _plain_operand(op_node)
        if operand is not None:
            edge = _edge_of(op_node, op)
            return edge, operand, op.numerator if op is not None and edge == edges.ZERO else None, op_node
    return edges.NONFINITE, cleaned, None, None


def _log_operand(file: _File, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    file.context.ancestors = file.ancestors(node)
    log = match_log(file.context, node)
    if log is not None:
        return log.operand
    return _plain_operand(node)


def _log_of(edge: str) -> Callable[[_File, cst.CSTNode, Finding], Planned]:
    """TL201-TL203: what the log takes (a probability, a sum of exps), as written, eps included."""

    def planner(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
        operand = _log_operand(file, node)
        return (edge, operand, None, node) if operand is not None else None

    return planner


def _x_log_x(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL204: the x of x * log(x)."""
    file.context.ancestors = file.ancestors(node)
    found = match_x_log_x(file.context, node)
    if found is None:
        return None
    return edges.NONPOSITIVE, found.log.operand, None, node


def _expm1_log1p(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL205: the x of exp(x) - 1 / 1 - exp(x) / log(1 + x)."""
    file.context.ancestors = file.ancestors(node)
    if isinstance(node, cst.BinaryOperation):
        for side in (node.left, node.right):
            exp = match_exp(file.context, side)
            if exp is not None:
                return edges.ABSORBED_EXP, exp.operand, None, None
        return None
    operand = _log_operand(file, node)
    rest = one_plus(operand) if operand is not None else None
    return (edges.ABSORBED, rest, None, None) if rest is not None else None


def _loss_input(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL206/TL207: what the loss receives; binary cross entropy breaks where it saturates."""
    file.context.ancestors = file.ancestors(node)
    loss = match_loss(file.context, node)
    if loss is not None and loss.input is not None:
        edge = edges.SATURATED if loss.kind == "bce" else edges.PROBABILITIES
        return edge, loss.input.value, None, node
    if isinstance(node, cst.Call):
        first = argument(node, 0, "input")
        if first is not None:
            return edges.PROBABILITIES, first.value, None, node
    return None


def _inverse_trig(file: _File, node: cst.CSTNode, finding: Finding) -> Planned:
    """TL108: the operand of acos, asin or atanh, at or past ±1."""
    if not isinstance(node, cst.Call):
        return None
    _, operand, _ = call_parts(file.context, node)
    return (edges.UNIT, operand, None, node) if operand is not None else None


_PLANNERS: Dict[str, Callable[[_File, cst.CSTNode, Finding], Planned]] = {
    "TL101": _unguarded,
    "TL102": _unguarded,
    "TL103": _unguarded,
    "TL104": _unguarded,
    "TL105": _vanishing_eps,
    "TL106": _where,
    "TL107": _nan_filter,
    "TL108": _inverse_trig,
    "TL201": _log_of(edges.NONPOSITIVE),
    "TL202": _log_of(edges.NONPOSITIVE),
    "TL203": _log_of(edges.OVERFLOW),
    "TL204": _x_log_x,
    "TL205": _expm1_log1p,
    "TL206": _loss_input,
    "TL207": _loss_input,
}
