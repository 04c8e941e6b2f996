from __future__ import annotations

import ast
from typing import FrozenSet, List, Optional, Set

import libcst as cst

from torchlint.analysis.api.api_drift import (
    FUNCTION_INSTANCE_CALL_RAISES_SINCE,
    FUNCTION_INSTANCE_CALL_WARNS_SINCE,
    effective_target,
    version_text,
)
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.autograd_functions import CONTEXT_METHODS, FUNCTION_BASES, is_autograd_function, is_static
from torchlint.analysis.model.ops import module_constructor
from torchlint.rule import WHOLE_FILE, Applicability, Confidence, FixSpec, Replacement, Rule


class AutogradFunctionInstanceCall(Rule):
    """
    ## What it does
    Flags a call of an instance of a `torch.autograd.Function` subclass
    defined in the file: `MyFn()(x)`, or `fn(x)` / `self.fn(x)` where
    `fn = MyFn()` / `self.fn = MyFn()`. This is how legacy Functions, with
    `forward(self, ...)` and `backward(self, ...)` as instance methods, were
    used before torch 0.4.

    ## Why is this bad?
    Since torch 1.5 the call raises `RuntimeError: Legacy autograd function
    with non-static forward method is deprecated. Please use new-style
    autograd function with static forward method.` (torch 1.2 warned). On
    torch 2.13 it raises for a class whose methods are static too: calling an
    instance is the legacy path, whatever the class looks like. A Function is
    used through `MyFn.apply(...)`.

    ## Example
    ```python
    class Square(torch.autograd.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x

        def backward(self, grad):
            (x,) = self.saved_tensors
            return 2 * x * grad

    y = Square()(x)
    ```

    ## Use instead
    ```python
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    y = Square.apply(x)
    ```

    ## Fix safety
    Safe where offered: `MyFn()(args)` becomes `MyFn.apply(args)`. `apply`
    calls `forward` and `backward` with the context as their first argument,
    whether they are static methods or the legacy instance methods (`self`
    is then the context), and the context holds what the instance held
    between them: `save_for_backward`, `saved_tensors`, any attribute set in
    `forward`. Offered only when that is all the instance held: the
    constructor takes no argument and the class defines nothing but
    `forward` and `backward`. An `__init__` that stores settings, or a
    helper method called on `self`, has no counterpart on the context: such
    classes are reported without a fix, to be rewritten by hand with the
    settings passed to `apply`; so is an instance kept in a name
    (`fn = MyFn(); fn(x)`). The fix leaves a legacy class's methods as they
    are (they work through `apply`); making them `@staticmethod`s taking
    `ctx` is the cleanup to do next: the codemod does not insert decorators.
    """

    code = "TL614"
    name = "autograd-function-instance-call"
    message = "calling an instance of an autograd Function raises RuntimeError since torch 1.5: use `MyFn.apply(...)`"
    fix_applicability = Applicability.SAFE
    triggers = ("Function",)
    # Certain from the code and proven at run time, but no validation draw (d1-d8) held one to read blind.
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. The call raises on the target torch (the runtime test shows it), but no "
        "validation draw has held one yet, so its precision on users' code is unmeasured; the level table "
        "moves it once blind readings exist."
    )
    _constructed: Optional[FrozenSet[str]] = None

    @classmethod
    def prepass(cls, scan):
        """The whole file, when it defines a top-level class whose base is torch's Function (what
        ``is_autograd_function`` asks of the class a call constructs) and constructs one."""
        functions = {
            statement.name for statement in scan.tree.body
            if isinstance(statement, ast.ClassDef)
            and any(not FUNCTION_BASES.isdisjoint(scan.qualified(base)) for base in statement.bases)
        }
        if functions and any(
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions
            for node in ast.walk(scan.tree)
        ):
            return WHOLE_FILE  # a call constructs one of them: an instance may be called
        return None

    def visit_Call(self, node: cst.Call) -> None:
        if not self._constructed_functions():
            return  # no call of the file constructs one of its Functions: no instance to call
        func = node.func
        constructor = func if isinstance(func, cst.Call) else module_constructor(self.context, func)
        if not isinstance(constructor, cst.Call) or not isinstance(constructor.func, cst.Name):
            return
        class_def = self._file_class(constructor.func.value)
        if class_def is None or not is_autograd_function(self.context, class_def):
            return
        target = effective_target(self.context.settings.target_torch_version)
        if target < FUNCTION_INSTANCE_CALL_WARNS_SINCE or is_version_guarded(self.context):
            return
        name = class_def.name.value
        effect = (
            f"raises RuntimeError since torch {version_text(FUNCTION_INSTANCE_CALL_RAISES_SINCE)}"
            if target >= FUNCTION_INSTANCE_CALL_RAISES_SINCE
            else f"is deprecated since torch {version_text(FUNCTION_INSTANCE_CALL_WARNS_SINCE)}"
        )
        fix, why = self._fix(node, constructor, class_def)
        self.report(node, f"calling an instance of the autograd Function `{name}` {effect} (legacy Function call): use `{name}.apply(...)`{why}", fix)

    def _constructed_functions(self) -> FrozenSet[str]:
        """The file's autograd Function classes that some call of the file constructs (``MyFn()``)."""
        if self._constructed is None:
            classes = {
                s.name.value for s in self.context.module.body
                if isinstance(s, cst.ClassDef) and is_autograd_function(self.context, s)
            }
            called: Set[str] = set()

            class Constructions(cst.CSTVisitor):
                def visit_Call(self, call: cst.Call) -> None:
                    if isinstance(call.func, cst.Name) and call.func.value in classes:
                        called.add(call.func.value)

            if classes:
                self.context.module.visit(Constructions())
            self._constructed = frozenset(called)
        return self._constructed

    def _file_class(self, name: str) -> Optional[cst.ClassDef]:
        found = [s for s in self.context.module.body if isinstance(s, cst.ClassDef) and s.name.value == name]
        return found[0] if len(found) == 1 else None

    def _fix(self, call: cst.Call, constructor: cst.Call, class_def: cst.ClassDef):
        if call.func is not constructor:
            return None, " (no fix: the instance is kept in a name)"
        if constructor.args:
            return None, " (no fix: its constructor takes settings that the context does not hold)"
        methods = self._methods(class_def)
        if methods is None:
            return None, " (no fix: the class holds more than forward and backward)"
        legacy = any(not is_static(method) for method in methods)
        apply = cst.Attribute(value=constructor.func, attr=cst.Name("apply"))
        message = "Call the Function through `.apply`" + (" (then make forward/backward static methods taking `ctx`)" if legacy else "")
        return FixSpec(Applicability.SAFE, message, (Replacement(call.func, apply),)), ""

    @staticmethod
    def _methods(class_def: cst.ClassDef) -> Optional[List[cst.FunctionDef]]:
        """``forward`` and ``backward`` when the class body holds nothing else (a docstring aside)."""
        methods: List[cst.FunctionDef] = []
        body = class_def.body.body if isinstance(class_def.body, cst.IndentedBlock) else ()
        for index, statement in enumerate(body):
            if isinstance(statement, cst.FunctionDef) and statement.name.value in CONTEXT_METHODS:
                if any(not (isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod") for d in statement.decorators):
                    return None
                methods.append(statement)
                continue
            docstring = (
                index == 0
                and isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
            )
            if not docstring:
                return None
        return methods if any(m.name.value == "forward" for m in methods) else None
