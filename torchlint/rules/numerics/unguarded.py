"""The visitor shared by the rules that report an unguarded domain-edge op (TL101, TL103, TL104)."""
from __future__ import annotations

from typing import ClassVar, FrozenSet, Optional, Tuple

import libcst as cst

from torchlint.analysis.flow import signs
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.values.domain import POW, DomainOp, is_reciprocal_exponent, possible_kind
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.values.fixes import clamp_operand_fix, eps_text
from torchlint.analysis.flow.grad_need import gradient_regions
from torchlint.analysis.project.guards import assess
from torchlint.rule import FixSpec, Rule


class UnguardedOpRule(Rule):
    """Reports an op of ``op_kinds`` (function, method, operator or augmented form) whose operand needs a guard.

    Subclasses set ``op_kinds`` and may override :meth:`fix`; by default the
    operand is clamped to eps, except in an augmented assignment, whose
    target is also its operand.
    """

    op_kinds: ClassVar[FrozenSet[str]] = frozenset()
    reads_callers = True
    judges_names = True  # guards.assess weighs naming conventions per op
    fix_message: ClassVar[str] = "Clamp the operand to eps"
    # Divisors are classified by what the enclosing function bound them to: only they need the site.
    needs_site: ClassVar[bool] = False
    # For the ast pre-pass: callee names (function or method) and operators that can be such an op.
    callee_names: ClassVar[FrozenSet[str]] = frozenset()
    operators: ClassVar[Tuple[type, ...]] = ()

    @classmethod
    def prepass(cls, scan):
        regions = scan.regions_calling_tensor_ops(cls.callee_names) | scan.regions_with_operator(*cls.operators)
        return gradient_regions(scan, regions) or None

    def visit_Call(self, node: cst.Call) -> None:
        self._check(node)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self._check(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        if possible_kind(self.context, node) not in self.op_kinds:
            return  # most calls and operators of a region are none of this rule's ops: no site to build
        site = site_of(self.context.ancestors) if self.needs_site else None
        op = match_domain_op(self.context, node, site)
        if op is None or op.kind not in self.op_kinds:
            return
        confidence = assess(self.context, op, shown=self.shown_level)
        if confidence is not None:
            self.report(node, fix=self.fix(node, op), confidence=confidence)

    def _never_negative(self, op: DomainOp) -> bool:
        """The base is at least 0 by construction (a ReLU output, a norm, a square): a clamp changes only its zeros."""
        site = site_of(self.context.ancestors)
        return signs.evaluate(self.context, op.operand, site).sign is not signs.Sign.UNKNOWN

    def fix(self, node: cst.CSTNode, op: DomainOp) -> Optional[FixSpec]:
        if isinstance(node, cst.AugAssign):
            return None
        if op.kind == POW and not is_reciprocal_exponent(op.exponent) and not self._never_negative(op):
            # ``x ** p`` with ``p`` held in a name may be an integer power of a signed base (``diff ** p`` with
            # p = 2): clamping the base would drop every negative entry.
            return None
        if signs.reaches_edge_only_by_rounding(self.context, op.operand, site_of(self.context.ancestors)):
            return None  # a clamp would flatten legitimate small probabilities: the exact form takes the logits
        return clamp_operand_fix(self.context, op, eps_text(self.context), self.fix_message)
