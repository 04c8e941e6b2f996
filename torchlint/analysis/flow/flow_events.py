"""What one walk of a function records (gradflow.FunctionFlow): where each statement sits (its order, loops,
branches, ``no_grad``), and the bindings, list feeds, backward calls and optimizer steps found there."""
from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple

import libcst as cst


@dataclass(frozen=True)
class Place:
    """Where a statement sits: its order in the function, enclosing loops and branches."""

    order: int
    loops: Tuple[cst.CSTNode, ...]
    branches: Tuple[Tuple[int, str], ...]
    no_grad: bool

    def exclusive_with(self, other: "Place") -> bool:
        """Both cannot run in one pass: they sit in different branches of one ``if`` or ``try``."""
        mine = dict(self.branches)
        return any(key in mine and mine[key] != branch for key, branch in other.branches)


@dataclass(frozen=True)
class FlowBinding:
    name: str
    value: cst.BaseExpression
    site: Place
    element: bool = False  # the name holds one element of ``value`` (for-target, unpacking)
    # ``x.requires_grad = True`` / ``x.requires_grad_()``: ``value`` is ``x`` as it was before; a leaf
    # autograd differentiates, unless that value was cut from a graph (the flag then papers over the cut)
    leaf: bool = False
    comprehension: bool = False  # a comprehension's target: it shadows the name inside its own statement


@dataclass(frozen=True)
class ListFeed:
    elements: Tuple[cst.BaseExpression, ...]
    site: Place
    # ``extend(xs)``: the elements are those of ``xs`` (when ``xs`` is not a display).
    iterable: Optional[cst.BaseExpression] = None


@dataclass(frozen=True)
class BackwardCall:
    call: cst.Call
    tensor: cst.BaseExpression  # what is differentiated (``loss`` in ``scaler.scale(loss).backward()``)
    site: Place
    frees_graph: bool  # no retain_graph/create_graph that may keep it
    kind: str = "backward"  # or "grad" for ``torch.autograd.grad``


@dataclass(frozen=True)
class StepCall:
    """``optimizer.step()`` (also ``scaler.step(optimizer)``): the parameters it updates change in place."""

    call: cst.Call
    optimizer: cst.BaseExpression  # ``optimizer`` in both forms
    site: Place


@dataclass(frozen=True)
class Origin:
    """A restricted question: does a value carry history that comes from here (None: from anywhere)?

    ``loop``: values an iteration of this loop hands to the next one (``h`` in ``out, h = rnn(x, h)``);
    ``parameters``: the function's parameters (what a caller passed in).  Module calls and
    parameters of ``self`` then only pass their inputs' history on; new leaves start none.
    """

    loop: Optional[cst.CSTNode] = None
    parameters: FrozenSet[str] = frozenset()
    # For ``loop``: a statement known to have run in the iteration that hands values on (a backward
    # call); a binding after it on its path is made whenever it runs (``h = h.detach()`` after it).
    given: Optional[Place] = None

    @property
    def key(self) -> tuple:
        return (id(self.loop), self.parameters, self.given.order if self.given is not None else None)


