from __future__ import annotations

import ast
from typing import List, Optional, Sequence

import libcst as cst

from torchlint.analysis.flow.callers import argument_for, file_calls
from torchlint.analysis.model.dataflow import bindings, later_statements, site_of
from torchlint.analysis.values.domain import (
    DIV,
    DIV_FUNCTIONS,
    LOG_FUNCTIONS,
    POW_FUNCTIONS,
    RSQRT_FUNCTIONS,
    SQRT_FUNCTIONS,
    DomainOp,
    call_names,
    is_guard_constant,
    structurally_equal,
)
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.values.fixes import BARE_PARENTS, clamped, eps_text
from torchlint.analysis.flow.grad_need import backward_never_reaches, gradient_flows, gradient_unlikely, in_no_grad_code
from torchlint.analysis.project.guards import reaches_edge
from torchlint.analysis.model.ops import is_value_receiver
from torchlint.analysis.project.owners import NAN_TESTS, filter_owner, is_nan_filter
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule
from torchlint.walk_order import visit

# Ops whose backward reads their own output (measured in tests/test_runtime_tl107.py): writing into
# that output in place makes backward raise "modified by an inplace operation".
OUTPUT_SAVING_OPS = frozenset(
    {"exp", "exp2", "sigmoid", "tanh", "softmax", "log_softmax", "relu", "sqrt", "rsqrt", "norm", "vector_norm", "std", "cdist"}
)
MASKED_FILTER_MESSAGE = (
    "x[x <= c] = c clamps after the op: the forward value is fixed, but the gradient at the clamped entries is "
    "0 * the op's inf = NaN; clamp the op's input instead"
)
MASKED_CLAMP_MESSAGE = (
    "x[x <= c] = c writes into x in place: x comes from an op whose backward reads its output, so backward fails "
    "('modified by an inplace operation'); x = x.clamp_min(c) gives the same values"
)


# For the ast pre-pass: filters by themselves, filters with a NaN/Inf test, and the ops they may hide.
_NAN_FILTERS = frozenset({"nan_to_num", "nan_to_num_", "nansum", "nanmean"})
_NAN_TEST_FILTERS = frozenset({"where", "masked_fill", "masked_fill_"})
_DOMAIN_OP_NAMES = call_names(SQRT_FUNCTIONS, RSQRT_FUNCTIONS, LOG_FUNCTIONS, POW_FUNCTIONS, DIV_FUNCTIONS)


class AfterTheFactNanFilter(Rule):
    """
    ## What it does
    Flags a NaN/Inf filter applied to the result of `sqrt`, `rsqrt`, `log`,
    a fractional power or a division by a reduction that can be 0, when the
    op's input is not guarded: `torch.nan_to_num(torch.sqrt(d))`,
    `torch.log(p).nan_to_num()`, `y.masked_fill(torch.isnan(y), 0)`,
    `torch.where(torch.isnan(y), 0, y)`, and `y = torch.log(p)` followed by
    `y[torch.isnan(y)] = 0`, `y[torch.isinf(y)] = 0`, `y[~torch.isfinite(y)] = 0`,
    `y[y != y] = 0` (only NaN differs from itself) or `y = torch.nan_to_num(y)`
    later in the same function.

    Also in-place clamping by masked assignment, `x[x <= c] = c` /
    `x[x < c] = c` with a positive guard `c`, when `x` was just computed by
    an op whose backward reads its own output (`exp`, `exp2`, `sigmoid`,
    `tanh`, `softmax`, `log_softmax`, `relu`, `sqrt`, `rsqrt`, `norm`,
    `linalg.vector_norm`, `std`, `cdist`: measured in the runtime test) or by
    a domain-edge op (`sqrt`, `log`, a fractional power, a division by a
    reduction), or when `x` is a parameter of a helper the file calls with
    such a value (`zero_filtering(torch.pow(mean, 1. / p))`); a helper whose
    callers the file does not show is reported with `medium` confidence
    where gradients flow.

    ## Why is this bad?
    The filter cleans the forward value only. Autograd still differentiates
    the op at the bad input: `sqrt` at 0 has the gradient `inf`, at negative
    inputs `nan`; `log` at 0 has `inf`; `a / n` with `n = 0` has `inf`/`nan`
    in `a` and `n`. The filter's backward passes 0 to the replaced elements,
    and `0 * inf = nan`: the loss is finite, the gradient is NaN, and the
    next optimizer step turns every weight into NaN. Guarding the input
    keeps both passes finite.

    Writing into such a result in place is worse: `r = torch.sqrt(x)` then
    `r[torch.isnan(r)] = 0`, or `p = logits.sigmoid()` then `p[p < eps] = eps`,
    makes every backward pass fail with "one of the variables needed for
    gradient computation has been modified by an inplace operation", on any
    input. `x = x.clamp_min(c)` computes the same values out of place.

    ## Example
    ```python
    dist = torch.nan_to_num(torch.sqrt(sq))
    log_p = torch.log(p)
    log_p[torch.isinf(log_p)] = 0
    ```

    ## Use instead
    ```python
    dist = torch.sqrt(sq.clamp_min(1e-6))
    log_p = torch.log(p.clamp_min(1e-6))
    ```

    ## Fix safety
    Numerics: the op's input is clamped (`clamp_min(eps)` with
    `[tool.torchlint] eps`, default 1e-6; `clamp_min(1)` for counts such as
    `mask.sum()`), and the filter is removed: the call is replaced by the op,
    a filtering statement (`y[torch.isnan(y)] = 0`, `y = torch.nan_to_num(y)`,
    `y.nan_to_num_()`) is deleted. Above the clamp the values are the
    original's; at the edge the result is the op at the clamp (`sqrt(1e-6) =
    1e-3`, `log(1e-6) = -13.8`) instead of the filter's replacement (0, or
    float32's most negative value for `nan_to_num(-inf)`), and the gradient
    is finite. `x[x <= c] = c` becomes `x = x.clamp_min(c)`: the same values;
    at exactly `x == c` the gradient passes through instead of being 0.

    Reported without a fix (rewrite it by hand) when the filter covers more
    than the op (`torch.nan_to_num(torch.log(a) - b)`: other NaN sources may
    be what it is for), when the filtered name was assigned something other
    than the op alone, when the filtering statement does more than filter
    (`scale[scale.isinf() | (scale > 1000)] = 1` also caps large values), or
    when the filter sits inside a compound statement.
    Not reported where no backward pass is expected: under `torch.no_grad()`,
    in `Dataset` / `__getitem__` code, `Metric` classes and `metrics/` files
    (see `analysis/flow/grad_need.py`), in initialisation code, optimizer files
    and helpers that every call in the same file runs under
    `torch.no_grad()`, on values autograd never differentiates (counts of
    comparisons, constants); and not when the input is already guarded.
    Masked clamps of values from other ops (a sum, `abs`, an integer power, a
    matmul) are not reported: their backward does not read the clamped
    tensor, and the clamp guards what comes next. The fix of a clamped
    parameter is unsafe: the caller's tensor is no longer changed in place.
    """

    code = "TL107"
    name = "after-the-fact-nan-filter"
    message = "filtering NaN/Inf after the op fixes the forward value only: the op's gradient at the bad input is still NaN/Inf; guard the input instead"
    fix_applicability = Applicability.NUMERICS
    triggers = ("nan_to_num", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "[")
    reads_callers = True

    @classmethod
    def prepass(cls, scan):
        # A filter (guards.is_nan_filter) around a domain op of the same region, or a masked assignment.
        def filters_an_op(region) -> bool:
            calls = region.calls
            if calls.isdisjoint(_NAN_FILTERS) and not (
                not calls.isdisjoint(_NAN_TEST_FILTERS) and (not calls.isdisjoint(NAN_TESTS) or region.mentions_inf)
            ):
                return False
            return not calls.isdisjoint(_DOMAIN_OP_NAMES) or bool(region.operators & {ast.Div, ast.Pow})

        return scan.regions_where(lambda region: region.masked_assignment or filters_an_op(region)) or None

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        ancestors = list(self.context.ancestors)
        op = match_domain_op(self.context, node, site_of(ancestors + [node]))
        if op is None:
            return
        owner = filter_owner(self.context, op, ancestors)
        if owner is None or not reaches_edge(self.context, op, ancestors) or backward_never_reaches(self.context, op, ancestors):
            return
        self.report(owner, fix=self._fix(op, owner, ancestors))

    # -- in-place clamping by masked assignment ---------------------------------

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not (isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and len(target.slice) == 1):
            return
        index = target.slice[0].slice
        if not isinstance(index, cst.Index):
            return
        name = target.value.value
        bound = _lower_bound_test(index.value, name)
        if bound is None or not structurally_equal(bound, node.value) or not is_guard_constant(node.value, self.context):
            return
        if gradient_unlikely(self.context) or in_no_grad_code(self.context, self.context.ancestors):
            return
        site = site_of(list(self.context.ancestors) + [node])
        reaching = bindings(site, name)
        if not reaching:
            return
        judged = self._clamped_value(reaching[0], site)
        if judged is None:
            return
        message, confidence = judged
        replacement = node.with_changes(
            targets=[cst.AssignTarget(target=cst.Name(name))],
            value=clamped(cst.Name(name), node.value),
        )
        # A parameter clamped in place is the caller's tensor too: the rewrite stops changing it.
        applicability = Applicability.UNSAFE if reaching[0].kind == "param" else Applicability.NUMERICS
        fix = FixSpec(applicability, f"Replace with `{name} = {name}.clamp_min(...)`", (Replacement(node, replacement),))
        self.report(node, message, fix, confidence=confidence)

    def _clamped_value(self, binding, site):
        """(message, confidence) for the value ``x`` holds when ``x[x <= c] = c`` clamps it, or None.

        The result of an op whose backward reads its output (backward fails) or of a domain-edge op (its
        NaN gradient stays) is certain; a parameter is judged by what the file's calls pass it, and is
        ``medium`` where gradients flow when no call passes such a value."""
        if binding.kind == "assign":
            if self._saves_output(binding.value):
                return MASKED_CLAMP_MESSAGE, Confidence.HIGH
            if self._is_domain_op(binding.value, binding.site):
                return MASKED_FILTER_MESSAGE, Confidence.HIGH
            return None
        if binding.kind != "param" or site.function is None:
            return None
        calls = file_calls(self.context, site.function)
        for call_site in calls or ():
            value = argument_for(site.function, binding.node.name.value, call_site)
            at = site_of(list(call_site.ancestors) + [call_site.call])
            if value is not None and (self._saves_output(value) or self._is_domain_op(value, at)):
                return MASKED_FILTER_MESSAGE, Confidence.HIGH
        # Where gradients flow, a parameter clamped in place is a likely repair of a NaN source; where the code
        # shows no gradient either way, a suspect.
        return MASKED_FILTER_MESSAGE, Confidence.MEDIUM if gradient_flows(self.context, self.context.ancestors) else Confidence.LOW

    def _is_domain_op(self, value: Optional[cst.BaseExpression], site) -> bool:
        return value is not None and match_domain_op(self.context, value, site) is not None

    def _saves_output(self, value: Optional[cst.BaseExpression]) -> bool:
        if not isinstance(value, cst.Call):
            return False
        qualified = self.context.qualified_name(value.func)
        if qualified is not None:
            return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in OUTPUT_SAVING_OPS
        func = value.func
        return isinstance(func, cst.Attribute) and func.attr.value in OUTPUT_SAVING_OPS and is_value_receiver(self.context, func.value)

    # -- the fix ---------------------------------------------------------------

    def _minimum(self, op: DomainOp) -> str:
        if op.kind == DIV and op.divisor is not None and op.divisor.kind == "count":
            return "1"
        return eps_text(self.context)

    def _guarded_op(self, op: DomainOp) -> cst.CSTNode:
        return op.node.deep_replace(op.operand, clamped(op.operand, self._minimum(op)))

    def _fix(self, op: DomainOp, owner: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> Optional[FixSpec]:
        if op.extra_args:
            return None
        if isinstance(owner, cst.Call):
            return self._inline_fix(op, owner, ancestors)
        return self._statement_fix(op, owner, ancestors)

    def _inline_fix(self, op: DomainOp, owner: cst.Call, ancestors: Sequence[cst.CSTNode]) -> Optional[FixSpec]:
        if is_nan_filter(self.context, owner) is not op.node:
            return None
        guarded = self._guarded_op(op)
        position = _index_of(ancestors, owner)
        parent = ancestors[position - 1] if position else None
        if isinstance(guarded, cst.BinaryOperation) and not isinstance(parent, BARE_PARENTS):
            guarded = guarded.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        guarded = guarded.with_changes(lpar=list(owner.lpar) or guarded.lpar, rpar=list(owner.rpar) or guarded.rpar)
        return FixSpec(
            Applicability.NUMERICS,
            "Guard the op's input and drop the filter",
            (Replacement(owner, guarded),),
        )

    def _statement_fix(self, op: DomainOp, owner: cst.CSTNode, ancestors: Sequence[cst.CSTNode]) -> Optional[FixSpec]:
        # The op must be the whole value of ``name = op``.
        statement = ancestors[-1] if ancestors else None
        if not (
            isinstance(statement, cst.Assign)
            and statement.value is op.node
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)
        ):
            return None
        name = statement.targets[0].target.value
        if not isinstance(owner, cst.SimpleStatementLine) or len(owner.body) != 1:
            return None
        block_size = None
        for later, later_site in later_statements(site_of(list(ancestors) + [op.node])):
            if later is owner:
                block_size = len(later_site.frames[-1][0])
                break
        if block_size is None:
            return None
        guard = Replacement(op.operand, clamped(op.operand, self._minimum(op)))
        small = owner.body[0]
        if _is_pure_filter(self.context, small, name) and block_size > 1:
            removal = Replacement(owner, cst.RemoveFromParent())
            return FixSpec(Applicability.NUMERICS, "Guard the op's input and delete the filter", (guard, removal))
        calls = _filter_calls_of(self.context, small, name)
        if len(calls) != 1:
            return None
        return FixSpec(
            Applicability.NUMERICS,
            "Guard the op's input and drop the filter",
            (guard, Replacement(calls[0], cst.Name(name))),
        )


def _lower_bound_test(test: cst.BaseExpression, name: str) -> Optional[cst.BaseExpression]:
    """``c`` for ``name <= c``, ``name < c``, ``c >= name``, ``c > name``."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    operator = test.comparisons[0].operator
    right = test.comparisons[0].comparator
    if _is_name(test.left, name) and isinstance(operator, (cst.LessThan, cst.LessThanEqual)):
        return right
    if _is_name(right, name) and isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        return test.left
    return None



def _index_of(sequence: Sequence[cst.CSTNode], node: cst.CSTNode) -> Optional[int]:
    for index, item in enumerate(sequence):
        if item is node:
            return index
    return None


def _is_name(node: Optional[cst.BaseExpression], name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name


def _is_pure_filter(context, small: cst.BaseSmallStatement, name: str) -> bool:
    """``y[isnan(y)] = v``, ``y = nan_to_num(y)``, ``y.nan_to_num_()``: a statement that does nothing else."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Subscript) and _is_name(target.value, name) and len(target.slice) == 1:
            index = target.slice[0].slice
            return isinstance(index, cst.Index) and _only_nan_tests(context, index.value, name)
        if _is_name(target, name):
            return _is_name(is_nan_filter(context, small.value), name)
        return False
    if isinstance(small, cst.Expr):
        return _is_name(is_nan_filter(context, small.value), name)
    return False


_NAN_TESTS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})


def _only_nan_tests(context, test: cst.BaseExpression, name: str) -> bool:
    """``isnan(y)``, ``y.isinf()``, ``~torch.isfinite(y)``, ``isnan(y) | isinf(y)``, ``y != y``: nothing but NaN/Inf tests of ``name``.

    ``scale[scale.isinf() | (scale > 1000)] = 1`` also clamps large values: deleting it would change them.
    """
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.BitInvert):
        return _only_nan_tests(context, test.expression, name)
    if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.BitOr):
        return _only_nan_tests(context, test.left, name) and _only_nan_tests(context, test.right, name)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        # ``y != y``: only NaN differs from itself
        other = test.comparisons[0]
        return isinstance(other.operator, cst.NotEqual) and _is_name(test.left, name) and _is_name(other.comparator, name)
    if not isinstance(test, cst.Call) or len(test.args) > 1:
        return False
    qualified = context.qualified_name(test.func)
    if qualified is not None:
        return qualified.rsplit(".", 1)[-1] in _NAN_TESTS and qualified.startswith("torch.") and len(test.args) == 1 and _is_name(test.args[0].value, name)
    return (
        isinstance(test.func, cst.Attribute)
        and test.func.attr.value in _NAN_TESTS
        and not test.args
        and _is_name(test.func.value, name)
    )


def _filter_calls_of(context, small: cst.CSTNode, name: str) -> List[cst.Call]:
    found: List[cst.Call] = []

    class _Find(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if _is_name(is_nan_filter(context, call), name):
                found.append(call)

    visit(small, _Find())
    return found
