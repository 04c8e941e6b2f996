"""Generate torchlint/data/torchvision_weights.json from torchvision's own sources.

    python tools/gen_torchvision_weights.py PATH/TO/torchvision   # the package folder (site-packages/torchvision)

Every model builder of torchvision (0.13 and later) declares, in its
``@handle_legacy_interface(weights=("pretrained", <value>), ...)`` decorator,
what the deprecated ``pretrained=True`` means: the weights it loads.  This
tool reads those decorators with ``ast`` (torchvision is never imported: its
wheels carry CUDA builds that need not load here) and writes, per builder, the
new keyword (``weights``, ``weights_backbone``) and the weights enum member each legacy keyword stands for:

- ``{"member": "torchvision.models.ResNet50_Weights.IMAGENET1K_V1"}``: a fixed member;
- ``{"member": null}``: no weights (``pretrained=True`` raises ValueError);
- ``{"chosen_by": "quantize", "if_true": ..., "if_false": ...}``: chosen by another keyword of the call;
- ``{"dynamic": true}``: chosen by code the table does not follow (a backbone name).

Builders are listed under every name they are public by: their defining module
(``torchvision.models.resnet.resnet50``) and the package that re-exports it
(``torchvision.models.resnet50``).  Enums are named by the package that exports them.
"""
from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

OUTPUT = Path(__file__).resolve().parent.parent / "torchlint" / "data" / "torchvision_weights.json"
LEGACY_DECORATOR = "handle_legacy_interface"


def module_name(package_dir: Path, path: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def exported_names(tree: ast.Module) -> Optional[List[str]]:
    for node in tree.body:
        names_all = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        if names_all and isinstance(node.value, (ast.List, ast.Tuple)):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def public_prefix(module: str, name: str, exports: Dict[str, Optional[List[str]]]) -> str:
    """The package that re-exports ``name`` from ``module`` (``from .resnet import *``), else the module."""
    names = exports.get(module)
    package = module.rsplit(".", 1)[0]
    if names is not None and name in names and not module.rsplit(".", 1)[1].startswith("_"):
        return package
    return module


def main(argv: List[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    package_dir = Path(argv[0]).resolve()
    models_dir = package_dir / "models"
    if not models_dir.is_dir():
        print(f"{package_dir}: not a torchvision package folder (no models/)", file=sys.stderr)
        return 2
    version_file = package_dir / "version.py"
    version_match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", version_file.read_text()) if version_file.exists() else None

    trees = {module_name(package_dir, p): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(models_dir.rglob("*.py"))}
    exports = {module: exported_names(tree) for module, tree in trees.items()}
    # Weights enum class -> its public qualified name.
    enums: Dict[str, str] = {}
    for module, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("WeightsEnum") for b in node.bases):
                enums[node.name] = f"{public_prefix(module, node.name, exports)}.{node.name}"

    def member(node: ast.expr) -> Optional[str]:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in enums:
            return f"{enums[node.value.id]}.{node.attr}"
        return None

    def legacy_value(node: ast.expr, legacy_keyword: str) -> dict:
        if isinstance(node, ast.Constant) and node.value is None:
            return {"member": None}
        fixed = member(node)
        if fixed is not None:
            return {"member": fixed}
        if isinstance(node, ast.Lambda) and isinstance(node.body, ast.IfExp):
            test, chosen, otherwise = node.body.test, member(node.body.body), member(node.body.orelse)
            # kwargs.get("quantize", False): another keyword of the call picks the weights.
            if (
                isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "get"
                and test.args and isinstance(test.args[0], ast.Constant) and chosen and otherwise
            ):
                return {"chosen_by": test.args[0].value, "if_true": chosen, "if_false": otherwise}
            # kwargs["pretrained"] == "legacy": a literal True is not the string, so it takes the other branch.
            if (
                isinstance(test, ast.Compare) and isinstance(test.left, ast.Subscript)
                and ast.unparse(test.left.slice).strip("'\"") == legacy_keyword
                and isinstance(test.ops[0], ast.Eq) and isinstance(test.comparators[0], ast.Constant)
                and isinstance(test.comparators[0].value, str) and otherwise
            ):
                return {"member": otherwise}
        return {"dynamic": True}

    builders: Dict[str, dict] = {}
    for module, tree in trees.items():
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if not (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == LEGACY_DECORATOR):
                    continue
                legacy: Dict[str, dict] = {}
                for keyword in decorator.keywords:
                    old_name, value = keyword.value.elts  # (legacy keyword, its meaning)
                    legacy[old_name.value] = {"replaced_by": keyword.arg, **legacy_value(value, old_name.value)}
                entry = {"module": module, "legacy": legacy}
                builders[f"{module}.{node.name}"] = entry
                public = public_prefix(module, node.name, exports)
                if public != module:
                    builders[f"{public}.{node.name}"] = entry
    data = {
        "generated_by": "tools/gen_torchvision_weights.py",
        "torchvision_version": version_match.group(1).split("+")[0] if version_match else "unknown",
        "builders": dict(sorted(builders.items())),
    }
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{OUTPUT}: {len(builders)} builder names from torchvision {data['torchvision_version']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
