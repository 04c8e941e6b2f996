from __future__ import annotations

import libcst as cst

from torchlint.analysis.flow.grad_need import gradient_flows, gradient_never_computed, gradient_regions
from torchlint.analysis.flow.unit_edge import unit_bounds, unit_edge
from torchlint.analysis.model.calls import has_star_args
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.model.ops import call_parts
from torchlint.analysis.values.domain import constant_value
from torchlint.analysis.values.fixes import float_literal, method_call
from torchlint.analysis.values.precision import project_uses_float16
from torchlint.findings import FixSpec, Replacement
from torchlint.rule import Applicability, Confidence, Rule

# The inverse functions whose domain ends at ±1, in every spelling torch has.
INVERSE_TRIG = frozenset({"acos", "arccos", "asin", "arcsin", "atanh", "arctanh"})
# How far inside ±1 the clamp keeps the operand: 1 - 1e-6 is a float32 value below 1 (its spacing there is
# 6e-8); float16 rounds it to 1 (spacing 4.9e-4), so code that computes in float16 gets 1e-3.
FLOAT32_MARGIN = 1e-6
FLOAT16_MARGIN = 1e-3


class InverseTrigAtTheEdge(Rule):
    """
    ## What it does
    Flags `acos`, `asin` and `atanh` (and `arccos`, `arcsin`, `arctanh`;
    function or method) of a value that reaches ±1 by its own construction:
    a cosine similarity (`F.cosine_similarity`, `nn.CosineSimilarity`, a sum
    or matrix product of normalized vectors, `(a * b).sum(d) / (a.norm(d) *
    b.norm(d))`), a clamp to exactly `[-1, 1]`, or a `tanh`, `cos` or `sin`
    output. An operand the code keeps inside the edge (`clamp(-1 + eps, 1 -
    eps)`, `x * 0.999`) or one nothing is known of is not reported
    (`torchlint/analysis/flow/unit_edge.py`).

    ## Why is this bad?
    The derivative of `acos(x)` is `-1 / sqrt(1 - x²)`: infinite at `x = ±1`,
    and `asin`'s likewise; `atanh(±1)` is infinite itself. A cosine is exactly
    1 for parallel vectors (the diagonal of a similarity matrix, a feature
    equal to its class centre) and rounding takes it past 1, where `acos` is
    NaN already in the forward pass ("Function 'AcosBackward0' returned nan
    values"). Clamping to `[-1, 1]` does not help: it passes ±1 through, and
    where it cut the value its zero gradient times the infinite one is NaN.
    `tanh` is exactly 1.0 in float32 for inputs above 9, so `atanh(tanh(u))`
    is infinite there. Angular-margin losses (ArcFace, SphereFace) clamp the
    cosine inside the edge for this reason.

    ## Example
    ```python
    theta = torch.acos(F.cosine_similarity(a, b))
    angle = torch.acos(torch.clamp(cos, -1, 1))
    ```

    ## Use instead
    ```python
    theta = torch.acos(F.cosine_similarity(a, b).clamp(-1 + 1e-6, 1 - 1e-6))
    angle = torch.acos(torch.clamp(cos, -1 + 1e-6, 1 - 1e-6))
    ```

    ## Fix safety
    Numerics: the operand is clamped to `[-1 + eps, 1 - eps]` (a clamp to
    exactly ±1 gets those bounds instead), with eps 1e-6, or 1e-3 in a
    project that computes in float16, where 1 - 1e-6 rounds to 1. Values
    inside the margin are computed exactly as before; within eps of ±1 the
    result is that of ±(1 - eps), with a finite gradient instead of an
    infinite or NaN one. bfloat16 values need a margin of 4e-3: raise it by
    hand there (autocast computes `acos` and `asin` in float32).

    ## Where it looks
    Everywhere a tensor op runs except where the code says no gradient is
    computed (`no_grad`, initialisation, data loading), as for TL101-TL104.
    NumPy and `math` functions are never reported. Silence one line with
    `# noqa: TL108`.
    """

    code = "TL108"
    name = "inverse-trig-at-the-edge"
    message = "acos/asin/atanh of a value that reaches ±1: infinite gradient at ±1, NaN past them; clamp inside [-1, 1]"
    fix_applicability = Applicability.NUMERICS
    triggers = ("acos", "asin", "atanh", "arccos", "arcsin", "arctanh")
    reads_callers = True

    confidence_levels = (
        "`medium` where the code shows gradients flow (a `forward`, a loss, a scope that calls `backward()`), "
        "`low` elsewhere. No form is found at `high` until a validation draw has read this rule's findings on "
        "users' code; the level table then moves the forms that keep a higher promise."
    )

    @classmethod
    def prepass(cls, scan):
        return gradient_regions(scan, scan.regions_calling_tensor_ops(INVERSE_TRIG)) or None

    def visit_Call(self, node: cst.Call) -> None:
        if has_star_args(node):
            return
        name, operand, is_method = call_parts(self.context, node)
        if name not in INVERSE_TRIG or operand is None:
            return
        ancestors = self.context.ancestors
        if gradient_never_computed(self.context, ancestors):
            return
        edge = unit_edge(self.context, operand, site_of(ancestors))
        if edge is None:
            return
        level = self._level(gradient_flows(self.context, ancestors))
        self.report(
            node,
            message=f"{name} of {edge}: infinite gradient at ±1, NaN past them; clamp inside [-1, 1]",
            fix=self._fix(operand),
            confidence=level,
        )

    @staticmethod
    def _level(flows: bool) -> Confidence:
        # Not `high` before a validation draw has read this rule's findings on users' code: the level table
        # (bench/validate.py --calibrate) moves the form up once readings show it keeps that promise.
        return Confidence.MEDIUM if flows else Confidence.LOW

    def _fix(self, operand: cst.BaseExpression) -> FixSpec:
        margin = float_literal(FLOAT16_MARGIN if project_uses_float16(self.context) else FLOAT32_MARGIN)
        low, high = cst.parse_expression(f"-1 + {margin}"), cst.parse_expression(f"1 - {margin}")
        bounds = _unit_clamp_bounds(self.context, operand)
        if bounds is not None:
            replacements = tuple(Replacement(old, new) for old, new in zip(bounds, (low, high)))
        else:
            replacements = (Replacement(operand, method_call(operand, "clamp", (low, high))),)
        return FixSpec(Applicability.NUMERICS, f"Clamp the operand to [-1 + {margin}, 1 - {margin}]", replacements)


def _unit_clamp_bounds(context, operand: cst.BaseExpression):
    """The two bound expressions of ``operand`` when it is itself a clamp to exactly [-1, 1]
    (``torch.clamp(x, -1, 1)``, ``x.clamp(min=-1, max=1)``), else None: the fix rewrites them in place."""
    if not isinstance(operand, cst.Call) or has_star_args(operand):
        return None
    name, _, _ = call_parts(context, operand)
    if name not in ("clamp", "clip"):
        return None
    bounds = unit_bounds(context, operand, name)
    if bounds is None or any(bound is None for bound in bounds):
        return None
    if (constant_value(bounds[0]), constant_value(bounds[1])) != (-1, 1):
        return None
    return bounds
