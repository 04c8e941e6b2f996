"""Import-alias resolution: which qualified name does an expression refer to?

A module-level import table, not LibCST's QualifiedNameProvider: scope
metadata costs several times the parse itself (see bench/ and PERF-NOTES),
and an import table answers the question rules ask ("is this ``torch.log``?")
for the way PyTorch code is written.

Resolved:
    import torch / import torch as T / import torch.nn.functional (binds ``torch``)
    import torch.nn.functional as F / from torch.nn import functional as F
    from torch import log as L / from torch.nn.functional import softmax
    attribute chains on any of these (``T.nn.functional.softmax``)
    imports inside functions (recorded when the traversal reaches them and
    forgotten when it leaves the function)

    star imports (``from torch import *``, ``from utils import *`` of a
    project module that imports torch), through :meth:`ImportTable.use_star_imports`:
    a name the file binds nowhere resolves through them (analysis/ast_names.StarImports)

Not resolved (documented in the README):
    relative imports, names rebound by assignment (``F = torch.nn.functional``),
    ``getattr`` and ``importlib``; a top-level ``def``/``class``/assignment of
    a name shadows an import of the same name for the whole file.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.ast_names import StarImports

# A name bound by something other than an import: it resolves to nothing.
_SHADOWED = ""


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _module_path(node: cst.BaseExpression) -> Optional[str]:
    return dotted_name(node)


class ImportTable:
    """Local name -> qualified name, built from the file's import statements."""

    def __init__(self) -> None:
        self.bindings: Dict[str, str] = {}
        # The modules of the file's top-level ``from m import *`` (relative ones as written, ``.utils``).
        self.star_modules: List[str] = []
        self._stars: Optional[Callable[[], Optional[StarImports]]] = None
        self._star_table: Optional[StarImports] = None

    # -- building -------------------------------------------------------------

    @classmethod
    def from_module(cls, module: cst.Module) -> "ImportTable":
        table = cls()
        shadowed = []
        for stmt, nested in _top_level_statements(module.body):
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                        written = "." * len(small.relative) + ((dotted_name(small.module) or "") if small.module else "")
                        table.star_modules.append(written)
                    elif isinstance(small, (cst.Import, cst.ImportFrom)):
                        table.add(small)
                    elif not nested and isinstance(small, (cst.Assign, cst.AnnAssign)):
                        shadowed.extend(_assigned_names(small))
            elif not nested and isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                # Only unconditional definitions shadow: ``except ImportError: torch = None``
                # and ``if not HAS_TORCH: def log(...)`` are fallbacks, not replacements.
                shadowed.append(stmt.name.value)
        for name in shadowed:
            table.bindings[name] = _SHADOWED
        return table

    def add(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _module_path(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.bindings[alias.asname.name.value] = full
                else:
                    top = full.split(".", 1)[0]
                    self.bindings[top] = top
        elif isinstance(node, cst.ImportFrom):
            if node.relative or node.module is None:
                names = node.names
                if not isinstance(names, cst.ImportStar):
                    for alias in names:
                        local = alias.evaluated_alias or alias.evaluated_name
                        self.bindings[local.split(".", 1)[0]] = _SHADOWED
                return
            base = _module_path(node.module)
            if base is None or isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                imported = alias.evaluated_name
                local = alias.evaluated_alias or imported
                self.bindings[local] = f"{base}.{imported}"

    def use_star_imports(self, build: Callable[[], Optional[StarImports]]) -> None:
        """Resolve names the file binds nowhere through its star imports, with the resolver ``build`` makes
        (called on the first such name: most files never need it)."""
        if self.star_modules:
            self._stars = build

    # -- querying -------------------------------------------------------------

    def qualified_name(self, node: cst.BaseExpression) -> Optional[str]:
        """``torch.nn.functional.softmax`` for ``F.softmax`` under ``import torch.nn.functional as F``."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        bound = self.bindings.get(head)
        if bound is None and self._stars is not None:
            bound = self._star(head)
        if not bound:
            return None
        return f"{bound}.{rest}" if rest else bound

    def _star(self, name: str) -> Optional[str]:
        if self._star_table is None:
            self._star_table = self._stars()
            if self._star_table is None:
                self._stars = None
                return None
        return self._star_table.resolve(name)

    def is_bound(self, local_name: str) -> bool:
        return local_name in self.bindings

    def reference_to(self, qualified: str) -> Optional[str]:
        """Source text that names ``qualified`` with the imports already present, or None.

        Prefers a direct alias (``F`` for torch.nn.functional) over a longer
        attribute chain through a parent package (``torch.nn.functional``).
        """
        best: Optional[str] = None
        for local, bound in self.bindings.items():
            if not bound:
                continue
            if bound == qualified:
                return local
            if qualified.startswith(bound + "."):
                candidate = local + qualified[len(bound):]
                if best is None or len(candidate) < len(best):
                    best = candidate
        return best


def _assigned_names(node: cst.CSTNode) -> Iterable[str]:
    targets = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AnnAssign):
        targets = [node.target]
    for target in targets:
        if isinstance(target, cst.Name):
            yield target.value


def _top_level_statements(
    body: Iterable[cst.CSTNode], nested: bool = False
) -> Iterable[Tuple[cst.CSTNode, bool]]:
    """(statement, inside an if/try block) for the module, looking into guarded imports."""
    for stmt in body:
        if isinstance(stmt, cst.If):
            yield from _top_level_statements(stmt.body.body, True)
            orelse = stmt.orelse
            while orelse is not None:
                yield from _top_level_statements(orelse.body.body, True)
                orelse = getattr(orelse, "orelse", None)
        elif isinstance(stmt, cst.Try):
            yield from _top_level_statements(stmt.body.body, True)
            for handler in stmt.handlers:
                yield from _top_level_statements(handler.body.body, True)
            if stmt.orelse is not None:
                yield from _top_level_statements(stmt.orelse.body.body, True)
        else:
            yield stmt, nested
