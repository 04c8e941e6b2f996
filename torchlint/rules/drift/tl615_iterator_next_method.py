from __future__ import annotations

import ast
import re
from typing import List, Optional

import libcst as cst

from torchlint.analysis.api.api_drift import LOADER_ITERATOR_NEXT_REMOVED_IN, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.flow.callers import arguments_from_callers
from torchlint.analysis.model.dataflow import site_of, sole_assignment
from torchlint.analysis.model.ops import possible_constructors
from torchlint.analysis.model.scope import is_self_attribute, self_attribute_assignments
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule


# ``_made_by_iter``'s answer for a name every assignment that may reach makes an iterator.
_JOINED = "joined"
# A ``def next(`` in the file: then some class of it may define the method (the ast check decides).
_OWN_NEXT_METHOD = re.compile(r"\bdef\s+next\s*\(")
# ``.next()`` as written (what the rule reports; a comment may match too: the visit decides).
_NEXT_METHOD_CALL = re.compile(r"\.\s*next\s*\(\s*\)")


class IteratorNextMethod(Rule):
    """
    ## What it does
    Flags `.next()` called on an iterator made by `iter(loader)` or
    `loader.__iter__()`: written on the call (`iter(loader).next()`), on a
    name whose one assignment made it (`it = iter(loader)`; `it.next()`), on
    an attribute that every assignment in the class makes so
    (`self.batches = iter(self.loader)`), or on a parameter every call in the
    file passes such an iterator (`train(net, iter(loader))`).

    ## Why is this bad?
    `next()` as a method is Python 2's iterator protocol. DataLoader
    iterators kept a `next` alias for it until torch 1.13; since then the
    line raises `AttributeError: '_SingleProcessDataLoaderIter' object has
    no attribute 'next'` the first time it runs (so do the iterators of
    lists, generators and every other built-in iterable on Python 3).

    ## Example
    ```python
    images, labels = iter(loader).next()
    batches = iter(loader)
    x, y = batches.next()
    ```

    ## Use instead
    ```python
    images, labels = next(iter(loader))
    batches = iter(loader)
    x, y = next(batches)
    ```

    ## Fix safety
    Safe: `next(it)` calls `it.__next__()`, which is what the `next` alias
    called on the releases that had it. Not flagged where the file defines a
    class with a `next` method (an iterator of its own may be what `iter`
    returns), where `iter` is rebound in the file, under a version guard,
    or for a `target-torch-version` before 1.13.
    """

    code = "TL615"
    name = "iterator-next-method"
    message = "`.next()` is Python 2's iterator method: DataLoader iterators lost it in torch 1.13 (AttributeError); use `next(it)`"
    fix_applicability = Applicability.SAFE
    triggers = ("next",)
    # The form is certain from the code, but no validation draw has had one to read blind: shown below the
    # default level until one does (a finding at `high` is a promise measured on code nobody tuned on).
    confidence = Confidence.MEDIUM
    confidence_levels = (
        "`medium`: every finding. What the code shows is certain (the runtime test proves the failure), but no "
        "validation draw has held one yet, so its precision on users' code is unmeasured; the level table "
        "moves it once blind readings exist (`bench/validate.py --calibrate`)."
    )
    _own_next: Optional[bool] = None

    @classmethod
    def prepass(cls, scan):
        """Regions calling ``.next()`` and those calling their functions, unless a class of the file defines ``next``
        (its own iterator may)."""
        calling = scan.regions_whose_text_matches(_NEXT_METHOD_CALL)
        if not calling:
            return None
        if _OWN_NEXT_METHOD.search(scan.source) is not None and any(
            isinstance(node, ast.ClassDef)
            and any(isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "next" for item in node.body)
            for node in ast.walk(scan.tree)
        ):
            return None
        return scan.with_mentions(calling)  # with the callers that may hand the iterator in

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "next" or node.args:
            return
        made = self._made_by_iter(func.value)
        if not made or self._file_defines_next():
            return
        if effective_target(self.context.settings.target_torch_version) < LOADER_ITERATOR_NEXT_REMOVED_IN:
            return
        if is_version_guarded(self.context):
            return
        call = cst.Call(func=cst.Name("next"), args=[cst.Arg(value=func.value)])
        self.report(
            node,
            f"`.next()` is Python 2's iterator method: DataLoader iterators have none since torch "
            f"{version_text(LOADER_ITERATOR_NEXT_REMOVED_IN)} (AttributeError at this line); use `next(...)`",
            FixSpec(Applicability.SAFE, "Call the builtin `next`", (Replacement(node, call),)),
            # An iterator made on every path that may reach (``it = iter(a)``, later ``if ...: it = iter(a)``) is a
            # form no validation draw has read blind yet: out of the level table's reach until one has.
            confidence=Confidence.MEDIUM if made == _JOINED else None,
            unmeasured=made == _JOINED,
        )

    def _made_by_iter(self, receiver: cst.BaseExpression):
        """Truthy when ``iter`` made the receiver: written on it, by the one assignment of a name, by every
        assignment that may reach (``_JOINED``), or by every assignment of a ``self.`` attribute in the class."""
        if _is_iter_call(receiver, self._iter_is_builtin()):
            return True
        if isinstance(receiver, cst.Name):
            binding = sole_assignment(site_of(self.context.ancestors), receiver.value)
            if binding is not None:
                return _is_iter_call(binding.value, self._iter_is_builtin())
            made = possible_constructors(self.context, receiver.value)
            if made:
                return _JOINED if all(_is_iter_call(call, self._iter_is_builtin()) for call in made) else False
            return _JOINED if self._passed_an_iterator(receiver.value) else False
        if is_self_attribute(receiver):
            values = self._class_assignments(receiver.attr.value)
            return bool(values) and all(_is_iter_call(value, self._iter_is_builtin()) for value in values)
        return False

    def _passed_an_iterator(self, parameter: str) -> bool:
        """``def train(net, train_iter): train_iter.next()`` where every call in the file passes ``iter(loader)`` or a
        name whose one assignment there is one."""
        passed = arguments_from_callers(self.context, self.context.ancestors, parameter)
        if not passed:
            return False
        for value, ancestors in passed:
            if isinstance(value, cst.Name):
                binding = sole_assignment(site_of(ancestors), value.value)
                value = binding.value if binding is not None else None
            if not _is_iter_call(value, self._iter_is_builtin()):
                return False
        return True

    def _class_assignments(self, attribute: str) -> List[Optional[cst.BaseExpression]]:
        """Every value bound to ``self.<attribute>`` in the enclosing class (None for a binding that is not a plain
        assignment, which is no iterator)."""
        class_def = self.context.enclosing(cst.ClassDef)
        return self_attribute_assignments(class_def).get(attribute, []) if class_def is not None else []

    def _file_defines_next(self) -> bool:
        """Whether a class of the file defines ``next`` (the pre-pass leaves such files out; without it,
        the visit must)."""
        if self._own_next is None:
            self._own_next = any(
                isinstance(class_def, cst.ClassDef)
                and isinstance(class_def.body, cst.IndentedBlock)
                and any(isinstance(item, cst.FunctionDef) and item.name.value == "next" for item in class_def.body.body)
                for class_def in _classes(self.context.module)
            )
        return self._own_next

    def _iter_is_builtin(self) -> bool:
        return not (self.context.binds_name("iter") or self.context.imports.is_bound("iter"))


def _is_iter_call(node: Optional[cst.BaseExpression], iter_is_builtin: bool) -> bool:
    """``iter(x)`` (one argument, the builtin) or ``x.__iter__()``."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Name) and node.func.value == "iter":
        return iter_is_builtin and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
    return isinstance(node.func, cst.Attribute) and node.func.attr.value == "__iter__" and not node.args


def _classes(module: cst.Module) -> List[cst.ClassDef]:
    found: List[cst.ClassDef] = []

    class Classes(cst.CSTVisitor):
        def visit_ClassDef(self, class_def: cst.ClassDef) -> None:
            found.append(class_def)

    module.visit(Classes())
    return found
