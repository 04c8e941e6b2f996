"""Generate torchlint/data/torchvision_api.json and torchtext_api.json: each package's public API in each of
its releases, from its wheels.

    python tools/gen_package_api.py torchvision WHEEL_DIR   # every torchvision-*.whl in WHEEL_DIR
    python tools/gen_package_api.py torchtext WHEEL_DIR     # every torchtext-*.whl

The wheels are read as zip files and their Python sources parsed with ``ast``
(nothing is imported: PyPI's wheels need the CUDA build of torch).  They were
fetched with ``pip download PACKAGE==X --no-deps --only-binary=:all:
--python-version PY --platform manylinux1_x86_64 ...`` for each release,
PY the newest Python the release has a wheel for (tools/README-api-table.md).

For every release the tool reads the modules of :data:`PACKAGES` (the ones
users call into): the module's names (its ``__all__``, else its public
definitions and, for a package, what it imports from its own modules), each
with the keywords of the function or of the class's ``__init__`` (or of the
first base class in the package that defines one).  The module itself is a
name too, so that ``from torchtext import data`` is dated.

A name is deprecated in a release whose function (a class: its ``__init__``)
starts by warning that it is deprecated (``warnings.warn("The use of the
transforms.Scale transform is deprecated, ...")``); a keyword is deprecated
where the body warns so under ``if keyword is not None`` or ``if "range" in
kwargs``.  ``**kwargs`` is recorded as the keyword ``**``; one handed whole to
another function of the module (``save_image`` to ``make_grid``) gives that
function's keywords instead.

The packages' releases pair with torch's (torchvision 0.15 and torchtext 0.15
with torch 2.0): the tables are written in torch releases, the package's own
release kept in ``releases``, so that ``--target-torch-version`` reads every
table the same way.  torchtext ended with 0.18 (torch 2.3): its table adds torch
2.4 as a release without any of its names (``ended``).
"""
from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

DATA = Path(__file__).resolve().parent.parent / "torchlint" / "data"
ANY_KEYWORD = "**"

# torchvision release (major, minor, micro) -> the torch release it was built for.
_EARLY_PAIRS = {(0, 2): "1.0", (0, 3): "1.1", (0, 4, 0): "1.2", (0, 4, 1): "1.3", (0, 4, 2): "1.3"}


def paired_torch(version: Tuple[int, ...]) -> str:
    """The torch release a torchvision release pairs with: 0.5-0.14 with 1.4-1.13, 0.15 onwards with 2.x."""
    if version[:3] in _EARLY_PAIRS:
        return _EARLY_PAIRS[version[:3]]
    if version[:2] in _EARLY_PAIRS:
        return _EARLY_PAIRS[version[:2]]
    minor = version[1]
    return f"1.{minor - 1}" if minor < 15 else f"2.{minor - 15}"


def _sources(wheel: zipfile.ZipFile, package: str) -> Dict[str, str]:
    found = {}
    for name in wheel.namelist():
        if name.startswith(f"{package}/") and name.endswith(".py"):
            found[name] = wheel.read(name).decode("utf-8", "replace")
    return found


def _parse(text: Optional[str]) -> Optional[ast.Module]:
    if text is None:
        return None
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _exported(tree: ast.Module) -> Optional[List[str]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _text(node: ast.AST) -> str:
    """The literal text of a message (constants of an f-string or a concatenation)."""
    return " ".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def _warns_deprecated(statement: ast.stmt) -> Optional[str]:
    """The message of ``warnings.warn("... deprecated ...")`` when ``statement`` is one."""
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name != "warn" or not call.args:
        return None
    text = _text(call.args[0])
    return text if "deprecat" in text.lower() else None


def _block_warns_deprecated(body: List[ast.stmt]) -> Optional[str]:
    """The deprecation message a block warns, its text possibly bound to a name first
    (``warning = "range will be deprecated, ..."; warnings.warn(warning)``)."""
    message = next((m for m in map(_warns_deprecated, body) if m), None)
    if message is not None:
        return message
    warns = any(_is_warn(statement) for statement in body)
    text = " ".join(_text(statement) for statement in body)
    return text if warns and "deprecat" in text.lower() else None


def _is_warn(statement: ast.stmt) -> bool:
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return False
    func = statement.value.func
    return (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "") == "warn"


def _replacement(message: str) -> Optional[str]:
    """What a deprecation message says to use instead: ``transforms.Resize`` in "..., please use
    transforms.Resize instead.", ``value_range`` in "range will be deprecated, please use value_range instead."."""
    pattern = re.compile(r"\b(?:please use|use)\s+[`'\"]?([A-Za-z_][\w.]*(?:\(\))?)[`'\"]?(?:\s+instead)?", re.IGNORECASE)
    found = pattern.search(message)
    while found is not None and found.group(1) in ("of", "the"):
        found = pattern.search(message, found.end())
    return found.group(1).rstrip(".") if found else None


def _signature(function: ast.FunctionDef, method: bool) -> Dict[str, object]:
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    if method and names:
        names = names[1:]
    keywords = sorted(set(names) | ({ANY_KEYWORD} if arguments.kwarg is not None else set()))
    record: Dict[str, object] = {}
    message = next((m for m in map(_warns_deprecated, function.body[:3]) if m), None)
    if message is not None:
        record["deprecated"] = True
        record["replacement"] = _replacement(message)
    deprecated_keywords = {}
    for statement in ast.walk(function):
        if not isinstance(statement, ast.If):
            continue
        test = statement.test
        if (
            isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id in names
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
        ):
            message = _block_warns_deprecated(statement.body)
            if message is not None:
                deprecated_keywords[test.left.id] = {"replacement": _replacement(message), "warns": {"unless": None}}
        # ``if "range" in kwargs: warnings.warn(...)``: a keyword still taken through ``**kwargs``, deprecated.
        if (
            arguments.kwarg is not None and isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)
            and arguments.kwarg.arg in {n.id for n in ast.walk(test.comparators[0]) if isinstance(n, ast.Name)}
        ):
            message = _block_warns_deprecated(statement.body)
            if message is not None:
                deprecated_keywords[test.left.value] = {"replacement": _replacement(message), "warns": {}}
                keywords.append(test.left.value)
    if deprecated_keywords:
        record["deprecated_keywords"] = deprecated_keywords
    record["keywords"] = sorted(set(keywords))
    # ``**kwargs`` handed whole to a function of the module (save_image to make_grid): its keywords, not any.
    if arguments.kwarg is not None:
        for call in ast.walk(function):
            if (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == arguments.kwarg.arg for k in call.keywords)
            ):
                record["forwards"] = call.func.id
    return record


def _classes(trees: Dict[str, ast.Module]) -> Dict[str, ast.ClassDef]:
    found: Dict[str, ast.ClassDef] = {}
    for tree in trees.values():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, node)
    return found


def _init_of(cls: ast.ClassDef, classes: Dict[str, ast.ClassDef], depth: int = 0) -> Optional[ast.FunctionDef]:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            return node
    if depth > 5:
        return None
    for base in cls.bases:
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
        if name in classes and classes[name] is not cls:
            found = _init_of(classes[name], classes, depth + 1)
            if found is not None:
                return found
    return None


def _callable_record(node: ast.AST, classes: Dict[str, ast.ClassDef]) -> Optional[Dict[str, object]]:
    if isinstance(node, ast.FunctionDef):
        record = _signature(node, method=False)
        record.pop("forwards", None)
        return record
    if isinstance(node, ast.ClassDef):
        init = _init_of(node, classes)
        if init is None:
            if all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases):
                return {"keywords": []}  # object's __init__: no keywords
            return {"keywords": [ANY_KEYWORD]}  # built by a base outside the package: keywords not known
        record = _signature(init, method=True)
        record.pop("forwards", None)
        for statement in node.body[:2]:  # a class whose body warns (rare) is deprecated too
            message = _warns_deprecated(statement)
            if message:
                record["deprecated"], record["replacement"] = True, _replacement(message)
        return record
    return None


@dataclass(frozen=True)
class Module:
    """A public module: its name, the files that may hold it (the first found), where its names are defined
    when not in that file (a folder of the wheel), and whether only its ``__all__`` counts."""

    name: str
    paths: Tuple[str, ...]
    search: Optional[str] = None


@dataclass(frozen=True)
class Package:
    modules: Tuple[Module, ...]
    pairs: Callable[[Tuple[int, ...]], str]
    output: str
    # The first torch release with no release of the package (torchtext's last, 0.18, pairs with torch 2.3).
    ended: Optional[str] = None


def _torchtext_pairs(version: Tuple[int, ...]) -> str:
    """torchtext 0.3 with torch 1.0, 0.4 with 1.2, 0.5-0.14 with 1.4-1.13, 0.15-0.18 with 2.0-2.3."""
    minor = version[1]
    if minor <= 4:
        return {3: "1.0", 4: "1.2"}.get(minor, "1.0")
    return f"1.{minor - 1}" if minor < 15 else f"2.{minor - 15}"


PACKAGES: Dict[str, Package] = {
    "torchvision": Package(
        modules=(
            Module("torchvision.transforms", ("torchvision/transforms/transforms.py",)),
            Module("torchvision.transforms.functional", ("torchvision/transforms/functional.py",)),
            Module("torchvision.utils", ("torchvision/utils.py",)),
            Module("torchvision.datasets", ("torchvision/datasets/__init__.py",), "torchvision/datasets/"),
        ),
        pairs=paired_torch,
        output="torchvision_api.json",
    ),
    "torchtext": Package(
        modules=(
            Module("torchtext.data", ("torchtext/data/__init__.py",), "torchtext/data/"),
            Module("torchtext.datasets", ("torchtext/datasets/__init__.py",), "torchtext/datasets/"),
            Module("torchtext.vocab", ("torchtext/vocab/__init__.py", "torchtext/vocab.py"), "torchtext/vocab"),
            Module("torchtext.legacy.data", ("torchtext/legacy/data/__init__.py",), "torchtext/legacy/data/"),
            Module("torchtext.legacy.datasets", ("torchtext/legacy/datasets/__init__.py",), "torchtext/legacy/datasets/"),
            Module("torchtext.legacy.vocab", ("torchtext/legacy/vocab.py",)),
            Module("torchtext.utils", ("torchtext/utils.py",)),
            Module("torchtext.transforms", ("torchtext/transforms.py",)),
            Module("torchtext.functional", ("torchtext/functional.py",)),
        ),
        pairs=_torchtext_pairs,
        output="torchtext_api.json",
        ended="2.4",
    ),
}


def _module_records(module: Module, sources: Dict[str, str]) -> Dict[str, Dict[str, object]]:
    """The module itself and each public name of it, with its keywords and deprecations."""
    path = next((p for p in module.paths if p in sources), None)
    tree = _parse(sources.get(path)) if path is not None else None
    if tree is None:
        return {}
    records: Dict[str, Dict[str, object]] = {module.name: {"keywords": [ANY_KEYWORD]}}
    own = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    elsewhere: Dict[str, ast.Module] = {}
    if module.search is not None:
        elsewhere = {p: t for p, t in ((p, _parse(s)) for p, s in sorted(sources.items()) if p.startswith(module.search)) if t is not None}
    classes = _classes({path: tree, **elsewhere})
    functions: Dict[str, ast.FunctionDef] = {}
    for other in [tree, *elsewhere.values()]:
        for node in other.body:
            if isinstance(node, ast.FunctionDef):
                functions.setdefault(node.name, node)
    exported = _exported(tree)
    if exported is None:
        exported = [name for name in own if not name.startswith("_")]
        if path.endswith("__init__.py"):  # ``from .field import Field``: the package re-exports it
            exported += [
                alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.level
                for alias in node.names if not (alias.asname or alias.name).startswith("_") and alias.name != "*"
            ]
    for name in exported:
        node = own.get(name) or classes.get(name) or functions.get(name)
        if node is None:
            continue
        record = _callable_record(node, classes)
        if record is None:
            continue
        if isinstance(node, ast.FunctionDef):
            forwarded = _signature(node, method=False).get("forwards")
            if forwarded in functions:  # ``**kwargs`` handed whole to another function (save_image to make_grid)
                target = _signature(functions[forwarded], method=False)
                own_keywords = [k for k in record["keywords"] if k != ANY_KEYWORD]  # type: ignore[union-attr]
                record["keywords"] = sorted(set(own_keywords) | set(target["keywords"]))  # type: ignore[arg-type]
                for keyword, note in (target.get("deprecated_keywords") or {}).items():  # type: ignore[union-attr]
                    record.setdefault("deprecated_keywords", {})[keyword] = note  # type: ignore[index]
        records[f"{module.name}.{name}"] = record
    return records


def dump(wheel_path: Path, package: str) -> Tuple[str, str, Dict[str, Dict[str, object]]]:
    """(release, paired torch release, {qualified name: record}) of one wheel of ``package``."""
    release = re.match(rf"{package}-(\d+)\.(\d+)\.(\d+)", wheel_path.name)
    if release is None:
        raise SystemExit(f"{wheel_path.name}: not a {package} wheel")
    version = tuple(int(part) for part in release.groups())
    with zipfile.ZipFile(wheel_path) as wheel:
        sources = _sources(wheel, package)
    apis: Dict[str, Dict[str, object]] = {}
    for module in PACKAGES[package].modules:
        apis.update(_module_records(module, sources))
    return ".".join(map(str, version)), PACKAGES[package].pairs(version), apis


def merge(dumps: List[Tuple[str, str, Dict[str, Dict[str, object]]]], ended: Optional[str] = None) -> Dict[str, object]:
    dumps = sorted(dumps, key=lambda d: tuple(int(p) for p in d[1].split(".")))
    versions = [torch for _, torch, _ in dumps]
    names = sorted({name for _, _, apis in dumps for name in apis})
    apis: Dict[str, Dict[str, object]] = {}
    for name in names:
        having = [torch for _, torch, found in dumps if name in found]
        first, last = having[0], having[-1]
        span = versions[versions.index(first): versions.index(last) + 1]
        record: Dict[str, object] = {"first": first, "last": last}
        absent = [v for v in span if v not in having]
        if absent:
            record["absent"] = absent
        keywords: Dict[str, List[str]] = {}
        deprecated = None
        replacement = None
        deprecated_keywords: Dict[str, Dict[str, object]] = {}
        for _, torch, found in dumps:
            entry = found.get(name)
            if entry is None:
                continue
            for keyword in entry["keywords"]:  # type: ignore[union-attr]
                keywords.setdefault(keyword, []).append(torch)
            if entry.get("deprecated") and deprecated is None:
                deprecated, replacement = torch, entry.get("replacement")
            for keyword, note in (entry.get("deprecated_keywords") or {}).items():  # type: ignore[union-attr]
                deprecated_keywords.setdefault(keyword, {"deprecated": torch, **note})
        record["keywords"] = {k: [present[0], present[-1]] for k, present in sorted(keywords.items())}
        if deprecated is not None:
            record["deprecated"] = deprecated
            if replacement:
                record["replacement"] = replacement
        if deprecated_keywords:
            record["deprecated_keywords"] = deprecated_keywords
        apis[name] = record
    table: Dict[str, object] = {
        "generated_by": "tools/gen_package_api.py",
        "versions": versions,
        "releases": {torch: release for release, torch, _ in dumps},
        "apis": apis,
    }
    if ended is not None:
        # A torch release with no release of the package: every name is gone there.
        table["versions"] = versions + [ended]
        table["ended"] = ended
    return table


def main(argv: List[str]) -> int:
    if len(argv) != 2 or argv[0] not in PACKAGES:
        print(__doc__, file=sys.stderr)
        return 2
    package, folder = argv
    wheels = sorted(Path(folder).glob(f"{package}-*.whl"))
    if not wheels:
        print(f"no {package} wheels in {folder}", file=sys.stderr)
        return 1
    table = merge([dump(wheel, package) for wheel in wheels], PACKAGES[package].ended)
    output = DATA / PACKAGES[package].output
    output.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{output}: {len(table['apis'])} names, releases {table['versions'][0]}-{table['versions'][-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
