"""Same-file callers: every call this file makes of one of its functions, and what it hands in.

The guard analysis asks two questions of the function that holds an op when
the op's operand is a parameter, or when the function itself runs nowhere
differentiated: "what do the callers pass?" (``reduce_loss(loss, mask)``
called only with masks built from lengths) and "where do the callers run?"
(``self._project_batch(w)`` called only under ``torch.no_grad()``).  The
file is taken at its word: a function it calls only with positive
arguments is not reported for a zero it is never handed here, even if it is
public (other modules may call it; the linter cannot see them).

:func:`call_sites` answers only when the file shows every way it reaches the
function:

- a plain name bound to a ``def`` (module level or nested), or a method
  called as ``self.name(...)`` from a method of its own class;
- every other mention of the name in the file is one of these calls (of
  this def or of another def the lookup ties it to: a method of the same
  name in another class): a function passed as a value (``map(fn, xs)``,
  ``self.hook = self._fn``), reached through another object
  (``other._fn(x)``, ``super()._fn(x)``), or called from code the lookup
  cannot tie to a def makes the answer None;
- not a ``forward``, dunder or decorated function: the framework or the
  decorator calls those.

:func:`argument_for` maps a parameter to the expression a call passes for
it (positional, keyword or the default), None when ``*args``/``**kwargs``
hide it.

The index is one walk of the module, done the first time a rule asks
(``FileContext.memoized``).  With the pre-pass, the regions that mention a
seeded function's name are kept (``Scan.with_mentions``), so the calls seen
here are the file's own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis.dataflow import site_of
from torchlint.analysis.returns import called_function
from torchlint.prepass import framework_called
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.context import FileContext


@dataclass(frozen=True)
class CallSite:
    call: cst.Call
    ancestors: Tuple[cst.CSTNode, ...]  # outermost first (the module), the call excluded
    through_self: bool  # ``self.name(...)``: the call's first argument is the method's second parameter




def call_sites(context: "FileContext", function: cst.FunctionDef) -> Optional[Tuple[CallSite, ...]]:
    """Every call of ``function`` in the file, or None when the file may reach it otherwise (see module docs)."""
    name = function.name.value
    if function.decorators or function.asynchronous is not None or framework_called(name):
        return None
    index = _index(context)
    if name in index.escaped:
        return None
    found = []
    for site in index.calls.get(name, ()):
        if any(node is function for node in site.ancestors):
            return None  # recursive: what it passes itself depends on what it was passed
        callee = called_function(context, site.call, site_of(list(site.ancestors) + [site.call]))
        if callee is None:
            return None  # a call of the name the lookup cannot tie to a def: it may be this one
        if callee is function:
            found.append(site)
    return tuple(found) or None


def argument_for(function: cst.FunctionDef, parameter: str, site: CallSite) -> Optional[cst.BaseExpression]:
    """What ``site`` passes for ``parameter`` of ``function`` (its default when the call omits it), or None."""
    params = function.params
    call = site.call
    if any(arg.star for arg in call.args):
        return None
    positional = list(params.posonly_params) + list(params.params)
    if site.through_self:
        positional = positional[1:]  # ``self`` is bound by the attribute lookup
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    passed = [arg.value for arg in call.args if arg.keyword is None]
    for position, param in enumerate(positional):
        if param.name.value == parameter:
            if position < len(passed):
                return passed[position]
            return keywords.get(parameter, param.default)
    for param in params.kwonly_params:
        if param.name.value == parameter:
            return keywords.get(parameter, param.default)
    return None


@dataclass
class _Index:
    calls: Dict[str, List[CallSite]]
    escaped: Set[str]  # names mentioned other than as the callee of a plain or ``self.`` call


def _index(context: "FileContext") -> _Index:
    return context.memoized("callers.index", context.module, lambda module: _build_index(module, _defined_names(module)))


def _defined_names(module: cst.Module) -> Set[str]:
    names: Set[str] = set()

    class _Defs(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            names.add(node.name.value)

    visit(module, _Defs())
    return names


def _build_index(module: cst.Module, wanted: Set[str]) -> _Index:
    index = _Index({}, set())
    path: List[cst.CSTNode] = []
    callees: Set[int] = set()  # ids of the Name/Attribute nodes that are the callee of an indexed call

    class _Calls(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Call):
                name, through_self = _callee(node.func)
                if name in wanted:
                    index.calls.setdefault(name, []).append(CallSite(node, tuple(path), through_self))
                    callees.add(id(node.func))
            elif isinstance(node, cst.Name):
                if node.value in wanted and id(node) not in callees:
                    index.escaped.add(node.value)
            elif isinstance(node, cst.Attribute):
                if node.attr.value in wanted and id(node) not in callees:
                    index.escaped.add(node.attr.value)
                callees.add(id(node.attr))  # the attribute's own Name is not a mention of a plain name
            elif isinstance(node, cst.FunctionDef):
                callees.add(id(node.name))  # the definition itself
            path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            path.pop()

    visit(module, _Calls())
    return index


def _callee(func: cst.BaseExpression) -> Tuple[Optional[str], bool]:
    if isinstance(func, cst.Name):
        return func.value, False
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value, True
    return None, False


def enclosing_function(ancestors: Sequence[cst.CSTNode]) -> Optional[cst.FunctionDef]:
    """The innermost ``def`` around a node (lambdas and classes in between end the search)."""
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef):
            return node
        if isinstance(node, (cst.ClassDef, cst.Lambda)):
            return None
    return None
