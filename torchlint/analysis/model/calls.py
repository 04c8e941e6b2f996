"""Reading and rewriting call arguments the way Python binds them."""
from __future__ import annotations

import ast
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

import libcst as cst


def has_star_args(call: cst.Call) -> bool:
    """``*args`` or ``**kwargs``: any parameter may be given, so nothing can be said to be missing."""
    return any(arg.star for arg in call.args)


def positional_args(call: cst.Call) -> Sequence[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def argument(call: cst.Call, position: int, name: str) -> Optional[cst.Arg]:
    """The argument bound to parameter ``name`` at ``position`` (0-based), if given."""
    positional = positional_args(call)
    if position < len(positional):
        return positional[position]
    return keyword_arg(call, name)


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` appended, keeping the call's layout.

    A trailing comma stays trailing and a one-argument-per-line call gets the
    new argument on its own line with the same indentation.
    """
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: the new argument inherits it (and the whitespace before ')');
        # the old last argument is separated from the new one the way it was from its predecessor.
        if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
            separator = args[-2].comma
        else:
            separator = cst.Comma(whitespace_after=call.whitespace_before_args)
        args[-1] = last.with_changes(comma=separator)
        args.append(new_arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg))
        args[-1 - 1] = args[-2].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=args)


def without_args(call: cst.Call, dropped: Collection[cst.Arg]) -> cst.Call:
    """``call`` without the arguments ``dropped``; the new last argument takes the old last one's comma and
    spacing, so a trailing comma or a closing parenthesis on its own line stays as it was."""
    ids = {id(arg) for arg in dropped}
    kept = [arg for arg in call.args if id(arg) not in ids]
    if kept and kept[-1] is not call.args[-1]:
        last = call.args[-1]
        kept[-1] = kept[-1].with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    return call.with_changes(args=kept)


# What literal_value returns for an argument that is not a literal.
NOT_A_LITERAL = object()
_NAMED_CONSTANTS = {"True": True, "False": False, "None": None}


def literal_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    """``True`` / ``False`` written as such, else None."""
    value = literal_value(node) if node is not None else NOT_A_LITERAL
    return value if isinstance(value, bool) else None


def literal_value(node: cst.BaseExpression) -> Any:
    """The value of a literal argument (``True``, ``None``, ``"max_length"``, ``1e-10``, ``-1``), else NOT_A_LITERAL."""
    if isinstance(node, cst.Name):
        return _NAMED_CONSTANTS.get(node.value, NOT_A_LITERAL)
    negative = isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus)
    number = node.expression if negative else node
    if isinstance(number, (cst.Integer, cst.Float)) or (isinstance(node, cst.SimpleString) and not negative):
        try:
            value = ast.literal_eval(number.value)
        except (ValueError, SyntaxError):
            return NOT_A_LITERAL
        return -value if negative else value
    return NOT_A_LITERAL


def calls_in(node: cst.CSTNode) -> Sequence[cst.Call]:
    """Every call inside ``node``, nested functions and classes included, in source order."""
    found: list = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    node.visit(_Calls())
    return found


def arguments_passed(
    facts: Any, function: ast.FunctionDef, parameter: str
) -> Optional[List[Tuple[Any, ast.Call, ast.expr]]]:
    """What every call of the top-level ``function`` of module ``facts`` (project_index.ModuleFacts) in the project passes for ``parameter``
    (its default where a call omits it), with the calling module and the call; None when a call passes ``*args``
    or ``**kwargs`` or gives the parameter twice. A call that leaves a required parameter out raises TypeError
    before the body runs: it passes nothing and is left out. Modules are found by the text ``name(`` (only they are
    parsed) and a call counts when its callee resolves to the function (imports, aliases, the module's own
    name)."""
    return _passed_by_calls(facts, function.name, function.args, parameter, 0)


def constructor_arguments_passed(
    facts: Any, cls: ast.ClassDef, init: ast.FunctionDef, parameter: str, subclasses: List[Tuple[Any, ast.ClassDef]]
) -> Optional[List[Tuple[Any, ast.Call, ast.expr]]]:
    """As :func:`arguments_passed`, for a parameter of the ``__init__`` of the top-level class ``cls``: what every
    construction of it passes, and of ``subclasses`` (``(their module's facts, the class)``: classes of the
    project that keep this ``__init__``)."""
    found = _passed_by_calls(facts, cls.name, init.args, parameter, 1)
    for module, subclass in subclasses:
        more = _passed_by_calls(module, subclass.name, init.args, parameter, 1)
        if found is None or more is None:
            return None
        found.extend(more)
    return found


def _passed_by_calls(
    facts: Any, callee: str, arguments: ast.arguments, parameter: str, bound_first: int
) -> Optional[List[Tuple[Any, ast.Call, ast.expr]]]:
    """What the calls of the top-level ``callee`` of ``facts`` pass for ``parameter`` of ``arguments``, the first
    ``bound_first`` positional parameters bound by the call itself (``self`` of a constructor)."""
    positional = [arg.arg for arg in arguments.posonlyargs + arguments.args]
    keyword_only = [arg.arg for arg in arguments.kwonlyargs]
    if parameter not in positional[bound_first:] and parameter not in keyword_only:
        return None
    defaults: Dict[str, ast.expr] = dict(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    defaults.update({arg.arg: value for arg, value in zip(arguments.kwonlyargs, arguments.kw_defaults) if value is not None})
    positional = positional[bound_first:]
    qualified = f"{facts.module}.{callee}"
    project = facts.project
    callers = [facts] if project is None else project.modules_calling(callee)
    found: List[Tuple[Any, ast.Call, ast.expr]] = []
    for caller in callers:
        for node in caller.calls_of(callee):
            own = isinstance(node.func, ast.Name) and node.func.id == callee and caller.path == facts.path
            if not own and not _names_definition(caller.qualify(node.func), qualified, facts, callee, project):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                return None
            given = [k.value for k in node.keywords if k.arg == parameter]
            if parameter in positional and positional.index(parameter) < len(node.args):
                given.append(node.args[positional.index(parameter)])
            if not given and parameter in defaults:
                given.append(defaults[parameter])
            if not given:
                continue  # a required parameter left out: the call raises TypeError and never runs the body
            if len(given) != 1:
                return None
            found.append((caller, node, given[0]))
    return found


def _names_definition(written: Optional[str], qualified: str, facts: Any, name: str, project: Any) -> bool:
    """Whether a callee the caller's imports resolve to ``written`` is ``name`` of ``facts`` (``qualified``), also
    through a package's re-export (``from src.trainer import Trainer`` of ``src/trainer/trainer.py``'s)."""
    if written is None:
        return False
    if written == qualified:
        return True
    if project is None:
        return False
    found = project.locate(written)
    return found is not None and found[0] is facts and found[1] == name


def backpropagated_names(scope: cst.CSTNode) -> frozenset:
    """The names ``scope`` (a function, or a module's top level with its functions) calls ``.backward()`` on with no
    argument: ``loss.backward()``."""
    found = set()

    class Backward(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "backward" and not call.args and isinstance(func.value, cst.Name):
                found.add(func.value.value)

    scope.visit(Backward())
    return frozenset(found)

