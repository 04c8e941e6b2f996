"""Where a file uses a torch API that changed: the walk TL601 (removed) and TL602 (deprecated) share.

A use is a call (``torch.solve(B, A)``, ``B.solve(A)`` on a value known to be a tensor), a reference
(``fn = torch.solve``, ``@torch.cuda.amp.custom_fwd``) or an import (``from torch import solve``,
``import torch._six``).  Names are resolved through the file's imports (analysis/model/names.py): a user's
own ``solve``, ``np.linalg.qr`` or ``scipy.linalg.solve`` never resolves to torch.  Uses under a
version or feature guard (analysis/api/version_guards.py) are compatibility code and are not reported.
"""
from __future__ import annotations

import ast
import weakref
from typing import Callable, ClassVar, Dict, FrozenSet, Optional, Set

import libcst as cst

from torchlint.analysis.api.api_drift import (
    SIX_TWINS,
    ApiChange,
    Status,
    change_of,
    deprecated_since_text,
    effective_target,
    in_watched_package,
    recorded_changes,
    tensor_method_names,
)
from torchlint.analysis.api.api_table import package_ended_by, release_text
from torchlint.analysis.model.ast_names import ast_dotted_name, every_node
from torchlint.analysis.api.drift_fixes import (
    CallSite,
    amp_decorator_reference,
    six_reference,
    rename_import,
    rename_reference,
    rewrite_call,
)
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.values.kinds import is_tensor
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.rule import Confidence, FixSpec, Rule

TENSOR_PREFIX = "torch.Tensor."


class ApiUseRule(Rule):
    """A use of a torch API whose status on the target release is ``status``."""

    status: ClassVar[Status]
    triggers = ("torch",)
    confidence = Confidence.HIGH

    def __init__(self, context) -> None:
        super().__init__(context)
        self.target = effective_target(context.settings.target_torch_version)
        # Callees already judged as calls: their name is not judged again as a reference.
        self._callees: Set[int] = set()
        # Local names bound by an import under a version guard (``if torch >= 2.4: from torch.amp import
        # GradScaler else: from torch.cuda.amp import GradScaler``): which API they name depends on the release.
        self._guarded_bindings: Set[str] = set()

    @classmethod
    def prepass(cls, scan):
        return api_use_regions(scan, cls.known) or None

    # -- what changed ------------------------------------------------------------------------

    @classmethod
    def known(cls, name: str) -> bool:
        """Whether ``name`` may be reported on some target (the pre-pass's necessary condition)."""
        return in_watched_package(name) and change_of(name) is not None

    def changed(self, name: Optional[str]) -> Optional[ApiChange]:
        if name is None or not in_watched_package(name):
            return None
        change = change_of(name)
        if change is None or change.status_at(self.target) is not self.status:
            return None
        return change

    def guarded(self) -> bool:
        # A deprecated API is still there on the target: a ``try`` planning for its absence runs it and warns.
        return is_version_guarded(self.context, present_on_target=self.status is Status.DEPRECATED)

    def _bound_by_guarded_import(self, node: cst.BaseExpression) -> bool:
        head = (dotted_name(node) or "").split(".", 1)[0]
        return head in self._guarded_bindings

    def level(self, change: ApiChange) -> Confidence:
        """``high`` for a use that fails on the target or warns there; ``low`` for an API deprecated only
        in torch's documentation (no warning, no removal scheduled: ``torch.norm``, ``torch.ger``)."""
        return Confidence.HIGH if self.status is Status.REMOVED or change.warns else Confidence.LOW

    # -- calls ------------------------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return
        self._callees.add(id(func))
        qualified = self.context.qualified_name(func)
        receiver = None
        change = self.changed(qualified)
        if qualified is None and isinstance(func, cst.Attribute) and func.attr.value in tensor_method_names():
            qualified = TENSOR_PREFIX + func.attr.value
            change = self.changed(qualified)
            if change is not None and not is_tensor(self.context, func.value):
                change = None
            receiver = func.value
        if change is None or self._fails_at_import(func, change) or self._bound_by_guarded_import(func) or self.guarded():
            return
        site = CallSite(node, qualified, receiver)
        # A change of the module or class the callee belongs to (``torch._six.x``) has no rewrite.
        fix = rewrite_call(self.context, site, change.rename_to) if change.name == qualified else None
        self.report(node, self.describe(change, site.name, "call"), fix, confidence=self.level(change))

    # -- references -------------------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        if self.context.imports.bindings.get(node.value):  # only names an import binds can be torch's
            self._reference(node)

    def _reference(self, node: cst.BaseExpression) -> None:
        if id(node) in self._callees or not self._is_outermost_load(node):
            return
        qualified = self.context.qualified_name(node)
        change = self.changed(qualified)
        if change is None or change.calls_only or self._fails_at_import(node, change) or self._bound_by_guarded_import(node):
            return
        if self.context.enclosing(cst.Import, cst.ImportFrom) is not None or self.guarded():
            return
        fix: Optional[FixSpec] = None
        if change.name == qualified:
            if isinstance(self.context.parent, cst.Decorator):
                fix = amp_decorator_reference(self.context, node, qualified)
            if fix is None and change.rename_to is not None:
                fix = rename_reference(self.context, node, qualified, change.rename_to)
        elif self.status is Status.REMOVED and change.name == "torch._six":
            fix = six_reference(self.context, node, qualified)
        # A decorator is called where the function is defined.
        form = "decorator" if isinstance(self.context.parent, cst.Decorator) else "reference"
        self.report(node, self.describe(change, qualified, form), fix, confidence=self.level(change))

    def _fails_at_import(self, node: cst.BaseExpression, change: ApiChange) -> bool:
        """A bare name of a removed API that is gone (not a stub), or a chain whose first name an import of it
        binds: its ``from ... import`` fails first and is the finding; its uses never run.  So are the uses of a package no release of which loads on the target
        (torchtext from torch 2.4) reached through an import of one of its modules (``from torchtext import
        data``; ``data.Field``, even where ``Field`` left earlier): that import fails."""
        if self.status is not Status.REMOVED or change.raises_when_called:
            return False
        if isinstance(node, cst.Name):
            return True
        head = (dotted_name(node) or "").split(".", 1)[0]
        bound = self.context.imports.bindings.get(head)
        if bound is not None and (bound == change.name or bound.startswith(change.name + ".")):
            return True  # ``from torch._six import queue``; ``queue.Empty``: the import fails first and is the finding
        ended = package_ended_by(change.name, self.target)
        return ended is not None and (dotted_name(node) or "").split(".", 1)[0] != ended

    def _is_outermost_load(self, node: cst.BaseExpression) -> bool:
        """The whole chain (not ``torch.cuda`` inside ``torch.cuda.amp``), read rather than bound or named."""
        parent = self.context.parent
        if isinstance(parent, cst.Attribute):
            return False  # the value or the attribute name of a longer chain
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            return False
        if isinstance(parent, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign)) and getattr(parent, "target", None) is node:
            return False
        return not isinstance(parent, (cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName))

    # -- imports ----------------------------------------------------------------------------------

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module is None:
            return
        if self.guarded():
            self._guarded_bindings.update(alias.evaluated_alias or alias.evaluated_name for alias in node.names)
            return
        statement_fix = self._import_fix(node, module)
        for alias in node.names:
            name = f"{module}.{alias.evaluated_name}"
            change = self.changed(name)
            if change is None or change.calls_only:
                continue
            if self.status is Status.DEPRECATED and not self._read_in_file(alias.evaluated_alias or alias.evaluated_name):
                continue  # a deprecated name warns when it is used; imported and never used, nothing warns
            self.report(alias, self.describe(change, name, "from-import"), statement_fix, confidence=self.level(change))
            statement_fix = None  # one fix per statement, on its first finding

    def _read_in_file(self, local: str) -> bool:
        """Whether the file reads the name ``local`` anywhere (read with ``ast``: code, not comments)."""

        def compute(_) -> FrozenSet[str]:
            try:
                tree = self.context.ast_tree if self.context.ast_tree is not None else ast.parse(self.context.source)
            except (SyntaxError, ValueError, RecursionError):
                return frozenset()
            return frozenset(node.id for node in every_node(tree) if isinstance(node, ast.Name))

        return local in self.context.memoized("api-uses.read-names", self.context.module, compute)

    def _import_fix(self, node: cst.ImportFrom, module: str) -> Optional[FixSpec]:
        return rename_import(node, module, self.renames())

    def renames(self) -> Dict[str, str]:
        """Name -> its drop-in replacement, for rewriting imports."""
        if self.status is Status.REMOVED:
            return SIX_TWINS
        return {change.name: change.rename_to for change in recorded_changes() if change.rename_to}

    def visit_Import(self, node: cst.Import) -> None:
        if self.guarded():
            self._guarded_bindings.update((alias.evaluated_alias or alias.evaluated_name).split(".", 1)[0] for alias in node.names)
            return
        for alias in node.names:
            name = dotted_name(alias.name)
            change = self.changed(name)
            if change is None:
                continue
            if self.status is Status.DEPRECATED and alias.asname is not None and not self._read_in_file(alias.evaluated_alias):
                continue  # ``import m.f as g`` and g never read: nothing warns
            self.report(alias, self.describe(change, name or change.name, "import"), confidence=self.level(change))

    # -- messages ---------------------------------------------------------------------------------

    def describe(self, change: ApiChange, used: str, form: str) -> str:
        """One line: what the use does on the target release, and what to write instead."""
        shown = used.replace(TENSOR_PREFIX, "Tensor.") if used.startswith(TENSOR_PREFIX) else used
        replacement = (change.rename_to or change.replacement).replace(TENSOR_PREFIX, "Tensor.")
        advice = f"; use {replacement}" if replacement else ""
        if self.status is Status.REMOVED:
            removed = release_text(change.name, change.removed) if change.removed else "torch ?"
            owner = "" if change.name == used else f" (`{change.name}` was removed)"
            ended = package_ended_by(change.name, change.removed) if change.removed else None
            if ended is not None:
                # torchtext 0.18 loads only on the torch it was built for (OSError: Could not load this library):
                # the name is gone with the whole package, not removed from it
                return f"`{shown}` is gone since {removed}: importing {ended} fails on that torch{advice}"
            return f"`{shown}` is gone since {removed}{owner}: {self._failure(change, form)}{advice}"
        since = deprecated_since_text(change.deprecated) if change.deprecated else "since an unknown release"
        how = (
            "warns when called" if change.warns and form == "call"
            else "warns where it decorates" if change.warns and form == "decorator"
            else "is deprecated"
        )
        fate = f"{release_text(change.name, change.removed)} removes it" if change.removed else "it breaks when torch drops it"
        return f"`{shown}` {how} {since}: {fate}{advice}"

    @staticmethod
    def _failure(change: ApiChange, form: str) -> str:
        if change.raises_when_called:
            return "the call raises RuntimeError" if form in ("call", "reference", "decorator") else "calling the imported function raises RuntimeError"
        return {
            "call": "the call raises AttributeError",
            "reference": "reading it raises AttributeError",
            "decorator": "the definition it decorates raises AttributeError",
            "from-import": "the import raises ImportError",
            "import": "the import raises ModuleNotFoundError",
        }[form]


def api_use_regions(scan, known: Callable[[str], bool]) -> FrozenSet[int]:
    """The pre-pass seeds: regions that may use an API ``known`` names, read with ``ast``: a name read
    through an import of torch, functorch or torchvision, an import of one of theirs, or a method call
    named like a changed tensor method (its receiver is judged later)."""
    methods = tensor_method_names()
    return scan.regions_where(
        lambda region: not region.attributes.isdisjoint(methods) or any(known(name) for name in _api_names(scan, region))
    )


# Per file (the pre-pass's Scan) and region: the torch-package names it may use.  Computed once for the
# three rules that ask (TL601, TL602, TL608); a Scan lives for one file.
_NAMES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _api_names(scan, region) -> FrozenSet[str]:
    known = _NAMES.get(scan)
    if known is None:
        # The file's local names bound to torch, functorch or torchvision by an import.
        watched = frozenset(local for local, targets in scan.imported.items() if any(in_watched_package(t) for t in targets))
        known = _NAMES[scan] = (watched, {})
    watched, per_region = known
    if id(region) not in per_region:
        per_region[id(region)] = _names_in(scan, region, watched)
    return per_region[id(region)]


def _names_in(scan, region, watched: FrozenSet[str]) -> FrozenSet[str]:
    if region.uses.isdisjoint(watched) and scan.stars is None and not isinstance(region.node, (ast.Import, ast.ImportFrom)):
        return frozenset()
    names: Set[str] = set()
    for node in region.nodes:
        kind = type(node)
        if kind is ast.ImportFrom:
            if node.module and not node.level:
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif kind is ast.Import:
            names.update(alias.name for alias in node.names)
        elif (kind is ast.Attribute or kind is ast.Name) and ast_dotted_name(node) is not None:
            names.update(scan.qualified(node))
    return frozenset(name for name in names if in_watched_package(name))
