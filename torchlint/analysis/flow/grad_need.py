"""Where a NaN gradient cannot happen because no gradient is computed: the negative signals TL106/TL107 ask for.

A NaN that only appears in the backward pass matters only where a backward
pass runs. Statically that is unknowable in general; these are the places
where it is known or conventional that it does not:

- code under ``torch.no_grad()`` / ``torch.inference_mode()`` /
  ``set_grad_enabled(False)`` or in a function decorated with them
  (:func:`torchlint.analysis.flow.module_evidence.in_no_grad_region`);
- data loading: ``__getitem__`` / ``__iter__`` of a class, any method of a
  ``Dataset`` / ``IterableDataset`` subclass, ``collate_fn``-style functions;
- metrics: methods of a class deriving from ``Metric``.

:func:`gradient_never_computed` is the same list for TL101-TL104 (plus initialisation, optimizer
code and input-preparation classes); :func:`gradient_flows` is the positive signal that makes an
operand of unknown sign a ``medium`` finding rather than a ``low`` one.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, FrozenSet, List, Optional, Sequence, Set

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.model.ast_names import ast_dotted_name, every_node
from torchlint.analysis.flow.callers import calls_named, enclosing_function, every_caller_passes, file_calls
from torchlint.analysis.model.calls import has_star_args, keyword_arg
from torchlint.analysis.model.dataflow import Site, bindings, site_of
from torchlint.analysis.values.domain import POW, SQRT, DomainOp, constant_value
from torchlint.analysis.flow.module_evidence import in_no_grad_region
from torchlint.analysis.values.kinds import MAX_DEPTH, value_kind
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.ops import call_parts
from torchlint.analysis.model.project_index import definition, file_facts
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

_DATA_METHODS = frozenset({"__getitem__", "__iter__", "__next__", "__getitems__"})
_NO_GRAD_BASES = re.compile(r"(^|\.)(Dataset|IterableDataset|Metric)$")
_COLLATE_FUNCTION = re.compile(r"collate")


def gradient_unlikely(context: "FileContext") -> bool:
    """Whether the node being visited runs where no backward pass is expected (see the module docs)."""
    return in_no_grad_region(context) or _in_data_or_metric_code(context.ancestors)


def _in_data_or_metric_code(ancestors: Sequence[cst.CSTNode]) -> bool:
    """Data loading (``__getitem__``, ``Dataset`` methods, collate functions) and metric classes."""
    for node in reversed(ancestors):
        if isinstance(node, cst.FunctionDef) and (
            node.name.value in _DATA_METHODS or conventions.says(bool(_COLLATE_FUNCTION.search(node.name.value)))
        ):
            return True
        if isinstance(node, cst.ClassDef):
            for base in node.bases:
                name = dotted_name(base.value)
                if name is not None and _NO_GRAD_BASES.search(name):
                    return True
    return False


_INTEGER_CASTS = frozenset({"long", "int", "bool", "short", "byte"})
_COUNTING = frozenset({"count_nonzero", "any", "all", "argmax", "argmin"})
_KEEPING = frozenset({"sum", "float", "double", "half", "to", "type_as", "squeeze", "unsqueeze", "view", "reshape", "flatten"})


def carries_no_gradient(context: "FileContext", node: cst.BaseExpression, ancestors=None, _depth: int = 0) -> bool:
    """Values autograd never differentiates: comparisons, integer/bool casts, counts of them
    (``torch.sum(logits > t).float()``, ``(m > 0).sum()``, ``count_nonzero``), names bound only to such values."""
    if _depth > 4:
        return False
    again = _depth + 1
    if isinstance(node, cst.Comparison):
        return True
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.BitInvert, cst.Not)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
        return True
    if isinstance(node, cst.Call) and node.args is not None:
        qualified = context.qualified_name(node.func)
        if qualified is not None:
            name = qualified.rsplit(".", 1)[-1]
            if not qualified.startswith("torch."):
                return False
            if name in _COUNTING:
                return True
            if name in _KEEPING and node.args:
                return carries_no_gradient(context, node.args[0].value, ancestors, again)
            return False
        if isinstance(node.func, cst.Attribute):
            method = node.func.attr.value
            if method in _INTEGER_CASTS or method in _COUNTING:
                return True
            if method in _KEEPING:
                return carries_no_gradient(context, node.func.value, ancestors, again)
        return False
    if isinstance(node, cst.Name) and ancestors is not None:
        reaching = bindings(site_of(list(ancestors)), node.value)
        values = [b.value for b in reaching if b.kind == "assign" and b.value is not None]
        return bool(values) and len(values) == len(reaching) and all(
            carries_no_gradient(context, value, ancestors, again) for value in values
        )
    return False


# -- where gradients flow --------------------------------------------------------------


# sqrt(0) = 0 and 0 ** (1/3) = 0 are fine values: only their derivative is infinite.
GRADIENT_ONLY_KINDS = frozenset({SQRT, POW})
NO_GRAD_CONTEXTS: FrozenSet[str] = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
# Consumers after which no gradient is wanted: they leave autograd (``detach``, ``long``, comparisons).
# The piecewise-constant ones (``floor``, ``round``, ``sign``) are not among them: they pass back a zero
# gradient, which meets sqrt's infinite one as 0 * inf = NaN when the operand needs a gradient.
_NON_DIFFERENTIABLE = frozenset({
    "detach", "item", "tolist", "numpy", "long", "int", "bool",
    "argmax", "argmin", "argsort", "nonzero", "isnan", "isinf", "isfinite", "eq", "ne", "gt", "lt", "ge", "le",
})
# Ground truth by name: ``target``, ``bbox_reg_targets``, ``gt_boxes``, ``y_true`` (not ``target_logit``,
# the model's logit of the target class).
_GROUND_TRUTH_NAME = re.compile(r"(^|_)targets?$|^gt(_|$)|(^|_)gt$|^y_true$")
# Sources that carry no gradient: constants and random draws.
_NO_GRADIENT_SOURCES = frozenset({
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal", "bernoulli",
    "multinomial", "arange", "linspace", "logspace", "ones", "zeros", "full", "ones_like", "zeros_like",
    "full_like", "eye", "tensor", "as_tensor", "empty", "poisson",
    # the legacy constructors: ``torch.Tensor([args.noise_std])`` holds the numbers it is given
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ByteTensor", "BoolTensor",
})


def gradient_cannot_flow(
    context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode], site: Optional[Site] = None
) -> bool:
    """Whether autograd can never differentiate ``op``: inside ``no_grad``/``inference_mode``
    (decorator or ``with``), optimizer code (a file defining a ``torch.optim.Optimizer``
    subclass), the ``forward`` of a ``torch.autograd.Function`` (a hand-written backward),
    a result that only feeds ``detach``/``round``/``long``/comparisons, or an operand made
    of constants, random draws and counts of comparisons or boolean masks."""
    if in_no_grad_code(context, ancestors) or _in_custom_autograd_function(context, ancestors):
        return True  # the forward of a torch.autograd.Function: its backward is written by hand
    path = list(ancestors) + [op.node]
    if _leaves_autograd(context, path):
        return True
    site = site or site_of(list(ancestors))
    return (
        _without_gradient(context, op.operand, site, 0)
        or _assigned_to_gradient_free_uses(context, path, site)
        or _returned_only_to_gradient_free_uses(context, path, site)
    )


def _leaves_autograd(context: "FileContext", path: Sequence[cst.CSTNode]) -> bool:
    """Whether the value at the end of ``path`` (outermost first) only feeds, within its statement, a
    comparison, a :data:`_NON_DIFFERENTIABLE` call, or the indices of a ranking (``_, idx = s.topk(k)``)."""
    for position in range(len(path) - 2, -1, -1):
        node = path[position]
        if isinstance(node, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return isinstance(node, cst.Assign) and _keeps_only_indices(context, node, path[position + 1])
        if isinstance(node, cst.Comparison):
            return True
        if isinstance(node, cst.Call):
            name, _, _ = call_parts(context, node)
            if name in _NON_DIFFERENTIABLE:
                return True
    return False


# Rankings that return (values, indices).
_RANKINGS = frozenset({"topk", "sort", "kthvalue", "max", "min", "median", "mode"})


def _keeps_only_indices(context: "FileContext", assign: cst.Assign, value: cst.CSTNode) -> bool:
    """``_, idx = s.topk(k)``: the ranking's values are thrown away, its indices carry no gradient."""
    if value is not assign.value or not isinstance(value, cst.Call) or len(assign.targets) != 1:
        return False
    name, _, _ = call_parts(context, value)
    target = assign.targets[0].target
    return (
        name in _RANKINGS
        and isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == 2
        and isinstance(target.elements[0].value, cst.Name)
        and target.elements[0].value.value == "_"
    )


def _returned_only_to_gradient_free_uses(context: "FileContext", path: Sequence[cst.CSTNode], site: Site) -> bool:
    """``magnitudes = w.pow(2).sum(1).sqrt()`` in a helper whose result (or the element of the tuple it
    returns that holds the value) every call in the file only ranks, prints or compares
    (``_, idx = helper(emb)[1].topk(6)``): nothing differentiates it.  One level of callers."""
    function = site.function
    assign = next((node for node in reversed(path) if isinstance(node, (cst.Assign, cst.BaseStatement))), None)
    if function is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return False
    positions = _returned_positions(context, function, target.value)
    if not positions:
        return False
    sites = file_calls(context, function)
    return bool(sites) and all(_call_result_unused_by_autograd(context, call_site, positions) for call_site in sites)


def _returned_positions(context: "FileContext", function: cst.FunctionDef, name: str) -> Optional[FrozenSet[Optional[int]]]:
    """Where ``name`` (or a name assigned from it in the function) leaves ``function``: the positions of the
    returned tuples that read it, ``None`` for a whole returned value; empty when it is never returned, None
    when a return cannot be read (a nested function's)."""
    derived = {name}
    reads = _reads_of(context, function)
    for _ in range(3):  # names assigned from it, a few steps on
        for candidate, paths in reads.items():
            for read in paths:
                holder = next((node for node in reversed(read) if isinstance(node, cst.Assign)), None)
                if holder is not None and len(holder.targets) == 1 and isinstance(holder.targets[0].target, cst.Name):
                    if candidate in derived:
                        derived.add(holder.targets[0].target.value)
    positions: Set[Optional[int]] = set()
    for node in _cst_nodes(function.body):
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            return None
        if not isinstance(node, cst.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, cst.Tuple):
            for index, element in enumerate(value.elements):
                if _reads_any(element.value, derived):
                    positions.add(index)
        elif _reads_any(value, derived):
            positions.add(None)
    return frozenset(positions)


def _reads_any(node: cst.CSTNode, names: Set[str]) -> bool:
    return any(isinstance(inner, cst.Name) and inner.value in names for inner in _cst_nodes(node))


def _call_result_unused_by_autograd(context: "FileContext", call_site, positions: FrozenSet[Optional[int]]) -> bool:
    """The call's value, at ``positions`` of the tuple it returns, only feeds uses that leave autograd in the
    scope that makes the call."""
    path = list(call_site.ancestors) + [call_site.call]
    if None not in positions and _leaves_autograd(context, path):
        return True
    parent = call_site.ancestors[-1] if call_site.ancestors else None
    if not isinstance(parent, cst.Assign) or parent.value is not call_site.call or len(parent.targets) != 1:
        return False
    target = parent.targets[0].target
    if isinstance(target, cst.Name):
        names = [target.value]
    elif isinstance(target, (cst.Tuple, cst.List)) and None not in positions:
        elements = target.elements
        if any(index >= len(elements) or not isinstance(elements[index].value, cst.Name) for index in positions):
            return False
        names = [elements[index].value.value for index in positions]
    else:
        return False
    scope = enclosing_function(call_site.ancestors)
    reads = _reads_of(context, scope) if scope is not None else _module_reads(context)
    for name in names:
        if name == "_":
            continue
        found = reads.get(name, ())
        if not found or not all(_leaves_autograd(context, read) for read in found):
            return False
    return True


def _module_reads(context: "FileContext"):
    """Every read of each name at a module's top level and in its functions, as in :func:`_reads_of`."""
    return context.memoized("guards.module-reads", context.module, lambda module: _collect_reads(module))


def _assigned_to_gradient_free_uses(
    context: "FileContext", path: Sequence[cst.CSTNode], site: Site, followed: FrozenSet[str] = frozenset()
) -> bool:
    """``w_norm = w.pow(2).sum(0).sqrt()`` whose every read in the function leaves autograd
    (``assert torch.all((w_norm - 1).abs() < tol)``), itself or through names assigned from it that do
    (``top = energy.max()``, then only ``energy - top > t``): nothing differentiates it.  Reads anywhere
    in the function count, before the assignment too (a loop may carry the value round)."""
    function = site.function
    assign = next((node for node in reversed(path) if isinstance(node, (cst.Assign, cst.BaseStatement))), None)
    if function is None or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return False
    target = assign.targets[0].target
    if not isinstance(target, cst.Name) or target.value in followed or len(followed) > 3:
        return False
    reads = _reads_of(context, function).get(target.value, ())
    followed = followed | {target.value}
    # A value never read is left to be reported: that is how snippets and unfinished code look.
    return bool(reads) and all(
        _leaves_autograd(context, read) or _assigned_to_gradient_free_uses(context, read, site, followed)
        for read in reads
    )


def _reads_of(context: "FileContext", function: cst.FunctionDef):
    """Every read of each local name in ``function`` (nested functions and lambdas included), as the
    path from the function's body down to the ``Name``; stores (assignment targets) are not reads."""

    return context.memoized("guards.reads", function, lambda node: _collect_reads(node.body))


def _cst_nodes(root: cst.CSTNode) -> List[cst.CSTNode]:
    """Every node under ``root``, itself included."""
    found, pending = [], [root]
    while pending:
        node = pending.pop()
        found.append(node)
        pending.extend(node.children)
    return found


def _collect_reads(root: cst.CSTNode):
    reads: dict = {}
    stack: list = []
    stores: Set[int] = set()

    class _Reads(cst.CSTVisitor):
        def on_visit(self, visited: cst.CSTNode) -> bool:
            if isinstance(visited, cst.AssignTarget):
                for stored in _cst_nodes(visited.target):
                    if isinstance(stored, cst.Name):
                        stores.add(id(stored))
            if isinstance(visited, cst.Name) and id(visited) not in stores:
                reads.setdefault(visited.value, []).append(tuple(stack) + (visited,))
            stack.append(visited)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            stack.pop()

    visit(root, _Reads())
    return reads


def backward_never_reaches(context: "FileContext", op: DomainOp, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Where no NaN gradient of ``op`` can happen, for the rules whose hazard is only a gradient (TL106's
    unselected ``where`` branch, TL107's filtered result): :func:`gradient_cannot_flow`, code where no
    backward pass is expected (:func:`torchlint.analysis.flow.grad_need.gradient_unlikely`), and ratios of
    counts of comparisons."""
    if gradient_unlikely(context) or gradient_cannot_flow(context, op, ancestors):
        return True
    parts = [op.operand] + ([op.numerator] if op.numerator is not None else [])
    return all(carries_no_gradient(context, part, ancestors) for part in parts)


# Methods torch and Python call to build an object: what they compute becomes a leaf.
_INITIALISATION_HOOKS = frozenset({"__init__", "__post_init__", "reset_parameters", "_reset_parameters", "_init_weights"})
# Functions named for initialisation (``init_weights``, ``xavier_init``): a naming convention.
_INITIALISATION = re.compile(r"(^|_)(init|initialize|initialise|reset_parameters)(_|$)|^__init__$", re.IGNORECASE)


def _initialises(name: str) -> bool:
    return name in _INITIALISATION_HOOKS or conventions.says(bool(_INITIALISATION.search(name)))



# Names that say gradients flow: a module's forward, a training step, a loss.  ``__call__`` says nothing
# (a data transform's is one), nor does a test of a loss (``test_focal_loss``, ``TestDiceLoss``).
_GRADIENT_NAME = re.compile(r"^(?!test).*loss", re.IGNORECASE)
# The hooks whose results a framework back-propagates.
_DIFFERENTIATED_HOOKS = frozenset({"forward", "training_step", "compute_loss"})


def _named_for_gradients(name: str) -> bool:
    return name in _DIFFERENTIATED_HOOKS or conventions.says(bool(_GRADIENT_NAME.search(name)))



def gradient_never_computed(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """The places the code itself says no gradient is computed, where TL101-TL104 report nothing:
    ``no_grad``/``inference_mode`` (region, decorator, or every same-file call of a helper), initialisation
    (``__init__``, ``reset_parameters``, ``*_init``), optimizer update code, data loading (``Dataset``
    methods, ``__getitem__``, collate functions), metric classes, and input preparation classes
    (``*FeatureExtractor``, ``*ImageProcessor`` subclasses)."""
    if in_no_grad_code(context, ancestors) or _in_preprocessing(context, ancestors):
        return True
    # A metric class whose method or own name says loss is one (pytorch-forecasting's losses derive from
    # torchmetrics' Metric): there the name is the evidence that gradients flow.
    return _in_data_or_metric_code(ancestors) and not _named_differentiated(ancestors)


# Calls that compute gradients, or make a tensor ask for them.
_GRADIENT_CALLS = frozenset({"backward", "grad", "requires_grad_"})


def _asks_for_gradients(scope: cst.CSTNode) -> bool:
    found = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _GRADIENT_CALLS:
                found.append(node)
            elif any(
                arg.keyword is not None and arg.keyword.value == "requires_grad"
                and isinstance(arg.value, cst.Name) and arg.value.value == "True"
                for arg in node.args
            ):
                found.append(node)
            return not found

    visit(scope, _Calls())
    return bool(found)


def gradient_flows(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether the code shows that gradients flow here (an unknown sign is then a ``medium`` finding,
    elsewhere a ``low`` one): a ``forward``, ``__call__`` or ``training_step``, a function or class named for
    a loss or a file of losses (names raise confidence, they never decide silence), a scope that calls
    ``backward()``/``autograd.grad`` or makes a tensor that requires a gradient, or a function the file
    calls from such code."""
    if _named_differentiated(ancestors) or _differentiated_path(context.path):
        return True
    function = enclosing_function(ancestors)
    if _computes_gradients(context, function):
        return True
    return function is not None and any(
        _named_differentiated(site.ancestors) or _computes_gradients(context, enclosing_function(site.ancestors))
        for site in calls_named(context, function.name.value)
    )


def gradient_flows_here(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """:func:`gradient_flows` from the code around ``ancestors`` alone: a ``forward``, a loss, or a scope that
    calls ``backward()`` itself; not a helper that such code calls (its result may only be logged)."""
    return _named_differentiated(ancestors) or _differentiated_path(context.path) or _computes_gradients(
        context, enclosing_function(ancestors)
    )


def _named_differentiated(ancestors: Sequence[cst.CSTNode]) -> bool:
    return any(
        isinstance(node, (cst.FunctionDef, cst.ClassDef)) and _named_for_gradients(node.name.value)
        for node in ancestors
    )


def _computes_gradients(context: "FileContext", function: Optional[cst.FunctionDef]) -> bool:
    """``function``'s code (the file, for a script's top level) calls backward or asks for a gradient: a
    ``.backward(...)`` or ``autograd.grad(...)`` call, ``requires_grad=True``, ``.requires_grad_(...)``."""
    scope = context.module if function is None else function
    return context.memoized("grad_need.computes-gradients", scope, _asks_for_gradients)


def gradient_regions(scan, regions: FrozenSet[int]) -> FrozenSet[int]:
    """The ``ast`` pre-pass's counterpart of :func:`gradient_never_computed` (a necessary condition): of
    ``regions`` (of a torchlint.prepass.Scan), those that are not a function that initialises or runs under
    ``@torch.no_grad()``."""
    return frozenset(i for i in regions if not _never_differentiated(scan, scan.regions[i].node))


def _never_differentiated(scan, node: ast.stmt) -> bool:
    """``__init__``/``reset_parameters``, or a function decorated with a no-grad context whatever import its name
    comes from."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if node.name in _INITIALISATION_HOOKS:
        return True  # not a function named for initialisation: a name moves a finding, never removes one
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call):
            if _all_in(scan.qualified(decorator.func), {"torch.set_grad_enabled"}):
                first = decorator.args[0] if decorator.args else None
                if isinstance(first, ast.Constant) and first.value is False:
                    return True
                continue
            decorator = decorator.func
        if _all_in(scan.qualified(decorator), NO_GRAD_CONTEXTS):
            return True
    return False


def _all_in(candidates, names) -> bool:
    return bool(candidates) and all(candidate in names for candidate in candidates)


def _differentiated_path(path: str) -> bool:
    """A file or folder named for losses (a naming convention)."""
    path = path.replace("\\", "/").lower()
    return conventions.says("loss" in path.rsplit("/", 2)[-1] or "/loss" in path)


_AUTOGRAD_FUNCTION_BASES = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
# Input preparation, run before the model (transformers-style feature extractors and processors).
_PREPROCESSING_BASE = re.compile(
    r"(FeatureExtractor|SequenceFeatureExtractor|ImageProcessor|VideoProcessor|ProcessorMixin|Tokenizer)(Mixin|Base|Fast)?$"
)


def _in_custom_autograd_function(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside the ``forward`` of a ``torch.autograd.Function`` subclass (a hand-written backward)."""
    for position, node in enumerate(ancestors):
        if isinstance(node, cst.ClassDef) and any(
            context.qualified_name(base.value) in _AUTOGRAD_FUNCTION_BASES for base in node.bases
        ):
            inner = ancestors[position + 1 :]
            return any(isinstance(n, cst.FunctionDef) and n.name.value == "forward" for n in inner)
    return False


def _in_preprocessing(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Input preparation classes: code no backward pass runs through."""
    for node in ancestors:
        if isinstance(node, cst.ClassDef):
            for base in node.bases:
                name = dotted_name(base.value) or ""
                if _PREPROCESSING_BASE.search(name.rsplit(".", 1)[-1]):
                    return True
    return False


def in_no_grad_code(context: "FileContext", ancestors: Sequence[cst.CSTNode], _callers: bool = True) -> bool:
    """``no_grad``/``inference_mode``, optimizer files, and initialisation code (``__init__``,
    ``reset_parameters``, ``*_init``): what they compute becomes a leaf, never differentiated through.
    So is a function every same-file call of which stands in such code (one level of callers)."""
    for node in ancestors:
        if isinstance(node, cst.FunctionDef) and any(_is_no_grad(context, d.decorator) for d in node.decorators):
            return True
        if isinstance(node, cst.FunctionDef) and _initialises(node.name.value):
            return True
        if isinstance(node, cst.With) and any(_is_no_grad(context, item.item) for item in node.items):
            return True
    # An optimizer's own update maths (its class's methods), not the loss functions its file may define too
    # (accelerate's megatron_lm.py wraps an optimizer and computes masked losses).
    if in_optimizer_class(context, ancestors):
        return True
    # A helper the file only calls with gradients off (``with torch.no_grad(): self._project(w)``).
    if not _callers:
        return False
    function = enclosing_function(ancestors)
    if function is None or (function.name.value not in _called_without_gradients(context) and not defines_optimizer(context)):
        return False  # no no-grad or initialisation code calls it: no walk of the module for its callers
    return _only_called_from(context, ancestors, lambda site: in_no_grad_code(context, site.ancestors, _callers=False))


_NO_GRAD_WORDS = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})


def _called_without_gradients(context: "FileContext") -> FrozenSet[str]:
    """The last names of every callee inside a ``with`` of a no-grad context, a function decorated with one
    or a function named for initialisation, read with ``ast`` (a superset of the calls
    :func:`in_no_grad_code` accepts: the contexts are matched by their last name, aliases included)."""

    def compute(module: cst.Module) -> FrozenSet[str]:
        try:
            tree = context.ast_tree if context.ast_tree is not None else ast.parse(context.source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return frozenset(_every_word(context))
        nodes = every_node(tree)
        words = set(_NO_GRAD_WORDS)
        for node in nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                words.update(a.asname for a in node.names if a.asname and a.name.rsplit(".", 1)[-1] in _NO_GRAD_WORDS)
        roots: List[ast.AST] = []
        for node in nodes:
            kind = type(node)
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                if _INITIALISATION.search(node.name) or any(_last_word(d) in words for d in node.decorator_list):
                    roots.append(node)
            elif kind is ast.With or kind is ast.AsyncWith:
                if any(_last_word(item.context_expr) in words for item in node.items):
                    roots.append(node)
        return frozenset(
            word for root in roots for node in every_node(root) if type(node) is ast.Call for word in (_last_word(node.func),) if word
        )

    return context.memoized("grad_need.called-without-gradients", context.module, compute)


def _last_word(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Call):
        node = node.func
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _every_word(context: "FileContext") -> Set[str]:
    return set(re.findall(r"\w+", context.source))


def _only_called_from(context: "FileContext", ancestors: Sequence[cst.CSTNode], accepts) -> bool:
    """Whether the function around ``ancestors`` has same-file calls and ``accepts`` every one of them
    (:func:`torchlint.analysis.flow.callers.file_calls`: public functions too, such as a schedule helper the
    file calls only from ``__init__``)."""
    function = enclosing_function(ancestors)
    sites = file_calls(context, function) if function is not None else None
    return bool(sites) and all(accepts(site) for site in sites)



def _is_no_grad(context: "FileContext", node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call):
        qualified = context.qualified_name(node.func)
        if qualified == "torch.set_grad_enabled" and node.args:
            value = node.args[0].value
            return isinstance(value, cst.Name) and value.value == "False"
        node = node.func
    return context.qualified_name(node) in NO_GRAD_CONTEXTS


def defines_optimizer(context: "FileContext") -> bool:
    """A file that defines an optimizer: its update maths is never differentiated."""
    cached = getattr(context, "_tl1_defines_optimizer", None)
    if cached is None:
        cached = False
        for statement in context.module.body:
            if isinstance(statement, cst.ClassDef):
                for base in statement.bases:
                    qualified = context.qualified_name(base.value) or dotted_name(base.value) or ""
                    if _names_an_optimizer(qualified) or _derives_from_optimizer(context, qualified):
                        cached = True  # an optimizer of its own, or one built on torch's (``class SharedAdam(optim.Adam)``)
        context._tl1_defines_optimizer = cached
    return cached


def in_optimizer_class(context: "FileContext", ancestors: Sequence[cst.CSTNode]) -> bool:
    """Inside a class that is an optimizer (``class SharedAdam(optim.Adam)``, a subclass of the project's own)."""
    for node in ancestors:
        if isinstance(node, cst.ClassDef):
            for base in node.bases:
                qualified = context.qualified_name(base.value) or dotted_name(base.value) or ""
                if _names_an_optimizer(qualified) or _derives_from_optimizer(context, qualified):
                    return True
    return False


def _names_an_optimizer(qualified: str) -> bool:
    return qualified.rsplit(".", 1)[-1].endswith("Optimizer") or qualified.startswith("torch.optim.")


def _derives_from_optimizer(context: "FileContext", qualified: str, depth: int = 0) -> bool:
    """A class of the file or of another module of the project whose bases, followed up, reach an optimizer
    (``class Adam(Optim)`` with ``Optim`` imported from the project's ``utils/optim.py``)."""
    if depth > 3 or "." not in qualified and context.project is None:
        return False
    facts = file_facts(context)
    if facts is None:
        return False
    found = definition(qualified if "." in qualified else f"{facts.module}.{qualified}", facts, context.project)
    if found is None:
        return False
    owner, name = found
    node = owner.class_nodes.get(name)
    if node is None:
        return False
    for base in node.bases:
        dotted = ast_dotted_name(base) or ""
        based = owner.imported(dotted) or owner.imports.get(dotted) or (f"{owner.module}.{dotted}" if dotted in owner.class_nodes else dotted)
        if _names_an_optimizer(based) or (based != qualified and _derives_from_optimizer(context, based, depth + 1)):
            return True
    return False


def may_be_negative(operand: cst.BaseExpression) -> bool:
    """``E[x^2] - E[x]^2`` style operands: rounding can make them negative, NaN in the forward pass."""
    return (isinstance(operand, cst.BinaryOperation) and isinstance(operand.operator, cst.Subtract)) or (
        isinstance(operand, cst.UnaryOperation) and isinstance(operand.operator, cst.Minus)
    )


def _asks_for_gradient(call: cst.Call) -> bool:
    requires = keyword_arg(call, "requires_grad")
    return requires is not None and not (isinstance(requires.value, cst.Name) and requires.value.value == "False")


def _without_gradient(context: "FileContext", node: cst.BaseExpression, site: Optional[Site], depth: int) -> bool:
    """Built only from literals, Python numbers, constants and random draws (no parameter or input)."""
    if depth > 3 * MAX_DEPTH:
        return False
    if constant_value(node) is not None or value_kind(context, node, site) == "number":
        return True
    if carries_no_gradient(context, node):
        return True  # comparisons, bool/integer casts and counts of them
    if isinstance(node, cst.Name):
        if conventions.says(bool(_GROUND_TRUTH_NAME.search(node.value))):
            return True  # ``bbox_reg_targets``, ``gt_boxes``: ground truth is never differentiated
        if site is None:
            return False
        reaching = bindings(site, node.value)
        if len(reaching) == 1 and reaching[0].kind == "param":
            # ``hz_to_mel(torch.tensor([f_min, f_max]))``: every caller hands in a constant
            return every_caller_passes(
                context, node.value, site, lambda value, at: _without_gradient(context, value, at, depth + 1)
            )
        # ``mask = zeros_like(x, dtype=bool); mask[idx] = True``: masked writes of constants add no gradient.
        return bool(reaching) and all(
            b.kind in ("assign", "update", "module", "unpack", "masked", "each") and b.value is not None
            and _without_gradient(context, b.value, b.site, depth + 1)
            for b in reaching
        )
    if isinstance(node, cst.BinaryOperation):
        return _without_gradient(context, node.left, site, depth + 1) and _without_gradient(context, node.right, site, depth + 1)
    if isinstance(node, cst.UnaryOperation):
        return _without_gradient(context, node.expression, site, depth + 1)
    if isinstance(node, cst.Call):
        name, source, is_method = call_parts(context, node)
        if name in _NO_GRADIENT_SOURCES and not is_method:
            return not _asks_for_gradient(node)  # torch.tensor(0.0, requires_grad=True) is a leaf that has one
        if name in ("detach",):
            return True
        if name is None or has_star_args(node):
            return False
        # A torch function or tensor method of gradient-free values is gradient-free.
        inputs = ([source] if is_method and source is not None else []) + [arg.value for arg in node.args]
        return bool(inputs) and all(_without_gradient(context, value, site, depth + 1) for value in inputs)
    if isinstance(node, cst.Subscript):
        return _without_gradient(context, node.value, site, depth + 1)
    if isinstance(node, cst.Attribute) and node.attr.value in ("data", "grad"):
        return True  # ``p.grad.data``: autograd tracks neither a tensor's .data nor its .grad
    return False


