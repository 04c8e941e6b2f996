"""What a rule can ask about the file it is visiting."""
from __future__ import annotations

import ast
import re
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple, TypeVar

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.model.codegen import render
from torchlint.analysis.model.names import ImportTable
from torchlint.analysis.model.ast_names import StarImports
from torchlint.analysis.model.scope import binds_name, self_attributes
from torchlint.findings import ImportRequirement

T = TypeVar("T")


# (the file's tree, its path, the star-imported modules as written) -> what they bind
StarImportResolver = Callable[[ast.Module, str, Sequence[str]], Optional[StarImports]]


class AnalysisSettings(Protocol):
    """What the analysis and the rules read of the run's settings (``torchlint.config.Settings``)."""

    eps: float
    target_torch_version: Optional[Tuple[int, int]]


class FileContext:
    def __init__(
        self,
        path: str,
        source: str,
        module: cst.Module,
        settings: AnalysisSettings,
        project: Optional[object] = None,
        star_imports: Optional[StarImportResolver] = None,
    ) -> None:
        """``project``: the run's project index (``project_index.ProjectIndex``), None for a text on its own;
        ``star_imports``: what resolves the file's star imports through it (see
        ``project_index.file_context``, which builds a context for the active run)."""
        self.path = path
        self.source = source
        # ``module`` may be parsed from the pre-pass's reduced text: line n of it is line
        # ``line_map[n - 1]`` of ``source`` (empty: the same lines).  Set by the engine.
        self.module = module
        self.line_map: List[int] = []
        # The whole file read by ``ast`` when the pre-pass parsed it (set by the engine), else None.
        self.ast_tree: Optional[ast.Module] = None
        # False when Python does not compile the text as written (``x.cuda(async=True)``, read with a stand-in).
        self.compiles = True
        self.settings = settings
        self.imports = ImportTable.from_module(module)
        # The nodes enclosing the one being visited, outermost first (maintained by the engine).
        self.ancestors: List[cst.CSTNode] = []
        self._class_attributes: Dict[int, Dict[str, cst.BaseExpression]] = {}
        self._memo: Dict[Tuple[str, int, bool], Tuple[object, bool]] = {}
        # True while the guard analysis judges what a same-file call passes (analysis/flow/callers.py):
        # the callers' own callers are not read (the pre-pass keeps one level of them).
        self.reading_callers = False
        # The run's project index (classes across files), when the CLI or flake8 built one; else None.
        self.project = project
        self._resolve_star_imports = star_imports
        self.imports.use_star_imports(self._star_imports)

    # -- names -----------------------------------------------------------------

    def _star_imports(self) -> Optional[StarImports]:
        if self._resolve_star_imports is None:
            return None
        try:
            tree = self.ast_tree if self.ast_tree is not None else ast.parse(self.source)
        except (SyntaxError, ValueError, RecursionError):
            return None
        return self._resolve_star_imports(tree, self.path, self.imports.star_modules)

    def qualified_name(self, node: cst.BaseExpression) -> Optional[str]:
        return self.imports.qualified_name(node)

    def reference(self, qualified: str, preferred_alias: str) -> Tuple[str, Optional[ImportRequirement]]:
        """Text naming module ``qualified`` (e.g. ``torch.nn.functional``) and the import it needs, if any.

        In order: an alias the file already has for exactly that module (``F``);
        a new ``import <qualified> as <preferred_alias>`` when that alias is
        not a word anywhere in the file; a chain through an imported parent
        package (``torch.nn.functional``); else a plain ``import <qualified>``.
        """
        existing = self.imports.reference_to(qualified)
        if existing is not None and "." not in existing:
            return existing, None
        alias_in_use = self.imports.is_bound(preferred_alias) or re.search(
            rf"(?<![\w.]){re.escape(preferred_alias)}\b", self.source
        )
        if not alias_in_use:
            return preferred_alias, ImportRequirement(qualified, preferred_alias)
        if existing is not None:
            return existing, None
        return qualified, ImportRequirement(qualified)

    # -- tree ------------------------------------------------------------------

    def code(self, node: cst.CSTNode, indents: Sequence[str] = ()) -> str:
        """Source text of ``node`` as it stands inside blocks indented by ``indents``.

        ``Module.code_for_node`` renders a multi-line node as if it stood at
        the top level; continuation lines inside an indented block need the
        block indentation to match the file.
        """
        return render(node, self.module, indents)

    def current_indents(self) -> Tuple[str, ...]:
        """The indentation of the blocks enclosing the node being visited."""
        default = self.module.default_indent
        return tuple(
            (node.indent if node.indent is not None else default)
            for node in self.ancestors
            if isinstance(node, cst.IndentedBlock)
        )

    @property
    def parent(self) -> Optional[cst.CSTNode]:
        return self.ancestors[-1] if self.ancestors else None

    def self_attribute_value(self, attr: str) -> Optional[cst.BaseExpression]:
        """The value assigned to ``self.<attr>`` in the enclosing class's methods, if any."""
        class_def = self.enclosing(cst.ClassDef)
        if class_def is None:
            return None
        table = self._class_attributes.get(id(class_def))
        if table is None:
            table = self._class_attributes[id(class_def)] = self_attributes(class_def)
        return table.get(attr)

    def memoized(self, kind: str, node: cst.CSTNode, compute: Callable[[cst.CSTNode], T]) -> T:
        """``compute(node)``, computed once per file: for facts about a whole function or the module
        that analyses would otherwise recompute at every call site. Kept apart for the answers with and
        without naming conventions (analysis/model/conventions.py), and a reused answer that a convention
        decided says so again."""
        # nodes live as long as the module this context holds
        key = (kind, id(node), conventions.active())
        if key not in self._memo:
            with conventions.recording() as record:
                value = compute(node)
            self._memo[key] = (value, bool(record))
        value, decided_by_names = self._memo[key]
        if decided_by_names:
            conventions.noted()
        return value  # type: ignore[return-value]

    def binds_name(self, name: str) -> bool:
        """Whether ``name`` is bound in the enclosing function (parameter or assignment) or the module."""
        return binds_name(self.enclosing(cst.FunctionDef), self.module, name)

    def enclosing(self, *types: type) -> Optional[cst.CSTNode]:
        for node in reversed(self.ancestors):
            if isinstance(node, types):
                return node
        return None
