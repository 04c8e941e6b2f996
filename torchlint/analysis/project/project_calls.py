"""Callers in other files: what the project's other modules pass to a function of the linted file.

``train(epoch, loader, net, criterion, optimizer)`` is often defined in ``utils/train.py`` and called only from
``main.py``, where ``criterion = nn.CrossEntropyLoss()``: the file that holds the function shows nothing of what
its parameters hold (analysis/flow/callers.py reads the file's own calls). This module reads the others, with
``ast`` through the project index, and answers only when they show every way the function is reached:

- the function is a top-level, undecorated ``def`` of a project module that does not rebind the parameter, and its
  own file names it nowhere but in its ``def`` (else the file's own calls answer);
- every mention of it in another module (a name or an attribute the module's imports resolve to it) is the callee
  of a call that writes the parameter's argument (positionally, by keyword; no ``*args``/``**kwargs``), and no
  notebook mentions its name (a notebook's calls are not read);
- at least one module calls it.

Each argument comes with the module that writes it and the function (if any) around the call, so the caller
reads it where it is written (analysis/values/ranks.py, analysis/project/module_outputs.py).
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.model.bindings import bound_names
from torchlint.analysis.model.project_index import ModuleFacts
from torchlint.analysis.model.saved_values import single_assignments

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext


@dataclass(frozen=True)
class ForeignArgument:
    """What one call in another module passes: ``value``, written in module ``facts`` inside ``function`` (None:
    the module's top level), at ``call``."""

    value: ast.expr
    facts: ModuleFacts
    function: Optional[ast.FunctionDef]
    call: ast.Call


def arguments_from_other_modules(context: "FileContext", function: cst.FunctionDef, parameter: str) -> Optional[List[ForeignArgument]]:
    """What every call of ``function`` in the project's other modules passes for ``parameter``, or None (see the
    module docs)."""
    project = context.project
    if project is None or function.decorators or not any(statement is function for statement in context.module.body):
        return None
    name = function.name.value
    if len(re.findall(r"(?<![\w.])%s(?!\w)" % re.escape(name), context.source)) != 1:
        return None  # the file itself names it (a call, a reference): its own calls answer
    positional = [param.name.value for param in list(function.params.posonly_params) + list(function.params.params)]
    keyword_only = [param.name.value for param in function.params.kwonly_params]
    if (parameter not in positional and parameter not in keyword_only) or parameter in bound_names(function.body):
        return None  # no such parameter, or the body rebinds it
    calls = project.fact(f"project-calls:{os.path.abspath(context.path)}:{name}", lambda: _foreign_calls(project, context.path, name))
    if not calls:
        return None
    found: List[ForeignArgument] = []
    for call, caller, facts in calls:
        value = _argument(call, parameter, positional)
        if value is None:
            return None
        found.append(ForeignArgument(value, facts, caller, call))
    return found


def _foreign_calls(project, path: str, name: str) -> Optional[List[Tuple[ast.Call, Optional[ast.FunctionDef], ModuleFacts]]]:
    """Every call of function ``name`` of the file at ``path`` in the project's other modules, with the function
    around it and the module's facts; None when a module refers to it other than as a callee, or a notebook names it."""
    found = []
    word = re.compile(rb"(?<![\w])%s(?!\w)" % re.escape(name.encode("utf-8")))
    for module, text in project.every_file_text():
        if not word.search(text):
            continue
        if module is None:
            return None  # a notebook names it: its calls are not read
        facts = project.module_facts(module)
        if facts is None or _same_file(facts.path, path):
            continue
        calls = _calls_of(project, facts, path, name)
        if calls is None:
            return None
        found.extend((call, caller, facts) for call, caller in calls)
    return found


def _calls_of(project, facts: ModuleFacts, path: str, name: str) -> Optional[List[Tuple[ast.Call, Optional[ast.FunctionDef]]]]:
    """The calls in ``facts``' module of function ``name`` of the file at ``path``, each with the function around it;
    None when the module refers to it other than as a callee."""
    callees = set()
    calls: List[Tuple[ast.Call, Optional[ast.FunctionDef]]] = []
    for node, caller in _nodes_with_functions(facts.tree):
        if isinstance(node, ast.Call):
            callees.add(id(node.func))
            if _names(project, facts, node.func, path, name):
                calls.append((node, caller))
    for node, _ in _nodes_with_functions(facts.tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in callees and _names(project, facts, node, path, name):
            return None  # passed as a value, stored, wrapped
    return calls


def _names(project, facts: ModuleFacts, node: ast.expr, path: str, name: str) -> bool:
    """Whether ``node`` (``train``, ``utils.train``) is, through ``facts``' imports, function ``name`` of ``path``."""
    last = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if last is None or (last != name and facts.imports.get(last, "").rpartition(".")[2] != name):
        return False  # neither the name nor an alias of it (``from utils.train import train as run``)
    qualified = facts.imported(ast_dotted_name(node))
    if qualified is None:
        return False
    located = project.locate(qualified)
    return located is not None and _same_file(located[0].path, path) and located[1] == name


def _same_file(first: str, second: str) -> bool:
    return os.path.abspath(first) == os.path.abspath(second)


def _nodes_with_functions(tree: ast.Module):
    """Every node of the module with the innermost function around it (None at the top level)."""
    pending: List[Tuple[ast.AST, Optional[ast.FunctionDef]]] = [(tree, None)]
    while pending:
        node, caller = pending.pop()
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else caller
            yield child, caller
            pending.append((child, inner))


def _argument(call: ast.Call, parameter: str, positional: List[str]) -> Optional[ast.expr]:
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(keyword.arg is None for keyword in call.keywords):
        return None
    if parameter in positional and positional.index(parameter) < len(call.args):
        return call.args[positional.index(parameter)]
    return next((keyword.value for keyword in call.keywords if keyword.arg == parameter), None)


def single_binding(argument: ForeignArgument, name: str) -> Optional[ast.expr]:
    """The value of the one assignment of ``name`` in the function around the call (or, when the function binds no
    ``name``, at the module's top level): what a plain name passed there holds; None when it is a parameter or bound
    otherwise too."""
    scope = argument.function
    if scope is None:
        return argument.facts.values.get(name)
    assigned = single_assignments(scope)
    if name in assigned:
        return assigned[name]
    binds = any(
        (isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load))
        or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name)
        or (isinstance(node, ast.arg) and node.arg == name)
        for node in ast.walk(scope)
        if node is not scope
    )
    return None if binds else argument.facts.values.get(name)  # a name of the module, read inside the function
