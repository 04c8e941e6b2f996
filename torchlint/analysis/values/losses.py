"""Recognising loss calls: ``F.cross_entropy(x, y)`` and ``nn.CrossEntropyLoss(...)(x, y)`` alike.

A loss module may be built inline (``nn.BCELoss()(p, y)``), in ``__init__``
(``self.criterion = nn.BCELoss()`` then ``self.criterion(p, y)`` in
``forward``), a few lines earlier in the same function
(``criterion = nn.KLDivLoss(reduction="batchmean")``) or at module level
(a training script's ``criterion = nn.CrossEntropyLoss()`` used inside a
function that does not rebind it).  :func:`match_loss` returns the call, its
input and target arguments, and where the module was built, so that a fix
can rewrite either the function or the constructor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.dataflow import named_call
from torchlint.analysis.model.calls import argument, has_star_args
from torchlint.analysis.values.fused import (
    Activation,
    as_receiver,
    bare,
    functional,
    is_pure,
    log_softmax_call,
    peel_shape_ops,
)
from torchlint.analysis.model.ops import module_constructor, possible_constructors, unmoved
from torchlint.analysis.model.scope import assignments
from torchlint.findings import ImportRequirement, Replacement
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

LOSS_FUNCTIONS: Dict[str, str] = {
    "torch.nn.functional.cross_entropy": "cross_entropy",
    "torch.nn.functional.nll_loss": "nll",
    "torch.nn.functional.binary_cross_entropy": "bce",
    "torch.nn.functional.kl_div": "kl_div",
    "torch.nn.functional.binary_cross_entropy_with_logits": "bce_logits",
}
LOSS_MODULES: Dict[str, str] = {}
for _kind, _names in {
    "cross_entropy": ("CrossEntropyLoss",),
    "nll": ("NLLLoss",),
    "bce": ("BCELoss",),
    "kl_div": ("KLDivLoss",),
    "bce_logits": ("BCEWithLogitsLoss",),
}.items():
    for _name in _names:
        LOSS_MODULES[f"torch.nn.{_name}"] = _kind
        LOSS_MODULES[f"torch.nn.modules.loss.{_name}"] = _kind

# Every name a loss above is called by, for the ast pre-pass.
LOSS_NAMES: FrozenSet[str] = frozenset(name.rsplit(".", 1)[-1] for name in list(LOSS_FUNCTIONS) + list(LOSS_MODULES))

# The function / module that takes raw scores where ``bce`` takes probabilities.
WITH_LOGITS_FUNCTION = "binary_cross_entropy_with_logits"
WITH_LOGITS_MODULE = "BCEWithLogitsLoss"


@dataclass(frozen=True)
class LossCall:
    """A loss applied to (input, target).

    ``form`` is "function" or "module"; for a module, ``constructor`` is the
    call that built it and ``built`` says where: "inline", "self" (an
    attribute set in the class, ``attribute`` names it), "local" (a name
    assigned earlier in the function), "module" (a module-level name), "branches" (one of the modules that
    branches bind the name to) or "param" (a parameter every caller passes one built by the same class).
    """

    kind: str
    form: str
    node: cst.Call
    input: Optional[cst.Arg]
    target: Optional[cst.Arg]
    constructor: Optional[cst.Call] = None
    built: Optional[str] = None
    attribute: Optional[str] = None


def match_loss(context: "FileContext", node: cst.CSTNode) -> Optional[LossCall]:
    if not isinstance(node, cst.Call) or has_star_args(node):
        return None
    func = node.func
    kind = LOSS_FUNCTIONS.get(context.qualified_name(func) or "")
    if kind is not None:
        return LossCall(kind, "function", node, argument(node, 0, "input"), argument(node, 1, "target"))
    constructor, built, attribute = _constructor(context, func)
    constructor = unmoved(constructor)  # ``nn.BCELoss().to(device)``: the loss it moves
    if constructor is None:
        return None
    kind = LOSS_MODULES.get(context.qualified_name(constructor.func) or "")
    if kind is None:
        return None
    return LossCall(kind, "module", node, argument(node, 0, "input"), argument(node, 1, "target"), constructor, built, attribute)


# Functional losses whose names do not end in ``_loss``.
_OTHER_LOSS_FUNCTIONS = frozenset({"cross_entropy", "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits"})


def is_functional_loss_name(name: str) -> bool:
    """A ``torch.nn.functional`` loss by its name there (``mse_loss``, ``cross_entropy``)."""
    return name.endswith("_loss") or name in _OTHER_LOSS_FUNCTIONS


def is_loss_call(context: "FileContext", node: cst.Call) -> bool:
    """Any torch loss, not only those :func:`match_loss` tells apart: a ``torch.nn.functional`` loss
    (``F.mse_loss``, ``F.l1_loss``), or a module built from a ``torch.nn`` ``*Loss`` class (``self.mse(...)``
    with ``self.mse = nn.MSELoss().cuda()``, ``criterion(...)``)."""
    qualified = context.qualified_name(node.func) or ""
    if qualified.startswith("torch.nn.functional."):
        return is_functional_loss_name(qualified.rsplit(".", 1)[-1])
    constructor = unmoved(module_constructor(context, node.func))
    if constructor is None:
        return False
    built = context.qualified_name(constructor.func) or ""
    return built.startswith("torch.nn.") and built.endswith("Loss")


def _constructor(context: "FileContext", func: cst.BaseExpression):
    if isinstance(func, cst.Call):
        return func, "inline", None
    if isinstance(func, cst.Attribute):
        found = module_constructor(context, func)
        return (found, "self", func.attr.value) if found is not None else (None, None, None)
    if isinstance(func, cst.Name):
        function = context.enclosing(cst.FunctionDef)
        if func.value not in _loss_holders(context, function or context.module) and (
            function is None or func.value not in _loss_holders(context, context.module)
        ):
            return None, None, None  # no assignment builds a loss under this name: skip the walk back
        found = named_call(context, func.value)
        if found is not None:
            return found[0], found[1], func.value
        for possible in possible_constructors(context, func.value):
            if context.qualified_name(possible.func) in LOSS_MODULES:
                return possible, "branches", func.value  # one of several losses: no fix rewrites it
    return None, None, None


def _loss_holders(context: "FileContext", scope: cst.CSTNode) -> FrozenSet[str]:
    """Names that some assignment of ``scope`` (a function or the module, nested blocks included) binds to a
    loss module's constructor: the only names :func:`match_loss` can find a loss module behind."""

    def compute(node: cst.CSTNode) -> FrozenSet[str]:
        body = node.body.body if isinstance(node, cst.FunctionDef) else node.body
        return frozenset(
            target.value
            for target, value in assignments(body)
            if isinstance(target, cst.Name)
            and isinstance(value, cst.Call)
            and LOSS_MODULES.get(context.qualified_name(unmoved(value).func) or "") is not None
        )

    return context.memoized("losses.holders", scope, compute)


def references(scope: cst.CSTNode, name: str) -> int:
    """How many times ``name`` is read or written in ``scope`` (a function or the module), nested scopes included."""
    counter = _NameCounter(name)
    visit(scope, counter)
    return counter.count


def attribute_references(scope: cst.CSTNode, owner: str, attribute: str) -> int:
    """How many times ``owner.attribute`` (e.g. ``self.criterion``) occurs in ``scope``."""
    counter = _AttributeCounter(owner, attribute)
    visit(scope, counter)
    return counter.count


class _NameCounter(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.count = 0

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.count += 1

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        visit(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        visit(node.value, self)
        return False


class _AttributeCounter(cst.CSTVisitor):
    def __init__(self, owner: str, attribute: str) -> None:
        super().__init__()
        self.owner = owner
        self.attribute = attribute
        self.count = 0

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.owner and node.attr.value == self.attribute:
            self.count += 1


# -- rewriting the activation a loss consumes ------------------------------------------------


@dataclass(frozen=True)
class Rewrite:
    """Text edits that undo (or turn into ``log_softmax``) the activation feeding a loss.

    ``changes_other_uses``: the activation was stored in a name that is read
    elsewhere too (returned from ``forward``, logged, thresholded), and the
    rewrite changes what those uses see.
    """

    replacements: Tuple[Replacement, ...]
    imports: Tuple[ImportRequirement, ...]
    changes_other_uses: bool


def rewrite_activation(context: "FileContext", activation: Activation, into: str) -> Optional[Rewrite]:
    """Replace ``activation`` by its input (``into="input"``) or by the ``log_softmax`` of it (``"log_softmax"``).

    Inline activations are rewritten where they stand. A stored one
    (``probs = F.softmax(logits, -1)`` ... ``loss(probs, y)``) is written
    out at the use when its input is a plain expression unchanged since the
    assignment (``loss(logits, y)``: nothing else changes); otherwise the
    assignment itself is rewritten, which changes every other reader of the
    name (``changes_other_uses``).
    """
    imports: Tuple[ImportRequirement, ...] = ()
    if into == "log_softmax":
        if activation.softmax is None:
            return None
        built = log_softmax_call(context, activation.softmax)
        if built is None:
            return None
        new, imports = built
    else:
        new = activation.input
    definition = activation.definition
    if definition is None:
        top = activation.call is activation.argument
        return Rewrite((Replacement(activation.call, bare(new) if top else as_receiver(new)),), imports, False)
    use = peel_shape_ops(context, activation.argument)
    inputs_stay = is_pure(activation.input) and definition.unchanged_at_use(activation.call)
    if inputs_stay and definition.value is activation.call and isinstance(use, cst.Name):
        top = use is activation.argument
        replacement = bare(new) if top else as_receiver(new)
        return Rewrite((Replacement(use, replacement),), imports, False)
    scope = context.enclosing(cst.FunctionDef) or context.module
    top = definition.value is activation.call
    others = references(scope, definition.name) > 2  # the assignment and this use
    return Rewrite((Replacement(activation.call, bare(new) if top else as_receiver(new)),), imports, others)


def with_logits_replacements(context: "FileContext", loss: LossCall) -> Optional[Tuple[Tuple[Replacement, ...], Tuple[ImportRequirement, ...]]]:
    """Turn a ``bce`` loss into its ``..._with_logits`` twin, arguments kept; None when the module is shared."""
    if loss.kind != "bce":
        return None
    if loss.form == "function":
        func = loss.node.func
        if isinstance(func, cst.Attribute):
            return (Replacement(func.attr, cst.Name(WITH_LOGITS_FUNCTION)),), ()
        new_func, imports = functional(context, WITH_LOGITS_FUNCTION)
        return (Replacement(func, new_func),), imports
    if loss.built == "self":
        class_def = context.enclosing(cst.ClassDef)
        if class_def is None or attribute_references(class_def, "self", loss.attribute) != 2:
            return None
    elif loss.built == "local":
        scope = context.enclosing(cst.FunctionDef) or context.module
        if references(scope, loss.attribute) != 2:
            return None
    elif loss.built == "module":
        if references(context.module, loss.attribute) != 2:
            return None
    elif loss.built in ("param", "branches"):
        return None  # built by the callers, or one of several modules the name may hold
    func = loss.constructor.func
    if isinstance(func, cst.Attribute):
        return (Replacement(func.attr, cst.Name(WITH_LOGITS_MODULE)),), ()
    reference, requirement = context.reference("torch.nn", "nn")
    return (Replacement(func, cst.parse_expression(f"{reference}.{WITH_LOGITS_MODULE}")),), tuple(r for r in (requirement,) if r)
