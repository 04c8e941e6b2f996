from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import (
    LEGACY_REDUCTION_KEYWORDS,
    NON_FULL_BACKWARD_HOOK_DEPRECATED_SINCE,
    SAVED_VARIABLES_DEPRECATED_SINCE,
    SCHEDULER_GET_LR_WARNS_SINCE,
    SCHEDULER_STEP_EPOCH_DEPRECATED_SINCE,
    SCHEDULERS_STEPPED_WITH_AN_ARGUMENT,
    SCHEDULERS_WITHOUT_GET_LR,
    VARIABLE_CLASSES,
    Status,
    deprecated_since_text,
    in_watched_package,
    version_text,
)
from torchlint.analysis.api.api_table import (
    UNKNOWN_VALUE,
    KeywordDeprecation,
    api_entry,
    keyword_at,
    keyword_deprecated_in,
    keyword_removed_in,
    keyword_warns,
)
from torchlint.analysis.model.calls import NOT_A_LITERAL, has_star_args, keyword_arg, literal_value, without_args
from torchlint.analysis.api.signatures import public_name
from torchlint.analysis.model.autograd_functions import context_parameter
from torchlint.analysis.flow.module_evidence import defines_a_method
from torchlint.analysis.model.ops import module_constructor, possible_constructors
from torchlint.analysis.model.scope import is_self_attribute, self_attribute_assignments
from torchlint.analysis.values.fused import as_receiver
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement
from torchlint.rules.drift.api_uses import TENSOR_PREFIX, ApiUseRule, api_use_regions


class DeprecatedTorchApi(ApiUseRule):
    """
    ## What it does
    Flags a call, a reference or an import of a torch API that is deprecated
    on the `target-torch-version` (with no target, on the newest torch) and
    not yet removed there:

    - linear algebra superseded by `torch.linalg`: `torch.qr`,
      `torch.cholesky`, `torch.chain_matmul`, `torch.lu`, `torch.lu_solve`,
      `torch.triangular_solve`, `torch.svd`, `torch.norm`, `torch.ger`;
    - `torch.range`, `torch.set_default_tensor_type`,
      `torch.testing.assert_allclose`, `torch.nn.utils.weight_norm`,
      `torch.nn.utils.clip_grad_norm`, the initialisers without a trailing
      underscore (`nn.init.xavier_uniform`, `nn.init.normal`, ...),
      `torch.backends.cuda.sdp_kernel`, `torch.utils._pytree._register_pytree_node`;
    - `F.upsample`, `F.upsample_nearest`, `F.upsample_bilinear`,
      `nn.UpsamplingNearest2d`, `nn.UpsamplingBilinear2d` (not `F.sigmoid` and
      `F.tanh`: deprecated in torch 0.4, they were un-deprecated since);
    - `torch.cuda.amp.autocast`, `GradScaler`, `custom_fwd`, `custom_bwd`
      and `torch.cpu.amp.autocast`/`GradScaler` (2.4 moved them to `torch.amp`);
    - `functorch.vmap`, `grad`, `jacrev`, ... (2.0 moved them to `torch.func`);
      torchvision's `transforms.v2.ToTensor`;
    - the same linear algebra called as a method of a value known to be a
      tensor (`A.qr()`, `S.cholesky()`, `A.lu()`, `b.lu_solve(LU, piv)`,
      `b.triangular_solve(A)`, `A.svd()`, `a.ger(b)`), and the non-in-place
      `Tensor.resize`/`resize_as` (a PIL image's `resize` is not a tensor's);
    - the legacy sparse constructors `torch.sparse.FloatTensor(i, v, size)`
      (and `Double`, `Half`, `BFloat16`, `Byte`, `Char`, `Short`, `Int`,
      `Long`, and the `torch.cuda.sparse` ones), warned since torch 2.1 when
      called (a type check such as `isinstance(t, torch.sparse.FloatTensor)`
      is not flagged);
    - TorchScript's entry points (`torch.jit.script`, as a decorator too,
      `trace`, `save`, `load`, `freeze`, `fork`, ...): deprecated in torch's
      documentation since 2.5 in favour of `torch.compile`/`torch.export`,
      and each warns when called (2.11 at the latest); no fix, since those
      work otherwise (a reference such as `torch.jit.ScriptModule` is not
      flagged);
    - `scheduler.step(epoch)` on an LR scheduler the file builds (a name
      every binding of which that may reach builds a `torch.optim.lr_scheduler`
      class, or a `self.` attribute bound to one; not
      `ReduceLROnPlateau`, whose argument is the metric): the epoch argument
      warns on every call since torch 1.4; no fix, since `step()` counts from
      the scheduler's own epoch, which differs by one where the loop passed
      the epoch before training it;
    - `scheduler.get_lr()` on such a scheduler, outside its class: since
      torch 1.4 it warns and returns the chainable form's next value, not
      the rate the optimizer uses (a StepLR read at its step boundary shows
      the rate decayed once more); `get_last_lr()` returns the rate in use.
      Every binding of a name that may reach the call must build a torch
      scheduler (one per branch is fine); not the plateau and composite
      schedulers, whose `get_lr` raises; at `medium` until a validation draw
      reads it;
    - the legacy CUDA tensor types called as constructors,
      `torch.cuda.FloatTensor(n)` (and the other dtypes): torch warns "The
      torch.cuda.*DtypeTensor constructors are no longer recommended" since
      2.1, and a machine without CUDA raises `TypeError` (a reference such as
      `x.type(torch.cuda.FloatTensor)` is not flagged);
    - `ctx.saved_variables` in a method of a class deriving from
      `torch.autograd.Function` (a `DeprecationWarning` since torch 1.0;
      `ctx.saved_tensors` returns the same tensors);
    - `module.register_backward_hook(hook)` (deprecated since torch 1.8 in
      favour of `register_full_backward_hook`; on a module whose forward runs
      several autograd nodes the hook sees only the last node's gradients and
      torch warns), unless a class of the project defines a method of that
      name (nn.Module is torch's only class with it); at `medium` until a
      validation draw reads it;
    - `torch.autograd.Variable(x)` (deprecated in torch's documentation, at
      `low`: it does not warn). It is no longer a wrapper that autograd needs:
      it returns a detached alias of `x`, so gradients stop there
      (`Variable(model(x))` trains nothing before it). `Variable(x,
      volatile=True)` is TL606's;
    - every name the table generated from torch's releases marks deprecated;
    - a keyword that table marks deprecated on the target, where the target
      still takes it (`verbose=` of the learning-rate schedulers from 2.2,
      `eps=` of `F.gumbel_softmax`); once torch drops it, TL405 reports the
      TypeError, and `size_average=`/`reduce=` are TL605's.

    An API deprecated after the target is not flagged (on torch 2.2,
    `torch.cuda.amp.autocast` is the documented spelling). Names resolve
    through the file's imports (`np.linalg.qr` and a local `range` are not
    torch's); uses under a version or feature guard are not flagged.

    ## Why is this bad?
    A deprecated API warns when called (most of these do) and goes away in
    a later release: the code that runs today raises `AttributeError` or
    `RuntimeError` after an upgrade, as `torch.solve` and `torch.symeig` did.
    Several replacements also differ in ways worth knowing before that day:
    `torch.range` includes its end, `torch.arange` does not.

    ## Example
    ```python
    L = torch.cholesky(A, upper=True)
    Q, R = torch.qr(A, some=False)
    P = torch.chain_matmul(A, B, C)
    idx = torch.range(0, n - 1)
    with torch.cuda.amp.autocast(True, torch.bfloat16):
        y = F.upsample(x, scale_factor=2)
    ```

    ## Use instead
    ```python
    L = torch.linalg.cholesky(A, upper=True)
    Q, R = torch.linalg.qr(A, mode="complete")
    P = torch.linalg.multi_dot([A, B, C])
    idx = torch.arange(0, n, dtype=torch.get_default_dtype())
    with torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16):
        y = F.interpolate(x, scale_factor=2)
    ```

    ## Fix safety
    Safe where a rewrite is offered: the replacement computes the same
    values (most deprecated functions call their replacement themselves).

    - drop-in renames: `torch.ger` to `torch.outer`, `F.upsample` to
      `F.interpolate`, `nn.init.X` to `nn.init.X_`, `clip_grad_norm` to `clip_grad_norm_`,
      `functorch.X` to `torch.func.X` (an import `from functorch import vmap`
      is rewritten to import from `torch.func`);
    - `torch.cholesky(A, upper=u)` to `torch.linalg.cholesky(A, upper=u)`;
      `torch.qr(A, some=s)` to `torch.linalg.qr(A, mode=...)`;
      `torch.chain_matmul(A, B, ...)` (two matrices or more) to
      `torch.linalg.multi_dot([A, B, ...])`; `torch.lu(A, get_infos=...)` to
      `torch.linalg.lu_factor`/`lu_factor_ex`; `torch.lu_solve(b, LU, piv)`
      to `torch.linalg.lu_solve(LU, piv, b)`; `torch.triangular_solve(b, A)`
      read for its solution to `torch.linalg.solve_triangular(A, b, upper=...)`;
      `torch.svd(A)` read for its singular values to `torch.linalg.svdvals(A)`;
      the method forms the same way (`A.qr()` to `torch.linalg.qr(A)`,
      `a.ger(b)` to `a.outer(b)`);
    - `torch.norm(x, p, dim, keepdim, dtype=...)` with a numeric `p` or the
      default Frobenius norm to `torch.linalg.vector_norm` (torch.norm calls
      it itself); `nuc`, a `p` held in a variable and `out=` keep no fix;
    - `F.upsample_nearest`/`_bilinear` and `nn.UpsamplingNearest2d`/
      `Bilinear2d` to `interpolate`/`nn.Upsample` with the `mode=` (and
      `align_corners=True`) they used;
    - `torch.cuda.amp.autocast(...)` / `GradScaler(...)` to
      `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`
      (positional arguments become keywords: the new first parameter is the
      device; the old autocast passed `dtype=torch.float16` explicitly, the
      new one takes the autocast dtype, float16 unless the program changed
      it with `torch.set_autocast_dtype`); `custom_fwd`/`custom_bwd` get
      `device_type="cuda"`;
    - `torch.backends.cuda.sdp_kernel(...)` with literal flags to
      `torch.nn.attention.sdpa_kernel([...])` listing the backends the flags
      enabled (sdp_kernel is implemented that way);
    - `torch.set_default_tensor_type(torch.FloatTensor | DoubleTensor)` to
      `torch.set_default_dtype(torch.float32 | float64)`;
    - `torch.sparse.FloatTensor(i, v[, size])` to
      `torch.sparse_coo_tensor(i, v[, size])`, with no `dtype=`: torch 2.13
      builds the legacy call exactly so, and the values give the dtype
      (`torch.sparse.FloatTensor(i, double_values, size)` is float64); where
      indices and values are known to be tensors, or the size is written as
      one value (`(n, n)`, `torch.Size(...)`, `x.shape`). A tensor built from
      a shape alone, `torch.sparse.HalfTensor(3, 4)`, becomes
      `torch.sparse_coo_tensor((3, 4), dtype=torch.float16)`: there the type
      gave the dtype;
    - `ctx.saved_variables` to `ctx.saved_tensors` (torch returns the same
      tuple under both names);
    - `Variable(x)` to `x.detach()` and `Variable(x, requires_grad=b)` to
      `x.detach().requires_grad_(b)`: the same alias, sharing `x`'s storage,
      as Variable returns (where the cut was not meant, drop `.detach()` by
      hand);
    - a deprecated keyword torch ignores is removed (`only_inputs=` of
      `torch.autograd.grad`, `eps=` of `F.gumbel_softmax`), and one torch
      renamed is renamed when the target takes the new name
      (`nn.Hardtanh(min_value=...)` to `min_val=`).

    Unsafe: `scheduler.get_lr()` becomes `scheduler.get_last_lr()`, the
    rates in use. Where the code read get_lr's value on purpose to set the
    next rates by hand, that value differs.

    No fix for `register_backward_hook`: the full hook receives the gradients
    of the module's inputs and outputs, which is usually what was wanted but
    not what the old hook computed, and it refuses a module whose forward
    changes its inputs in place.

    Unsafe: `torch.range(start, end, step)` becomes `torch.arange(start,
    end + step, step, dtype=torch.get_default_dtype())` (range includes its
    end and always returns the default float dtype); that is exact when
    `end - start` is a whole number of steps, which is only known for integer
    literals (then the fix is safe).

    No fix: a deprecated keyword whose replacement is another way of working
    (`verbose=`: read `get_last_lr()`), `torch.testing.assert_allclose` (assert_close checks dtypes and
    uses another float16 tolerance), `torch.nn.utils.weight_norm` (the
    parametrized version stores other `state_dict` keys: checkpoints stop
    loading), a CUDA tensor type in `set_default_tensor_type` (it also moved
    tensor factories to the GPU), `torch.svd` whose `U`/`V` are read (it
    returns `V`, `torch.linalg.svd` returns `Vh`), `transforms.v2.ToTensor`
    (the replacement returns a `tv_tensors.Image`), a CUDA tensor type's
    constructor (`torch.cuda.FloatTensor(2, 3)` is a shape, `([2, 3])` data:
    `torch.empty` or `torch.tensor` with `device="cuda"`), `torch.cuda.sparse.*`
    (what the CUDA types build cannot be run on a CPU-only build, where they
    raise `TypeError`), the typed storages (`torch.ByteStorage.from_buffer`:
    `torch.frombuffer` and `torch.UntypedStorage` take other arguments and
    give a tensor or an untyped storage, so the code around them changes
    too), a legacy sparse call whose two arguments may be a
    shape or indices and values, or that passes `device=`, `Tensor.resize` (its
    replacement depends on whether the size changes), and an import of a name
    whose replacement is not a drop-in (`from torch.cuda.amp import
    autocast`: its calls are fixed, the import is left for you to remove).
    """

    code = "TL602"
    name = "deprecated-torch-api"
    message = "this torch API is deprecated: it warns today and breaks when torch removes it"
    # The least safe of its fixes (torch.range with a non-literal end); the others are safe.
    fix_applicability = Applicability.UNSAFE
    status = Status.DEPRECATED
    confidence_levels = """
- **high**: an API that warns at run time on the target (`torch.qr`, `torch.cuda.amp.autocast`, `nn.init.xavier_uniform`):
  torch has announced that it goes.
  So is a deprecated keyword passed a value that makes torch's own source warn: the table's generator reads
  the test above each warning (`if verbose != "deprecated"`, `if not only_inputs`) and follows the keyword
  into the helpers it is passed to (the schedulers' shared `verbose` check).
- **medium**: such a keyword passed a variable, where the test decides (`only_inputs=flag`); `scheduler.step(epoch)`
  (it warns, but no validation draw has read one blind yet).
- **low**: an API deprecated only in torch's documentation, which neither warns nor has a removal date
  (`torch.norm`, `torch.svd`, `torch.ger`, `nn.UpsamplingNearest2d`), and names the
  generated table marks deprecated: the code is dated, but nothing says it breaks soon. So is a deprecated
  keyword passed a value torch lets through without a warning (`only_inputs=True`).
"""

    @classmethod
    def prepass(cls, scan):
        def passes_deprecated_keyword(region) -> bool:
            return any(
                _deprecated_keyword(public_name(candidate), keyword)
                for candidates, written in region.keyword_calls
                for candidate in candidates
                for keyword in written
            )

        return (
            api_use_regions(scan, cls.known)
            | scan.regions_where(passes_deprecated_keyword)
            | scan.regions_where(lambda region: not region.attributes.isdisjoint({"saved_variables", _NON_FULL_HOOK}))
            | scan.regions_calling_qualified(VARIABLE_CLASSES)
            | (
                scan.regions_whose_text_matches(_STEP_WITH_ARGUMENT) | scan.regions_whose_text_matches(_GET_LR_CALL)
                if "lr_scheduler" in scan.source
                else frozenset()
            )
        ) or None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        super().visit_Attribute(node)
        if node.attr.value != "saved_variables" or not isinstance(node.value, cst.Name):
            return
        function = self.context.enclosing(cst.FunctionDef)
        if function is None or context_parameter(self.context, function, self.context.enclosing(cst.ClassDef)) != node.value.value:
            return
        if self.target < SAVED_VARIABLES_DEPRECATED_SINCE or self.guarded():
            return
        self.report(
            node,
            f"`{node.value.value}.saved_variables` is deprecated (a DeprecationWarning since torch "
            f"{version_text(SAVED_VARIABLES_DEPRECATED_SINCE)}): use `.saved_tensors`, which returns the same tensors",
            FixSpec(Applicability.SAFE, "Use `.saved_tensors`", (Replacement(node.attr, cst.Name("saved_tensors")),)),
        )

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self.context.qualified_name(node.func) in VARIABLE_CLASSES:
            self._variable(node)
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "step" and node.args:
            self._scheduler_step_with_epoch(node)
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "get_lr" and not node.args:
            self._scheduler_get_lr(node)
            return
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == _NON_FULL_HOOK:
            self._non_full_backward_hook(node)
            return
        if not any(arg.keyword is not None for arg in node.args):
            return
        qualified = self.context.qualified_name(node.func)
        if qualified is None or not in_watched_package(qualified):
            return
        api = public_name(qualified)
        for arg in node.args:
            if arg.keyword is None or not _deprecated_keyword(api, arg.keyword.value):
                continue
            keyword = arg.keyword.value
            since = keyword_deprecated_in(api, keyword)
            if self.target < since or keyword_at(api, keyword, self.target).accepted is not True:
                continue  # not yet deprecated there, or gone: TL405 reports the TypeError
            if self.guarded():
                return
            value = literal_value(arg.value)
            warns = keyword_warns(api, keyword, UNKNOWN_VALUE if value is NOT_A_LITERAL else value)
            level = Confidence.HIGH if warns else Confidence.LOW if warns is False else Confidence.MEDIUM
            note = api_entry(api).deprecated_keywords[keyword]
            renamed = self._renamed_keyword(api, note.replacement)
            self.report(arg, _keyword_message(api, keyword, since, warns, note, renamed), self._keyword_fix(node, arg, note, renamed), confidence=level)

    def _scheduler_step_with_epoch(self, node: cst.Call) -> None:
        """``scheduler.step(epoch)`` on a scheduler this file builds (a name or ``self.`` attribute bound to an
        ``lr_scheduler`` class): the argument warns on every call. No fix: ``step()`` counts from the scheduler's
        own epoch, which differs by one where the loop passed the epoch before training it."""
        if has_star_args(node) or self.target < SCHEDULER_STEP_EPOCH_DEPRECATED_SINCE:
            return
        built = self._scheduler_classes(node.func.value)
        if not built or any(not name.startswith("torch.optim.lr_scheduler.") or name in SCHEDULERS_STEPPED_WITH_AN_ARGUMENT for name in built):
            return
        if self.guarded():
            return
        self.report(
            node,
            f"`{_shown_scheduler(built)}.step(epoch)` warns on every call since torch "
            f"{version_text(SCHEDULER_STEP_EPOCH_DEPRECATED_SINCE)} (the epoch argument is deprecated): call `step()` "
            f"once per epoch and let the scheduler count",
            None,
            # Certain from the code (the runtime test shows the warning), but no validation draw has read one
            # blind yet: below the default level until one has.
            confidence=Confidence.MEDIUM,
        )

    def _scheduler_get_lr(self, node: cst.Call) -> None:
        """``scheduler.get_lr()`` where every binding of the receiver that may reach builds a torch scheduler that
        computes a rate: it warns and gives the chainable form's next value; ``get_last_lr()`` is the rate in use."""
        if self.target < SCHEDULER_GET_LR_WARNS_SINCE:
            return
        built = self._scheduler_classes(node.func.value)
        if not built or any(not name.startswith("torch.optim.lr_scheduler.") or name in SCHEDULERS_WITHOUT_GET_LR for name in built):
            return
        if self.guarded():
            return
        self.report(
            node,
            f"`{_shown_scheduler(built)}.get_lr()` called outside `step()` warns since torch {version_text(SCHEDULER_GET_LR_WARNS_SINCE)} "
            "and can return another rate than the one in use: use `get_last_lr()`",
            FixSpec(
                Applicability.UNSAFE,
                "Use `get_last_lr()` (the rates in use; code that set rates from get_lr's value reads other values)",
                (Replacement(node.func.attr, cst.Name("get_last_lr")),),
            ),
            # Certain from the code (the runtime test shows the warning and the value), but no validation draw has
            # read one blind yet: below the default level until one has, and out of the level table's reach.
            confidence=Confidence.MEDIUM,
            unmeasured=True,
        )

    def _scheduler_classes(self, receiver: cst.BaseExpression) -> tuple:
        """The qualified classes that may have built ``receiver``: one per binding of a name that may reach, or per
        assignment of a ``self.`` attribute in the class (empty when one is something else). An assignment of
        ``None`` is left out: no method is called on None where the call runs (``if self.sched is not None``)."""
        calls: tuple = ()
        if isinstance(receiver, cst.Name):
            calls = possible_constructors(self.context, receiver.value)
        elif is_self_attribute(receiver):
            class_def = self.context.enclosing(cst.ClassDef)
            values = self_attribute_assignments(class_def).get(receiver.attr.value, []) if class_def is not None else []
            values = [value for value in values if not (isinstance(value, cst.Name) and value.value == "None")]
            if not values or not all(isinstance(value, cst.Call) for value in values):
                return ()  # some binding is not a call (an unpacking, an update): nothing to name
            calls = tuple(values)
        if not calls:
            constructor = module_constructor(self.context, receiver)
            calls = (constructor,) if constructor is not None else ()
        built = tuple(self.context.qualified_name(call.func) for call in calls)
        return built if all(built) else ()

    def _non_full_backward_hook(self, node: cst.Call) -> None:
        """``module.register_backward_hook(hook)``: nn.Module is torch's only class with the method, so any receiver
        is one, unless a class of the project defines a method of that name. No fix: a full hook receives the
        gradients of the module's inputs, not of its last autograd node, and refuses modules whose forward
        changes its inputs in place."""
        if self.context.qualified_name(node.func) is not None or self.target < NON_FULL_BACKWARD_HOOK_DEPRECATED_SINCE:
            return
        if defines_a_method(self.context, _NON_FULL_HOOK) or self.guarded():
            return
        self.report(
            node,
            f"`register_backward_hook` is deprecated since torch {version_text(NON_FULL_BACKWARD_HOOK_DEPRECATED_SINCE)}: "
            "on a module whose forward runs several autograd nodes the hook sees only the last node's gradients, and "
            "torch warns; use `register_full_backward_hook`",
            None,
            # Certain from the code (the runtime test shows the warning), but no validation draw has read one
            # blind yet: below the default level until one has, and out of the level table's reach.
            confidence=Confidence.MEDIUM,
            unmeasured=True,
        )

    def _variable(self, node: cst.Call) -> None:
        """``Variable(x)``: deprecated in torch's documentation only (no warning), so ``low``. It returns a
        detached alias of ``x``; ``x.detach()`` is that alias (``.requires_grad_(b)`` for the flag)."""
        if has_star_args(node) or keyword_arg(node, "volatile") is not None or self.guarded():
            return  # volatile=: TL606 reports the flag that no longer works
        positional = [arg for arg in node.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg for arg in node.args if arg.keyword is not None}
        if not positional or len(positional) > 2 or set(keywords) - {"requires_grad"} or (len(positional) == 2 and keywords):
            return
        data = positional[0].value
        flag = positional[1] if len(positional) == 2 else keywords.get("requires_grad")
        detached = cst.Call(func=cst.Attribute(value=as_receiver(data), attr=cst.Name("detach")))
        if flag is not None:
            replacement = cst.Call(func=cst.Attribute(value=detached, attr=cst.Name("requires_grad_")), args=[cst.Arg(value=flag.value)])
        else:
            replacement = detached
        self.report(
            node,
            "`torch.autograd.Variable` is deprecated (torch's documentation): it returns a detached alias of its "
            "argument, so no gradient flows back through it; pass the tensor itself, or `.detach()` where the cut is meant",
            FixSpec(Applicability.SAFE, "Use `.detach()` (what Variable returns)", (Replacement(node, replacement),)),
            confidence=Confidence.LOW,
        )

    def _renamed_keyword(self, api: str, replacement: Optional[str]) -> Optional[str]:
        """The replacement, when it is a keyword the target's API takes (``min_value`` -> ``min_val``)."""
        if replacement is None or not replacement.isidentifier():
            return None
        return replacement if keyword_at(api, replacement, self.target).accepted else None

    @staticmethod
    def _keyword_fix(call: cst.Call, arg: cst.Arg, note: KeywordDeprecation, renamed: Optional[str]) -> Optional[FixSpec]:
        """Safe: an ignored keyword is removed; one renamed is renamed, unless the new name is already given."""
        if note.ignored:
            return FixSpec(Applicability.SAFE, f"Remove `{arg.keyword.value}=` (torch ignores it)", (Replacement(call, without_args(call, [arg])),))
        if renamed is not None and keyword_arg(call, renamed) is None and not has_star_args(call):
            return FixSpec(Applicability.SAFE, f"Rename `{arg.keyword.value}=` to `{renamed}=`", (Replacement(arg.keyword, cst.Name(renamed)),))
        return None


def _shown_scheduler(built: tuple) -> str:
    """The scheduler's class as a message names it: its class when one class built it on every path."""
    return built[0].rsplit(".", 1)[1] if len(set(built)) == 1 else "scheduler"


def _deprecated_keyword(api: str, keyword: str) -> bool:
    """A keyword the table marks deprecated; ``size_average``/``reduce`` are TL605's."""
    return keyword not in LEGACY_REDUCTION_KEYWORDS and keyword_deprecated_in(api, keyword) is not None


def _keyword_message(api: str, keyword: str, since, warns, note: KeywordDeprecation, renamed: Optional[str]) -> str:
    shown = api.replace(TENSOR_PREFIX, "Tensor.")
    how = "warns when passed" if warns else "is deprecated"
    removed = keyword_removed_in(api, keyword)
    fate = f"torch {version_text(removed)} removes it (TypeError)" if removed else "it breaks when torch drops it"
    if note.ignored:
        advice = "; torch ignores it: remove it"
    elif renamed is not None:
        advice = f"; use `{renamed}=`"
    elif note.replacement:
        advice = f"; use {note.replacement}"
    else:
        advice = ""
    return f"`{keyword}=` of {shown} {how} {deprecated_since_text(since)}: {fate}{advice}"


# nn.Module's method whose hook sees one autograd node's gradients (its replacement is register_full_backward_hook).
_NON_FULL_HOOK = "register_backward_hook"
# ``.step(`` with an argument: a scheduler stepped with its epoch (the visit decides).
_STEP_WITH_ARGUMENT = re.compile(r"\.\s*step\s*\(\s*[^)\s]")
# ``.get_lr()``: a scheduler's rate read outside its step (the visit decides).
_GET_LR_CALL = re.compile(r"\.\s*get_lr\s*\(\s*\)")
