"""Local dataflow for the guard analysis: every binding of a name that may reach a use.

``analysis/model/bindings.py`` answers "which single assignment produced this
value?" (None as soon as anything is uncertain): the right question when a
fix rewrites the value.  The guard analysis asks a different one, "may this
name hold a value the author guarded?", and needs what ``bindings.py``
deliberately refuses: ``d += eps`` and ``d.clamp_(min=eps)`` (updates of
the value), ``d[d == 0] = 1`` (masked repairs), bindings made on some paths
only (``if``/``for``/``try``), parameters with defaults and module constants.

A :class:`Site` is a position in the tree: the innermost enclosing function
and, for every enclosing block inside it, the block's statements and the
index of the statement holding the position.  Build one from the engine's
ancestor list with :func:`site_of`; a binding found earlier comes with the
site of its own statement, so its value can be analysed in turn.

:func:`bindings` returns what reaches the site, latest first:

- ``assign``: ``d = value`` (also annotated); unconditional, ends the search;
- ``update``: ``d += v`` given as the equivalent expression ``d + v``
  evaluated at the statement (its ``d`` refers to the binding before it);
  ends the search;
- ``inplace``: ``d.clamp_(min=eps)`` / ``d.add_(eps)``, given as the
  out-of-place call ``d.clamp(min=eps)``; ends the search;
- ``masked``: ``d[cond] = value`` (the value may hold only for some elements);
  the search goes on;
- ``conditional``: a binding inside an earlier ``if``/``for``/``while``/``try``
  (it may not run); the search goes on, unless every branch of an
  ``if``/``elif``/``else`` binds the name or leaves the block;
- ``param``: a parameter of the function (``value`` is its default, if any);
- ``module``: the last module-level assignment (constants), used when the
  function itself does not bind the name;
- ``unpack``: ``a, b = value`` (``value`` is the whole right-hand side, of
  which the name holds one element: :func:`unpacked_element` gives it when
  both sides are tuples of the same length); ends the search;
- ``each``: a lambda's parameter, one binding per element of ``(a, b)`` in
  ``map(lambda t: ..., (a, b))`` (the name holds each in turn);
- ``opaque``: ``with ... as``, loop targets, imports, nested ``def``, a
  lambda's parameter otherwise: a value this module cannot see; ends the search.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.model.bindings import all_params, bound_names, names_in_target, root_names, touches
from torchlint.analysis.model.names import dotted_name
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# A block's statements and the index of the one holding the position.
Frame = Tuple[Sequence[cst.CSTNode], int]


@dataclass(frozen=True)
class Site:
    function: Optional[cst.FunctionDef]
    frames: Tuple[Frame, ...]
    module: Optional[cst.Module] = None
    # The parameters of the lambdas around the position, innermost last: (name, the lambda, the
    # values ``map(lambda t: ..., (a, b))`` hands it with their site, or None when they are unknown).
    lambda_params: Tuple[Tuple[str, cst.Lambda, Optional[Tuple[Tuple[cst.BaseExpression, ...], "Site"]]], ...] = ()

    def at(self, frames: Tuple[Frame, ...]) -> "Site":
        return Site(self.function, frames, self.module)  # a statement: outside any lambda


@dataclass(frozen=True)
class Binding:
    kind: str
    value: Optional[cst.BaseExpression]
    site: Optional[Site]
    node: cst.CSTNode


def _statements_of(node: cst.CSTNode) -> Optional[Sequence[cst.CSTNode]]:
    if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementSuite, cst.SimpleStatementLine)):
        return node.body
    return None


def site_of(ancestors: Sequence[cst.CSTNode]) -> Site:
    """The site of a node whose enclosing nodes (outermost first) are ``ancestors``."""
    function: Optional[cst.FunctionDef] = None
    module = ancestors[0] if ancestors and isinstance(ancestors[0], cst.Module) else None
    frames: List[Frame] = []
    lambdas: List[Tuple[str, cst.Lambda, object]] = []
    for position, node in enumerate(ancestors):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            function = node if isinstance(node, cst.FunctionDef) else None
            frames = []
            lambdas = []
            continue
        if isinstance(node, cst.Lambda):
            names = [param.name.value for param in all_params(node.params)]
            mapped = _mapped_values(ancestors, position) if len(names) == 1 else None
            lambdas.extend((name, node, mapped) for name in names)
            continue
        body = _statements_of(node)
        if body is None or position + 1 >= len(ancestors):
            continue
        child = ancestors[position + 1]
        for index, statement in enumerate(body):
            if statement is child:
                frames.append((body, index))
                break
    return Site(function, tuple(frames), module, tuple(lambdas))


def _mapped_values(ancestors: Sequence[cst.CSTNode], position: int):
    """For the lambda at ``ancestors[position]``: the elements of ``(a, b)`` in ``map(lambda t: ..., (a, b))``
    and the site of the call, else None."""
    if position < 2:
        return None
    arg, call = ancestors[position - 1], ancestors[position - 2]
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "map"):
        return None
    if len(call.args) != 2 or call.args[0] is not arg or any(a.keyword is not None or a.star for a in call.args):
        return None
    sequence = call.args[1].value
    if not isinstance(sequence, (cst.Tuple, cst.List)) or not sequence.elements:
        return None
    if any(isinstance(element, cst.StarredElement) for element in sequence.elements):
        return None
    return tuple(element.value for element in sequence.elements), site_of(ancestors[: position - 2])


def bindings(site: Site, name: str) -> List[Binding]:
    """The bindings of ``name`` that may reach ``site``, latest first (see the module docs)."""
    found: List[Binding] = []
    for parameter, lambda_node, mapped in reversed(site.lambda_params):
        if parameter == name:
            if mapped is None:
                return [Binding("opaque", None, None, lambda_node)]
            values, at = mapped
            return [Binding("each", value, at, value) for value in values]
    frames = site.frames
    for depth in range(len(frames) - 1, -1, -1):
        body, index = frames[depth]
        prefix = frames[:depth]
        for position in range(index - 1, -1, -1):
            here = site.at(prefix + ((body, position),))
            if _bindings_in_statement(body[position], name, here, found):
                return found
    if site.function is not None:
        param = _parameter(site.function, name)
        if param is not None:
            found.append(Binding("param", param.default, None, param))
            return found
        if site.module is not None:
            constant = _module_binding(site.module, name)
            if constant is not None:
                found.append(constant)
    return found


def bound_on_every_path(site: Site, name: str) -> bool:
    """Whether some statement before ``site`` binds ``name`` on every path to it: a plain binding, or an
    if/elif/else each of whose branches binds it (then :func:`bindings` holds only ``conditional`` ones, and
    yet nothing older reaches)."""
    frames = site.frames
    for depth in range(len(frames) - 1, -1, -1):
        body, index = frames[depth]
        prefix = frames[:depth]
        for position in range(index - 1, -1, -1):
            if _bindings_in_statement(body[position], name, site.at(prefix + ((body, position),)), []):
                return True
    return False


def _bindings_in_statement(statement: cst.CSTNode, name: str, here: Site, found: List[Binding]) -> bool:
    """Append the bindings of ``name`` made by ``statement``; True when one is unconditional."""
    if isinstance(statement, cst.BaseSmallStatement):  # an earlier statement of the same line: ``a = 1; f(a)``
        return _small_binding(statement, name, here, found)
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        for position in range(len(statement.body) - 1, -1, -1):
            inner = here.at(here.frames + ((statement.body, position),))
            if _small_binding(statement.body[position], name, inner, found):
                return True
        return False
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        if statement.name.value == name:
            found.append(Binding("opaque", None, None, statement))
            return True
        return False
    if isinstance(statement, cst.With):
        if any(item.asname is not None and name in names_in_target(item.asname.name) for item in statement.items):
            found.append(Binding("opaque", None, None, statement))
            return True
        body = statement.body
        if isinstance(body, cst.IndentedBlock):
            # A with-block runs straight through: search it from its end.
            for position in range(len(body.body) - 1, -1, -1):
                inner = here.at(here.frames + ((body.body, position),))
                if _bindings_in_statement(body.body[position], name, inner, found):
                    return True
        return False
    # if / for / while / try: what they bind may not happen, unless every branch of an if/elif/else binds it (or
    # leaves by return/raise/break/continue): then nothing bound before the statement reaches past it.
    if isinstance(statement, cst.For) and name in names_in_target(statement.target):
        found.append(Binding("conditional", None, None, statement))
    every_branch_binds = isinstance(statement, cst.If) and statement.orelse is not None
    for block in _blocks(statement):
        binds = bool(block) and _leaves(block[-1])
        for position in range(len(block) - 1, -1, -1):
            inner = here.at(here.frames + ((block, position),))
            nested: List[Binding] = []
            unconditional = _bindings_in_statement(block[position], name, inner, nested)
            for binding in nested:
                found.append(Binding("conditional", binding.value, binding.site, binding.node))
            if nested:
                binds = binds or unconditional
                break
        every_branch_binds = every_branch_binds and binds
    return every_branch_binds


def _leaves(statement: cst.CSTNode) -> bool:
    """A statement after which its block does not go on: ``return``, ``raise``, ``break``, ``continue``."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Return, cst.Raise, cst.Break, cst.Continue)) for small in statement.body
    )


def _small_binding(small: cst.CSTNode, name: str, here: Site, found: List[Binding]) -> bool:
    if isinstance(small, cst.Assign):
        for target in small.targets:
            if isinstance(target.target, cst.Name) and target.target.value == name:
                found.append(Binding("assign", small.value, here, small))
                return True
            if name in names_in_target(target.target):
                # ``a, b = x.chunk(2)`` / ``B, N, C = x.shape``: an element of the value.
                found.append(Binding("unpack", small.value, here, small))
                return True
            if (
                isinstance(target.target, cst.Subscript)
                and isinstance(target.target.value, cst.Name)
                and target.target.value.value == name
            ):
                found.append(Binding("masked", small.value, here, small))
        return False
    if isinstance(small, cst.AnnAssign):
        if isinstance(small.target, cst.Name) and small.target.value == name and small.value is not None:
            found.append(Binding("assign", small.value, here, small))
            return True
        return False
    if isinstance(small, cst.AugAssign):
        if isinstance(small.target, cst.Name) and small.target.value == name:
            operator = _BINARY_FOR_AUGMENTED.get(type(small.operator))
            if operator is None:
                found.append(Binding("opaque", None, None, small))
            else:
                value = cst.BinaryOperation(left=cst.Name(name), operator=operator, right=small.value)
                found.append(Binding("update", value, here, small))
            return True
        return False
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == name
            and func.attr.value.endswith("_")
            and not func.attr.value.startswith("_")
        ):
            out_of_place = call.with_changes(func=func.with_changes(attr=cst.Name(func.attr.value[:-1])))
            found.append(Binding("inplace", out_of_place, here, small))
            return True
        return False
    if isinstance(small, (cst.Import, cst.ImportFrom)):
        names = small.names
        if isinstance(names, cst.ImportStar):
            return False
        for alias in names:
            bound = alias.evaluated_alias or alias.evaluated_name
            if bound.split(".", 1)[0] == name:
                found.append(Binding("opaque", None, None, small))
                return True
    return False


_BINARY_FOR_AUGMENTED = {
    cst.AddAssign: cst.Add(),
    cst.SubtractAssign: cst.Subtract(),
    cst.MultiplyAssign: cst.Multiply(),
    cst.DivideAssign: cst.Divide(),
    cst.PowerAssign: cst.Power(),
}


def _blocks(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    body = getattr(statement, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        yield body.body
    for handler in getattr(statement, "handlers", ()) or ():
        yield from _blocks(handler)
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        yield [orelse]
    elif isinstance(orelse, cst.Else):
        yield from _blocks(orelse)
    final = getattr(statement, "finalbody", None)
    if isinstance(final, cst.Finally):
        yield from _blocks(final)


def _parameter(function: cst.FunctionDef, name: str) -> Optional[cst.Param]:
    for param in all_params(function.params):
        if param.name.value == name:
            return param
    return None


def _module_binding(module: cst.Module, name: str) -> Optional[Binding]:
    last: Optional[Binding] = None
    for position, statement in enumerate(module.body):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            if statement.name.value == name:
                last = Binding("opaque", None, None, statement)
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            target = None
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                target = small.target
            if isinstance(target, cst.Name) and target.value == name:
                last = Binding("module", small.value, Site(None, ((module.body, position),), module), small)
            elif isinstance(small, cst.Assign) and isinstance(target, (cst.Tuple, cst.List)):
                # ``bce, l1 = nn.BCELoss(), nn.L1Loss()``: the element paired with the name, when the value is a
                # display of the same length
                paired = unpacked_element(Binding("unpack", small.value, None, small), name)
                if paired is not None:
                    last = Binding("module", paired, Site(None, ((module.body, position),), module), small)
    return last


def sole_assignment(site: Optional[Site], name: str) -> Optional[Binding]:
    """The one plain assignment of ``name`` that reaches ``site`` (``denom = s.sum()``), or None when
    another binding may reach it too (a parameter, an update, a binding on some paths)."""
    if site is None:
        return None
    reaching = bindings(site, name)
    if len(reaching) == 1 and reaching[0].kind == "assign" and reaching[0].value is not None:
        return reaching[0]
    return None


def unpacked_element(binding: Binding, name: str) -> Optional[cst.BaseExpression]:
    """For ``a, m = x, x.ne(pad)`` (an ``unpack`` binding of a tuple of the same length), the element ``name``
    receives (``x.ne(pad)`` for ``m``); None for anything else (``a, b = x.chunk(2)``, starred targets)."""
    if binding.kind != "unpack" or not isinstance(binding.node, cst.Assign) or len(binding.node.targets) != 1:
        return None
    target, value = binding.node.targets[0].target, binding.node.value
    if not isinstance(target, (cst.Tuple, cst.List)) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    if len(target.elements) != len(value.elements):
        return None
    for target_element, value_element in zip(target.elements, value.elements):
        if isinstance(target_element, cst.StarredElement) or isinstance(value_element, cst.StarredElement):
            return None
    for target_element, value_element in zip(target.elements, value.elements):
        if isinstance(target_element.value, cst.Name) and target_element.value.value == name:
            return value_element.value
    return None


def unpack_position(binding: Binding, name: str) -> Optional[Tuple[int, int]]:
    """For ``mag, phase = self.stft(x)`` (an ``unpack`` binding into a flat tuple of names), the index
    ``name`` takes and the tuple's length; None for starred or nested targets."""
    if binding.kind != "unpack" or not isinstance(binding.node, cst.Assign) or len(binding.node.targets) != 1:
        return None
    target = binding.node.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    if any(isinstance(element, cst.StarredElement) for element in target.elements):
        return None
    for index, element in enumerate(target.elements):
        if isinstance(element.value, cst.Name) and element.value.value == name:
            return index, len(target.elements)
    return None


def later_statements(site: Site) -> Iterator[Tuple[cst.CSTNode, Site]]:
    """Statements after the site's statement in its enclosing blocks of the same function, nearest first."""
    for depth in range(len(site.frames) - 1, -1, -1):
        body, index = site.frames[depth]
        prefix = site.frames[:depth]
        for position in range(index + 1, len(body)):
            yield body[position], site.at(prefix + ((body, position),))


def earlier_statements(site: Site) -> Iterator[Tuple[cst.CSTNode, Site]]:
    """Statements before the site's statement in its enclosing blocks of the same function, nearest first."""
    for depth in range(len(site.frames) - 1, -1, -1):
        body, index = site.frames[depth]
        prefix = site.frames[:depth]
        for position in range(index - 1, -1, -1):
            yield body[position], site.at(prefix + ((body, position),))


# -- the one assignment a value comes from: what a fix may rewrite --------------------------------


@dataclass(frozen=True)
class Definition:
    """``name = value``: the one plain assignment that gives ``name`` its value at a use."""

    name: str
    value: cst.BaseExpression
    # The statement line holding the assignment.
    statement: cst.SimpleStatementLine
    # Statements executed between the assignment and the use (the assignment's own line first).
    between: Tuple[cst.CSTNode, ...]
    # The nodes enclosing the assignment, outermost first, ending with the assignment itself: where to ask
    # about the names its value reads.
    ancestors: Tuple[cst.CSTNode, ...]

    def unchanged_at_use(self, expression: cst.BaseExpression) -> bool:
        """Whether ``expression``, read at the definition, still has the same value at the use."""
        roots = set(root_names(expression))
        if not roots:
            return True
        return not any(touches(node, roots) for node in self.between)


def path_to(root: cst.CSTNode, target: cst.CSTNode) -> Optional[Tuple[cst.CSTNode, ...]]:
    """The nodes from ``root`` down to ``target``, outermost first, ending with ``target`` (the ``ancestors`` of a
    node inside it); None when ``target`` is not in ``root``.  A walk of the tree: for the rare question about a
    node the engine's visit is not at."""
    stack: List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]] = [(root, (root,))]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        stack.extend((child, path + (child,)) for child in reversed(node.children))
    return None


def reaching_definition(ancestors: Sequence[cst.CSTNode], name: str) -> Optional[Definition]:
    """The plain assignment that gives ``name`` its value at a use below ``ancestors`` (the nodes enclosing
    the use, outermost first: the engine's ``context.ancestors``), or None when anything is uncertain.

    It asks :func:`bindings` at the use and holds the answer to stricter terms, since a fix may rewrite
    the value (``probs`` in ``F.cross_entropy(probs, y)`` assigned a softmax a few lines earlier):

    - exactly one binding reaches, an ``assign`` (``masked`` writes such as ``p[m] = 0`` do not count:
      :meth:`Definition.unchanged_at_use` sees them); updates, in-place methods, bindings on some paths,
      parameters, module constants and unpacking give None;
    - the assignment is a statement line of a block enclosing the use (not inside a ``with`` before it);
    - nothing run between it and the use binds the name in any way, a compound statement enclosing the
      use included (a loop whose later statement rebinds it reaches the use on the next iteration);
    - no comprehension variable or lambda parameter of that name encloses the use.
    """
    if _bound_around_use(ancestors, name):
        return None
    reaching = [binding for binding in bindings(site_of(ancestors), name) if binding.kind != "masked"]
    if len(reaching) != 1 or reaching[0].kind != "assign" or reaching[0].site is None:
        return None
    binding = reaching[0]
    frames = binding.site.frames
    if len(frames) < 2:
        return None
    block, index = frames[-2]
    line = block[index]
    if not (isinstance(line, cst.SimpleStatementLine) and line.body is frames[-1][0]):
        return None  # a one-line suite: ``if c: p = f(x)``
    holder = _index_holding(ancestors, line)
    if holder is None:
        return None
    between: List[cst.CSTNode] = [line]
    if holder + 1 < len(ancestors) and ancestors[holder + 1] is not line:
        on_path = ancestors[holder + 1]
        position = _position(ancestors[holder].body, line)
        for statement in ancestors[holder].body[position + 1:]:
            if statement is on_path:
                break
            between.append(statement)
        between.extend(node for node in ancestors[holder + 1:] if isinstance(node, cst.BaseCompoundStatement))
    if any(name in bound_names(node) for node in between[1:]):
        return None
    return Definition(name, binding.value, line, tuple(between), tuple(ancestors[: holder + 1]) + (line, binding.node))


def attribute_assignment_reaches(assignment: cst.Assign, dotted: str, ancestors: Sequence[cst.CSTNode]) -> bool:
    """Whether what ``assignment`` stores into the attribute chain ``dotted`` (``model.net = torch.load(p)``) is
    what a read of it below ``ancestors`` sees: the read stands in a later statement of the block holding the
    assignment, and no statement from the assignment to that one stores into ``dotted`` again or rebinds its
    root. The bindings walk follows names only; a method called between that might store the attribute is not
    looked into."""
    root = dotted.split(".", 1)[0]
    for index in range(len(ancestors) - 2, -1, -1):
        statements = _statements_of(ancestors[index])
        if statements is None:
            continue
        assigned_at = next(
            (position for position, statement in enumerate(statements)
             if isinstance(statement, cst.SimpleStatementLine) and any(small is assignment for small in statement.body)),
            None,
        )
        if assigned_at is None:
            continue
        used_at = next((position for position, statement in enumerate(statements) if statement is ancestors[index + 1]), None)
        if used_at is None or used_at <= assigned_at:
            return False
        return not any(
            root in bound_names(statement) or _stores_into(statement, dotted) for statement in statements[assigned_at + 1 : used_at + 1]
        )
    return False


def _stores_into(statement: cst.CSTNode, dotted: str) -> bool:
    """Whether ``statement`` assigns to or deletes the attribute chain ``dotted``."""

    class _Stores(cst.CSTVisitor):
        found = False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, _STORES) and dotted_name(node.target) == dotted:
                self.found = True
            return not self.found

    visitor = _Stores()
    visit(statement, visitor)
    return visitor.found


_STORES = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)


def _index_holding(ancestors: Sequence[cst.CSTNode], statement: cst.CSTNode) -> Optional[int]:
    """The index of the ancestor whose block holds ``statement``, innermost first."""
    for index in range(len(ancestors) - 1, -1, -1):
        body = getattr(ancestors[index], "body", None)
        if isinstance(body, (list, tuple)) and any(item is statement for item in body):
            return index
    return None


def _position(sequence: Sequence[cst.CSTNode], node: cst.CSTNode) -> int:
    return next(position for position, item in enumerate(sequence) if item is node)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _bound_around_use(ancestors: Sequence[cst.CSTNode], name: str) -> bool:
    """A comprehension variable or lambda parameter of that name between the statement and the use."""
    for node in reversed(ancestors):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
        if isinstance(node, cst.Lambda):
            if any(p.name.value == name for p in all_params(node.params)):
                return True
        elif isinstance(node, _COMPREHENSIONS):
            comp = node.for_in
            while comp is not None:
                if name in names_in_target(comp.target):
                    return True
                comp = comp.inner_for_in
    return False


# -- the call a name holds (``sm = nn.Softmax(1)``, ``crit = nn.BCELoss()``) -----------------------


def named_call(
    context: "FileContext", name: str, ancestors: Optional[Sequence[cst.CSTNode]] = None
) -> Optional[Tuple[cst.Call, str]]:
    """(the call, "local" or "module") that ``name`` holds at a use below ``ancestors`` (by default where the
    engine stands): the one assignment that reaches it in the function or script
    (:func:`reaching_definition`), else, inside a function that does not bind the name, the module's only
    top-level ``name = Call(...)``."""
    ancestors = context.ancestors if ancestors is None else ancestors
    definition = reaching_definition(ancestors, name)
    if definition is not None:
        return (definition.value, "local") if isinstance(definition.value, cst.Call) else None
    function = next((node for node in reversed(ancestors) if isinstance(node, cst.FunctionDef)), None)
    if function is not None and not _bound_in_function(context, function, name):
        value = _module_level_value(context, name)
        if value is not None:
            return value, "module"
    return None


def _bound_in_function(context: "FileContext", function: cst.FunctionDef, name: str) -> bool:
    if any(p.name.value == name for p in all_params(function.params)):
        return True
    return name in context.memoized("names bound in body", function, _names_bound_in_body)


def _names_bound_in_body(function: cst.FunctionDef) -> FrozenSet[str]:
    return frozenset(name for stmt in function.body.body for name in bound_names(stmt))


def _module_level_value(context: "FileContext", name: str) -> Optional[cst.Call]:
    """The value of the only top-level ``name = Call(...)`` of the module, if there is exactly one binding."""
    found = None
    for stmt in context.memoized("top-level binders", context.module, _top_level_binders).get(name, ()):
        if found is not None or not isinstance(stmt, cst.SimpleStatementLine):
            return None
        small = stmt.body[0] if len(stmt.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
            return None
        found = small.value
    return found if isinstance(found, cst.Call) else None


def _top_level_binders(module: cst.Module) -> Dict[str, Tuple[cst.CSTNode, ...]]:
    """name -> the top-level statements that bind it, in order."""
    binders: Dict[str, List[cst.CSTNode]] = {}
    for stmt in module.body:
        for name in bound_names(stmt):
            binders.setdefault(name, []).append(stmt)
    return {name: tuple(stmts) for name, stmts in binders.items()}
