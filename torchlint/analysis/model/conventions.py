"""Naming conventions: what a name may say, and how far it may move a finding.

A name is evidence of nothing (DESIGN.md): facts decide whether a site is reported. A convention (an operand
named like an eps, a value named ``safe_*``, a tensor named ``*_mask``) may move a finding by one level, up or
down, never make it appear or vanish. Every name pattern of the analysis is asked through :func:`says`, so
that one switch turns them all off, and the analysis can compare what it concludes with and without them:

- :func:`recording` notes whether a convention decided anything while a question was answered;
- :func:`disabled` answers the same question as if every identifier had another name;
- :func:`moved` combines the two answers: the level the facts give, moved one step toward the level the
  names give (``None``, not reported, counts as the step below ``low``; the facts' ``None`` stays ``None`` and
  their ``low`` is never silenced).

``tests/test_renaming.py`` renames every identifier of the fixtures and checks the result.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, List, Optional, TypeVar

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("torchlint_naming_conventions", default=True)
_RECORD: contextvars.ContextVar[Optional[List[bool]]] = contextvars.ContextVar("torchlint_convention_record", default=None)

L = TypeVar("L")

# How many times a convention decided, ever (read before and after a step to see whether one did: cheaper
# than a recording around every step of a traversal).
decisions = 0


def says(matched: bool) -> bool:
    """A naming convention's verdict: ``matched`` while conventions apply (noting that one decided), else False."""
    global decisions
    if not matched or not _ACTIVE.get():
        return False
    decisions += 1
    record = _RECORD.get()
    if record is not None:
        record.append(True)
    return True


def active() -> bool:
    return _ACTIVE.get()


def noted() -> None:
    """Note that a convention decided, for an answer reused from a memo that one had decided."""
    global decisions
    decisions += 1
    record = _RECORD.get()
    if record is not None:
        record.append(True)


@contextlib.contextmanager
def recording() -> Iterator[List[bool]]:
    """Collect (as a non-empty list) whether any convention decided inside the block."""
    outer = _RECORD.get()
    record: List[bool] = []
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)
        if outer is not None and record:
            outer.append(True)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    token = _ACTIVE.set(False)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def moved(by_facts: Optional[L], by_names: Optional[L], order: List[L]) -> Optional[L]:
    """The level the facts give, moved one step toward the level the names give. ``order``: the levels,
    lowest first."""
    if by_facts is None:
        return None
    facts_rank = order.index(by_facts)
    names_rank = -1 if by_names is None else order.index(by_names)
    if names_rank > facts_rank:
        return order[facts_rank + 1]
    if names_rank < facts_rank:
        return order[max(facts_rank - 1, 0)]
    return by_facts
