"""Rename every identifier a Python file binds, to check that no finding rests on a name alone.

A name is evidence of nothing (DESIGN.md): a finding may move one level when a documented naming
convention says so, never appear or vanish. :func:`rename_identifiers` rewrites a file so that every
name it binds (functions, classes, parameters, variables, loop and ``with`` targets, import aliases,
and the attributes it assigns on ``self``) becomes a neutral ``v1``, ``v2``, ... consistently through
the file, keyword arguments of its own functions included. Untouched: what the framework calls by
name (``forward``, dunders, the methods of ``nn.Module``, ``Optimizer``, ``Dataset`` and
``autograd.Function`` it overrides, Lightning's and the Trainer's hooks), ``self`` and ``cls``, the
attribute names torch's own objects have (``.data``, ``.grad``, ``.weight``), names the file does not
bind (builtins, imported modules), and strings.
"""
from __future__ import annotations

import functools
import keyword
from typing import Dict, FrozenSet, List, Optional, Set

import libcst as cst

# Hooks that frameworks other than torch call by name (no package of theirs is installed for tests).
FRAMEWORK_HOOKS = frozenset({
    "forward", "backward", "setup_context", "jvp", "vjp", "vmap", "training_step", "validation_step",
    "test_step", "predict_step", "configure_optimizers", "compute_loss", "training_epoch_end",
    "validation_epoch_end", "on_train_epoch_end", "on_validation_epoch_end",
})
KEPT_PARAMETERS = frozenset({"self", "cls"})


@functools.lru_cache(maxsize=1)
def framework_attributes() -> FrozenSet[str]:
    """Attribute and method names of torch's own objects: a file that overrides or reads them means
    torch's member, whatever it is called."""
    import torch
    import torch.utils.data

    owners = (torch.Tensor, torch.nn.Module, torch.nn.Parameter, torch.optim.Optimizer, torch.utils.data.Dataset,
              torch.utils.data.DataLoader, torch.autograd.Function, torch.optim.lr_scheduler.LRScheduler)
    names = set()
    for owner in owners:
        names.update(dir(owner))
    # Instance attributes set in constructors (not in dir() of the class).
    names.update({"training", "param_groups", "state", "defaults", "dataset", "batch_size", "data", "grad",
                  "weight", "bias", "optimizer", "last_epoch"})
    return frozenset(names)


class _Bindings(cst.CSTVisitor):
    """The names and ``self`` attributes a module binds, and its functions' parameter names."""

    def __init__(self) -> None:
        self.names: Set[str] = set()
        self.attributes: Set[str] = set()
        self.parameters: Set[str] = set()
        self.functions: Set[str] = set()
        self.class_names: Set[str] = set()  # bound in a class body (read bare there, as attributes elsewhere)
        self.imported: Set[str] = set()  # names an import binds under their own name (``torch``)
        self.identifiers: Set[str] = set()
        # What encloses the node being visited: "class" or "function", innermost last.
        self._scopes: List[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.identifiers.add(node.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name.value)
        self.functions.add(node.name.value)
        self._scopes.append("class")

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        is_method = bool(self._scopes) and self._scopes[-1] == "class"
        if not _is_hook(name, is_method):
            self._bind(name)
            self.functions.add(name)
        self._scopes.append("function")

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def _bind(self, name: str) -> None:
        """A name bound in a class body is an attribute of the class (``self.eps`` reads it)."""
        if self._scopes and self._scopes[-1] == "class":
            self.attributes.add(name)
            self.class_names.add(name)
        else:
            self.names.add(name)

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value not in KEPT_PARAMETERS:
            self.names.add(node.name.value)
            self.parameters.add(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._target(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._target(node.asname.name)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._target(node.name.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node.target)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        if node.asname is not None:
            self._target(node.asname.name)
        else:
            top = node.name
            while isinstance(top, cst.Attribute):
                top = top.value
            if isinstance(top, cst.Name):
                self.imported.add(top.value)

    def _target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            self.attributes.add(target.attr.value)


def _is_hook(name: str, is_method: bool) -> bool:
    if name.startswith("__") and name.endswith("__"):
        return True
    if name in FRAMEWORK_HOOKS or name.startswith("on_"):
        return True
    return is_method and name in framework_attributes()


class _Renamer(cst.CSTTransformer):
    def __init__(
        self, names: Dict[str, str], attributes: Dict[str, str], class_names: Set[str], parameters: Set[str],
        functions: Set[str],
    ) -> None:
        super().__init__()
        self.names = names
        self.attributes = attributes
        self.class_names = class_names
        self.parameters = parameters
        self.functions = functions
        self.imported: Set[str] = set()
        self._scopes: List[str] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append("class")

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self._scopes.pop()
        # The class's own name is bound in the enclosing scope.
        new = self.names.get(original.name.value) if not self._in_class() else self.attributes.get(original.name.value)
        return updated.with_changes(name=cst.Name(new or original.name.value))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append("function")

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        self._scopes.pop()
        name = original.name.value
        new = self.attributes.get(name) if self._in_class() else self.names.get(name)
        return updated.with_changes(name=cst.Name(new or name))

    def _in_class(self) -> bool:
        return bool(self._scopes) and self._scopes[-1] == "class"

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        if self._in_class() and updated.value in self.class_names:
            new = self.attributes.get(updated.value)
        else:
            new = self.names.get(updated.value)
        return updated.with_changes(value=new) if new else updated

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        root = original.value
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value in self.imported:
            return updated.with_changes(attr=original.attr)  # ``torch.load``: the library's attribute
        new = self.attributes.get(original.attr.value)
        # The attribute's own Name was renamed as a plain name too: undo that, then apply the attribute map.
        return updated.with_changes(attr=cst.Name(new or original.attr.value))

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        if original.keyword is None:
            return updated
        name = original.keyword.value
        # A keyword of a call of the file's own function or class follows its parameter; other keywords are
        # the callee's (``torch.load(map_location=)``).
        return updated.with_changes(keyword=cst.Name(name))

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        callee = original.func
        last = callee.value if isinstance(callee, cst.Name) else callee.attr.value if isinstance(callee, cst.Attribute) else None
        if last not in self.functions:
            return updated
        args = []
        for arg in updated.args:
            if arg.keyword is not None and arg.keyword.value in self.parameters:
                arg = arg.with_changes(keyword=cst.Name(self.names[arg.keyword.value]))
            args.append(arg)
        return updated.with_changes(args=args)

    def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> cst.ImportAlias:
        # The imported name itself is the library's: only an ``as`` alias is the file's.
        return updated.with_changes(name=original.name)


def rename_identifiers(source: str, prefix: str = "v") -> str:
    """``source`` with every name it binds replaced by ``<prefix>N`` (see the module docstring)."""
    module = cst.parse_module(source)
    found = _Bindings()
    module.visit(found)
    attributes_kept = framework_attributes()
    names: Dict[str, str] = {}
    taken = set(found.identifiers)
    counter = 0

    def fresh() -> str:
        nonlocal counter
        while True:
            counter += 1
            candidate = f"{prefix}{counter}"
            if candidate not in taken and not keyword.iskeyword(candidate):
                taken.add(candidate)
                return candidate

    # A leading underscore is Python's mark of a module's private name, not a word: it stays.
    for name in sorted(found.names):
        names[name] = ("_" if name.startswith("_") else "") + fresh()
    # Attributes: what the file assigns on ``self`` or binds in a class body (methods included), read
    # through any object; torch's own attribute names stay.
    attributes: Dict[str, str] = {}
    for attr in sorted(found.attributes - attributes_kept):
        if not (attr.startswith("__") and attr.endswith("__")):
            attributes[attr] = names.get(attr) or ("_" if attr.startswith("_") else "") + fresh()
    renamer = _Renamer(names, attributes, found.class_names, found.parameters, found.functions)
    renamer.imported = found.imported
    return module.visit(renamer).code


def renamed_path(path: str) -> Optional[str]:
    """A neutral file name in the same folder (``m.py``; notebooks keep their suffix)."""
    head, _, tail = path.rpartition("/")
    suffix = ".ipynb" if tail.endswith(".ipynb") else ".py"
    return (head + "/" if head else "") + "m" + suffix
