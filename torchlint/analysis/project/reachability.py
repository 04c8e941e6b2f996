"""Code nothing in the project calls: a function, a method or a class its code never names.

A finding in such code is one level less sure (``torchlint/engine.py`` asks :func:`unreferenced`): the
hazard is real only if someone calls it later. The question is answered from code, never from names or
comments: a definition is referenced when its name appears, outside its own body, as a name, an
attribute, an imported name or a string constant (``getattr(self, "load_model")``, a registry of
``"resnet"``), in any module of the run's project or in the file itself. Left as referenced: framework
hooks (dunders, ``forward``, Lightning's steps), methods of classes that derive from something outside
the project (the base class may call them), decorated definitions (a decorator may register them), and
anything in a file the project index does not cover when the project holds notebooks (a cell may call it).
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Optional, Sequence, Set, Tuple

import libcst as cst

from torchlint.analysis.flow.callers import framework_called

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# Methods a framework calls by name on a user's subclass (besides dunders and ``forward``).
_HOOKS = frozenset({
    "backward", "setup_context", "jvp", "vmap", "extra_repr", "reset_parameters", "configure_optimizers",
    "setup", "teardown", "step", "zero_grad", "state_dict", "load_state_dict", "collate_fn", "compute_loss",
})


def unreferenced(context: "FileContext", enclosing: Sequence[cst.CSTNode]) -> Optional[str]:
    """The name of the definition holding a report that nothing in the project names, or None.
    ``enclosing``: the report's outermost enclosing nodes (a top-level statement; for a member of a
    top-level class, the class, its body and the member)."""
    if not enclosing:
        return None
    top = enclosing[0]
    if isinstance(top, cst.FunctionDef):
        return _unreferenced_function(context, top, None)
    if isinstance(top, cst.ClassDef):
        if top.decorators:
            return None
        if not _named_elsewhere(context, top.name.value, top):
            return top.name.value
        member = enclosing[2] if len(enclosing) == 3 else None
        if isinstance(member, cst.FunctionDef) and _only_project_bases(context, top):
            return _unreferenced_function(context, member, top)
    return None


def _unreferenced_function(context: "FileContext", function: cst.FunctionDef, owner: Optional[cst.ClassDef]) -> Optional[str]:
    name = function.name.value
    if function.decorators or framework_called(name) or name in _HOOKS or name.startswith("on_") or name.startswith("test"):
        return None
    return None if _named_elsewhere(context, name, owner or function) else name


def _only_project_bases(context: "FileContext", class_def: cst.ClassDef) -> bool:
    """The class derives from nothing (``object``) or only from classes of its own file: no outside base class
    can call its methods by name."""
    local = {stmt.name.value for stmt in context.module.body if isinstance(stmt, cst.ClassDef)}
    for base in class_def.bases:
        value = base.value
        if isinstance(value, cst.Name) and (value.value == "object" or value.value in local):
            continue
        return False
    return True


def _named_elsewhere(context: "FileContext", name: str, definition: cst.CSTNode) -> bool:
    """Whether ``name`` appears in code outside ``definition``: in this file (read with ``ast``) or in another
    module of the project."""
    project = context.project
    if project is None:
        return True  # a text on its own: other modules may import it
    own = _file_references(context, name)
    span = _span(context, definition)
    if any(not (span[0] <= line <= span[1]) for line in own):
        return True
    module = project.module_of(context.path)
    if module is None or project.holds_notebooks():
        return True  # a notebook, or a project with notebooks: cells the index does not read may call it
    return bool(project.fact(f"references:{name}", lambda: _project_references(project, name) - {module}))


def _span(context: "FileContext", definition: cst.CSTNode) -> Tuple[int, int]:
    """The first and last line of ``definition`` in the file, read with ``ast`` (decorators included)."""
    for node in ast.walk(_tree(context)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == definition.name.value:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if _same_definition(context, node, definition):
                return first, node.end_lineno or node.lineno
    return (0, -1)


def _same_definition(context: "FileContext", node: ast.AST, definition: cst.CSTNode) -> bool:
    # Several definitions may share a name (a method in two classes): the one whose body matches in length.
    return len(getattr(node, "body", ())) == len(definition.body.body) if isinstance(definition.body, cst.IndentedBlock) else True


def _tree(context: "FileContext") -> ast.Module:
    def compute(_) -> ast.Module:
        try:
            return context.ast_tree if context.ast_tree is not None else ast.parse(context.source)
        except (SyntaxError, ValueError, RecursionError):
            return ast.Module(body=[], type_ignores=[])

    return context.memoized("reachability.tree", context.module, compute)


def _file_references(context: "FileContext", name: str) -> Tuple[int, ...]:
    return tuple(line for line, found in _references_in(_tree(context)) if found == name)


def _references_in(tree: ast.AST):
    """(line, identifier) of every name, attribute, imported name and string constant of ``tree``'s code."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.alias):
            yield getattr(node, "lineno", 0), node.name.rsplit(".", 1)[-1]
            if node.asname:
                yield getattr(node, "lineno", 0), node.asname
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            for word in re.findall(r"[A-Za-z_]\w*", node.value):
                yield node.lineno, word


def _project_references(project, name: str) -> Set[str]:
    """The project modules whose code names ``name``."""
    needle = name.encode("utf-8")
    found: Set[str] = set()
    for module in project.module_names():
        if needle not in project.module_bytes(module):
            continue
        facts = project.module_facts(module)
        if facts is None or any(found_name == name for _, found_name in _references_in(facts.tree)):
            found.add(module)
    return found

