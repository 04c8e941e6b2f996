"""The literal behind a name: what a local, a module constant, a parameter's default or ``self.eps`` holds.

One reader for every analysis that asks "is this eps 1e-8?": names are followed to what the code binds them
to (analysis/model/dataflow.py), never judged by what they are called.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.analysis.model.dataflow import Site, bindings, site_of

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# The largest literal read as "a small constant added to stay off zero".
EPS_LITERAL_LIMIT = 1e-2


def number_value(node: cst.BaseExpression) -> Optional[float]:
    """The value of a numeric literal (``1e-6``, ``-3``, ``0.5``), else None."""
    sign = 1.0
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        sign = -1.0 if isinstance(node.operator, cst.Minus) else 1.0
        node = node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        try:
            return sign * float(node.evaluated_value)
        except (ValueError, OverflowError):
            return None
    return None


def literal_behind(context: "FileContext", term: cst.BaseExpression, site: Optional[Site]) -> Optional[cst.BaseExpression]:
    """The numeric literal ``term`` is or holds, read at ``site``: itself, the one assignment of a local or
    module name, a parameter's default, a class constant read as ``self.eps``, or ``self.eps`` set in the
    class from a literal or from a default of ``__init__``. None when the code does not show one."""
    if number_value(term) is not None:
        return term
    if isinstance(term, cst.Name):
        if site is None:
            return None
        reaching = bindings(site, term.value)
        if len(reaching) == 1 and reaching[0].kind in ("assign", "module", "param") and reaching[0].value is not None:
            value = reaching[0].value
            return value if number_value(value) is not None else None
        return None
    if isinstance(term, cst.Attribute) and isinstance(term.value, cst.Name) and term.value.value == "self":
        value = context.self_attribute_value(term.attr.value)
        if value is None:
            value = _class_constant(context, term.attr.value)
        if value is not None and number_value(value) is not None:
            return value
        if isinstance(value, cst.Name):
            return init_default(context, value.value)
    return None


def _class_constant(context: "FileContext", name: str) -> Optional[cst.BaseExpression]:
    """``eps = 1e-6`` in the body of the enclosing class."""
    class_def = context.enclosing(cst.ClassDef)
    if class_def is None:
        return None
    found = None
    for statement in class_def.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
                ):
                    found = small.value
    return found


def init_default(context: "FileContext", parameter: str) -> Optional[cst.BaseExpression]:
    """The literal default of ``parameter`` in the enclosing class's ``__init__`` (``def __init__(self, eps=1e-12)``)."""
    class_def = context.enclosing(cst.ClassDef)
    if class_def is None:
        return None
    for statement in class_def.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            params = statement.params
            for param in list(params.params) + list(params.kwonly_params):
                if param.name.value == parameter and param.default is not None and number_value(param.default) is not None:
                    return param.default
    return None


def small_positive_behind(context: "FileContext", term: cst.BaseExpression) -> bool:
    """``term`` holds a small positive literal (at most ``ops.EPS_LITERAL_LIMIT``), read where the traversal is."""
    literal = literal_behind(context, term, site_of(list(context.ancestors)))
    value = number_value(literal) if literal is not None else None
    return value is not None and 0 < value <= EPS_LITERAL_LIMIT
