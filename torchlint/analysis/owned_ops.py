"""Ops that TL106/TL107 take over from TL101-TL104: "can it reach its domain edge?" without the ownership step.

:func:`torchlint.analysis.guards.needs_guard` answers "should TL101-TL104
report this op?": reaches the edge *and* no other rule owns it.  The owners
(``where_owner`` -> TL106, ``filter_owner`` -> TL107) ask the first half
alone, so that an op is reported by exactly one rule: the owner reports it
when, and only when, it can reach the edge.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import libcst as cst

from torchlint.analysis.dataflow import site_of
from torchlint.analysis.domain import DIV, DomainOp
from torchlint.analysis.guards import Sign, guarded_by_condition, is_constant_tensor, sign_of, value_kind

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext


def reaches_edge(context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether ``op``'s operand is a tensor that is neither provably positive nor guarded by a condition."""
    site = site_of(list(ancestors) + [op.node])
    kind = value_kind(context, op.operand, site)
    if kind in ("number", "array") or is_constant_tensor(context, op.operand, site):
        return False
    if op.is_operator and op.kind != DIV and kind != "tensor":
        return False
    division = op.kind == DIV
    if sign_of(context, op.operand, site, division=division) is Sign.POSITIVE:
        return False
    return not guarded_by_condition(context, op.operand, ancestors, division=division)
