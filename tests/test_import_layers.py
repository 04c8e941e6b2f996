"""The modules of torchlint import downward only: no import circles.

The graph counts every import statement between torchlint modules, at module
level and inside functions (a lazy import is still a dependency), but not those
under ``if TYPE_CHECKING:`` (never run).  ``from pkg import name`` imports the
submodule ``pkg.name`` when there is one, else the package ``pkg`` (its
``__init__.py``).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

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


def _imports(node: ast.AST) -> Iterator[ast.stmt]:
    """Every import statement under ``node``, at any depth, but those in the body of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.orelse:
                yield from _imports_of_statement(statement)
        else:
            yield from _imports_of_statement(child)


def _imports_of_statement(statement: ast.AST) -> Iterator[ast.stmt]:
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        yield statement
    yield from _imports(statement)


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


def import_graph(package_dir: Path) -> Edges:
    modules = module_files(package_dir)
    edges: Edges = {}
    for module, (path, is_package) in modules.items():
        for statement in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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
        "through the others, every other one (imports inside functions count; those under `if TYPE_CHECKING:` "
        "do not). Modules must import downward only: in a circle no module can be understood, tested or "
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


def test_the_graph_counts_imports_in_functions_and_skips_type_checking(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub import low\n")
    (package / "sub" / "low.py").write_text("def f():\n    from pkg import high\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom pkg.sub import low\nif TYPE_CHECKING:\n    from pkg import other\n"
    )
    (package / "other.py").write_text("from pkg import high\nfrom . import other\n")
    edges = import_graph(package)
    assert set(edges) == {
        ("pkg.sub", "pkg.sub.low"),
        ("pkg.sub.low", "pkg.high"),
        ("pkg.high", "pkg.sub.low"),
        ("pkg.other", "pkg.high"),
        ("pkg.other", "pkg.other"),
    }
    assert circles(edges) == [["pkg.high", "pkg.sub.low"], ["pkg.other"]]
    message = describe(circles(edges), edges)
    assert "circle 1: pkg.high, pkg.sub.low" in message
    assert "pkg.sub.low (line 2) -> pkg.high" in message
