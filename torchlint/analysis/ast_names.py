"""Names in ``ast`` trees, for the code that reads files without LibCST (the pre-pass, the project index)."""
from __future__ import annotations

import ast
from typing import Optional


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
