"""Custom autograd Functions: classes deriving from ``torch.autograd.Function``, and the context argument of
their methods.

A new-style Function defines ``forward(ctx, ...)`` and ``backward(ctx, ...)`` as static methods and is
called through ``F.apply(...)``; a legacy one (torch before 0.4) defined them as instance methods, stored
state on ``self`` and was called as ``F()(x)``, which raises RuntimeError since torch 1.5.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

FUNCTION_BASES = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction"}
)
# The methods torch calls with the context (or, in a legacy Function, the instance) first.
CONTEXT_METHODS = frozenset({"forward", "backward", "setup_context", "jvp", "vjp"})


def is_autograd_function(context: "FileContext", class_def: cst.ClassDef) -> bool:
    """``class F(torch.autograd.Function)``, bases resolved through the file's imports."""
    return any(context.qualified_name(base.value) in FUNCTION_BASES for base in class_def.bases)


def is_static(function: cst.FunctionDef) -> bool:
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators)


def context_parameter(context: "FileContext", function: cst.FunctionDef, class_def: Optional[cst.ClassDef]) -> Optional[str]:
    """The name of the first parameter of ``forward``/``backward``/... of an autograd Function: ``ctx`` of a
    static method, ``self`` of a legacy one."""
    if class_def is None or function.name.value not in CONTEXT_METHODS or not is_autograd_function(context, class_def):
        return None
    params = function.params.params or function.params.posonly_params
    return params[0].name.value if params else None
