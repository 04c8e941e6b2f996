"""Names in ``ast`` trees, for the code that reads files without LibCST (the pre-pass, the project index)."""
from __future__ import annotations

import ast
from typing import Callable, Iterator, Optional, Tuple


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
