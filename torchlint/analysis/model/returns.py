"""Same-file calls: which function of this file a call runs, and the values it returns.

The guard analysis asks "what does ``stft(x)`` / ``self._magnitude(x)``
return?" when the helper is defined in the same file (a ``def stft`` that
clamps its power before the root, a method that adds eps).  This module
answers the lookup half; :func:`torchlint.analysis.project.guards.sign_of` judges
the returned values.  Everything is computed once per file through
``FileContext.memoized`` and looks only at the module's top level, class
bodies and the called function's own body: no whole-tree walk per call.

- :func:`called_function`: the ``FunctionDef`` a call reaches, for a plain
  name bound to a module-level ``def`` (not rebound in the calling function)
  and for ``self.name(...)`` inside a method of a class that defines
  ``name`` itself (inherited and overridden methods are not followed: a
  subclass may override it).  Decorated functions are not followed (a
  decorator may change what is returned), nor generators.
- :func:`returned_values`: ``(value, site)`` for every ``return value`` of a
  function (nested functions and lambdas excluded); None when some path
  returns nothing or the function yields.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.model.dataflow import Site, bindings, site_of
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

Returned = Tuple[cst.BaseExpression, Site]


def called_function(context: "FileContext", call: cst.Call, site: Optional[Site]) -> Optional[cst.FunctionDef]:
    """The same-file function ``call`` runs (see module docs), or None."""
    func = call.func
    if isinstance(func, cst.Name) and site is not None:
        reaching = bindings(site, func.value)
        if len(reaching) == 1 and reaching[0].kind == "opaque" and isinstance(reaching[0].node, cst.FunctionDef):
            return _followable(reaching[0].node)
        return None
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == "self"
        and site is not None
        and site.function is not None
    ):
        owner = classes_of_methods(context).get(id(site.function))
        if owner is None:
            return None
        for statement in _body(owner):
            if isinstance(statement, cst.FunctionDef) and statement.name.value == func.attr.value:
                return _followable(statement)
    return None


def returned_values(context: "FileContext", function: cst.FunctionDef) -> Optional[List[Returned]]:
    """Every value ``function`` returns with its site, or None (see module docs)."""
    return context.memoized("returns.values", function, lambda node: _collect_returns(context, node))


def _followable(function: cst.FunctionDef) -> Optional[cst.FunctionDef]:
    return None if function.decorators or function.asynchronous is not None else function


def _body(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    return getattr(body, "body", ()) if body is not None else ()


def classes_of_methods(context: "FileContext") -> Dict[int, cst.ClassDef]:
    """id(method) -> its class, for the classes at module level and nested in them."""

    def compute(module: cst.Module) -> Dict[int, cst.ClassDef]:
        owners: Dict[int, cst.ClassDef] = {}
        pending = [statement for statement in module.body if isinstance(statement, cst.ClassDef)]
        while pending:
            klass = pending.pop()
            for statement in _body(klass):
                if isinstance(statement, cst.FunctionDef):
                    owners[id(statement)] = klass
                elif isinstance(statement, cst.ClassDef):
                    pending.append(statement)
        return owners

    return context.memoized("returns.classes", context.module, compute)


def _collect_returns(context: "FileContext", function: cst.FunctionDef) -> Optional[List[Returned]]:
    found: List[Returned] = []
    path: List[cst.CSTNode] = [context.module, function]
    failed = []

    class _Returns(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if failed:
                return False
            if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not function:
                return False
            if isinstance(node, cst.Yield):
                failed.append(node)
                return False
            if isinstance(node, cst.Return):
                if node.value is None:
                    failed.append(node)
                else:
                    found.append((node.value, site_of(path + [node])))
                return False
            if node is not function:
                path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if path and path[-1] is original_node:
                path.pop()

    visit(function.body, _Returns())
    if failed or not found or _may_fall_off(function.body):
        return None
    return found


def _may_fall_off(block: cst.BaseSuite) -> bool:
    """Whether control can reach the end of ``block`` (an implicit ``return None``), judged on its last statement."""
    statements = getattr(block, "body", ())
    if not statements:
        return True
    last = statements[-1]
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return not any(isinstance(small, (cst.Return, cst.Raise)) for small in last.body)
    if isinstance(last, cst.If):
        if last.orelse is None:
            return True
        orelse = last.orelse.body if isinstance(last.orelse, cst.Else) else cst.IndentedBlock(body=[last.orelse])
        return _may_fall_off(last.body) or _may_fall_off(orelse)
    if isinstance(last, (cst.With,)):
        return _may_fall_off(last.body)
    if isinstance(last, cst.Try):
        return _may_fall_off(last.body) or any(_may_fall_off(handler.body) for handler in last.handlers)
    return True
