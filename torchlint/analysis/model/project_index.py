"""The project index: dataset classes across the files of one run, and how they are imported.

A ``DataLoader(ds, batch_size=32)`` usually sits in a training script while
``ds``'s class lives in another module of the same project.  The index answers
"which class is ``pkg.data.TextDataset`` and what does its ``__getitem__``
return?" for every file of the run, and is built once per run (the CLI) or
once per project root (the flake8 plugin), lazily, on the first question.

Cost: building it costs nothing until a rule asks; each file's module name
comes from its path (climbing through ``__init__.py`` packages), and a module
is read and parsed with ``ast`` (about a twelfth of LibCST's cost) only when
a lookup reaches it: the module a ``DataLoader``'s dataset class is imported
from, a package ``__init__.py`` that re-exports it, the module of a base
class.  A run over a large tree therefore parses only the few modules that
its DataLoaders' datasets come from, once each.

Star imports (``from utils import *``) bind what the module exports
(:meth:`ProjectIndex.star_lookup`, name by name: its public names or
``__all__``, following its own star imports); a star import of a library
binds every name the file binds nowhere else (analysis/ast_names.StarImports).  The same resolver
serves the LibCST import table, the pre-pass and this index.

What the index cannot see: classes created at run time (``type(...)``,
factories returning a class or a dataset), datasets of other libraries
beyond those analysis/model/dataset_items.py knows, modules outside the run's
files, and ``__getitem__`` inherited from a class outside the project.
"""
from __future__ import annotations

import ast
import collections
import contextlib
import contextvars
import functools
import json
import os
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from torchlint.analysis.model.ast_names import (
    StarImports,
    ast_bound_names,
    ast_dotted_name,
    every_node,
    import_bindings,
    library_lookup,
    star_modules,
)
from torchlint.analysis.model.dataset_items import ItemShape, item_shape
from torchlint.source import readable_legacy_text

if TYPE_CHECKING:  # pragma: no cover
    import libcst as cst

    from torchlint.analysis.model.file_context import AnalysisSettings, FileContext
    from torchlint.analysis.model.saved_values import NamedSave, RefusedSave, SavedLayout

# How many import / inheritance hops a lookup follows.
MAX_HOPS = 8


@dataclass(frozen=True)
class DatasetClass:
    module: str
    name: str
    path: str
    # Base classes as qualified names (resolved through the defining module's imports).
    bases: Tuple[str, ...]
    defines_getitem: bool
    # The parameters of its own ``__init__`` after ``self``, in order (empty without one).
    init_parameters: Tuple[str, ...] = ()
    node: Optional[ast.ClassDef] = field(default=None, repr=False, compare=False)
    facts: Optional["ModuleFacts"] = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def item(self) -> Optional[ItemShape]:
        """What ``__getitem__`` returns when its items vary in length; None when it is absent or they do not
        (read on the first question: most classes of a module are never asked about)."""
        if self.node is None:
            return None
        getitem = _method(self.node, "__getitem__")
        return item_shape(getitem, self.facts, self.node) if getitem is not None else None


# -- module names ------------------------------------------------------------------


def _has_init(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py"))


def module_name(path: str, is_package_dir: Callable[[str], bool] = _has_init) -> str:
    """``pkg.data.text`` for ``.../pkg/data/text.py`` (climbing while ``__init__.py`` says it is a package, and
    through a namespace folder inside one: ``pkg.nopkg.c`` for ``pkg/nopkg/c.py``)."""
    path = os.path.abspath(path)
    directory, filename = os.path.split(path)
    stem = filename.rsplit(".", 1)[0]
    packages_of = lambda folder: _packages_of(folder, is_package_dir)  # noqa: E731
    parts = _packages_through_namespaces(directory, is_package_dir, packages_of) + (() if stem == "__init__" else (stem,))
    return ".".join(p for p in parts if p) or stem


def _packages_of(directory: str, is_package_dir: Callable[[str], bool]) -> Tuple[str, ...]:
    """The package names ``module_name`` climbs through from ``directory``, outermost first."""
    names = []
    while is_package_dir(directory):
        directory, package = os.path.split(directory)
        names.append(package)
        if not package:
            break
    return tuple(reversed(names))


def _packages_through_namespaces(
    directory: str, is_package_dir: Callable[[str], bool], packages_of: Callable[[str], Tuple[str, ...]]
) -> Tuple[str, ...]:
    """``("model", "networks")`` for ``model/networks/`` when ``networks/`` has no ``__init__.py`` but ``model/``
    is a package (a namespace folder inside a regular package), climbing at most ``_NAMESPACE_LEVELS`` such
    folders; otherwise what :func:`_packages_of` says."""
    own = packages_of(directory)
    if own:
        return own
    folders: List[str] = []
    current = directory
    for _ in range(_NAMESPACE_LEVELS):
        parent, folder = os.path.split(current)
        if not folder or not folder.isidentifier():
            return ()
        folders.append(folder)
        if is_package_dir(parent):
            return packages_of(parent) + tuple(reversed(folders))
        current = parent
    return ()


def resolve_relative(current_module: str, is_package: bool, level: int, target: Optional[str]) -> Optional[str]:
    """The absolute module of ``from <level dots><target> import ...`` written in ``current_module``."""
    parts = current_module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        if level - 1 > len(parts):
            return None
        parts = parts[: len(parts) - (level - 1)]
    if target:
        parts = parts + target.split(".")
    return ".".join(parts) or None


# -- the per-file analysis (ast) -----------------------------------------------------


# How many folders without __init__.py a module's name may climb (``utils.optim`` for ``utils/optim.py``).
_NAMESPACE_LEVELS = 2


class ModuleFacts:
    """Imports and top-level classes of one parsed module."""

    def __init__(self, tree: ast.Module, module: str, path: str, project: Optional["ProjectIndex"] = None) -> None:
        self.module = module
        self.path = path
        # The index whose modules this one's star imports may name (None: only its own names are known).
        self.project = project
        self._stars: Optional[StarImports] = None
        is_package = os.path.basename(path) == "__init__.py"
        # local name -> qualified name
        self.imports: Dict[str, str] = {}
        self.classes: Dict[str, DatasetClass] = {}
        # The top-level definitions themselves, for analyses that read bodies (analysis/project/module_outputs.py).
        self.class_nodes: Dict[str, ast.ClassDef] = {}
        self.functions: Dict[str, ast.FunctionDef] = {}
        # Names assigned exactly once at the top level (``model = Net()``), and their values.
        self.values: Dict[str, ast.expr] = {}
        # Facts other analyses computed about this module's definitions, kept as long as the module is.
        self.memo: Dict[object, object] = {}
        self.tree = tree
        self._calls: Optional[Dict[str, List[ast.Call]]] = None

        def relative_base(stmt: ast.ImportFrom) -> Optional[str]:
            return resolve_relative(module, is_package, stmt.level, stmt.module)

        for node in tree.body:
            for stmt in _guarded(node):
                self.imports.update(import_bindings(stmt, relative_base))
        self.star_modules = star_modules(tree, relative_base)
        if project is not None and path not in ("-", ""):
            # An absolute import finds a module beside the file first when its folder is sys.path[0].
            self.imports = {local: project.resolve_from(path, name) for local, name in self.imports.items()}
            self.star_modules = [project.resolve_from(path, name) for name in self.star_modules]
        assigned: Dict[str, List[ast.expr]] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = self._class(node)
                self.class_nodes[node.name] = node
            elif isinstance(node, (ast.If, ast.Try)):
                # a class a script defines in its ``if __name__ == "__main__":`` block (or another top-level block)
                # is a module-level name where it runs, when no other statement binds that name
                for inner in _guarded(node):
                    if isinstance(inner, ast.ClassDef) and bound_once(tree, inner.name):
                        self.classes[inner.name] = self._class(inner)
                        self.class_nodes[inner.name] = inner
            elif isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in _target_names(target):
                        assigned.setdefault(name, []).append(node.value if isinstance(target, ast.Name) else None)
        self.values = {name: values[0] for name, values in assigned.items() if len(values) == 1 and values[0] is not None}

    def calls_of(self, name: str) -> List[ast.Call]:
        """The module's calls whose callee is written ``name`` or ``x.name``, or by a local name an import binds
        to something called ``name`` (``from m import f as g``: ``g(...)``); the tree is walked once per module."""
        if self._calls is None:
            calls: Dict[str, List[ast.Call]] = {}
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Call):
                    func = node.func
                    last = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                    if last is not None:
                        calls.setdefault(last, []).append(node)
            self._calls = calls
        found = list(self._calls.get(name, ()))
        for local, qualified in self.imports.items():
            if local != name and qualified.rpartition(".")[2] == name:
                found.extend(self._calls.get(local, ()))
        return found

    def stars(self) -> Optional[StarImports]:
        """What this module's ``from m import *`` statements bind, through the project's modules (None without any)."""
        if not self.star_modules:
            return None
        if self._stars is None:
            lookup = self.project.star_lookup if self.project is not None else library_lookup
            self._stars = StarImports(self.star_modules, ast_bound_names(self.tree), lookup)
        return self._stars

    def imported(self, dotted: Optional[str]) -> Optional[str]:
        """``torch.tensor`` for ``T.tensor`` (``import torch as T``) or ``tensor`` (``from torch import *``): a
        name this module imports, qualified; None for its own names and locals."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        qualified = self.imports.get(head)
        if qualified is None and head not in self.classes and head not in self.functions and head not in self.values:
            stars = self.stars()
            qualified = stars.resolve(head) if stars is not None else None
        if qualified is None:
            return None
        return f"{qualified}.{rest}" if rest else qualified

    def qualify(self, node: ast.expr) -> Optional[str]:
        return self.qualify_dotted(_dotted(node))

    def qualify_dotted(self, dotted: Optional[str]) -> Optional[str]:
        """``pkg.data.TextDataset`` for ``TextDataset`` as this module names it (imports, relative ones too)."""
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.classes:
            qualified = f"{self.module}.{head}"
        else:
            qualified = self.imports.get(head) or self.imported(head) or f"{self.module}.{head}"
        return f"{qualified}.{rest}" if rest else qualified

    def _class(self, node: ast.ClassDef) -> DatasetClass:
        bases = tuple(q for q in (self.qualify(base) for base in node.bases) if q)
        init = _method(node, "__init__")
        parameters = tuple(a.arg for a in init.args.posonlyargs + init.args.args + init.args.kwonlyargs)[1:] if init else ()
        return DatasetClass(self.module, node.name, self.path, bases, _method(node, "__getitem__") is not None, parameters, node, self)


def _method(node: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name), None)


def _guarded(node: ast.stmt) -> Iterable[ast.stmt]:
    """A top-level statement, looking into ``try:`` / ``if`` blocks (guarded imports)."""
    if isinstance(node, ast.Try):
        for block in [node.body, *[h.body for h in node.handlers], node.orelse, node.finalbody]:
            for stmt in block:
                yield from _guarded(stmt)
    elif isinstance(node, ast.If):
        for stmt in node.body + node.orelse:
            yield from _guarded(stmt)
    else:
        yield node


_dotted = ast_dotted_name


def bound_once(tree: ast.Module, name: str) -> bool:
    """Whether the module's top level (its ``if``/``try`` blocks included) binds ``name`` in one statement only."""
    count = 0
    for node in tree.body:
        for statement in _guarded(node):
            if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                count += statement.name == name
            elif isinstance(statement, (ast.Import, ast.ImportFrom)):
                count += any((alias.asname or alias.name.split(".", 1)[0]) == name for alias in statement.names)
            else:
                count += any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(statement))
    return count == 1


def _target_names(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def notebook_code(data: bytes) -> bytes:
    """The code cells' text of a notebook file (its outputs are no code: a traceback printing ``exec(`` calls
    nothing); the file's bytes as they are when it is no notebook JSON."""
    try:
        cells = json.loads(data).get("cells", [])
        return "\n".join(
            "".join(cell["source"]) if isinstance(cell.get("source"), list) else str(cell.get("source", ""))
            for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"
        ).encode("utf-8", "replace")
    except (ValueError, AttributeError, TypeError, KeyError):
        return data


# A word followed by ``(``, as a call writes it (``f(``, ``obj.f (``); not preceded by a word character.
_CALLED_WORD = re.compile(rb"(?<![\w])([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def facts_of_source(source: str, path: str) -> Optional[ModuleFacts]:
    """Classes and imports of the file being linted, from its current text (whatever the index holds)."""
    tree = _parsed(source)
    if tree is None:
        return None
    return ModuleFacts(tree, _module_of_path(path), path, active_project())


_NOT_ASKED = object()


def _encoded(text: str) -> Optional[bytes]:
    """``text`` as the UTF-8 bytes a file holding it has (None when no file can: a lone surrogate)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _parsed(source: "str | bytes") -> Optional[ast.Module]:
    """``ast``'s tree of a module's text; a text of torch 0.3 days (``x.cuda(async=True)``) read as the engine
    reads it (source.readable_legacy_text); None when it does not parse."""
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        pass
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    readable = readable_legacy_text(text)
    return ast.parse(readable) if readable is not None else None


def definition(
    qualified: str, local: Optional[ModuleFacts], project: Optional["ProjectIndex"]
) -> Optional[Tuple[ModuleFacts, str]]:
    """The module facts defining ``qualified`` and its name there: the linted file's own first, then the project's."""
    module, _, name = qualified.rpartition(".")
    if local is not None and module == local.module:
        if name in local.classes or name in local.functions or name in local.values:
            return local, name
        target = local.imports.get(name) or local.imported(name)
        if target is not None and target != qualified:
            qualified = target
        elif project is None:
            return None
    return project.locate(qualified) if project is not None else None


def file_facts(context) -> Optional[ModuleFacts]:
    """The linted file's imports and top-level definitions, read with ``ast`` from its whole text once per file
    (``context`` is a FileContext: rules share the answer; the pre-pass's tree is reused when there is one)."""

    def compute(_) -> Optional[ModuleFacts]:
        tree = getattr(context, "ast_tree", None)
        if tree is None:
            return facts_of_source(context.source, context.path)
        return facts_of_tree(tree, context.path)

    return context.memoized("project.file_facts", context.module, compute)


def star_imports_of(tree: ast.Module, path: str, written: Optional[Sequence[str]] = None) -> Optional[StarImports]:
    """What the file at ``path`` (read as ``tree``) binds through its star imports, resolved through the active
    project index; ``written``: the star-imported modules as the file writes them (``.utils``), when known."""
    module = _module_of_path(path)
    is_package = os.path.basename(path) == "__init__.py"
    if written is None:
        modules = star_modules(tree, lambda node: resolve_relative(module, is_package, node.level, node.module))
    else:
        modules = []
        for name in written:
            level = len(name) - len(name.lstrip("."))
            resolved = resolve_relative(module, is_package, level, name[level:] or None) if level else name
            if resolved:
                modules.append(resolved)
    if not modules:
        return None
    project = active_project()
    return StarImports(modules, ast_bound_names(tree), project.star_lookup if project is not None else library_lookup)


def facts_of_tree(tree: ast.Module, path: str) -> ModuleFacts:
    """Classes and imports of a file from its ``ast`` (a pre-pass's tree)."""
    return ModuleFacts(tree, _module_of_path(path), path, active_project())


def _module_of_path(path: str) -> str:
    return module_name(path) if path not in ("-", "") else "__main__"


_IMPORT_LINE = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+([^#\n]*)|import[ \t]+([^#\n]+))", re.MULTILINE)


def _imported_modules(module: str, data: bytes, path: str) -> Iterator[str]:
    """The modules (and candidate submodules) a module's import lines name, read from its text."""
    is_package = os.path.basename(path) == "__init__.py"
    for match in _IMPORT_LINE.finditer(data):
        dots, base, names, plain = match.groups()
        if plain is not None:
            for part in plain.decode("utf-8", "replace").split(","):
                name = part.strip().split(" ", 1)[0]
                if name:
                    yield name
            continue
        target = base.decode("utf-8", "replace") or None
        absolute = resolve_relative(module, is_package, len(dots), target) if dots else target
        if not absolute:
            continue
        yield absolute
        for part in names.decode("utf-8", "replace").strip("()\\ \t\r").split(","):
            name = part.strip().split(" ", 1)[0]
            if name.isidentifier():
                yield f"{absolute}.{name}"


def _package_root(directory: str) -> str:
    """The folder holding the outermost package ``directory`` is in (``directory`` itself when it is no package)."""
    while _has_init(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return directory


def declared_all(facts: ModuleFacts) -> Optional[List[str]]:
    """The names of a module's ``__all__`` when it is a literal list or tuple of strings."""
    declared = facts.values.get("__all__")
    if isinstance(declared, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in declared.elts
    ):
        return [e.value for e in declared.elts]
    return None


def refused_saves_in(facts: ModuleFacts, project: Optional["ProjectIndex"]) -> List["RefusedSave"]:
    """Each ``torch.save(obj, path)`` of a module whose ``obj`` holds a value that ``torch.load``'s weights-only
    unpickler refuses (analysis/model/saved_values.py: a module, NumPy arrays, an ``argparse.Namespace``, an
    object of a class of the project, ...), with the path's key (checkpoints.ast_path_key's: a literal's text,
    a dotted name such as ``args.model_path`` otherwise).  Classes are looked up in the file, then the project."""
    found = facts.memo.get("project.refused_saves")
    if found is None:
        # Imported here: the index serves warm runs that read the cache alone and never load LibCST.
        from torchlint.analysis.model.saved_values import refused_saves

        found = facts.memo["project.refused_saves"] = refused_saves(
            facts, lambda qualified, local: definition(qualified, local, project)
        )
    return found  # type: ignore[return-value]


def saved_paths_in(facts: ModuleFacts) -> FrozenSet[str]:
    """The path keys (checkpoints.ast_path_key's) of every ``torch.save(obj, path)`` of a module."""
    from torchlint.analysis.model.checkpoints import SAVE_FUNCTIONS, ast_path_key
    from torchlint.analysis.model.saved_values import single_assignments

    found = facts.memo.get("project.saved_paths")
    if found is None:
        module_single = single_assignments(facts.tree)
        keys = set()
        for node in every_node(facts.tree):
            if isinstance(node, ast.Call) and len(node.args) >= 2 and facts.qualify(node.func) in SAVE_FUNCTIONS:
                key = ast_path_key(node.args[1], module_single, facts.values)
                if key is not None:
                    keys.add(key)
        found = facts.memo["project.saved_paths"] = frozenset(keys)
    return found  # type: ignore[return-value]


def constructor_parameters(
    qualified: str, local: Optional[ModuleFacts], project: Optional["ProjectIndex"], depth: int = 0
) -> Tuple[str, ...]:
    """The parameters (after ``self``) of the ``__init__`` that building class ``qualified`` runs: its own, or
    the first of its bases' in the file or the project that has one; empty when none is seen."""
    found = definition(qualified, local, project) if depth <= MAX_HOPS else None
    if found is None or found[1] not in found[0].classes:
        return ()
    cls = found[0].classes[found[1]]
    if cls.node is not None and _method(cls.node, "__init__") is not None:
        return cls.init_parameters
    for base in cls.bases:
        parameters = constructor_parameters(base, found[0], project, depth + 1)
        if parameters:
            return parameters
    return ()


def dataset_item(
    qualified: str, local: Optional[ModuleFacts], project: Optional["ProjectIndex"], depth: int = 0
) -> Optional[Tuple[DatasetClass, ItemShape]]:
    """The class ``qualified`` and its variable item shape, looking in the linted file first, then the project.

    A class without ``__getitem__`` takes it from its first base (in order)
    that the file or the project defines.
    """
    if depth > MAX_HOPS:
        return None
    cls = None
    module, _, name = qualified.rpartition(".")
    if local is not None and module == local.module:
        cls = local.classes.get(name)
    if cls is None and project is not None:
        cls = project.find_class(qualified)
    if cls is None:
        return None
    if cls.defines_getitem:
        return (cls, cls.item) if cls.item is not None else None
    for base in cls.bases:
        found = dataset_item(base, local, project, depth + 1)
        if found is not None:
            return cls, found[1]
    return None


# -- the index ------------------------------------------------------------------------


class ProjectIndex:
    """Dataset classes of a set of files, found lazily on the first question.

    ``files`` is the run's file list, or a callable returning it (the flake8
    plugin walks the project root only when a rule first asks).
    """

    def __init__(self, files: "Sequence[str] | Callable[[], Sequence[str]]") -> None:
        self._files_source = files
        self._lock = threading.RLock()
        self._modules: Optional[Dict[str, str]] = None  # module name -> path
        self._aliases: Dict[str, str] = {}  # a name a script inside a package imports a module by -> its own
        self._names: Dict[str, str] = {}  # a file's absolute path -> its module name
        self._folders: FrozenSet[str] = frozenset()  # every folder above a file of the run, absolute
        self._file_list: Tuple[str, ...] = ()
        self._facts: Dict[str, Optional[ModuleFacts]] = {}
        self._refused_saves: Dict[Tuple[str, str], Optional["RefusedSave"]] = {}
        self._star_names: Dict[Tuple[str, str], Tuple[bool, Optional[str]]] = {}
        self._reaches: Dict[Tuple[str, Tuple[bytes, ...]], bool] = {}
        self._imports: Dict[str, FrozenSet[str]] = {}
        self._imported_files: Dict[str, FrozenSet[str]] = {}
        self._literal_savers: Dict[Tuple[str, str], Tuple[str, ...]] = {}
        self._bytes: Dict[str, bytes] = {}
        # key -> (value, the modules whose text or facts computing it read)
        self._facts_of_project: Dict[str, Tuple[object, frozenset]] = {}
        self._reading: Optional[set] = None
        self.parsed_files = 0
        # module -> (the text, its ``ast`` tree) of files the linter parsed lately, for a fact that parses them next
        self._adopted: "collections.OrderedDict[str, Tuple[str, ast.Module]]" = collections.OrderedDict()
        self._script_folders: Dict[str, Optional[str]] = {}  # resolve_from's, per path

    # -- building ---------------------------------------------------------------

    def _ensure(self) -> Dict[str, str]:
        if self._modules is None:
            with self._lock:
                if self._modules is None:
                    files = self._files_source() if callable(self._files_source) else self._files_source
                    self._file_list = tuple(files)
                    modules: Dict[str, str] = {}
                    # Two files of one name outside packages (``train.py`` and ``temp/attention/train.py``): an
                    # import from the top of the repository finds the shallower one, so it holds the bare name.
                    files = sorted(files, key=lambda path: os.path.abspath(path).count(os.sep))
                    # module_name's climb through __init__.py packages, done once per directory however many
                    # files it holds (a warm cached run over a large tree builds this map and little else).
                    is_package_dir = functools.lru_cache(maxsize=None)(_has_init)
                    packages_of = functools.lru_cache(maxsize=None)(lambda d: _packages_of(d, is_package_dir))
                    for path in files:
                        if path.endswith(".py"):
                            directory, filename = os.path.split(os.path.abspath(path))
                            stem = filename.rsplit(".", 1)[0]
                            own = (() if stem == "__init__" else (stem,))
                            # ``model/networks/wrn.py`` where ``model/`` is a package and ``networks/`` a namespace
                            # folder in it: Python imports it as ``model.networks.wrn``, its own name; the bare
                            # name (a script beside it) comes second.
                            for packages in dict.fromkeys((_packages_through_namespaces(directory, is_package_dir, packages_of), packages_of(directory))):
                                name = ".".join(p for p in packages + own if p) or stem
                                if stem == "__init__" or name not in modules:
                                    # ``pkg/loss/__init__.py`` beside ``pkg/loss.py``: an import finds the package.
                                    modules[name] = path
                    # Folders without __init__.py are namespace packages: a script beside ``utils/`` imports
                    # ``utils.optim``.  Their names come second: a regular package's name wins.
                    # So are the folders above a package: of two ``util/`` packages in sibling folders, the one
                    # that lost the bare name is still known as ``train.util`` (what a script in ``train/`` finds).
                    for path in files:
                        if path.endswith(".py"):
                            directory, filename = os.path.split(os.path.abspath(path))
                            stem = filename.rsplit(".", 1)[0]
                            packages = packages_of(directory)
                            name = ".".join(packages + (() if stem == "__init__" else (stem,)))
                            if not name:
                                continue
                            for _ in packages:
                                directory = os.path.dirname(directory)
                            named = modules.get(name) == path
                            for _ in range(_NAMESPACE_LEVELS):
                                directory, folder = os.path.split(directory)
                                if not folder or is_package_dir(os.path.join(directory, folder)):
                                    break
                                if not folder.isidentifier():
                                    if not named:
                                        # ``CIFAT-100KD/losses.py`` beside a ``losses.py`` of another experiment
                                        # folder that holds the bare name: no import spells this name, but the
                                        # file needs one of its own (its scripts find it beside them).
                                        modules.setdefault(f"{folder}.{name}", path)
                                    break
                                name = f"{folder}.{name}"
                                named = modules.setdefault(name, path) == path or named
                    # A script at the top of a package (a repository whose root holds an ``__init__.py``) has that
                    # folder as sys.path[0]: it imports the modules below it without the outer package's name
                    # (``processors.ner_seq`` for ``repo/processors/ner_seq.py``).  Those names are aliases of the
                    # module's own, so that each file is read and parsed once whatever it is imported as.
                    aliases: Dict[str, str] = {}
                    for name in modules:
                        inner = name.partition(".")[2]
                        if inner and inner not in modules:
                            aliases.setdefault(inner, name)
                    self._aliases = aliases
                    # Each file's own name: its first one (the other of two same-named files is known by its
                    # folder's name, ``attention.train``).
                    names: Dict[str, str] = {}
                    for name, path in modules.items():
                        names.setdefault(os.path.abspath(path), name)
                    self._names = names
                    # The folders holding files of the run, for imports resolved from a script's folder.
                    folders: Set[str] = set()
                    for path in names:
                        folder = os.path.dirname(path)
                        while folder not in folders and os.path.dirname(folder) != folder:
                            folders.add(folder)
                            folder = os.path.dirname(folder)
                    self._folders = frozenset(folders)
                    self._modules = modules
        return self._modules

    def resolve_from(self, path: str, dotted: str) -> str:
        """The name the project knows what an absolute import of ``dotted`` finds from file ``path`` by. A file
        outside packages runs as a script with its folder as sys.path[0] (so do the modules such a script
        imports from there): ``util.misc`` is the ``util/misc.py`` beside it, whatever other file the project
        knows as ``util.misc``."""
        self._ensure()
        folder = self._script_folders.get(path, _NOT_ASKED)
        if folder is _NOT_ASKED:
            # The folder Python puts first on the path when ``path`` runs; None inside a package.
            folder = os.path.dirname(os.path.abspath(path))
            folder = self._script_folders[path] = None if _has_init(folder) else folder
        if folder is None:
            return dotted
        parts = dotted.split(".")
        found: Optional[Tuple[int, str]] = None
        current = folder
        for index, part in enumerate(parts):
            current = os.path.join(current, part)
            package = self._names.get(os.path.join(current, "__init__.py"))
            module = self._names.get(current + ".py")
            if package is not None:
                found = (index, package)
            elif module is not None:
                found = (index, module)
                break
            elif current not in self._folders:
                break
        if found is None:
            return dotted
        index, name = found
        return ".".join([name] + parts[index + 1:])

    def canonical(self, module: str) -> str:
        """The name the project knows ``module`` by: itself, or the module an alias (:meth:`_ensure`) stands for."""
        if module in self._ensure():
            return module
        return self._aliases.get(module, module)

    def _module_facts(self, module: str) -> Optional[ModuleFacts]:
        """One module's classes and imports, parsed with ``ast`` the first time a lookup reaches it."""
        module = self.canonical(module)
        self._read(module)
        if module in self._facts:
            return self._facts[module]
        path = self._ensure().get(module)
        facts = None
        if path is not None:
            data = self._module_bytes(module, record=False)
            if data.strip():  # an empty module (a bare ``__init__.py``) defines nothing
                tree = self._adopted_tree(module, data) or _parsed(data)
                if tree is not None:
                    self.parsed_files += 1
                    facts = ModuleFacts(tree, module, path, self)
        self._facts[module] = facts
        return facts

    def _module_bytes(self, module: str, record: bool = True) -> bytes:
        """A module's text, read once per index (the answers built on it record that they read it)."""
        module = self.canonical(module)
        if record:
            self._read(module)
        found = self._bytes.get(module)
        if found is None:
            path = self._ensure().get(module)
            found = b""
            if path is not None:
                try:
                    with open(path, "rb") as handle:
                        found = handle.read()
                except OSError:
                    found = b""
            self._bytes[module] = found
        return found

    # -- one parse of a file for the linter and the index -----------------------------

    _ADOPTED_KEPT = 16  # the linter's latest trees: a file's own facts are asked while it is linted

    def parsed_text(self, path: str, source: str) -> Optional[ast.Module]:
        """The ``ast`` tree of the file at ``path`` when this index has parsed it and ``source`` is the text it read
        there, so the linter does not parse the same text again; None otherwise."""
        module = self._own_module(path)
        facts = self._facts.get(module) if module is not None else None
        data = self._bytes.get(module) if facts is not None else None
        if data is None or _encoded(source) != data:
            return None
        return facts.tree

    def adopt(self, path: str, source: str, tree: ast.Module) -> None:
        """``tree`` is ``ast.parse(source)`` of the file at ``path``: a fact that parses that module while its
        text is still ``source`` takes it instead of parsing again."""
        module = self._own_module(path)
        if module is None or module in self._facts:
            return
        with self._lock:
            self._adopted[module] = (source, tree)
            self._adopted.move_to_end(module)
            while len(self._adopted) > self._ADOPTED_KEPT:
                self._adopted.popitem(last=False)

    def _adopted_tree(self, module: str, data: bytes) -> Optional[ast.Module]:
        with self._lock:
            adopted = self._adopted.pop(module, None)
        if adopted is None or _encoded(adopted[0]) != data:
            return None
        return adopted[1]

    def _own_module(self, path: str) -> Optional[str]:
        """The module the index reads from ``path`` itself (not another file that hides it)."""
        module = self.module_of(path)
        if module is None:
            return None
        module = self.canonical(module)
        found = self._ensure().get(module)
        return module if found is not None and os.path.abspath(found) == os.path.abspath(path) else None

    # -- questions ----------------------------------------------------------------

    def fact(self, key: str, compute: Callable[[], object]):
        """A fact about the whole project (``compute()``), computed once per index: an analysis asks it of
        every file, the project answers it once.  Every asker is told (:meth:`_read`) which modules the
        answer rests on, as if it had read them itself (the cache keys a file's result on them)."""
        if key not in self._facts_of_project:
            with self._lock:
                outer, self._reading = self._reading, set()
                try:
                    value = compute()
                    read = frozenset(self._reading)
                finally:
                    self._reading = outer
                self._facts_of_project.setdefault(key, (value, read))
        value, read = self._facts_of_project[key]
        self._read_all(read)
        return value

    def _read(self, module: str) -> None:
        """Hook: ``module``'s text or facts went into an answer (the run's index records it for the cache)."""
        if self._reading is not None and self._records(module):
            self._reading.add(module)

    def _read_all(self, modules: FrozenSet[str]) -> None:
        """:meth:`_read` of each of ``modules``, as one set operation (a fact asked again replays what it read)."""
        if self._reading is not None:
            self._reading |= self._recorded(modules)

    def _recorded(self, modules: FrozenSet[str]) -> FrozenSet[str]:
        """Those of ``modules`` that :meth:`_records` notes."""
        if self._reading is not None and EVERY_FILE in self._reading:
            return modules & {EVERY_FILE}
        return modules

    def _records(self, module: str) -> bool:
        """Whether reading ``module`` is noted: not while an answer that rests on every file is computed."""
        return not (self._reading is not None and EVERY_FILE in self._reading and module != EVERY_FILE)

    def files(self) -> List[str]:
        """Every file of the project as the run listed it (notebooks too); reading one is the asker's business."""
        self._ensure()
        return list(self._file_list)

    def module_texts(self) -> Iterator[bytes]:
        """The text of every module of the project, read one at a time (for facts read from text first)."""
        for module in sorted(self._ensure()):
            yield self._module_bytes(module)

    def every_text(self) -> Iterator[bytes]:
        """The text of every file of the project, modules and notebooks, each once, for a fact that reads them
        all: the answer rests on the project as a whole (:data:`EVERY_FILE`), one dependency instead of one
        per module."""
        for _, data in self.every_file_text():
            yield data

    def every_file_text(self) -> Iterator[Tuple[Optional[str], bytes]]:
        """:meth:`every_text` with each text's module name (None for a notebook)."""
        self._read(EVERY_FILE)
        seen: Set[str] = set()
        for module, path in sorted(self._ensure().items()):
            if path not in seen:
                seen.add(path)
                yield module, self._module_bytes(module, record=False)
        for _, data in self._notebook_texts():
            yield None, data

    def _notebook_texts(self) -> Iterator[Tuple[str, bytes]]:
        """Each notebook of the run with its code cells' text."""
        for path in self._file_list:
            if path.endswith(".ipynb"):
                try:
                    with open(path, "rb") as handle:
                        yield path, notebook_code(handle.read())
                except OSError:
                    continue

    def reaches_words(self, module: str, words: Tuple[bytes, ...]) -> bool:
        """Whether ``module``, or a project module it imports (directly or through others), holds one of ``words``
        in its text: a necessary condition, from the text alone (nothing is parsed), for a definition of the
        module to use something written with those words."""
        key = (module, words)
        if key not in self._reaches:
            pending, seen, found = [module], {module}, False
            while pending and not found:
                current = pending.pop()
                data = self._module_bytes(current)
                if any(word in data for word in words):
                    found = True
                    break
                for imported in _imported_modules(current, data, self._ensure().get(current, "")):
                    if imported not in seen and self.is_module(imported):
                        seen.add(imported)
                        pending.append(imported)
            self._reaches[key] = found
        return self._reaches[key]

    def module_bytes(self, module: str) -> bytes:
        """The text of a project module (empty when unreadable); the answer it goes into rests on it."""
        return self._module_bytes(module)

    def modules_saving_literal(self, near: str, literal: str) -> Tuple[str, ...]:
        """The modules near file ``near`` (see :meth:`refused_save_near`) with a ``torch.save(obj, <literal>)``
        (``literal``: a string literal's text, quotes included)."""
        folder = _package_root(os.path.dirname(os.path.abspath(near)))
        key = (folder, literal)
        if key not in self._literal_savers:
            found = []
            needle = ast.literal_eval(literal).encode("utf-8", "replace")
            prefix = folder + os.sep
            for module, path in sorted(self._ensure().items()):
                if not os.path.abspath(path).startswith(prefix):
                    continue
                data = self._module_bytes(module)
                if needle not in data or b"save" not in data:
                    continue
                facts = self._module_facts(module)
                if facts is not None and literal in saved_paths_in(facts):
                    found.append(module)
            self._literal_savers[key] = tuple(found)
        return self._literal_savers[key]

    def imports_of(self, module: str) -> FrozenSet[str]:
        """The project modules ``module``'s import lines name (read from its text; nothing is parsed)."""
        found = self._imports.get(module)
        if found is None:
            data = self._module_bytes(module)
            path = self._ensure().get(module, "")
            found = frozenset(
                imported
                for imported in (
                    self.canonical(self.resolve_from(path, name) if path else name)
                    for name in _imported_modules(module, data, path)
                )
                if imported != module and self.is_module(imported)
            )
            self._imports[module] = found
        else:
            self._read(module)  # an answer built on it rests on that module's text, cached or not
        return found

    def imported_files(self, module: str) -> FrozenSet[str]:
        """The files (absolute paths) of the project modules ``module``'s import lines name."""
        found = self._imported_files.get(module)
        if found is None:
            modules = self._ensure()
            found = frozenset(os.path.abspath(modules[name]) for name in self.imports_of(module) if name in modules)
            self._imported_files[module] = found
        else:
            self._read(module)  # an answer built on it rests on that module's text, cached or not
        return found

    def program_of(self, module: str) -> FrozenSet[str]:
        """The modules that can run in one process with ``module``: every module that imports it (directly or
        through others), and every module any of those imports. A repository of several scripts that share
        nothing is several programs; a helper every script imports runs in all of them."""

        def compute() -> FrozenSet[str]:
            importers: Dict[str, Set[str]] = {}
            for name in self._ensure():
                for imported in self.imports_of(name):
                    importers.setdefault(imported, set()).add(name)
            above, pending = {module}, [module]
            while pending:
                for importer in importers.get(pending.pop(), ()):
                    if importer not in above:
                        above.add(importer)
                        pending.append(importer)
            program, pending = set(above), list(above)
            while pending:
                for imported in self.imports_of(pending.pop()):
                    if imported not in program:
                        program.add(imported)
                        pending.append(imported)
            return frozenset(program)

        return self.fact(f"program:{module}", compute)

    def is_imported(self, module: str) -> bool:
        """Whether another module of the project imports ``module`` (read from import lines, nothing parsed)."""
        return module in self._imported_modules()

    def imports_within(self) -> bool:
        """Whether any module of the project imports another: the project is a program of modules, not a folder
        of separate files (bug-report excerpts, snippets)."""
        return bool(self._imported_modules())

    def _imported_modules(self) -> FrozenSet[str]:
        def compute() -> FrozenSet[str]:
            self._read(EVERY_FILE)  # every module's import lines: one dependency on the whole project
            paths = self._ensure()
            # A file may have two names (``weights_init`` and, in a namespace folder, ``utils.weights_init``):
            # an import by either imports the file, known by its first name (module_of's).
            primary: Dict[str, str] = {}
            for name, path in paths.items():
                primary.setdefault(path, name)
            found = set()
            importers = [(name, path, self._module_bytes(name, record=False)) for name, path in paths.items()]
            # A notebook imports too, from its own folder (``from models import *`` beside ``models.py``).
            importers += [("__main__", path, data) for path, data in self._notebook_texts()]
            for name, path, data in importers:
                for written in _imported_modules(name, data, path):
                    imported = self.canonical(self.resolve_from(path, written))
                    if imported != name and imported in paths:
                        found.add(imported)
                        if primary[paths[imported]] != primary.get(path):
                            found.add(primary[paths[imported]])
            return frozenset(found)

        return self.fact("imported-modules", compute)  # type: ignore[return-value]

    def module_path(self, module: str) -> Optional[str]:
        """The file of project module ``module`` (any name it is known by), or None."""
        return self._ensure().get(self.canonical(module))

    def module_paths(self) -> Dict[str, str]:
        """Each module of the project by its first name (module_of's), with its file."""
        first: Dict[str, str] = {}
        seen: Set[str] = set()
        for name, path in self._ensure().items():
            if path not in seen:
                seen.add(path)
                first[name] = path
        return first

    def is_module(self, module: str) -> bool:
        """Whether ``module`` is a module of the project (known from file names: nothing is parsed)."""
        return self.canonical(module) in self._ensure()

    def compiles(self, module: str) -> bool:
        """Whether Python 3.7+ compiles the module's text: one of torch 0.3 days (``x.cuda(async=True)``) is read
        for its findings (source.readable_legacy_text) but raises SyntaxError when run or imported."""
        def compute() -> bool:
            data = self._module_bytes(module)
            return b"async" not in data or readable_legacy_text(data.decode("utf-8", "replace")) is None

        return bool(self.fact(f"compiles:{self.canonical(module)}", compute))

    def module_facts(self, module: str) -> Optional[ModuleFacts]:
        """Imports and top-level definitions of project module ``module`` (None outside the project)."""
        return self._module_facts(module)

    def refused_save_near(self, near: str, literal: str) -> Optional["RefusedSave"]:
        """A ``torch.save`` of a module near file ``near`` that writes to the checkpoint path ``literal`` (the
        text of a string literal, quotes included) a value weights_only refuses (see :func:`refused_saves_in`),
        else None.  Near: the files under the package ``near`` belongs to (its folder when it is in none); only
        those whose bytes hold the path are parsed (and count as looked up), once per path and folder."""
        folder = _package_root(os.path.dirname(os.path.abspath(near)))
        key = (folder, literal)
        if key not in self._refused_saves:
            found = None
            needle = ast.literal_eval(literal).encode("utf-8", "replace")
            prefix = folder + os.sep
            seen = {os.path.abspath(near)}
            # Shorter names first: a file that a namespace folder names twice is read under its own name.
            for module, path in sorted(self._ensure().items(), key=lambda item: (item[0].count("."), item[0])):
                if not os.path.abspath(path).startswith(prefix) or os.path.abspath(path) in seen:
                    continue
                seen.add(os.path.abspath(path))
                try:
                    with open(path, "rb") as handle:
                        data = handle.read()
                except OSError:
                    continue
                if needle not in data or b"save" not in data:
                    continue
                facts = self._module_facts(module)
                if facts is not None:
                    found = next((save for save in refused_saves_in(facts, self) if save.key == literal), None)
                    if found:
                        break
            self._refused_saves[key] = found
        return self._refused_saves[key]

    def saves_named_near(self, near: str, file_name: str) -> Tuple["NamedSave", ...]:
        """Every ``torch.save`` of the modules near file ``near`` (see :meth:`refused_save_near`) whose path ends
        in ``file_name``, written whole (analysis/model/saved_values.py ``saves_by_file_name``); only files whose
        bytes hold the name are parsed, but the answer rests on every file of the folder."""
        from torchlint.analysis.model.saved_values import saves_by_file_name

        folder = _package_root(os.path.dirname(os.path.abspath(near)))

        def compute() -> Tuple["NamedSave", ...]:
            self._read(EVERY_FILE)
            needle = file_name.encode("utf-8", "replace")
            prefix = folder + os.sep
            seen: Set[str] = set()
            found: List["NamedSave"] = []
            for module, path in sorted(self._ensure().items(), key=lambda item: (item[0].count("."), item[0])):
                absolute = os.path.abspath(path)
                if not absolute.startswith(prefix) or absolute in seen:
                    continue
                seen.add(absolute)
                data = self._module_bytes(module, record=False)
                if needle not in data or b"save" not in data:
                    continue
                facts = self._module_facts(module)
                if facts is not None:
                    locate = lambda qualified, local: definition(qualified, local, self)  # noqa: E731
                    found.extend(save for save in saves_by_file_name(facts, locate) if save.file_name == file_name)
            return tuple(found)

        return self.fact(f"saves-named:{folder}:{file_name}", compute)

    def saved_layouts_near(self, near: str) -> Tuple["SavedLayout", ...]:
        """The dicts with literal keys that the modules near file ``near`` (see :meth:`refused_save_near`) save,
        directly or through a project function (analysis/model/saved_values.py ``saved_layouts``); only files
        whose bytes hold ``save`` are parsed."""
        from torchlint.analysis.model.saved_values import saved_layouts, saving_functions

        folder = _package_root(os.path.dirname(os.path.abspath(near)))

        def compute() -> Tuple["SavedLayout", ...]:
            # Every module of the folder is read: the answer rests on the project as a whole, one dependency.
            self._read(EVERY_FILE)
            near: List[str] = []
            seen: Set[str] = set()
            prefix = folder + os.sep
            for module, path in sorted(self._ensure().items(), key=lambda item: (item[0].count("."), item[0])):
                absolute = os.path.abspath(path)
                if absolute.startswith(prefix) and absolute not in seen:
                    seen.add(absolute)
                    near.append(module)

            def calling(names: FrozenSet[str]) -> List[ModuleFacts]:
                # Only modules whose text calls one of ``names`` are parsed.
                pattern = re.compile(rb"(?<![\w])(?:%s)\s*\(" % b"|".join(re.escape(n.encode()) for n in sorted(names)))
                found_facts = []
                for module in near:
                    if pattern.search(self._module_bytes(module, record=False)):
                        facts = self._module_facts(module)
                        if facts is not None:
                            found_facts.append(facts)
                return found_facts

            # A helper that saves what it is given is called by its name: other calls need no lookup.
            savers = frozenset(name for facts in calling(frozenset({"save"})) for name in saving_functions(facts))
            found: List["SavedLayout"] = []
            for facts in calling(savers | {"save"}):
                found.extend(saved_layouts(facts, lambda qualified, local: definition(qualified, local, self), savers))
            return tuple(found)

        return self.fact(f"saved-layouts:{folder}", compute)

    def modules_calling(self, name: str) -> List["ModuleFacts"]:
        """The modules of the project whose text calls ``name(...)`` (by that name or as an attribute), parsed;
        the others are not."""
        self._read(EVERY_FILE)  # which modules call it rests on every one of them
        callers = self.fact("modules-calling", self._modules_by_called_word).get(name.encode("utf-8"), ())
        found = []
        for module in callers:
            facts = self._module_facts(module)
            if facts is not None:
                found.append(facts)
        return found

    def _modules_by_called_word(self) -> Dict[bytes, Tuple[str, ...]]:
        """Each word written before ``(`` somewhere in the project -> the modules that write it so, in order:
        read once per index (a scan per name asked read the whole project each time)."""
        found: Dict[bytes, List[str]] = {}
        for module in sorted(self._ensure()):
            for word in set(_CALLED_WORD.findall(self._module_bytes(module, record=False))):
                found.setdefault(word, []).append(module)
        return {word: tuple(modules) for word, modules in found.items()}

    def is_shadowed(self, path: str) -> bool:
        """Whether ``path`` is a module that a package of the same name hides (``loss.py`` beside ``loss/``):
        every import of that name loads the package, so nothing runs the module."""
        if path.endswith("__init__.py"):
            return False
        holder = self._ensure().get(module_name(path))
        return holder is not None and holder.endswith("__init__.py") and os.path.abspath(holder) != os.path.abspath(path)

    def module_of(self, path: str) -> Optional[str]:
        """The module name of a file of the run (None when it is not one of them): the name an import of it
        finds, so a file another of the same name hides is known by its folder's (``attention.train``)."""
        self._ensure()
        return self._names.get(os.path.abspath(path))

    def find_class(self, qualified: str) -> Optional[DatasetClass]:
        """The class named ``qualified`` (``pkg.data.TextDataset``), following re-exports."""
        found = self.locate(qualified)
        if found is None:
            return None
        facts, name = found
        return facts.classes.get(name)

    def locate(self, qualified: str) -> Optional[Tuple[ModuleFacts, str]]:
        """The module that defines ``qualified`` (a class, a function or a name assigned once at its top
        level) and the name it has there, following re-exports; None outside the project."""
        for _ in range(MAX_HOPS):
            module, _, name = qualified.rpartition(".")
            if not module:
                return None
            facts = self._module_facts(module)
            if facts is None:
                return None
            if name in facts.classes or name in facts.functions or name in facts.values:
                return facts, name
            target = facts.imports.get(name) or facts.imported(name)
            if target is None or target == qualified:
                return None
            qualified = target
        return None

    def star_lookup(self, module: str, name: str, _seen: Optional[frozenset] = None) -> Tuple[bool, Optional[str]]:
        """What ``from <module> import *`` binds ``name`` to: (whether the module is the project's, what the name
        is there or None).  Reads only the modules on the way: the module's own definitions and imports, then
        its star imports, later ones first; ``__all__`` limits what it exports."""
        key = (module, name)
        if key in self._star_names:
            return self._star_names[key]
        if not self.is_module(module):
            return False, None
        facts = self._module_facts(module)
        if facts is None:
            return True, None  # empty, or unreadable: it binds nothing we can know
        seen = (_seen or frozenset()) | {module}
        found: Optional[str] = None
        public = declared_all(facts)
        if (public is None and not name.startswith("_")) or (public is not None and name in public):
            if name in facts.classes or name in facts.functions or name in facts.values:
                found = f"{module}.{name}"
            elif name in facts.imports:
                found = facts.imports[name]
            else:
                for star in reversed(facts.star_modules):
                    if star in seen:
                        continue
                    known, qualified = self.star_lookup(star, name, seen)
                    if qualified is not None or not known:
                        found = qualified or f"{star}.{name}"
                        break
            if found is None and public is not None:
                found = f"{module}.{name}"
        self._star_names[key] = (True, found)
        return True, found



def mentioned_in_project(context, key: str, pattern: "re.Pattern[bytes]") -> bool:
    """Whether the file of ``context`` or any module of its project matches ``pattern`` (read as text, once
    per run and key): a fact about how the project runs (it traces models, it chooses its device) that no
    single file needs to show."""
    if pattern.search(context.source.encode("utf-8", "replace")):
        return True
    project = context.project
    if project is None:
        return False
    return bool(project.fact(key, lambda: any(pattern.search(data) for data in project.module_texts())))


def files_under(root: str) -> List[str]:
    """Python files under ``root``, skipping the usual non-source folders (for the flake8 plugin)."""
    skip = {".git", ".hg", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist", "node_modules", "site-packages", ".eggs"}
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in skip and not d.endswith(".egg-info"))
        found.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return found


# What an answer read when it read every file of the project (ProjectIndex.every_text): a dependency on all of
# them at once, which the cache checks as one digest of every file's digest.
EVERY_FILE = "*"


# -- the run's index ----------------------------------------------------------------

_ACTIVE: "contextvars.ContextVar[Optional[ProjectIndex]]" = contextvars.ContextVar("torchlint_project", default=None)


def active_project() -> Optional[ProjectIndex]:
    """The index of the run in progress (None when a text is linted on its own)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def activated(index: Optional[ProjectIndex]) -> Iterator[Optional[ProjectIndex]]:
    """Make ``index`` the one every FileContext created inside the block sees as ``context.project``."""
    token = _ACTIVE.set(index)
    try:
        yield index
    finally:
        _ACTIVE.reset(token)


def file_context(path: str, source: str, module: "cst.Module", settings: "AnalysisSettings") -> "FileContext":
    """The analysis's context for one file of the run in progress: it sees the active project index, and
    its star imports resolve through it."""
    # Imported here: the index serves warm runs that read the cache alone and never load LibCST.
    from torchlint.analysis.model.file_context import FileContext

    index = active_project()

    def resolve(tree: ast.Module, file: str, written: Sequence[str]) -> Optional[StarImports]:
        with activated(index):
            return star_imports_of(tree, file, written)

    return FileContext(path, source, module, settings, project=index, star_imports=resolve)
