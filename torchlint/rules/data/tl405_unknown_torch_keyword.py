from __future__ import annotations

import ast
import difflib
import functools
import re
from typing import List, Optional

import libcst as cst

from torchlint.analysis.api import api_table
from torchlint.analysis.api.api_table import Version, keyword_at, keyword_varies, release_text
from torchlint.analysis.api.api_drift import version_text
from torchlint.analysis.model import conventions
from torchlint.analysis.model.calls import has_star_args, literal_bool, without_args
from torchlint.analysis.model.names import ImportTable, dotted_name
from torchlint.analysis.model.ops import possible_constructors
from torchlint.analysis.model.scope import is_self_attribute, self_attribute_assignments, statements
from torchlint.analysis.api.torchvision_builders import MODEL_NAMESPACES
from torchlint.analysis.flow.module_evidence import constructed_kind, module_classes
from torchlint.analysis.api.signatures import (
    accepted_keywords,
    misspelt_keywords,
    public_name,
    renamed_keyword,
    table_torch_version,
    tensor_method,
)
from torchlint.analysis.values.kinds import requires_grad_flag
from torchlint.analysis.values.kinds import is_tensor
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

REQUIRES_GRAD = "requires_grad"
# ``loss``, ``total_loss``, ``outputs.loss``: a name that says it holds a loss value.
_LOSS_NAME = re.compile(r"(^|[._])(\w*_)?loss$", re.IGNORECASE)
# How close an assigned attribute must be to `requires_grad` to be read as its misspelling.
ATTRIBUTE_CUTOFF = 0.85


class UnknownTorchKeyword(Rule):
    """
    ## What it does
    Flags a keyword argument that the called torch API does not accept, such as
    `torch.load(path, map_locat="cuda:0")` or `DataLoader(ds, batchsize=32)`,
    and an assignment to a misspelling of a tensor's `requires_grad` attribute
    (`p.require_grad = False`) or to its method `requires_grad_`
    (`p.requires_grad_ = False`), and `requires_grad` assigned on a module
    (`self.requires_grad = False` in an `nn.Module` subclass,
    `self.vgg.requires_grad = False` where `self.vgg` is built by an `nn`
    class, a module class of the file or a torchvision builder):
    `nn.Module` has no such flag, so Python sets a plain attribute and every
    parameter stays trainable; the fix calls `requires_grad_(...)`, which sets
    the flag of each parameter. A class that reads its own `requires_grad`
    back is left alone.

    The accepted keywords come from a table of the most used torch,
    torch.nn, torch.nn.functional, torch.utils.data and torch.optim APIs
    (constructors of the common modules, losses, optimizers and schedulers,
    `DataLoader` and samplers, tensor factories, `torch.load`/`torch.save`)
    and `torch.Tensor` methods (`backward`, `to`, `sum`, ...), generated from
    torch's own signatures by `tools/gen_signatures.py` and shipped with
    torchlint; the message names the torch version it was made from.
    torchvision's transforms, `torchvision.transforms.functional`,
    `torchvision.utils` and dataset classes are checked against its own
    table, generated from its wheels 0.2.2 to 0.28
    (`tools/gen_package_api.py`): a keyword it removed is named with the
    release (`RandomRotation(resample=...)`: removed in torchvision 0.14, use
    `interpolation`; `save_image(..., range=...)`: use `value_range`), and
    renamed when its deprecation named the keyword that replaced it. An
    API the signatures table does not list (`Sampler`, which takes
    `*args, **kwargs` today) is checked against torch's release table only:
    a keyword it shows removed by the target is reported, also in
    `super().__init__(...)` of a class whose one base is that API
    (`super().__init__(data_source=None)` in a `Sampler` subclass raises
    TypeError since torch 2.10; torch had ignored it, so the fix removes it). A
    tensor method is checked where the receiver is known to be a tensor (a
    torch function's or a loss module's result, a tensor method's, through
    a name; `is_tensor` in analysis/values/kinds.py), and `.backward(...)` also on a name that
    says it holds a loss (`loss`, `total_loss`). Keywords torch renamed are
    named with their new spelling (`loss.backward(retain_variables=True)`:
    torch renamed it `retain_graph`). APIs that take `**kwargs` are never flagged (`torch.load` is
    checked because torch documents that its extra keywords go to
    `pickle.Unpickler`).

    ## Why is this bad?
    A keyword the function does not take raises `TypeError` ("got an
    unexpected keyword argument") the first time the line runs, often deep
    into a job (the checkpoint load at the end of an epoch). A misspelt
    attribute is worse: Python lets any attribute be set on a tensor or
    parameter, so `p.require_grad = False` silently freezes nothing (and
    `w.require_grad = True` silently trains nothing); the same goes for
    assigning to the method `requires_grad_`.

    ## Example
    ```python
    model.load_state_dict(torch.load(path, map_locat="cuda:0"))
    for p in model.backbone.parameters():
        p.require_grad = False
    loss = criterion(model(x), y)
    loss.backward(retain_variables=True)
    ```

    ## Use instead
    ```python
    model.load_state_dict(torch.load(path, map_location="cuda:0"))
    for p in model.backbone.parameters():
        p.requires_grad = False
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)
    ```

    ## Fix safety
    A misspelt keyword is renamed to the closest accepted name (difflib
    ratio of at least 0.8) only when exactly one name is closest and that
    name is not already given, a keyword torch renamed to its new name; the fix is safe, because the original call
    cannot run at all. The attribute fix (`requires_grad`) is unsafe: it
    changes what is trained, which is the point but should be reviewed.
    Calls with `**kwargs` are reported without a fix (the corrected name may
    be among them).

    Keywords are judged for the `target-torch-version` (default: the newest
    release known) with the table of torch's releases
    (`torchlint/data/torch_api.json`, 1.11 onwards): a keyword torch dropped
    is named with the release that dropped it (`ReduceLROnPlateau(...,
    verbose=True)`: gone in 2.7) and is not reported for a target that still
    took it; a keyword newer than the target (`DataLoader(...,
    in_order=False)` for torch 2.5) is reported. Where that table cannot
    tell what the target took (a target before 1.11, an API it lacks), only
    keywords with a close accepted name are reported for an older target.

    Not seen: APIs outside the table (its list is in the JSON file), methods
    of values not known to be tensors (a model's output), tensor methods
    whose keywords the generator could not check against torch (listed as
    open), torch APIs reached through a name rebound by assignment. A call
    guarded by a version check is judged for the target all the same. Attribute typos are flagged only on
    a receiver other than `self`/`cls` and only when the file never reads
    that attribute back (a config object's own `require_grad` field is left
    alone).
    """

    code = "TL405"
    name = "unknown-torch-keyword"
    message = "the torch API does not accept this keyword: the call raises TypeError"
    fix_applicability = Applicability.UNSAFE
    confidence_levels = """
- **high**: a torch function, class or method of a value known to be a tensor.
- attribute typos (`p.require_grad = False`): **high** when the code shows the tensor's own flag and it
  differs from the value written (a parameter, a layer's `.weight`, a loop over `parameters()`; a tensor a
  factory built); **medium** when the code does not show the flag; not reported when the flag already has
  the value written (`torch.zeros(n).require_grad = False` changes nothing that matters).
- `requires_grad` assigned on a module: **medium**, a form no validation draw has read blind yet (out of the
  level table's reach until one has).
- **low**: `.backward(...)` on a value the code does not show to be a tensor.
- **medium**: `.backward(...)` on a value whose name says it is a loss (`loss.backward(...)` where `loss`
  is a model's output): the receiver is assumed to be a tensor.
"""
    triggers = ("torch", "_grad", "backward")

    def __init__(self, context) -> None:
        super().__init__(context)
        self._top_level: Optional[ImportTable] = None

    @classmethod
    def prepass(cls, scan):
        # Classes deriving from a torch API that dropped keywords: ``super().__init__(data_source=None)`` in them.
        derived = {
            cls.name
            for cls in _classes(scan.tree.body)
            if cls.bases and any(_drops_keywords(name) for base in cls.bases for name in scan.qualified(base))
        }

        def may_report(region) -> bool:
            if derived and (
                region.enclosing_class in derived
                or any(cls.name in derived for cls in _classes([region.node]))
            ):
                return True
            for candidates, written in region.keyword_calls:
                for qualified in candidates:
                    accepted = accepted_keywords(qualified)
                    if accepted is None:
                        if any(_removed_keyword(qualified, keyword) for keyword in written):
                            return True
                        continue
                    if not accepted.issuperset(written):
                        return True
                    # a keyword some release lacks: new since a target older than the table's torch
                    if any(keyword_varies(public_name(qualified), keyword) for keyword in written):
                        return True
            for call in region.callees:  # tensor methods: ``loss.backward(retain_variables=True)``
                if isinstance(call.func, ast.Attribute) and call.keywords:
                    accepted = accepted_keywords(tensor_method(call.func.attr))
                    if accepted is not None and not accepted.issuperset(k.arg for k in call.keywords if k.arg):
                        return True
            # ``module.requires_grad = False`` as well as a misspelt flag (``p.require_grad = False``)
            return any(a == REQUIRES_GRAD or _looks_like_requires_grad(a) for a in region.attribute_stores)

        return scan.regions_where(may_report) or None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self._qualified(node.func) or self._base_constructor(node.func)
        confidence = Confidence.HIGH
        if qualified is None and isinstance(node.func, cst.Attribute):
            # A tensor's method: checked where the receiver is known to be a tensor, or (medium) is a loss by name.
            method = tensor_method(node.func.attr.value)
            if accepted_keywords(method) is not None and misspelt_keywords(method, node):
                if is_tensor(self.context, node.func.value):
                    qualified = method
                elif node.func.attr.value == "backward":
                    # ``.backward(retain_variables=True)`` on a value the code does not show to be a tensor: a
                    # suspect; a receiver named for a loss is one level more (a naming convention).
                    named = conventions.says(bool(_LOSS_NAME.search(dotted_name(node.func.value) or "")))
                    qualified, confidence = method, Confidence.MEDIUM if named else Confidence.LOW
        if qualified is None:
            return
        if accepted_keywords(qualified) is None:
            # Not in the signatures table (``Sampler`` takes ``*args, **kwargs`` today): only a keyword the API
            # table shows removed by the target is reported.
            self._removed_keywords(node, qualified, confidence)
            return
        misspelt = misspelt_keywords(qualified, node)
        api = public_name(qualified)
        target = self._target()
        older = target < api_table.VERSIONS[-1]
        given = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        for arg in node.args:
            if arg.keyword is None:
                continue
            written = arg.keyword.value
            at_target = keyword_at(api, written, target)
            if at_target.accepted:
                continue  # the target's torch takes it (an older one may have had a keyword torch dropped since)
            if at_target.removed_in is not None and written in misspelt:
                message = f"`{written}` was removed from {api} in {release_text(api, at_target.removed_in)}: the call raises TypeError"
                if at_target.replacement:
                    message += f"; use {at_target.replacement}"
                fix = None
                renamed = renamed_keyword(qualified, written)
                if renamed is not None and renamed == at_target.replacement and renamed not in given and not has_star_args(node):
                    # the keyword's deprecation named its successor, which takes the same values (resample= ->
                    # interpolation=, fillcolor= -> fill=, range= -> value_range=)
                    fix = FixSpec(Applicability.SAFE, f"Rename `{written}` to `{renamed}`", (Replacement(arg.keyword, cst.Name(renamed)),))
                self.report(arg, message, fix, confidence=confidence)
                continue
            if at_target.added_in is not None and older:
                message = (
                    f"`{written}` is new in {release_text(api, at_target.added_in)}: {api} of the target torch "
                    f"{version_text(target)} does not take it, the call raises TypeError"
                )
                self.report(arg, message, None, confidence=confidence)
                continue
            if written not in misspelt:
                continue
            correction = misspelt[written]
            if older and correction is None and at_target.accepted is None:
                # The table cannot tell what the target's torch took: report only misspellings.
                continue
            # at an older target, the release the verdict was checked against
            checked = version_text(target) if older and at_target.accepted is False else table_torch_version()
            message = f"`{written}` is not a keyword of {api} (torch {checked}): the call raises TypeError"
            fix = None
            if correction is not None:
                renamed = renamed_keyword(qualified, written) == correction
                message += f"; torch renamed it `{correction}`" if renamed else f"; did you mean `{correction}`?"
                if correction not in given and not has_star_args(node):
                    fix = FixSpec(
                        Applicability.SAFE,
                        f"Rename `{written}` to `{correction}`",
                        (Replacement(arg.keyword, cst.Name(correction)),),
                    )
            self.report(arg, message, fix, confidence=confidence)

    def _removed_keywords(self, node: cst.Call, qualified: str, confidence: Confidence) -> None:
        api = _table_name(qualified)
        if api is None:
            return
        target = self._target()
        for arg in node.args:
            if arg.keyword is None:
                continue
            at_target = keyword_at(api, arg.keyword.value, target)
            if at_target.accepted is False and at_target.removed_in is not None:
                message = (
                    f"`{arg.keyword.value}` was removed from {api} in {release_text(api, at_target.removed_in)}: "
                    "the call raises TypeError"
                )
                note = api_table.api_entry(api).deprecated_keywords.get(arg.keyword.value)
                fix = None
                if note is not None and note.ignored:
                    # torch ignored it for as long as it took it: dropping it changes nothing
                    message += "; torch ignored it: remove it"
                    fix = FixSpec(Applicability.SAFE, f"Remove `{arg.keyword.value}=` (torch ignored it)", (Replacement(node, without_args(node, [arg])),))
                elif at_target.replacement:
                    message += f"; use {at_target.replacement}"
                self.report(arg, message, fix, confidence=confidence)

    def _base_constructor(self, func: cst.BaseExpression) -> Optional[str]:
        """``super().__init__`` in a class with one base, a torch API: that API's constructor."""
        if not (
            isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"
        ):
            return None
        owner = next((a for a in reversed(self.context.ancestors) if isinstance(a, cst.ClassDef)), None)
        if owner is None or len(owner.bases) != 1:
            return None
        base = self.context.qualified_name(owner.bases[0].value)
        return base if base is not None and _table_name(base) is not None else None

    def _qualified(self, func: cst.BaseExpression) -> Optional[str]:
        """The callee's qualified name, with a function's own imports scoped to that function.

        The shared import table lets an import inside one function rebind a
        name for the rest of the file (``from torch.nn import Linear`` in a
        helper would turn a module-level ``Linear`` of another library into
        torch's); a wrong keyword table means a false report, so here the
        module-level binding wins outside the importing function.
        """
        qualified = self.context.qualified_name(func)
        if qualified is None:
            return None
        if self._top_level is None:
            self._top_level = ImportTable.from_module(self.context.module)
        top = self._top_level.qualified_name(func)
        if top == qualified:
            return qualified
        head = (dotted_name(func) or "").split(".", 1)[0]
        for ancestor in self.context.ancestors:
            if isinstance(ancestor, cst.FunctionDef) and _imports(ancestor, head):
                return qualified
        return top

    def _target(self) -> Version:
        """The torch release to check against: the configured target, else the newest the table knows."""
        target = self.context.settings.target_torch_version
        return tuple(target) if target is not None else api_table.VERSIONS[-1]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            attribute = target.target
            if isinstance(attribute, cst.Attribute):
                self._check_attribute(attribute, node.value, node)

    def _check_attribute(self, attribute: cst.Attribute, value: cst.BaseExpression, statement: cst.Assign) -> None:
        written = attribute.attr.value
        if written == REQUIRES_GRAD:
            self._check_module_flag(attribute, value, statement)
            return
        if not _looks_like_requires_grad(written):
            return
        receiver = attribute.value
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return
        if _is_read_in(self.context.source, written):
            return  # the file's own attribute, set and read back
        # Harmless when the tensor already has the value the author meant (``torch.zeros(...).require_grad =
        # False``); a sure no-op when it has the other one (``p.require_grad = False`` on a parameter).
        intended = literal_bool(value)
        effective = requires_grad_flag(self.context, receiver)
        if intended is not None and effective is not None and intended == effective:
            return
        confidence = Confidence.HIGH if intended is not None and effective is not None else Confidence.MEDIUM
        if written == REQUIRES_GRAD + "_":
            message = "`requires_grad_` is a method: assigning to it changes nothing, the tensor's requires_grad stays as it was"
        else:
            message = f"`{written}` is not a tensor attribute: setting it changes nothing, the tensor's requires_grad stays as it was"
        fix = FixSpec(
            Applicability.UNSAFE,
            f"Rename `{written}` to `{REQUIRES_GRAD}`",
            (Replacement(attribute.attr, cst.Name(REQUIRES_GRAD)),),
        )
        self.report(attribute, message, fix, confidence=confidence)


    def _check_module_flag(self, attribute: cst.Attribute, value: cst.BaseExpression, statement: cst.Assign) -> None:
        """``module.requires_grad = False``: ``nn.Module`` has no such flag, so the assignment sets a plain attribute
        and every parameter keeps its own ``requires_grad`` (the module's ``requires_grad_`` is what freezes it)."""
        receiver = attribute.value
        if not self._holds_a_module(receiver):
            return
        text = self.context.code(receiver).strip()
        if _is_read_in(self.context.source, REQUIRES_GRAD, receiver=text):
            return  # the class's own flag, set and read back
        fix = None
        if len(statement.targets) == 1:
            call = cst.Call(func=cst.Attribute(receiver, cst.Name(REQUIRES_GRAD + "_")), args=[cst.Arg(value)])
            fix = FixSpec(Applicability.UNSAFE, "Call `requires_grad_(...)` on the module", (Replacement(statement, cst.Expr(call)),))
        self.report(
            attribute,
            "`requires_grad` is no flag of an nn.Module: this sets a plain attribute and every parameter stays "
            "trainable; use `module.requires_grad_(False)`",
            fix,
            # A form no validation draw has read blind yet: out of the level table's reach until one has.
            confidence=Confidence.MEDIUM,
            unmeasured=True,
        )

    def _holds_a_module(self, receiver: cst.BaseExpression) -> bool:
        """``self`` in a method of a module class of the file, or a name or ``self.`` attribute every binding of
        which builds a module (an ``nn`` class, a module class of the file, a torchvision model builder, or its
        ``.features``)."""
        classes = module_classes(self.context)
        owner = self.context.enclosing(cst.ClassDef)
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return owner is not None and owner.name.value in classes and self.context.enclosing(cst.FunctionDef) is not None
        if is_self_attribute(receiver):
            if owner is None:
                return False
            values = self_attribute_assignments(owner).get(receiver.attr.value, [])
        elif isinstance(receiver, cst.Name):
            values = list(possible_constructors(self.context, receiver.value))
        else:
            return False
        return bool(values) and all(value is not None and self._builds_a_module(value, classes) for value in values)

    def _builds_a_module(self, value: cst.BaseExpression, classes) -> bool:
        if isinstance(value, cst.Attribute) and value.attr.value == "features":
            value = value.value  # ``vgg19(...).features``
        if not isinstance(value, cst.Call):
            return False
        if constructed_kind(self.context, value, classes) == "module":
            return True
        qualified = self.context.qualified_name(value.func) or ""
        return any(qualified.startswith(namespace + ".") and qualified.count(".") == namespace.count(".") + 1 for namespace in MODEL_NAMESPACES)


def _imports(function: cst.FunctionDef, name: str) -> bool:
    """Whether an import statement in ``function``'s own body binds ``name``."""
    for stmt in statements(function.body.body):
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        bound = alias.evaluated_alias or alias.evaluated_name
                        if bound.split(".", 1)[0] == name:
                            return True
    return False


def _looks_like_requires_grad(name: str) -> bool:
    if name == REQUIRES_GRAD + "_":
        return True
    # A ratio 2M/(len(name)+13) >= 0.85 needs a length from 10 to 17: skip difflib for the others.
    if not 10 <= len(name) <= 17:
        return False
    return difflib.SequenceMatcher(None, name, REQUIRES_GRAD).ratio() >= ATTRIBUTE_CUTOFF


def _is_read_in(source: str, attribute: str, receiver: str = "") -> bool:
    """Whether ``.attribute`` (of ``receiver`` when given) is read anywhere (not only assigned), or named in a string
    (``getattr``)."""
    owner = rf"(?<![\w.]){re.escape(receiver)}" if receiver else ""
    for match in re.finditer(rf"{owner}\.\s*{re.escape(attribute)}\b|[\'\"]{re.escape(attribute)}[\'\"]", source):
        if match.group(0)[0] in "'\"":
            return True
        after = source[match.end() :].lstrip()
        if after.startswith("=") and not after.startswith("=="):
            continue
        return True
    return False


def _table_name(qualified: str) -> Optional[str]:
    """The API table's name for ``qualified``: itself, its public name, or the package's re-export of a class
    of one of its modules (``torch.utils.data.sampler.Sampler`` is ``torch.utils.data.Sampler``)."""
    parts = qualified.split(".")
    shorter = ".".join(parts[:-2] + parts[-1:]) if len(parts) > 2 and parts[-2].islower() else None
    for name in (qualified, public_name(qualified), shorter):
        if name is not None and api_table.api_entry(name) is not None:
            return name
    return None


def _removed_keyword(qualified: str, keyword: str) -> bool:
    name = _table_name(qualified)
    return name is not None and api_table.keyword_removed_in(name, keyword) is not None


@functools.lru_cache(maxsize=None)  # the table is fixed: every class of every file asks of the same few bases
def _drops_keywords(qualified: str) -> bool:
    """Whether some keyword of the API ``qualified`` names is gone by the newest release the table knows."""
    name = _table_name(qualified)
    entry = api_table.api_entry(name) if name is not None else None
    return entry is not None and any(api_table.keyword_removed_in(name, keyword) for keyword in entry.keywords)


def _classes(statements) -> List[ast.ClassDef]:
    """The classes among ``statements`` and those nested in their bodies (a class in a class), not in functions:
    only the statements' own level is walked, so a file costs its class count, not its node count."""
    found: List[ast.ClassDef] = []
    pending = [s for s in statements if isinstance(s, ast.ClassDef)]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(s for s in cls.body if isinstance(s, ast.ClassDef))
    return found
