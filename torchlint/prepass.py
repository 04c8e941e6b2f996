"""The pre-pass: which rules can report in a file, and which parts of it LibCST must see.

A LibCST parse costs ~12x an ``ast.parse`` and walking its tree in Python as
much again (bench/results/metadata_cost.md), so the engine first reads the
file with ``ast`` (one parse, one walk) and asks every triggered rule for its
*seeds* (:meth:`torchlint.rule.Rule.prepass`):

- ``None``: no node of this file can be reported by the rule (say, no call
  named ``sqrt`` inside a ``forward``); the rule does not run;
- :data:`WHOLE_FILE`: the rule may report and may look anywhere in the file;
- a set of region numbers: the rule reports only inside these regions and
  looks outside them only at what they name.

A *region* is a top-level compound statement, or one member of a top-level
class.  When no running rule asked for the whole file, the regions that are
neither seeds nor definitions of a name a kept region uses (followed to a
fixpoint: helpers, ``self.attr`` assigned in ``__init__``, module constants)
are removed before the LibCST parse: a function (or a module-level
``if``/``for``/``with``) becomes the statement ``0``.  Kept lines are verbatim and the plan maps each line of the reduced
text to the file's line, so positions (and the fix edits built from them)
are the file's.  Imports and simple statements are never removed.

Every seed condition is a necessary condition of the rule's reports, stated
over ``ast`` nodes: equality of findings with and without the pre-pass is
tested on every fixture and measured on the corpus (bench/prepass_equivalence.py).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Protocol, Sequence, Set, Tuple, Type, Union

from torchlint.analysis.flow.callers import framework_called, judged_by_instances
from torchlint.analysis.model.ast_names import ast_dotted_name, every_node, import_bindings
from torchlint.analysis.model.project_index import star_imports_of
from torchlint.findings import WHOLE_FILE
from torchlint.source import line_starts


Seeds = Union[None, str, FrozenSet[int]]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MASK_PARTS = (ast.Compare, ast.Call)
_CONSTRUCTORS = frozenset({"__init__", "__post_init__", "setup", "build"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BLOCK_PARTS = (ast.stmt, ast.excepthandler, ast.match_case)


@dataclass
class Region:
    """A top-level compound statement or a member of a top-level class, with what it names."""

    node: ast.stmt
    first_line: int  # decorators included
    last_line: int
    enclosing_class: Optional[str] = None
    removable: bool = False
    # Names assigned in a function are its locals; elsewhere they are the module's or the class's.
    stores_are_bindings: bool = True
    calls: Set[str] = field(default_factory=set)  # last names of callees, import aliases resolved
    qualified_calls: Set[str] = field(default_factory=set)  # callees through the file's imports (``torch.load``)
    operators: Set[type] = field(default_factory=set)  # BinOp / AugAssign operator classes
    uses: Set[str] = field(default_factory=set)  # names read and attributes named
    attributes: Set[str] = field(default_factory=set)  # attributes named (``x.data``)
    plain_calls: Set[str] = field(default_factory=set)  # callees that are bare names (``float(x)``)
    mentions_inf: bool = False  # ``inf`` as a name, an attribute or in a string (``float("inf")``)
    binds: Set[str] = field(default_factory=set)  # names it defines for the module (functions, constants)
    scope_names: Set[str] = field(default_factory=set)  # functions and classes defined in it
    function_names: Set[str] = field(default_factory=set)  # the functions among them
    # (what the callee may be through the imports, the keywords written) for calls with keywords
    keyword_calls: List[Tuple[Tuple[str, ...], Tuple[str, ...]]] = field(default_factory=list)
    callees: List[ast.Call] = field(default_factory=list)  # every call in it, for seed conditions on arguments
    attribute_stores: Set[str] = field(default_factory=set)  # ``x.attr = ...``
    smallest_float: float = float("inf")  # smallest non-zero float literal (in absolute value)
    divisors: List[ast.expr] = field(default_factory=list)  # right operands of ``/`` and ``/=``
    exponents: List[ast.expr] = field(default_factory=list)  # right operands of ``**`` and ``**=``
    assigned: Dict[str, List[ast.expr]] = field(default_factory=dict)  # ``name = value`` statements in it
    bool_membership: bool = False  # ``True in x`` / ``False not in x``
    masked_assignment: bool = False  # ``x[x != x] = 0``, ``x[torch.isnan(x) | m] = 0``: a mask of ``x`` as its index
    # Every node of the region (every_node's, walked once for all the seed conditions); a class header's: none.
    nodes: List[ast.AST] = field(default_factory=list)


class Scan:
    """What ``ast`` says about one file: its regions and, per region, what the seed conditions ask."""

    def __init__(self, path: str, source: str, tree: ast.Module) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self.aliases: Dict[str, str] = {}  # local name -> the imported object's last name
        self.imported: Dict[str, Set[str]] = {}  # local name -> what any import of the file binds it to
        self.identifiers: Set[str] = set()
        self.regions: List[Region] = []
        self._imports: List[ast.stmt] = []
        self._starts: Optional[List[int]] = None
        for statement in tree.body:
            if isinstance(statement, ast.ClassDef):
                header = self._region(statement, None, shallow=True)
                self.identifiers |= header.uses | header.binds
                for member in statement.body:
                    self.regions.append(self._region(member, statement.name))
            else:
                self.regions.append(self._region(statement, None))
        self._collect_aliases()
        # ``from utils import *`` / ``from torch import *``: names bound nowhere in the file resolve through them.
        self.stars = star_imports_of(tree, path) if self._has_star_import() else None
        for region in self.regions:
            self.identifiers |= region.uses | region.binds | region.attribute_stores
            self._resolve_calls(region)

    # -- queries for the rules' seed conditions ------------------------------------

    def regions_calling(self, names: Iterable[str]) -> FrozenSet[int]:
        wanted = set(names)
        return frozenset(i for i, region in enumerate(self.regions) if region.calls & wanted)

    def qualified(self, node: ast.expr) -> Set[str]:
        """What a name or attribute chain may stand for through any import of the file (``torch.no_grad``)."""
        dotted = ast_dotted_name(node)
        if dotted is None:
            return set()
        head, _, rest = dotted.partition(".")
        targets = self.imported.get(head)
        if targets is None and self.stars is not None:
            star = self.stars.resolve(head)
            targets = {star} if star else set()
        return {f"{target}.{rest}" if rest else target for target in targets or ()}

    def regions_calling_tensor_ops(self, names: Iterable[str]) -> FrozenSet[int]:
        """Regions calling one of ``names`` (last names) as a torch function or a method of a value:
        ``math.sqrt(d)`` and ``np.log(p)`` resolve to another library and are left out."""
        wanted = set(names)

        def calls_one(region: Region) -> bool:
            if not region.calls & wanted:
                return False
            for call in region.callees:
                if wanted.isdisjoint(_callee_names(call.func, self.aliases)):
                    continue
                qualified = self.qualified(call.func)
                if not qualified or any(name.startswith("torch.") for name in qualified):
                    return True
            return False

        return self.regions_where(calls_one)

    def regions_calling_qualified(self, names: Iterable[str]) -> FrozenSet[int]:
        """Regions calling one of ``names`` (``torch.load``) as the file's imports resolve it."""
        wanted = set(names)
        return frozenset(i for i, region in enumerate(self.regions) if region.qualified_calls & wanted)

    def regions_with_operator(self, *operators: type) -> FrozenSet[int]:
        return frozenset(i for i, region in enumerate(self.regions) if region.operators.intersection(operators))

    def regions_where(self, predicate) -> FrozenSet[int]:
        return frozenset(i for i, region in enumerate(self.regions) if predicate(region))

    def mentions(self, names: Iterable[str]) -> bool:
        """Whether any name, attribute or imported name of the file is one of ``names``."""
        return not self.identifiers.isdisjoint(names)

    def regions_using_both(self, first: Iterable[str], second: Iterable[str]) -> FrozenSet[int]:
        """Regions that may use a value mentioning one of ``first`` and one mentioning one of ``second``
        (a loss and an activation), each written there or reached as :meth:`reachable_words` says."""
        first, second = tuple(first), tuple(second)
        if not (self.mentions(first) and self.mentions(second)):
            return frozenset()
        first_words, second_words = self.reachable_words(first), self.reachable_words(second)
        return self.regions_where(lambda r: not r.uses.isdisjoint(first_words) and not r.uses.isdisjoint(second_words))

    def reachable_words(self, words: Iterable[str]) -> Set[str]:
        """``words`` (names such as ``BCELoss``, ``softmax``), the import aliases of them, and the names
        and attributes through which code may reach a value that mentions them: names assigned outside
        functions and attributes assigned anywhere (``self.criterion = nn.BCELoss()``). A region that
        can use such a value mentions one of these in its ``uses``."""
        mentioned = set(words)
        mentioned.update(local for local, original in self.aliases.items() if original in mentioned)
        found = set(mentioned)
        pending: List[Tuple[ast.AST, bool]] = [(statement, False) for statement in self.tree.body]
        while pending:
            node, in_function = pending.pop()
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                if any(
                    (type(inner) is ast.Name and inner.id in mentioned) or (type(inner) is ast.Attribute and inner.attr in mentioned)
                    for inner in every_node(node.value)
                ):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for inner in every_node(target):
                            if type(inner) is ast.Attribute:
                                found.add(inner.attr)
                            elif type(inner) is ast.Name and not in_function:
                                found.add(inner.id)
            elif isinstance(node, ast.stmt):
                inner_function = in_function or isinstance(node, _DEFS)
                pending.extend((child, inner_function) for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCK_PARTS))
            elif isinstance(node, _BLOCK_PARTS):  # except handlers, match cases
                pending.extend((child, in_function) for child in ast.iter_child_nodes(node) if isinstance(child, _BLOCK_PARTS))
        return found

    def with_mentions(self, regions: FrozenSet[int]) -> FrozenSet[int]:
        """``regions`` and every region whose text mentions, as a word, a function defined in one of them
        (other than those only a framework calls), and for a ``forward`` the regions naming its class and
        the attributes those regions store: where the file's calls of those functions may be."""
        names: Set[str] = set()
        classes: Set[str] = set()
        for index in regions:
            region = self.regions[index]
            # Every function, owned or public: where the file calls it says whether gradients flow there.
            names.update(name for name in region.function_names if not framework_called(name))
            if region.enclosing_class is not None and isinstance(region.node, _DEFS) and region.node.name == "forward":
                if judged_by_instances(region.enclosing_class):
                    classes.add(region.enclosing_class)  # reached through ``self.attr = Cls(...)``, ``self.attr(...)``
        mentioned = set(regions)
        attributes: Set[str] = set()
        for index in self._mentioning(classes, mentioned):
            attributes.update(_instance_attributes(self.regions[index].node, classes))
        self._mentioning(names | attributes, mentioned)
        return frozenset(mentioned)

    def regions_mentioning(self, words: Iterable[str]) -> FrozenSet[int]:
        """Regions whose text holds one of ``words`` as a word (say, where the file may call a function)."""
        found: Set[int] = set()
        self._mentioning(set(words), found)
        return frozenset(found)

    def regions_whose_text_matches(self, pattern: "re.Pattern[str]") -> FrozenSet[int]:
        """Regions whose source text holds a match of ``pattern``: a cheap superset for a syntactic seed."""
        starts = self._line_starts()
        return frozenset(
            index for index, region in enumerate(self.regions)
            if pattern.search(self.source, starts[region.first_line - 1], starts[region.last_line])
        )

    def _mentioning(self, words: Set[str], found: Set[int]) -> Set[int]:
        """Add to ``found`` the regions whose text holds one of ``words``; return those regions."""
        if not words:
            return set()
        pattern = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, words))) + r")\b")
        starts = self._line_starts()
        source = self.source
        hits = set()
        for index, region in enumerate(self.regions):
            if pattern.search(source, starts[region.first_line - 1], starts[region.last_line]):
                hits.add(index)
        found |= hits
        return hits

    def _line_starts(self) -> List[int]:
        if self._starts is None:
            self._starts = line_starts(self.source) + [len(self.source)]
        return self._starts

    def differentiated(self, regions: FrozenSet[int], name_pattern: "re.Pattern[str]", path_matches: bool) -> FrozenSet[int]:
        """The regions that may hold code under a function or class whose name matches ``name_pattern``."""
        if path_matches:
            return regions
        return frozenset(
            i
            for i in regions
            if any(name_pattern.search(name) for name in self.regions[i].scope_names)
            or (self.regions[i].enclosing_class is not None and name_pattern.search(self.regions[i].enclosing_class))
        )

    # -- building ---------------------------------------------------------------------

    @property
    def import_statements(self) -> List[ast.stmt]:
        """Every ``import`` / ``from ... import`` of the file, at any depth."""
        return self._imports

    def _has_star_import(self) -> bool:
        return any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in self._imports)

    def _collect_aliases(self) -> None:
        # Imports anywhere count: a superset of what the linter's import table resolves at any point.
        for node in self._imports:
            for local, target in import_bindings(node):
                self.imported.setdefault(local, set()).add(target)
            for alias in node.names:
                if alias.asname:
                    self.aliases[alias.asname] = alias.name.rsplit(".", 1)[-1]

    def callee_names(self, func: ast.expr) -> Set[str]:
        """The last names a callee may stand for, import aliases resolved (``S`` of ``from torch import sum as S``)."""
        return set(_callee_names(func, self.aliases))

    def _resolve_calls(self, region: Region) -> None:
        for call in region.callees:
            names = _callee_names(call.func, self.aliases)
            region.calls.update(names)
            if isinstance(call.func, ast.Name):
                region.plain_calls.update(names)
            qualified = tuple(self.qualified(call.func))
            region.qualified_calls.update(qualified)
            if call.keywords and qualified:
                written = tuple(k.arg for k in call.keywords if k.arg is not None)
                if written:
                    region.keyword_calls.append((qualified, written))

    def _region(self, statement: ast.stmt, enclosing_class: Optional[str], shallow: bool = False) -> Region:
        decorators = getattr(statement, "decorator_list", None) or ()
        region = Region(statement, _first_line(statement), statement.end_lineno or statement.lineno, enclosing_class)
        region.removable = _removable(statement, enclosing_class is not None)
        region.stores_are_bindings = not isinstance(statement, _DEFS)
        if isinstance(statement, _SCOPES):
            # A method is reached through ``self.name`` (see needed_regions); a top-level function or class by its name.
            if enclosing_class is None:
                region.binds.add(statement.name)
            region.scope_names.add(statement.name)
        if shallow:  # a class header: its bases and decorators
            for node in list(getattr(statement, "bases", ())) + list(decorators):
                for inner in every_node(node):
                    self._note(region, inner)
            return region
        region.nodes = every_node(statement)
        for node in region.nodes:
            self._note(region, node)
        return region

    def _note(self, region: Region, node: ast.AST) -> None:
        kind = type(node)
        if kind is ast.Name:
            if isinstance(node.ctx, ast.Load):
                region.uses.add(node.id)
                if node.id == "inf":
                    region.mentions_inf = True
            elif region.stores_are_bindings:
                region.binds.add(node.id)
        elif kind is ast.Attribute:
            region.uses.add(node.attr)
            region.attributes.add(node.attr)
            if node.attr == "inf":
                region.mentions_inf = True
            if not isinstance(node.ctx, ast.Load):
                region.attribute_stores.add(node.attr)
        elif kind is ast.Call:
            region.callees.append(node)  # resolved once every import of the file is known
        elif kind is ast.Import or kind is ast.ImportFrom:
            self._imports.append(node)
        elif kind is ast.BinOp or kind is ast.AugAssign:
            operator = type(node.op)
            region.operators.add(operator)
            if operator is ast.Div:
                region.divisors.append(node.right if kind is ast.BinOp else node.value)
            elif operator is ast.Pow:
                region.exponents.append(node.right if kind is ast.BinOp else node.value)
        elif kind is ast.Assign:
            for target in node.targets:
                if type(target) is ast.Name:
                    region.assigned.setdefault(target.id, []).append(node.value)
        elif kind is ast.AnnAssign:
            if node.value is not None and type(node.target) is ast.Name:
                region.assigned.setdefault(node.target.id, []).append(node.value)
        elif kind is ast.Constant:
            value = node.value
            if type(value) is float and value != 0.0 and abs(value) < region.smallest_float:
                region.smallest_float = abs(value)
            elif type(value) is str and "inf" in value.lower():
                region.mentions_inf = True
        elif kind in _SCOPES:
            if node is not region.node:
                region.binds.add(node.name)
            region.scope_names.add(node.name)
            if kind is not ast.ClassDef:
                region.function_names.add(node.name)
        elif kind is ast.Compare:
            left = node.left
            if (
                isinstance(left, ast.Constant)
                and type(left.value) is bool
                and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            ):
                region.bool_membership = True
        elif kind is ast.Subscript:
            if not isinstance(node.ctx, ast.Load) and type(node.value) is ast.Name:
                inside = every_node(node.slice)
                if any(isinstance(n, _MASK_PARTS) for n in inside) and any(
                    type(n) is ast.Name and n.id == node.value.id for n in inside
                ):
                    region.masked_assignment = True
        elif kind is ast.Global or kind is ast.Nonlocal:
            region.binds.update(node.names)
        elif kind is ast.alias:
            region.uses.add(node.name.rsplit(".", 1)[-1])
            region.binds.add(node.asname or node.name.split(".", 1)[0])


def _instance_attributes(root: ast.AST, classes: Set[str]) -> Set[str]:
    """Attributes assigned a value that constructs one of ``classes`` (``self.loss = Loss().to(d)``)."""
    found = set()
    for node in every_node(root):
        if type(node) is ast.Assign and any(
            type(inner) is ast.Call and type(inner.func) is ast.Name and inner.func.id in classes for inner in every_node(node.value)
        ):
            found.update(target.attr for target in node.targets if type(target) is ast.Attribute)
    return found


def _callee_names(func: ast.expr, aliases: Dict[str, str]) -> Tuple[str, ...]:
    if isinstance(func, ast.Name):
        original = aliases.get(func.id)
        return (func.id, original) if original and original != func.id else (func.id,)
    if isinstance(func, ast.Attribute):
        return (func.attr,)
    return ()


def _removable(statement: ast.stmt, in_class: bool) -> bool:
    """Whether a region may be removed: a function or method, or a module-level compound statement
    without an import (imports feed name resolution)."""
    if isinstance(statement, _DEFS):
        return True  # reduce_source checks that it starts its line
    if in_class or isinstance(statement, ast.ClassDef):
        return False  # a class body must keep a statement; a class keeps its members' headers
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
        return not _has_import(statement)
    return False


def _has_import(statement: ast.stmt) -> bool:
    return any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in every_node(statement))


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None) or ()
    return min([statement.lineno] + [d.lineno for d in decorators])


# -- the plan ----------------------------------------------------------------------------


class SeededRule(Protocol):
    """What the pre-pass asks of a rule class (``torchlint.rule.Rule``)."""

    reads_callers: bool

    @classmethod
    def prepass(cls, scan: "Scan") -> Seeds: ...


@dataclass
class Plan:
    rules: List[Type[SeededRule]]  # the rules that may report: the others do not run
    text: str  # what LibCST parses: the file, or the file without the regions no rule needs
    # Line n of ``text`` is line ``lines[n - 1]`` of the file; empty when ``text`` is the file.
    lines: List[int] = field(default_factory=list)
    # The file's ``ast`` (the whole file), for analyses that read it with ``ast`` (FileContext.ast_tree).
    tree: Optional[ast.Module] = None


def plan(source: str, path: str, rule_classes: Sequence[Type[SeededRule]], tree: Optional[ast.Module] = None) -> Optional[Plan]:
    """The rules to run and the text to parse, or None when ``ast`` cannot read the file (then the
    engine parses it whole with every triggered rule, and LibCST reports what is wrong).
    ``tree``: ``ast.parse(source)`` when the caller already has it."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    scan = Scan(path, source, tree)
    running: List[Type[SeededRule]] = []
    seeds: Set[int] = set()
    callers_read_in: Set[int] = set()  # seeds of the rules that read callers (Rule.reads_callers)
    whole = False
    for rule_class in rule_classes:
        wanted = rule_class.prepass(scan)
        if wanted is None or (wanted != WHOLE_FILE and not wanted):
            continue
        running.append(rule_class)
        if wanted == WHOLE_FILE:
            whole = True
        else:
            (callers_read_in if rule_class.reads_callers else seeds).update(wanted)
    if not running or whole:
        return Plan(running, source, tree=tree)
    # One search for the regions that mention them: with_mentions of a union is the union of with_mentions.
    seeds |= scan.with_mentions(frozenset(callers_read_in)) if callers_read_in else set()
    text, lines = reduce_source(source, scan, needed_regions(scan, seeds))
    return Plan(running, text, lines, tree)


def needed_regions(scan: Scan, seeds: Iterable[int]) -> Set[int]:
    """The seeds and, to a fixpoint, every region that defines a name a needed region uses
    (through regions that are never removed too: a module constant bound to a helper's result);
    for a class member, also its class's constructor and the members that set an attribute or
    define a method it names (``self.criterion``, ``self.helper()``)."""
    definers: Dict[str, List[int]] = {}
    # Attributes are looked up in the class that uses them: (class, attribute) -> its members that set it.
    attribute_definers: Dict[Tuple[Optional[str], str], List[int]] = {}
    constructors: Dict[str, List[int]] = {}
    for index, region in enumerate(scan.regions):
        for name in region.binds:
            definers.setdefault(name, []).append(index)
        if region.enclosing_class is not None:
            for name in region.attribute_stores:
                attribute_definers.setdefault((region.enclosing_class, name), []).append(index)
            if isinstance(region.node, _DEFS):  # a method: what ``self.name(...)`` runs
                attribute_definers.setdefault((region.enclosing_class, region.node.name), []).append(index)
        if region.enclosing_class is not None and isinstance(region.node, _DEFS) and region.node.name in _CONSTRUCTORS:
            constructors.setdefault(region.enclosing_class, []).append(index)
    needed: Set[int] = set()
    pending = list(seeds)
    while pending:
        index = pending.pop()
        if index in needed:
            continue
        needed.add(index)
        region = scan.regions[index]
        # A method is read with its class's constructor: what ``self``'s attributes hold.
        pending.extend(constructors.get(region.enclosing_class, ()))
        for name in region.uses:
            pending.extend(definers.get(name, ()))
            if region.enclosing_class is not None:
                pending.extend(attribute_definers.get((region.enclosing_class, name), ()))
    return needed


_FINAL_LINE_BREAK = re.compile(r"(\r\n|\r|\n)$")


def reduce_source(source: str, scan: Scan, needed: Set[int]) -> Tuple[str, List[int]]:
    """The file without the regions not ``needed``, and for each of its lines the file's line number.

    A removed region becomes the line ``0`` at its indentation: a class keeps a body and the
    module keeps its shape (its header of comments, where an import goes).  Kept lines are
    verbatim, so a column on them is the file's column.
    """
    starts = line_starts(source)

    def offset(line: int) -> int:  # the start of 1-based ``line``; past the end for the line after the last
        return starts[line - 1] if line - 1 < len(starts) else len(source)

    pieces: List[str] = []
    lines: List[int] = []
    kept_from = 1  # the first line not yet copied
    for index, region in enumerate(scan.regions):
        if index in needed or not region.removable:
            continue
        first_line = region.first_line
        indent = source[offset(first_line) : offset(first_line) + _indent_of(source, offset(first_line))]
        if len(indent) != _column_of(region.node):
            continue  # the statement does not start its line (``x = 1; def f(): ...``): keep it
        if first_line < kept_from:
            continue
        end = offset(region.last_line + 1)
        ending = _FINAL_LINE_BREAK.search(source[offset(region.last_line) : end])
        pieces.append(source[offset(kept_from) : offset(first_line)])
        lines.extend(range(kept_from, first_line))
        pieces.append(indent + "0" + (ending.group(0) if ending is not None else ""))
        lines.append(first_line)
        kept_from = region.last_line + 1
    if not pieces:
        return source, []
    pieces.append(source[offset(kept_from) :])
    lines.extend(range(kept_from, len(starts) + 1))
    return "".join(pieces), lines


def _column_of(statement: ast.stmt) -> int:
    """Where a statement's first line starts (its ``@`` for a decorated definition); indentation
    is ASCII, so ``ast``'s UTF-8 byte columns are characters here."""
    decorators = getattr(statement, "decorator_list", None) or ()
    if decorators:
        first = min(decorators, key=lambda d: (d.lineno, d.col_offset))
        if first.lineno < statement.lineno:
            return first.col_offset - 1
    return statement.col_offset


def _indent_of(source: str, start: int) -> int:
    width = 0
    while start + width < len(source) and source[start + width] in " \t\f":
        width += 1
    return width
