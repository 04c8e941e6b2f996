from __future__ import annotations

import ast
import re
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.flow.callers import CallSite, every_call_site
from torchlint.analysis.model.calls import backpropagated_names, has_star_args, keyword_arg, positional_args
from torchlint.analysis.flow.gradflow import FunctionFlow, current_flow
from torchlint.analysis.flow.flow_events import Place
from torchlint.rule import WHOLE_FILE, Applicability, FixSpec, Replacement, Rule

TORCH_CONVERTERS = frozenset({"torch.as_tensor", "torch.tensor", "torch.Tensor", "torch.FloatTensor"})
FLOAT_CONSTRUCTORS = frozenset({"torch.Tensor", "torch.FloatTensor"})
NUMPY_CONVERTERS = frozenset({"numpy.array", "numpy.asarray"})
# Methods a framework calls by their name and trains through what they return (``nn.Module.__call__``, Lightning's
# trainer, transformers' ``Trainer``): the frameworks' protocol, not a naming convention.
_FRAMEWORK_TRAINED_RETURNS = frozenset({"forward", "training_step", "compute_loss"})


class GraphBreakTensorFromList(Rule):
    """
    ## What it does
    Flags `torch.as_tensor(L)`, `torch.tensor(L)`, `torch.Tensor(L)`,
    `torch.FloatTensor(L)` and `np.array(L)` where `L` is a list that received
    tensors carrying gradients: the outputs of a module (`self.fc(x)` where
    `__init__` set `self.fc = nn.Linear(...)`, `model(x)`, `self.encoder(x)`,
    `D(x)` where the file calls `D.parameters()`), leaves the code asked
    gradients for (`torch.tensor(0.3, requires_grad=True)`,
    `x.requires_grad = True`, `x.requires_grad_()`), arithmetic on them or a
    loss, appended in a loop (also when the list's name is then re-bound to
    the tensor), added by `extend`
    or `+=`, or built by a list comprehension or a list display, when the
    result flows into a tensor that is `.backward()`-ed in the same function
    or into the return value of `forward`, `training_step` or `compute_loss`
    (which their frameworks train through), or of a function that a caller in
    the file back-propagates (`loss = multitask_loss(...)`, then
    `loss.backward()`); for `np.array`, anywhere. Lists gathered for metrics
    and logging with the torch constructors stay silent.

    ## Why is this bad?
    These constructors read each element as a Python number and copy it into
    a new leaf tensor: the result has `requires_grad=False` and no history.
    Whatever is computed from it trains nothing. With a GradScaler the step
    fails with "No inf checks were recorded for this optimizer" (no parameter
    got a gradient); without one, the loss simply never moves. `np.array(L)`
    raises "Can't call numpy() on Tensor that requires grad".

    ## Example
    ```python
    def forward(self, features, spans):
        pred = []
        for start, end in spans:
            pred.append(self.fc(features[start:end].mean(0)))
        return torch.as_tensor(pred, device=features.device)
    ```

    ## Use instead
    ```python
        return torch.cat(pred).to(features.device)
    ```

    ## Fix safety
    Measured with torch 2.13: over a list of `n` one-element tensors, each
    of the four torch constructors returns shape `(n,)` whatever the elements'
    shape (`()`, `(1,)`, `(1, 1)`), and raises "only one element tensors can
    be converted to Python scalars" for larger elements. `torch.stack` gives
    `(n,)` for 0-d elements and `(n, 1)` for `(1,)` ones; `torch.cat` gives
    `(n,)` for `(1,)` elements and fails on 0-d ones. So the fix is
    `torch.stack(L)` when every element is known to be 0-d (a full reduction
    such as `.sum()` / `.mean()`, a loss with a reducing `reduction`,
    `.squeeze()`), `torch.cat(L)` when every element is known to be `(1,)`
    (`.view(1)`, `.reshape(-1)`, `.flatten()`, `.unsqueeze(0)` of a 0-d value):
    safe, the shape, values and dtype equal the original's. Where the shape
    cannot be known (a module output such as `self.fc(h)` of shape `(1, 1)`),
    the fix is `torch.stack(L).flatten()`, which also gives `(n,)` for every
    input the original accepted, but is unsafe: a list of larger tensors, on
    which the original raised, is now silently flattened. `device=` and
    `dtype=` become `.to(...)`; `torch.Tensor` / `torch.FloatTensor` gain
    `.float()` (they always made float32); `requires_grad=True` is dropped
    (the result now has a history). An empty list gave shape `(0,)` and now
    raises. `np.array(L)` is flagged without a fix: whether the values should
    be detached (for metrics) or stacked (for training) is for the author.

    Not seen: lists filled in another function or kept on `self`, elements
    from callees whose names say neither model nor loss, a result returned
    to a caller in another file that back-propagates it.
    """

    code = "TL301"
    name = "graph-break-tensor-from-list"
    message = (
        "building a tensor from a list of grad-carrying tensors copies their values into a leaf "
        "with requires_grad=False: the graph is cut and no parameter gets a gradient; use torch.stack/torch.cat"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("tensor", "Tensor", "array")

    @classmethod
    def prepass(cls, scan):
        converters = TORCH_CONVERTERS | NUMPY_CONVERTERS
        candidates = scan.regions_calling_qualified(converters)
        if not candidates:
            return None
        seeds = set()
        scope_facts: Dict[int, Tuple[FrozenSet[str], bool]] = {}
        for index in candidates:
            region = scan.regions[index]
            in_class_body = region.enclosing_class is not None
            for scope in _scopes_with_candidate_conversions(scan, region.node, in_class_body, converters, scope_facts):
                if scope is None:
                    # top-level script code: its flow spans every top-level statement
                    return WHOLE_FILE
                seeds.add(index)
                break
        # with the regions that call a seeded function: a caller may back-propagate what it returns
        return scan.with_mentions(frozenset(seeds)) if seeds else None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in TORCH_CONVERTERS and qualified not in NUMPY_CONVERTERS:
            return
        positional = positional_args(node)
        if not positional or has_star_args(node):
            return
        flow = current_flow(self.context)
        # np.array raises on tensors that require grad wherever it is; the torch copies only matter when trained
        if flow is None or (qualified in TORCH_CONVERTERS and not self._trained(flow, node)):
            return
        elements = self._elements(flow, node, positional[0].value)
        if not elements or not any(flow.carries_grad(element, at=site) for element, site in elements):
            return
        if qualified in NUMPY_CONVERTERS:
            self.report(
                node,
                "np.array over tensors that require grad raises \"Can't call numpy() on Tensor that requires grad\"; "
                "detach them for metrics or torch.stack them to keep training",
            )
            return
        self.report(node, fix=self._fix(flow, node, qualified, positional[0].value, elements))

    def _trained(self, flow: FunctionFlow, call: cst.Call) -> bool:
        """Whether the converted value reaches a backward()-ed tensor, or the return of a
        function whose result is trained (a framework's ``forward``/``training_step``/``compute_loss``,
        or a function a caller in the file back-propagates): a list of outputs gathered for
        metrics or logging is not trained through, and keeping its graph would only hold memory."""
        sinks = [(c.tensor, c.site) for c in flow.backward_calls]
        if _returns_trained(self.context, flow.function):
            sinks.extend(flow.returns)
        return any(id(call) in flow.flows_into(sink, site) for sink, site in sinks)

    @staticmethod
    def _elements(flow: FunctionFlow, call: cst.Call, source: cst.BaseExpression) -> List[Tuple[cst.BaseExpression, Place]]:
        """What the converted list holds, each with the site where it is evaluated (none under no_grad)."""
        if isinstance(source, cst.Name):
            return [(element, site) for element, site in flow.list_elements(source.value) if not site.no_grad]
        site = flow.sites.get(id(call))
        if site is None or site.no_grad:
            return []
        if isinstance(source, (cst.List, cst.Tuple)):
            return [(e.value, site) for e in source.elements if not isinstance(e, cst.StarredElement)]
        if isinstance(source, cst.ListComp):
            return [(source.elt, site)]
        return []

    def _fix(
        self,
        flow: FunctionFlow,
        node: cst.Call,
        qualified: str,
        source: cst.BaseExpression,
        elements: Sequence[Tuple[cst.BaseExpression, Place]],
    ) -> Optional[FixSpec]:
        conversions = self._conversions(node, qualified)
        if conversions is None:
            return None
        nested = _nested_list(flow, source)
        if nested is not None:
            # ``torch.Tensor([losses])`` with ``losses`` a list the function fills: a (1, n) tensor, which
            # ``torch.stack(losses).unsqueeze(0)`` builds when every element is 0-d (``torch.stack([losses])`` is a
            # TypeError: stack takes tensors, not a list)
            if {flow.element_shape(element) for element, _ in flow.list_elements(nested)} != {"scalar"}:
                return None
            torch_ref, requirement = self.context.reference("torch", "torch")
            return FixSpec(
                Applicability.SAFE,
                "Build it with `torch.stack(...).unsqueeze(0)`, which keeps the graph",
                (Replacement(node, f"{torch_ref}.stack({nested}).unsqueeze(0){conversions}"),),
                tuple(r for r in (requirement,) if r),
            )
        if isinstance(source, cst.Name) and any(
            feed.iterable is not None for feed in flow.list_feeds.get(source.value, ())
        ):
            shapes = {None}
        else:
            shapes = {flow.element_shape(element) for element, _ in elements}
        if "number" in shapes:
            return None  # Python numbers among the tensors: stack would need them converted
        if any(isinstance(element, cst.Name) and flow.list_feeds.get(element.value) for element, _ in elements):
            return None  # a list literal holding lists the function fills: a nested shape the rewrite would lose
        torch_ref, requirement = self.context.reference("torch", "torch")
        listed = self.context.code(source)
        if shapes == {"scalar"}:
            text, applicability, how = f"{torch_ref}.stack({listed})", Applicability.SAFE, "torch.stack"
        elif shapes == {"one"}:
            text, applicability, how = f"{torch_ref}.cat({listed})", Applicability.SAFE, "torch.cat"
        else:
            text, applicability, how = f"{torch_ref}.stack({listed}).flatten()", Applicability.UNSAFE, "torch.stack(...).flatten()"
        text += conversions
        return FixSpec(
            applicability,
            f"Build it with `{how}`, which keeps the graph",
            (Replacement(node, text),),
            tuple(r for r in (requirement,) if r),
        )

    def _conversions(self, node: cst.Call, qualified: str) -> Optional[str]:
        """``.to(...)`` / ``.float()`` that keep the original's device and dtype, or None when unsure."""
        positional = positional_args(node)
        given: List[Tuple[str, cst.BaseExpression]] = []
        if len(positional) > 1:
            if qualified != "torch.as_tensor" or len(positional) > 3:
                return None
            for name, arg in zip(("dtype", "device"), positional[1:]):
                given.append((name, arg.value))
        for arg in node.args:
            if arg.keyword is None:
                continue
            name = arg.keyword.value
            if name in ("dtype", "device"):
                given.append((name, arg.value))
            elif name == "requires_grad":
                continue
            else:
                return None
        suffix = ".float()" if qualified in FLOAT_CONSTRUCTORS else ""
        if len(given) == 1:
            suffix += f".to({self.context.code(given[0][1])})"
        elif given:
            inner = ", ".join(f"{name}={self.context.code(value)}" for name, value in given)
            suffix += f".to({inner})"
        if keyword_arg(node, "dtype") is not None and qualified in FLOAT_CONSTRUCTORS:
            return None
        return suffix


# -- the pre-pass's necessary condition, over ``ast`` ------------------------------------------

_AST_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_AST_SOURCES = (ast.Name, ast.List, ast.Tuple, ast.ListComp)
_FEEDING_METHODS = frozenset({"append", "insert", "extend"})



def _nested_list(flow: FunctionFlow, source: cst.BaseExpression) -> Optional[str]:
    """The name of the one list a list literal wraps (``[losses]``, ``losses`` filled by the function), or None."""
    if not isinstance(source, (cst.List, cst.Tuple)) or len(source.elements) != 1:
        return None
    element = source.elements[0]
    if isinstance(element, cst.StarredElement) or not isinstance(element.value, cst.Name):
        return None
    return element.value.value if flow.list_feeds.get(element.value.value) else None


def _returns_trained(context, function) -> bool:
    """What ``function`` returns is trained: it is a framework's trained hook, or a call of it in the file is
    back-propagated (:func:`_back_propagated`)."""
    if not isinstance(function, cst.FunctionDef):
        return False
    if function.name.value in _FRAMEWORK_TRAINED_RETURNS:
        return True
    return any(_back_propagated(context, site) for site in every_call_site(context, function) or ())


def _back_propagated(context, site: CallSite) -> bool:
    """The caller back-propagates what the call returns: ``f(...).backward()``, or ``loss = f(...)`` (or
    ``loss += f(...)``) and ``loss.backward()`` in the calling function."""
    parent = site.ancestors[-1] if site.ancestors else None
    if isinstance(parent, cst.Attribute) and parent.attr.value == "backward" and parent.value is site.call:
        return True
    if not isinstance(parent, (cst.Assign, cst.AugAssign)) or parent.value is not site.call:
        return False
    targets = [target.target for target in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
    names = {target.value for target in targets if isinstance(target, cst.Name)}
    scope = next((node for node in reversed(site.ancestors) if isinstance(node, cst.FunctionDef)), context.module)
    return not names.isdisjoint(context.memoized("calls.backpropagated-names", scope, backpropagated_names))


def _scopes_with_candidate_conversions(
    scan, root: ast.stmt, in_class_body: bool, converters: frozenset, scope_facts: Dict[int, Tuple[FrozenSet[str], bool]]
) -> Iterator[Optional[ast.AST]]:
    """The functions (None for top-level code) of ``root`` holding a conversion this rule may report.

    Necessary conditions of a report, each a superset of what the LibCST check accepts: a first
    positional argument that is a list name, a display or a comprehension, and no star arguments;
    a display with an element that is not a literal; a name that the function feeds (an
    assignment, ``+=``, ``append``/``insert``/``extend``); for the torch constructors, a function
    named for training or one that mentions ``backward``. Top-level class bodies hold no training
    code (``in_class_body``: ``root`` is a member of one).
    """
    stack: List[Tuple[ast.AST, Optional[ast.AST], bool]] = [(root, None, in_class_body)]
    while stack:
        node, scope, in_class = stack.pop()
        if isinstance(node, _AST_FUNCTIONS):
            scope, in_class = node, False
        elif isinstance(node, ast.ClassDef):
            in_class = scope is None  # a class inside a function belongs to the function's flow
        elif isinstance(node, ast.Call) and not in_class and _may_report(scan, node, scope, converters, scope_facts):
            yield scope
        for child in ast.iter_child_nodes(node):
            stack.append((child, scope, in_class))


def _may_report(
    scan, call: ast.Call, scope: Optional[ast.AST], converters: frozenset, scope_facts: Dict[int, Tuple[FrozenSet[str], bool]]
) -> bool:
    candidates = scan.qualified(call.func) & converters
    if not candidates or not call.args or any(keyword.arg is None for keyword in call.keywords):
        return False
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return False
    source = call.args[0]
    if not isinstance(source, _AST_SOURCES):
        return False
    if isinstance(source, (ast.List, ast.Tuple)) and all(_is_literal(element) for element in source.elts):
        return False
    body = scope if scope is not None else scan.tree
    facts = scope_facts.get(id(body))
    if facts is None:
        facts = scope_facts[id(body)] = _fed_names_and_backward(body)
    fed, mentions_backward = facts
    if isinstance(source, ast.Name) and source.id not in fed:
        return False
    if candidates <= NUMPY_CONVERTERS:
        return True
    if scope is not None and (scope.name in _FRAMEWORK_TRAINED_RETURNS or "backward" in scan.identifiers):
        return True  # a framework's hook, or a function a caller of the file may back-propagate (its callers kept)
    return mentions_backward


def _is_literal(element: ast.expr) -> bool:
    if isinstance(element, ast.UnaryOp) and isinstance(element.op, (ast.USub, ast.UAdd)):
        element = element.operand
    return isinstance(element, ast.Constant) or isinstance(element, ast.Starred)


def _fed_names_and_backward(body: ast.AST) -> Tuple[FrozenSet[str], bool]:
    """The names ``body`` binds or feeds (``append``/``insert``/``extend``), and whether it mentions
    ``backward``: read in one walk per function, whatever number of conversions it holds."""
    fed = set()
    mentions_backward = False
    for node in ast.walk(body):
        if isinstance(node, ast.Name):
            if node.id == "backward":
                mentions_backward = True
            if not isinstance(node.ctx, ast.Load):
                fed.add(node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr == "backward":
                mentions_backward = True
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _FEEDING_METHODS
            and isinstance(node.func.value, ast.Name)
        ):
            fed.add(node.func.value.id)
    return frozenset(fed), mentions_backward
