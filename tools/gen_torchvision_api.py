"""Generate torchlint/data/torchvision_api.json: torchvision's public API in each release, from its wheels.

    python tools/gen_torchvision_api.py WHEEL_DIR      # every torchvision-*.whl in WHEEL_DIR, one per release

The wheels are read as zip files and their Python sources parsed with ``ast``
(torchvision is never imported: PyPI's wheels need the CUDA build of torch).
They were fetched with ``pip download torchvision==X --no-deps --only-binary=:all:
--python-version PY --platform manylinux1_x86_64 ...`` for each release from
0.2.2 to 0.28.0, PY the newest Python the release has a wheel for.

For every release the tool reads the modules users call into:

- ``torchvision.transforms``: the names ``transforms/transforms.py`` exports
  (``__all__``; the package re-exports them), with the keywords of each class's
  ``__init__``;
- ``torchvision.transforms.functional`` and ``torchvision.utils``: their public
  functions and keywords;
- ``torchvision.datasets``: the names its ``__init__`` exports, with the keywords
  of the class's ``__init__`` (or of the first base class in the package that
  defines one).

A name is deprecated in a release whose function (a class: its ``__init__``)
starts by warning that it is deprecated (``warnings.warn("The use of the
transforms.Scale transform is deprecated, ...")``); a keyword is deprecated
where the body warns so under ``if keyword is not None`` (``resample``,
``fillcolor``, ``range``).  ``**kwargs`` is recorded as the keyword ``**``.

torchvision's releases pair with torch's (0.15 with 2.0, 0.5 with 1.4): the
table is written in torch releases, the paired torchvision release kept in
``releases``, so that ``--target-torch-version`` reads both tables the same way.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

OUTPUT = Path(__file__).resolve().parent.parent / "torchlint" / "data" / "torchvision_api.json"
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


def _sources(wheel: zipfile.ZipFile) -> Dict[str, str]:
    found = {}
    for name in wheel.namelist():
        if name.startswith("torchvision/") and name.endswith(".py"):
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


def dump(wheel_path: Path) -> Tuple[str, str, Dict[str, Dict[str, object]]]:
    """(torchvision release, paired torch release, {qualified name: record}) of one wheel."""
    release = re.match(r"torchvision-(\d+)\.(\d+)\.(\d+)", wheel_path.name)
    if release is None:
        raise SystemExit(f"{wheel_path.name}: not a torchvision wheel")
    version = tuple(int(part) for part in release.groups())
    with zipfile.ZipFile(wheel_path) as wheel:
        sources = _sources(wheel)
    apis: Dict[str, Dict[str, object]] = {}

    transforms = _parse(sources.get("torchvision/transforms/transforms.py"))
    if transforms is not None:
        classes = _classes({"t": transforms})
        defined = {n.name: n for n in transforms.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        for name in _exported(transforms) or [n for n in defined if not n.startswith("_")]:
            record = _callable_record(defined.get(name), classes) if name in defined else None
            if record is not None:
                apis[f"torchvision.transforms.{name}"] = record

    for module, path in (("torchvision.transforms.functional", "torchvision/transforms/functional.py"), ("torchvision.utils", "torchvision/utils.py")):
        tree = _parse(sources.get(path))
        if tree is None:
            continue
        exported = _exported(tree)
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        for node in functions.values():
            if not node.name.startswith("_") and (exported is None or node.name in exported):
                record = _signature(node, method=False)
                forwarded = record.pop("forwards", None)
                if forwarded in functions:
                    target = _signature(functions[forwarded], method=False)
                    own = [k for k in record["keywords"] if k != ANY_KEYWORD]  # type: ignore[union-attr]
                    record["keywords"] = sorted(set(own) | set(target["keywords"]))  # type: ignore[arg-type]
                    for keyword, note in (target.get("deprecated_keywords") or {}).items():  # type: ignore[union-attr]
                        record.setdefault("deprecated_keywords", {})[keyword] = note  # type: ignore[index]
                apis[f"{module}.{node.name}"] = record

    datasets = _parse(sources.get("torchvision/datasets/__init__.py"))
    if datasets is not None:
        trees = {p: t for p, t in ((p, _parse(s)) for p, s in sources.items() if p.startswith("torchvision/datasets/")) if t is not None}
        classes = _classes(trees)
        for name in _exported(datasets) or []:
            if name in classes:
                record = _callable_record(classes[name], classes)
                if record is not None:
                    apis[f"torchvision.datasets.{name}"] = record
    text = ".".join(map(str, version))
    return text, paired_torch(version), apis


def _intervals(present: List[str], versions: List[str]) -> List[Tuple[str, str]]:
    runs: List[Tuple[str, str]] = []
    for version in versions:
        if version in present:
            if runs and versions.index(runs[-1][1]) == versions.index(version) - 1:
                runs[-1] = (runs[-1][0], version)
            else:
                runs.append((version, version))
    return runs


def merge(dumps: List[Tuple[str, str, Dict[str, Dict[str, object]]]]) -> Dict[str, object]:
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
    return {
        "generated_by": "tools/gen_torchvision_api.py",
        "versions": versions,
        "releases": {torch: release for release, torch, _ in dumps},
        "apis": apis,
    }


def main(argv: List[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    wheels = sorted(Path(argv[0]).glob("torchvision-*.whl"))
    if not wheels:
        print(f"no torchvision wheels in {argv[0]}", file=sys.stderr)
        return 1
    table = merge([dump(wheel) for wheel in wheels])
    OUTPUT.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUTPUT}: {len(table['apis'])} names, releases {table['versions'][0]}-{table['versions'][-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
