"""The modules of torchlint import downward only: no import circles, and the analysis in layers.

The graph counts every import statement between torchlint modules, at module
level, inside functions (a lazy import is still a dependency) and under
``if TYPE_CHECKING:`` (a type names what a module depends on, and a circle
through types is still a circle a reader must hold in mind).  ``from pkg
import name`` imports the submodule ``pkg.name`` when there is one, else the
package ``pkg`` (its ``__init__.py``).

The analysis (``torchlint/analysis/``) is a stack of folders, each importing
only the folders below it and the shared types beneath the whole analysis
(``ANALYSIS_LAYERS``, bottom first); it never imports a rule, the engine or the
command line.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import torchlint

# (importing module, imported module) -> lines of the import statements
Edges = Dict[Tuple[str, str], Set[int]]


def module_files(package_dir: Path) -> Dict[str, Tuple[Path, bool]]:
    """Module name -> (file, is a package's ``__init__.py``) for every module of the package."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, type_checking: bool) -> Iterator[ast.stmt]:
    """Every import statement under ``node``, at any depth; those in the body of ``if TYPE_CHECKING:`` only
    when ``type_checking``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test) and not type_checking:
            for statement in child.orelse:
                yield from _imports_of_statement(statement, type_checking)
        else:
            yield from _imports_of_statement(child, type_checking)


def _imports_of_statement(statement: ast.AST, type_checking: bool) -> Iterator[ast.stmt]:
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        yield statement
    yield from _imports(statement, type_checking)


def _imported(statement: ast.stmt, module: str, is_package: bool, modules: Dict[str, Tuple[Path, bool]]) -> Iterator[str]:
    """The package's modules that one import statement imports."""
    if isinstance(statement, ast.Import):
        yield from (alias.name for alias in statement.names if alias.name in modules)
        return
    assert isinstance(statement, ast.ImportFrom)
    base = statement.module or ""
    if statement.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (statement.level - 1)]
        base = ".".join(package + ([statement.module] if statement.module else []))
    for alias in statement.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            yield submodule
        elif base in modules:
            yield base


def import_graph(package_dir: Path, type_checking: bool = True) -> Edges:
    modules = module_files(package_dir)
    edges: Edges = {}
    for module, (path, is_package) in modules.items():
        for statement in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_checking):
            for target in _imported(statement, module, is_package, modules):
                edges.setdefault((module, target), set()).add(statement.lineno)
    return edges


def circles(edges: Edges) -> List[List[str]]:
    """The strongly connected components of more than one module, and the modules that import themselves."""
    successors: Dict[str, Set[str]] = {}
    for source, target in edges:
        successors.setdefault(source, set()).add(target)
        successors.setdefault(target, set())
    # Tarjan's algorithm.
    order: Dict[str, int] = {}
    lowest: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(module: str) -> None:
        order[module] = lowest[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(successors[module]):
            if target not in order:
                visit(target)
                lowest[module] = min(lowest[module], lowest[target])
            elif target in on_stack:
                lowest[module] = min(lowest[module], order[target])
        if lowest[module] == order[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in successors[module]:
                found.append(sorted(component))

    for module in sorted(successors):
        if module not in order:
            visit(module)
    return sorted(found)


def describe(found: List[List[str]], edges: Edges) -> str:
    lines = [
        "Import circles between torchlint modules. A circle is a group of modules that each import, directly or "
        "through the others, every other one (imports inside functions and under `if TYPE_CHECKING:` count). "
        "Modules must import downward only: in a circle no module can be understood, tested or "
        "imported without the others, and whether a name exists yet depends on which module was imported first. "
        "Break each circle by moving what the lower module needs down into it, or into a module below both."
    ]
    for number, component in enumerate(found, 1):
        members = set(component)
        lines.append(f"\ncircle {number}: {', '.join(component)}")
        for (source, target), numbers in sorted(edges.items()):
            if source in members and target in members:
                lines.append(f"  {source} (line {', '.join(map(str, sorted(numbers)))}) -> {target}")
    return "\n".join(lines)


def test_torchlint_has_no_import_circles():
    edges = import_graph(Path(torchlint.__file__).parent)
    found = circles(edges)
    assert not found, describe(found, edges)


def test_the_graph_counts_imports_in_functions_and_under_type_checking(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub import low\n")
    (package / "sub" / "low.py").write_text("def f():\n    from pkg import high\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom pkg.sub import low\nif TYPE_CHECKING:\n    from pkg import other\n"
    )
    (package / "other.py").write_text("from pkg import high\nfrom . import other\n")
    run_time = {
        ("pkg.sub", "pkg.sub.low"),
        ("pkg.sub.low", "pkg.high"),
        ("pkg.high", "pkg.sub.low"),
        ("pkg.other", "pkg.high"),
        ("pkg.other", "pkg.other"),
    }
    assert set(import_graph(package, type_checking=False)) == run_time
    edges = import_graph(package)
    assert set(edges) == run_time | {("pkg.high", "pkg.other")}
    assert circles(edges) == [["pkg.high", "pkg.other", "pkg.sub.low"]]
    message = describe(circles(edges), edges)
    assert "circle 1: pkg.high, pkg.other, pkg.sub.low" in message
    assert "pkg.sub.low (line 2) -> pkg.high" in message


# The analysis's folders, bottom first: a folder imports only the folders before it (and itself).
ANALYSIS_LAYERS = ("model", "values", "flow", "project", "api")
# Below the whole analysis: what every layer may import.
BENEATH_ANALYSIS = frozenset({"torchlint.findings", "torchlint.walk_order", "torchlint.source"})


def layer_of(module: str) -> Optional[int]:
    parts = module.split(".")
    if parts[:2] != ["torchlint", "analysis"] or len(parts) < 3:
        return None
    return ANALYSIS_LAYERS.index(parts[2]) if parts[2] in ANALYSIS_LAYERS else -1


def layer_violations(edges: Edges) -> List[str]:
    found = []
    for (source, target), numbers in sorted(edges.items()):
        where = f"{source} (line {', '.join(map(str, sorted(numbers)))}) -> {target}"
        if source in BENEATH_ANALYSIS:
            if target not in BENEATH_ANALYSIS:
                found.append(f"{where}: the shared types import nothing above them")
            continue
        level = layer_of(source)
        if level is None or source == "torchlint.analysis":
            continue
        if level == -1:
            found.append(f"{source}: every analysis module lives in a layer folder {ANALYSIS_LAYERS}")
            continue
        if target in BENEATH_ANALYSIS:
            continue
        target_level = layer_of(target)
        if target_level is None or target_level == -1:
            found.append(f"{where}: the analysis imports only its layers and {sorted(BENEATH_ANALYSIS)}")
        elif target_level > level and target != "torchlint.analysis":
            found.append(f"{where}: {ANALYSIS_LAYERS[level]} is below {ANALYSIS_LAYERS[target_level]}")
    return found


def test_the_analysis_imports_its_layers_downward_only():
    edges = import_graph(Path(torchlint.__file__).parent)
    assert set(module_files(Path(torchlint.__file__).parent / "analysis")) >= {
        f"analysis.{layer}" for layer in ANALYSIS_LAYERS
    }
    found = layer_violations(edges)
    assert not found, "\n".join(found)


def test_a_layer_that_imports_upward_is_named():
    edges = {
        ("torchlint.analysis.model.a", "torchlint.analysis.flow.b"): {3},
        ("torchlint.analysis.flow.b", "torchlint.analysis.model.a"): {1},
        ("torchlint.analysis.values.c", "torchlint.engine"): {2},
        ("torchlint.findings", "torchlint.rule"): {5},
    }
    found = layer_violations(edges)
    assert found == [
        "torchlint.analysis.model.a (line 3) -> torchlint.analysis.flow.b: model is below flow",
        "torchlint.analysis.values.c (line 2) -> torchlint.engine: the analysis imports only its layers and "
        "['torchlint.findings', 'torchlint.source', 'torchlint.walk_order']",
        "torchlint.findings (line 5) -> torchlint.rule: the shared types import nothing above them",
    ]
