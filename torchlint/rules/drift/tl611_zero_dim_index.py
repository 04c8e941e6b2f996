from __future__ import annotations

import ast
import re
from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import ZERO_DIM_INDEX_RAISES_SINCE, ZERO_DIM_INDEX_WARNS_SINCE, effective_target, version_text
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.flow.callers import arguments_from_callers, constructor_passed_by_callers, function_of_parameter
from torchlint.analysis.project.project_calls import arguments_from_other_modules, single_binding
from torchlint.analysis.model.dataflow import reaching_definition
from torchlint.analysis.model.calls import has_star_args
from torchlint.analysis.values.ranks import ast_builds_scalar_loss, called_function_rank, project_loss_module_call, known_rank, read_detached, scalar_loss_module, zero_dim_on_some_path
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule


# Where a passed loss module's callers were read: in the file itself, or in the project's other modules.
_THE_FILE, _OTHER_MODULES = "the file", "other modules"
# Every ``x[0]`` is written so (a comment or string may match too: the ast check decides).
_ZERO_INDEX_TEXT = re.compile(r"\[[\s(]*0[\s)]*\]")


class ZeroDimIndex(Rule):
    """
    ## What it does
    Flags `[0]` on a tensor the code shows to be 0-dimensional, with or
    without `.data` before it: `loss.data[0]`, `loss[0]`,
    `x.sum().data[0]`. The value is 0-dim when it is

    - the output of a torch loss whose reduction leaves one number (the
      default `"mean"`, `"sum"`, `"batchmean"`): `F.nll_loss(out, y)`, or a
      module `criterion = nn.CrossEntropyLoss()` called as `criterion(out, y)`,
      also when `criterion` is a parameter every caller in the file passes
      such a module (`train(loader, model, criterion)`), or (at `medium` until
      a validation draw reads it), for a function its own file never calls,
      every caller in the project's other modules (`from utils.train import
      train` in `main.py`);
    - at `medium` until a validation draw reads it, the output of a module
      built from a class of the file or the project whose `forward` returns
      one of these on every `return` (`criterion = CrossEntropyLoss2d(weight)`
      returning `self.loss(F.log_softmax(out, 1), y)` with
      `self.loss = nn.NLLLoss2d()`);
    - a full reduction of a tensor: `x.sum()`, `x.mean()`, `x.norm()`,
      `x.max()` with no dimension, `torch.sum(x)`;
    - the result of a method of the project's classes that returns one of
      these on every `return` (`g_loss = model.g_loss(z)` where every class
      defining `g_loss` returns `-self.critic(g).mean()`), also one element of
      the tuple it returns (`c_loss, fake = model.c_loss(x, z, return_g=True)`
      when `return (l, g) if return_g else l`: a literal argument or a
      default left decides the branch);
    - a local name bound to one of these;
    - at `medium`, a name one branch binds to one of these while the other
      bindings' rank is not shown (`loss = mixup_loss(...)` or
      `loss = criterion(...)`): the line fails on that branch's path;
    - at `medium` until a validation draw reads it, such a value read as a
      NumPy array (`loss.data.cpu().numpy()[0]`: a 0-d array, `IndexError:
      too many indices`).

    ## Why is this bad?
    Up to torch 0.3 a loss was a 1-element tensor, and `loss.data[0]` read
    its value. Since 0.4 losses and full reductions are 0-dimensional, and
    since 0.5 indexing one raises `IndexError: invalid index of a 0-dim
    tensor. Use tensor.item() in Python or tensor.item<T>() in C++ to convert
    a 0-dim tensor to a number` (0.4 warned). Old training loops crash at the
    first logging line.

    ## Example
    ```python
    loss = criterion(model(x), y)
    total += loss.data[0]
    norm = grad.norm()[0]
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    total += loss.item()
    norm = grad.norm().item()
    ```

    ## Fix safety
    Safe for `X.data[0]`: it was the Python number `X.item()` returns, and
    `.data` had already cut the graph; safe too where the indexed value was
    read through `.data` or `.detach()` before a move (`loss.data.cpu()[0]`).
    Unsafe for `X[0]` without `.data`: on
    torch 0.3 a `Variable` indexed so stayed in the autograd graph, and
    `.item()` returns a number that does not (if the result is
    back-propagated, keep the 0-dim tensor `X` itself instead).
    """

    code = "TL611"
    name = "zero-dim-index"
    message = "indexing a 0-dim tensor raises IndexError since torch 0.5: use `.item()`"
    fix_applicability = Applicability.UNSAFE
    triggers = ("[0]",)

    @classmethod
    def prepass(cls, scan):
        """Regions indexing ``[0]`` into what ``known_rank`` can show is 0-dim: a call, or a name some
        assignment of the region or of the module binds to a call, a name or arithmetic, or adds to (a
        parameter or a loop variable has no rank the code shows, nor has an attribute such as ``x.shape``)."""
        module_names = _names_bound_to_calls(scan.tree.body)

        def indexes_with_zero(region) -> bool:
            nodes = region.nodes
            indexed = [
                node.value.value if isinstance(node.value, ast.Attribute) and node.value.attr == "data" else node.value
                for node in nodes
                if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == 0
            ]
            if any(isinstance(value, ast.Call) for value in indexed):
                return True
            names = {value.id for value in indexed if isinstance(value, ast.Name)}
            return bool(names) and not names.isdisjoint(module_names | _names_bound_to_calls(nodes))

        written = scan.regions_whose_text_matches(_ZERO_INDEX_TEXT)
        found = frozenset(i for i in written if indexes_with_zero(scan.regions[i]))
        # With the regions that call them: a loss module a caller passes (``train(loader, model, criterion)``).
        return scan.with_mentions(found) if found else None

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return
        index = node.slice[0].slice.value
        if not isinstance(index, cst.Integer) or index.value != "0" or node.slice[0].comma is not cst.MaybeSentinel.DEFAULT:
            return
        if not _tight(node):
            return  # the trigger "[0]" is written as such
        parent = self.context.parent
        if isinstance(parent, (cst.AssignTarget, cst.Del)) or (isinstance(parent, cst.AugAssign) and parent.target is node):
            return  # written to, not read (``total += loss.data[0]`` reads it)
        base, through_data = node.value, False
        if isinstance(base, cst.Attribute) and base.attr.value == "data":
            base, through_data = base.value, True
        confidence = None
        # Forms no validation draw has read blind yet (shown at medium, out of the level table's reach until one has):
        # a loss module of a class of the project, a loss module that callers in other modules pass.
        unread_form = False
        if known_rank(self.context, base) == 0:
            call = self._defining_call(base)
            unread_form = call is not None and project_loss_module_call(self.context, call)
        else:
            passed = self._loss_of_a_passed_module(base)
            if passed is None:
                if not (isinstance(base, cst.Name) and zero_dim_on_some_path(self.context, base.value, self.context.ancestors)):
                    return
                confidence = Confidence.MEDIUM  # 0-dim on one branch's path; the others' rank is not shown
            unread_form = passed == _OTHER_MODULES
        target = effective_target(self.context.settings.target_torch_version)
        if target < ZERO_DIM_INDEX_WARNS_SINCE or is_version_guarded(self.context):
            return
        # Read as a NumPy array (``loss.data.cpu().numpy()[0]``): a form no validation draw has read blind yet, shown
        # at medium and out of the level table's reach until one has.
        unmeasured = _read_as_an_array(base) or unread_form
        if unmeasured:
            confidence = Confidence.MEDIUM
        raises = target >= ZERO_DIM_INDEX_RAISES_SINCE
        effect = (
            f"raises IndexError since torch {version_text(ZERO_DIM_INDEX_RAISES_SINCE)}"
            if raises
            else f"warns since torch {version_text(ZERO_DIM_INDEX_WARNS_SINCE)}"
        )
        written = "`.data[0]`" if through_data else "`[0]`"
        self.report(
            node,
            f"{written} on a 0-dim tensor (a loss or a full reduction) {effect}: "
            f"invalid index of a 0-dim tensor; use `.item()`",
            self._fix(node, base, through_data, read_detached(base)),
            confidence=confidence,
            unmeasured=unmeasured,
        )

    def _defining_call(self, base: cst.BaseExpression) -> Optional[cst.Call]:
        """``base`` itself when a call, or the call its name's one reaching binding holds."""
        call = base
        if isinstance(base, cst.Name):
            definition = reaching_definition(self.context.ancestors, base.value)
            call = definition.value if definition is not None else None
        return call if isinstance(call, cst.Call) else None

    def _loss_of_a_passed_module(self, base: cst.BaseExpression) -> Optional[str]:
        """``loss = criterion(out, y)`` with ``criterion`` a parameter that every caller in the file passes a
        reducing torch loss module (``train(loader, model, criterion)``, ``criterion = nn.CrossEntropyLoss()``):
        :data:`_THE_FILE`; or, for a function its file never calls, every caller in the project's other modules:
        :data:`_OTHER_MODULES`; else None."""
        call = self._defining_call(base)
        if call is None or not isinstance(call.func, cst.Name) or has_star_args(call):
            return None
        if scalar_loss_module(self.context, constructor_passed_by_callers(self.context, call.func.value)):
            return _THE_FILE
        if self._loss_module_from_other_modules(call.func.value):
            return _OTHER_MODULES
        # ``train(model, loader, distillation)``: every caller passes a function of the file that returns one number
        passed = arguments_from_callers(self.context, self.context.ancestors, call.func.value)
        if passed and all(
            isinstance(value, cst.Name) and called_function_rank(self.context, value.value, call, site) == 0
            for value, site in passed
        ):
            return _THE_FILE
        return None

    def _loss_module_from_other_modules(self, name: str) -> bool:
        """``train(epoch, loader, net, criterion)`` defined here and called only from other modules of the project,
        each passing a reducing torch loss module (``criterion = nn.CrossEntropyLoss()`` in ``main.py``)."""
        function = function_of_parameter(self.context.ancestors, name, self.context)
        if function is None:
            return False
        passed = arguments_from_other_modules(self.context, function, name)
        return bool(passed) and all(
            ast_builds_scalar_loss(single_binding(argument, argument.value.id) if isinstance(argument.value, ast.Name) else argument.value, argument.facts)
            for argument in passed
        )

    @staticmethod
    def _fix(node: cst.Subscript, base: cst.BaseExpression, through_data: bool, detached: bool) -> FixSpec:
        item = cst.Call(func=cst.Attribute(value=base, attr=cst.Name("item")))
        if through_data:
            return FixSpec(Applicability.SAFE, "Use `.item()` (the number `.data[0]` read)", (Replacement(node, item),))
        if detached:
            return FixSpec(Applicability.SAFE, "Use `.item()` (the number `[0]` read from a detached value)", (Replacement(node, item),))
        return FixSpec(
            Applicability.UNSAFE,
            "Use `.item()` (a number: out of the autograd graph, where the old `Variable` element stayed in it)",
            (Replacement(node, item),),
        )


def _read_as_an_array(node: cst.BaseExpression) -> bool:
    """``x.numpy()``, possibly after ``.data``/``.cpu()``/``.detach()`` (``loss.data.cpu().numpy()``)."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "numpy"


def _tight(node: cst.Subscript) -> bool:
    empty = ("", None)
    return (
        getattr(node.lbracket.whitespace_after, "value", None) in empty
        and getattr(node.rbracket.whitespace_before, "value", None) in empty
        and getattr(node.whitespace_after_value, "value", None) in empty
    )


def _names_bound_to_calls(nodes) -> set:
    """Names that ``name = call(...)``, ``a, b = call(...)``, ``name = other``, ``name = a / b`` (or an annotated
    assignment) or ``name += value`` binds among ``nodes``: the values through which ``known_rank`` follows a name."""
    names = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Call, ast.Name, ast.BinOp)):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
            if isinstance(node.value, ast.Call):  # ``cls_loss, reg_loss = losses(...)``: the elements of what it returns
                names.update(
                    element.id
                    for target in node.targets
                    if isinstance(target, (ast.Tuple, ast.List))
                    for element in target.elts
                    if isinstance(element, ast.Name)
                )
        elif isinstance(node, ast.AnnAssign) and isinstance(node.value, (ast.Call, ast.Name, ast.BinOp)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)  # ``loss += criterion(out, y)``: a sum of 0-dim losses
    return names
