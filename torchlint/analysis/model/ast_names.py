"""Names in ``ast`` trees, for the code that reads files without LibCST (the pre-pass, the project index),
what star imports bind (:class:`StarImports`, which the LibCST import table uses too), and a fast walk
over a tree's nodes (:func:`every_node`)."""
from __future__ import annotations

import ast
import builtins
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple


def every_node(root: ast.AST) -> List[ast.AST]:
    """Every node under ``root`` (itself included) but the operator and context markers, in no particular
    order: ``ast.walk``'s nodes without its per-node generators (a third of the pre-pass's time)."""
    found = []
    pending = [root]
    pop, push, extend, node_type, add = pending.pop, pending.append, pending.extend, ast.AST, found.append
    while pending:
        node = pop()
        add(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend(item for item in value if isinstance(item, node_type))
            elif isinstance(value, node_type) and type(value) not in _MARKERS:
                push(value)
    return found


# Field-less nodes that only mark their parent (``Load``, ``Add``, ``Eq``): a quarter of all nodes, none noted.
_MARKERS = frozenset(
    kind
    for base in (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
    for kind in base.__subclasses__()
)


def own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not descending into the functions, lambdas and classes defined in it
    (those nodes themselves are yielded: they bind their names here)."""
    pending: List[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        pending.extend(ast.iter_child_nodes(node))


def ast_dotted_name(node: ast.expr) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def import_bindings(
    node: ast.stmt, relative_base: Optional[Callable[[ast.ImportFrom], Optional[str]]] = None
) -> Iterator[Tuple[str, str]]:
    """(local name, what it names) for every name an import binds: ``import a.b`` binds ``a`` to
    ``a``, ``import a.b as c`` binds ``c`` to ``a.b``, ``from a import b as c`` binds ``c`` to ``a.b``.
    A relative import binds only what ``relative_base`` resolves its module to; star imports nothing."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                head = alias.name.split(".", 1)[0]
                yield head, head
    elif isinstance(node, ast.ImportFrom):
        base = node.module if not node.level else (relative_base(node) if relative_base is not None else None)
        if base is None:
            return
        for alias in node.names:
            if alias.name != "*":
                yield alias.asname or alias.name, f"{base}.{alias.name}"


# Names Python binds before any import: a star import of a library is never taken to shadow them.
BUILTIN_NAMES = frozenset(dir(builtins))


# What a star-imported module binds to a name: (the module is one whose text was read, what the name is there
# or None).  For a module that was not read (a library), every public name is taken as its own.
StarLookup = Callable[[str, str], Tuple[bool, Optional[str]]]


def library_lookup(module: str, name: str) -> Tuple[bool, Optional[str]]:
    """The lookup when no module's text is known: every star-imported module is a library."""
    return False, None


class StarImports:
    """The names a module's ``from m import *`` statements may bind, resolved name by name on demand.

    ``modules``: the star-imported modules, in the order of the statements (a later one shadows an earlier
    one, as in Python); ``bound``: the names the module binds itself anywhere (assignments, parameters,
    definitions, other imports), which no star import reaches; ``lookup(module, name)``: what a module of the
    project binds ``name`` to (ProjectIndex.star_lookup: its definitions, imports and own star imports, or
    ``__all__``); for a library, whose public names are not known, every name that is not a builtin is
    taken as the library's (``load`` under ``from torch import *`` is ``torch.load``).
    """

    def __init__(self, modules: Sequence[str], bound: Iterable[str], lookup: StarLookup = library_lookup) -> None:
        self.modules = tuple(modules)
        self.bound = frozenset(bound)
        self.lookup = lookup
        self._resolved: Dict[str, Optional[str]] = {}

    def resolve(self, name: str) -> Optional[str]:
        """What ``name`` stands for through the star imports, or None."""
        if name not in self._resolved:
            self._resolved[name] = self._resolve(name)
        return self._resolved[name]

    def _resolve(self, name: str) -> Optional[str]:
        if not self.modules or name in self.bound or name.startswith("_") or name in BUILTIN_NAMES:
            return None
        for module in reversed(self.modules):
            known, qualified = self.lookup(module, name)
            if qualified is not None:
                return qualified
            if not known:
                return f"{module}.{name}"
        return None


def ast_bound_names(tree: ast.AST) -> Set[str]:
    """Every name a module binds anywhere (assignment and loop targets, parameters, definitions, imports)."""
    bound: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias) and node.name != "*":
            bound.add(node.asname or node.name.split(".", 1)[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def star_modules(tree: ast.Module, relative_base: Optional[Callable[[ast.ImportFrom], Optional[str]]] = None) -> List[str]:
    """The modules a module star-imports at its top level (``from m import *``), in order."""
    found = []
    pending = list(tree.body)
    while pending:  # Python allows them only at the top level, maybe under ``if`` / ``try``
        node = pending.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            pending[:0] = node.body + node.orelse + [s for h in getattr(node, "handlers", ()) for s in h.body] + getattr(node, "finalbody", [])
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            module = node.module if not node.level else (relative_base(node) if relative_base is not None else None)
            if module:
                found.append(module)
    return found
