"""Parse once, run the enabled rules in one traversal, honour noqa, apply fixes to a fixpoint.

Cost model (see PERF-NOTES and bench/): a file that contains no trigger of
an enabled rule is not parsed; the ``ast`` pre-pass (torchlint/prepass.py)
drops the rules that cannot report in the file and removes the regions no
running rule needs before LibCST parses it; positions (LibCST's PositionProvider, which
costs more than the parse) are computed only for files with findings; no
scope or qualified-name metadata is used.
"""
from __future__ import annotations

import ast
import bisect
import re
import traceback
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Type

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from torchlint import confirmations, prepass, registry, walk_order
from torchlint.config import Settings
from torchlint.analysis.model import conventions
from torchlint.analysis.model.codegen import statement_positions
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.model.project_index import active_project, file_context
from torchlint.noqa import NoqaIndex, is_skipped_file
from torchlint.rule import (
    DEFAULT_CONFIDENCE_FLOOR,
    Applicability,
    Confidence,
    Diagnostic,
    Edit,
    Finding,
    Fix,
    FixSpec,
    ImportRequirement,
    Location,
    PendingReport,
    Rule,
    handler_names,
)
from torchlint.source import LEGACY_ASYNC_STAND_IN, line_starts, python_syntax_error, readable_legacy_text, too_deeply_nested

# Fixes are applied in passes until nothing changes; nested fixes need one pass per level.
MAX_FIX_PASSES = 10


@dataclass
class LintResult:
    findings: List[Finding] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)


@dataclass
class FixResult:
    text: str
    applied_codes: Tuple[str, ...]  # the code of each applied fix, in the order they were applied
    result: LintResult  # what remains after fixing
    # The ``frozen`` spans fix_text was given, where they stand in ``text``.
    frozen: Tuple[Tuple[int, int], ...] = ()

    @property
    def applied(self) -> int:
        return len(self.applied_codes)


# -- the traversal ---------------------------------------------------------------


def rule_crash(path: str, rule: Type[Rule], exc: BaseException) -> Diagnostic:
    """The diagnostic for a rule's own bug: names the file, the rule, the exception and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" [{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}]" if frames else ""
    return Diagnostic(
        path=path,
        message=f"internal error in {rule.code} ({rule.name}): {type(exc).__name__}: {exc}{where}; please report it",
        kind="internal",
    )


class _Traversal(cst.CSTVisitor):
    """One walk of the tree that calls every enabled rule's handlers for each node."""

    def __init__(self, context: FileContext, rules: Sequence[Rule], diagnostics: List[Diagnostic]) -> None:
        super().__init__()
        self.context = context
        self.diagnostics = diagnostics
        self.crashed: Set[str] = set()
        # Rules a naming convention decided something for (analysis/model/conventions.py).
        self.decided_by_names: Set[str] = set()
        self._visit: Dict[str, List[Tuple[Optional[Rule], Callable]]] = {}
        self._leave: Dict[str, List[Tuple[Optional[Rule], Callable]]] = {}
        # Imports inside a function join the import table as the walk reaches them and
        # leave it with the function, after the rules' own leave handlers have run.
        for node_type in ("Import", "ImportFrom"):
            self._visit[node_type] = [(None, context.imports.add)]
        self._outer_bindings: List[Dict[str, str]] = []
        self._visit["FunctionDef"] = [(None, self._enter_function)]
        for rule in rules:
            for name in handler_names(type(rule)):
                kind, _, node_type = name.partition("_")
                table = self._visit if kind == "visit" else self._leave
                table.setdefault(node_type, []).append((rule, getattr(rule, name)))
        self._leave.setdefault("FunctionDef", []).append((None, self._leave_function))

    def _enter_function(self, node: cst.FunctionDef) -> None:
        self._outer_bindings.append(dict(self.context.imports.bindings))

    def _leave_function(self, node: cst.FunctionDef) -> None:
        self.context.imports.bindings = self._outer_bindings.pop()

    def _call(self, rule: Optional[Rule], method: Callable, node: cst.CSTNode) -> None:
        if rule is None:
            method(node)
            return
        if rule.code in self.crashed:
            return
        before = conventions.decisions
        try:
            method(node)
            if conventions.decisions != before:
                self.decided_by_names.add(rule.code)
        except Exception as exc:  # one rule's bug must not stop the others
            self.crashed.add(rule.code)
            rule.reports.clear()
            self.diagnostics.append(rule_crash(self.context.path, type(rule), exc))

    def on_visit(self, node: cst.CSTNode) -> bool:
        handlers = self._visit.get(type(node).__name__)
        if handlers:
            for rule, method in handlers:
                self._call(rule, method, node)
        self.context.ancestors.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.context.ancestors.pop()
        handlers = self._leave.get(type(original_node).__name__)
        if handlers:
            for rule, method in handlers:
                self._call(rule, method, original_node)

    # Attribute-level hooks are unused; skipping them saves a dispatch per child.
    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def walk(self, module: cst.Module) -> None:
        """Call the handlers as ``module.visit(self)`` would, for every node but whitespace and
        punctuation that no handler asks for, without LibCST rebuilding each node on the way
        (its visit re-creates and re-validates every node: half of a cold run's time)."""
        handled = set(self._visit) | set(self._leave)
        walk_order.walk(module, self.on_visit, self.on_leave, walk_order.descender(handled.__contains__))


# -- linting -----------------------------------------------------------------------


def select_rules(source: str, codes: Iterable[str]) -> List[Type[Rule]]:
    """The enabled rules whose trigger text occurs in ``source`` (the cheap prefilter)."""
    return [rule for rule in registry.rules_for_codes(codes) if any(t in source for t in rule.triggers)]


def parse(source: str, path: str, python_accepts: bool = False) -> Tuple[Optional[cst.Module], Optional[Diagnostic]]:
    """LibCST's tree of ``source``, or the syntax error.  ``python_accepts``: ``ast.parse`` took the
    text (or the file it was reduced from), so it nests no deeper than CPython allows."""
    deep = None if python_accepts else too_deeply_nested(source)
    if deep is not None:
        # Checked before LibCST sees the text: its native parser would crash the process.
        return None, Diagnostic(path, f"syntax error: {deep[2]}", deep[0], deep[1], "parse")
    try:
        return cst.parse_module(source), None
    except cst.ParserSyntaxError as exc:
        message = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()[0]
        line, column = exc.raw_line, exc.raw_column + 1
        python = python_syntax_error(source)
        if python is not None and python[0] <= line:  # not a later line: then it is the same mistake, better placed
            line, column, message = python
        return None, Diagnostic(path, f"syntax error: {message}", line, column, "parse")
    except RecursionError:
        return None, Diagnostic(path, "syntax error: expression nested too deeply to parse", 1, 1, "parse")


def lint_text(
    source: str,
    path: str,
    settings: Settings,
    codes: Optional[Iterable[str]] = None,
    honour_noqa: bool = True,
    use_prepass: bool = True,
    tree: Optional[ast.Module] = None,
    use_triggers: bool = True,
) -> LintResult:
    """Findings for one decoded file (no fixes applied).

    ``use_prepass=False`` parses and walks the whole file with every triggered rule, and
    ``use_triggers=False`` runs the rules whose trigger text the file lacks too: the findings are
    the same (tested), only slower; tests and bench/ compare them.
    ``tree``: the file's ``ast`` when the caller has it (flake8 does), so the pre-pass need not parse.
    """
    result = LintResult()
    if is_skipped_file(source):
        return result
    legacy = readable_legacy_text(source)
    if legacy is not None:
        source, tree = legacy, None  # same length, same positions: see source.readable_legacy_text
    enabled = settings.codes_for(path) if codes is None else codes
    rule_classes = select_rules(source, enabled) if use_triggers else list(registry.rules_for_codes(enabled))
    if not rule_classes:
        return result
    parsed_text, line_map, plan = source, [], None
    if use_prepass:
        project = active_project()
        if tree is None and project is not None:
            tree = project.parsed_text(path, source)  # a fact of an earlier file parsed this one
        plan = prepass.plan(source, path, rule_classes, tree)
        if project is not None and plan is not None and plan.tree is not None:
            project.adopt(path, source, plan.tree)
        if plan is not None:
            rule_classes, parsed_text, line_map = plan.rules, plan.text, plan.lines
            if not rule_classes:
                return result
    module, error = parse(parsed_text, path, python_accepts=plan is not None)
    if module is None:
        if line_map and error.line:
            error = replace(error, line=line_map[min(error.line, len(line_map)) - 1])
        result.diagnostics.append(error)
        return result
    context = file_context(path, source, module, settings)
    context.line_map = line_map
    context.ast_tree = plan.tree if plan is not None else None
    context.compiles = legacy is None
    rules = []
    for rule_class in rule_classes:
        try:
            rules.append(rule_class(context))
        except Exception as exc:  # a rule that cannot start on this file must not stop the others
            result.diagnostics.append(rule_crash(path, rule_class, exc))
    traversal = _Traversal(context, rules, result.diagnostics)
    try:
        if walk_order.available():
            traversal.walk(module)
        else:
            module.visit(traversal)
    except RecursionError:
        result.diagnostics.append(Diagnostic(path, "file nested too deeply to analyse", 1, 1, "internal"))
        return result
    _judge_conventions(context, module, rules, traversal, result.diagnostics)
    _apply_measured_levels(rules, traversal)
    floor = settings.confidence_floor
    confirmed_here = settings.confirmed_in(path) if settings.confirmed else []
    if confirmed_here:  # a finding a run confirmed is shown at high whatever its level: keep every level until matched
        floor, shown_from = Confidence.LOW, floor
    pending = [
        report
        for rule in rules
        if rule.code not in traversal.crashed
        for report in rule.reports
        if report.confidence.at_least(floor)
    ]
    if not pending:
        return result
    result.findings = _materialize(pending, context, result.diagnostics, parsed_text)
    if legacy is not None:
        result.findings = [_without_stand_in(finding) for finding in result.findings]
    if honour_noqa:
        index = NoqaIndex(source)
        result.findings = [f for f in result.findings if not index.suppresses(f.code, f.location.line)]
    if confirmed_here:
        result.findings = [f for f in confirmations.promote(result.findings, source, confirmed_here) if f.confidence.at_least(shown_from)]
    if settings.unfixable:
        result.findings = [
            replace(f, fix=None, fix_edit_locations=(), fix_edit_cells=()) if f.code in settings.unfixable and f.fix else f
            for f in result.findings
        ]
    result.findings.sort(key=lambda f: f.sort_key)
    return result


_LEVELS = [Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH]


def _judge_conventions(
    context: FileContext, module: cst.Module, rules: Sequence[Rule], traversal: "_Traversal", diagnostics: List[Diagnostic]
) -> None:
    """For each rule a naming convention decided something for in this file, walk the file again with that
    rule alone and conventions off: the facts decide which nodes are reported, the names move each one's
    level by one (analysis/model/conventions.py). Rules that judge conventions themselves are left alone."""
    named = [
        rule for rule in rules
        if rule.code in traversal.decided_by_names and rule.code not in traversal.crashed and not rule.judges_names
    ]
    if not named:
        return
    blind = []
    for rule in named:
        try:
            blind.append(type(rule)(context))
        except Exception as exc:
            diagnostics.append(rule_crash(context.path, type(rule), exc))
            return
    with conventions.disabled():
        again = _Traversal(context, blind, diagnostics)
        try:
            again.walk(module) if walk_order.available() else module.visit(again)
        except RecursionError:
            return
    for rule, facts_only in zip(named, blind):
        # Each answer at its measured level first, so that a convention still moves the shown level by one.
        _show_at_measured_levels(rule)
        if facts_only.code in again.crashed:
            continue
        _show_at_measured_levels(facts_only)
        rule.reports = _moved_reports(rule.reports, facts_only.reports)


def _apply_measured_levels(rules: Sequence[Rule], traversal: "_Traversal") -> None:
    """Move each finding to the level its rule's form measured on validation draws (Rule.shown_level): a level is
    a promise, and a form that did not keep it moves down. Rules that weigh naming conventions per op map both
    of their answers themselves; for the others :func:`_judge_conventions` has mapped them already."""
    for rule in rules:
        if rule.code in traversal.crashed or rule.judges_names or rule.code in traversal.decided_by_names:
            continue
        _show_at_measured_levels(rule)


def _show_at_measured_levels(rule: Rule) -> None:
    for index, report in enumerate(rule.reports):
        if report.unmeasured:
            continue  # a form new since the draws the table rests on: shown where the rule put it
        if report.found_unreached is not None:
            # The table measured the form as the analysis finds it; unreached code is shown at low whatever it maps to.
            level = Confidence.LOW
        else:
            level = rule.shown_level(report.confidence)
        if level is not report.confidence:
            fix = report.fix
            if fix is not None and fix.applicability is Applicability.NUMERICS and not level.at_least(DEFAULT_CONFIDENCE_FLOOR):
                fix = replace(fix, applicability=Applicability.UNSAFE)
            rule.reports[index] = replace(report, confidence=level, fix=fix)


def _moved_reports(by_names: List[PendingReport], by_facts: List[PendingReport]) -> List[PendingReport]:
    def key(report: PendingReport):
        return (id(report.node), report.message)

    named = {key(report): report for report in by_names}
    factual = {key(report): report for report in by_facts}
    out = []
    for report_key in list(factual) + [k for k in named if k not in factual]:
        on, off = named.get(report_key), factual.get(report_key)
        level = conventions.moved(off.confidence if off else None, on.confidence if on else None, _LEVELS)
        if level is None:
            continue
        base = on if on is not None else off
        fix = base.fix
        if fix is not None and fix.applicability is Applicability.NUMERICS and not level.at_least(DEFAULT_CONFIDENCE_FLOOR):
            fix = replace(fix, applicability=Applicability.UNSAFE)
        out.append(replace(base, confidence=level, fix=fix))
    return out


def _without_stand_in(finding: Finding) -> Finding:
    """The finding without its fix when an edit would write the stand-in for ``async`` into the file."""
    if finding.fix is not None and any(LEGACY_ASYNC_STAND_IN in edit.content for edit in finding.fix.edits):
        return replace(finding, fix=None, fix_edit_locations=())
    return finding


def _materialize(
    pending: List[PendingReport], context: FileContext, diagnostics: List[Diagnostic], parsed_text: Optional[str] = None
) -> List[Finding]:
    """Turn held reports into findings with positions and text edits.

    ``parsed_text``: the text ``context.module`` was parsed from (the pre-pass's reduced text);
    without it, and the text was reduced, positions are resolved over the whole module.
    """
    if parsed_text is None and not context.line_map:
        parsed_text = context.source
    if parsed_text is None:
        positions = _whole_module_positions(context.module)
    else:
        positions = _StatementPositions(context.module, parsed_text, pending)
    if context.line_map:
        positions = _FileLines(positions, context.line_map)
    starts = line_starts(context.source)
    findings = []
    seen = set()
    broken: Set[str] = set()
    import_uses = _first_import_uses(pending, positions, starts)
    for report in pending:
        if report.rule.code in broken:
            continue
        rng = positions.get(report.node)
        if rng is None:  # the rule reported a node it built itself, not one of the file's: a crash of that rule
            broken.add(report.rule.code)
            diagnostics.append(
                rule_crash(context.path, type(report.rule), LookupError("reported a node that is not in the parsed file"))
            )
            continue
        location = Location(rng.start.line, rng.start.column + 1, rng.end.line, rng.end.column + 1)
        key = (report.rule.code, location)
        if key in seen:  # two handlers of one rule reaching the same node report once
            continue
        seen.add(key)
        fix = None
        edit_locations: Tuple[Tuple[int, int, int, int], ...] = ()
        if report.fix is not None:
            try:
                fix = _build_fix(report.fix, report.indents, context, positions, starts, import_uses)
            except Exception as exc:
                diagnostics.append(
                    Diagnostic(
                        context.path,
                        f"internal error building the fix for {report.rule.code}: {type(exc).__name__}: {exc}; "
                        "the finding is reported without a fix",
                        location.line,
                        location.column,
                        "internal",
                    )
                )
            else:
                edit_locations = tuple(_edit_location(edit, starts) for edit in fix.edits)
        findings.append(
            Finding(
                code=report.rule.code,
                name=report.rule.name,
                path=context.path,
                location=location,
                message=report.message,
                fix=fix,
                fix_edit_locations=edit_locations,
                confidence=report.confidence,
            )
        )
    return [finding for finding in findings if finding.code not in broken] if broken else findings


def _whole_module_positions(module: cst.Module):
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


_POSITION_NEWLINE = re.compile(r"\r\n?|\n")  # what PositionProvider counts as a line break


class _StatementPositions:
    """PositionProvider's positions over the whole module, computed statement by statement.

    Resolving positions is a codegen of the whole module that records every node (more
    than the parse costs), while a file's findings and fixes sit in a few statements.  A
    statement of a module's or a block's body starts a line, and its codegen depends on
    nothing before it but the indentation of its blocks: rendered alone with that
    indentation, it gives every node inside it the module's positions less a line shift.
    The shift comes from where the statement's text stands in the parsed text, used only
    when exactly one line of that text starts with it (it stands there by construction, so
    that is its place).  A node in no such statement gets the whole module's positions.

    Statements tried: a top-level class's member and the top-level statement that
    enclosed each report (``PendingReport.enclosing``), and a top-level statement asked for
    itself (import placement).
    """

    def __init__(self, module: cst.Module, text: str, pending: Sequence[PendingReport]) -> None:
        self._module = module
        self._text = text
        self._top_level = {id(statement) for statement in module.body}
        self._untried: List[Tuple[cst.CSTNode, Tuple[str, ...]]] = []
        self._tried: Set[int] = set()
        for report in pending:
            self._untried.extend(_enclosing_statements(report.enclosing, module, self._top_level))
        self._resolved: List[Tuple[Dict[cst.CSTNode, CodeRange], int]] = []  # (ranges, line shift)
        self._whole = None

    def get(self, node: cst.CSTNode, default=None):
        found = self._find(node)
        return default if found is None else found

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._find(node)
        if found is None:
            return self._whole_positions()[node]  # the KeyError whole-module resolution raises
        return found

    def _find(self, node: cst.CSTNode) -> Optional[CodeRange]:
        if self._whole is not None:
            return self._whole.get(node)
        found = self._known(node)
        if found is not None:
            return found
        if id(node) in self._top_level and self._resolve(node, ()):
            found = self._known(node)
            if found is not None:
                return found
        while self._untried:
            statement, indents = self._untried.pop(0)
            if self._resolve(statement, indents):
                found = self._known(node)
                if found is not None:
                    return found
        return self._whole_positions().get(node)

    def _known(self, node: cst.CSTNode) -> Optional[CodeRange]:
        for ranges, shift in self._resolved:
            rng = ranges.get(node)
            if rng is not None:
                if not shift:
                    return rng
                return CodeRange(
                    CodePosition(rng.start.line + shift, rng.start.column),
                    CodePosition(rng.end.line + shift, rng.end.column),
                )
        return None

    def _resolve(self, statement: cst.CSTNode, indents: Tuple[str, ...]) -> bool:
        """Positions of the nodes of ``statement`` (a body's statement inside blocks indented by
        ``indents``); False when its place in the text is not certain."""
        if id(statement) in self._tried:
            return False
        self._tried.add(id(statement))
        rendered, computed = statement_positions(statement, self._module, indents)
        start = _only_line_start(self._text, rendered)
        if start is None:
            return False
        text = self._text
        before = text.count("\n", 0, start) if "\r" not in text else len(_POSITION_NEWLINE.findall(text, 0, start))
        self._resolved.append((computed, before))
        return True

    def _whole_positions(self):
        if self._whole is None:
            self._whole = _whole_module_positions(self._module)
        return self._whole


def _enclosing_statements(
    enclosing: Sequence[cst.CSTNode], module: cst.Module, top_level: Set[int]
) -> List[Tuple[cst.CSTNode, Tuple[str, ...]]]:
    """The statements (with the indentation of their blocks) whose positions a report needs first:
    the member of a top-level class it is in, then its top-level statement.  Each is checked to be
    where ``enclosing`` says: a wrong indentation would render text that is not the file's."""
    statements: List[Tuple[cst.CSTNode, Tuple[str, ...]]] = []
    if not enclosing or id(enclosing[0]) not in top_level:
        return statements
    if (
        len(enclosing) == 3
        and isinstance(enclosing[0], cst.ClassDef)
        and isinstance(enclosing[1], cst.IndentedBlock)
        and enclosing[1] is enclosing[0].body
        and any(member is enclosing[2] for member in enclosing[1].body)
    ):
        block = enclosing[1]
        statements.append((enclosing[2], (module.default_indent if block.indent is None else block.indent,)))
    statements.append((enclosing[0], ()))
    return statements


def _only_line_start(text: str, needle: str) -> Optional[int]:
    """The one offset where ``needle`` occurs at the start of a line of ``text``, else None."""
    if not needle:
        return None
    found = None
    start = text.find(needle)
    while start != -1:
        # Every statement and empty line ends with a line break (LibCST's own invariant).
        if start == 0 or text[start - 1] in "\r\n":
            if found is not None:
                return None
            found = start
        start = text.find(needle, start + 1)
    return found


class _FileLines:
    """Positions in a pre-pass's reduced text, read as positions in the file (see prepass.Plan.lines)."""

    def __init__(self, positions, line_map: List[int]) -> None:
        self._positions = positions
        self._line_map = line_map

    def _file_range(self, rng: CodeRange) -> CodeRange:
        lines = self._line_map
        return CodeRange(
            CodePosition(lines[rng.start.line - 1], rng.start.column), CodePosition(lines[rng.end.line - 1], rng.end.column)
        )

    def get(self, node: cst.CSTNode, default=None):
        rng = self._positions.get(node)
        return default if rng is None else self._file_range(rng)

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        return self._file_range(self._positions[node])


def _offset(starts: List[int], line: int, column: int) -> int:
    return starts[line - 1] + column


def _edit_location(edit: Edit, starts: List[int]) -> Tuple[int, int, int, int]:
    line = bisect.bisect_right(starts, edit.start)
    end_line = bisect.bisect_right(starts, edit.end)
    return (line, edit.start - starts[line - 1] + 1, end_line, edit.end - starts[end_line - 1] + 1)


def _minimal_edit(start: int, old: str, new: str) -> Edit:
    """Trim the common prefix and suffix so that edits touch as little text as possible."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return Edit(start + prefix, start + len(old) - suffix, new[prefix : len(new) - suffix])


def _first_import_uses(pending: List[PendingReport], positions, starts: List[int]) -> Dict[ImportRequirement, int]:
    """Per import that fixes need, the earliest offset any fix of the file replaces.

    Every fix then inserts that import at the same place, so fixes applied together add it once.
    """
    uses: Dict[ImportRequirement, int] = {}
    for report in pending:
        if report.fix is None or not report.fix.imports:
            continue
        for replacement in report.fix.replacements:
            rng = positions.get(replacement.old)
            if rng is None:
                continue
            offset = _offset(starts, rng.start.line, rng.start.column)
            for requirement in report.fix.imports:
                uses[requirement] = min(uses.get(requirement, offset), offset)
    return uses


def _build_fix(
    spec: FixSpec, indents: Tuple[str, ...], context: FileContext, positions, starts: List[int], import_uses: Dict[ImportRequirement, int]
) -> Fix:
    edits = []
    for replacement in spec.replacements:
        old = replacement.old
        if isinstance(replacement.new, cst.RemovalSentinel):
            edits.append(_line_removal(old, context, positions, starts))
            continue
        rng = positions[old]
        start = _offset(starts, rng.start.line, rng.start.column)
        end = _offset(starts, rng.end.line, rng.end.column)
        # Positions exclude an expression's own parentheses; its rendering includes them.  (A class's `lpar`
        # is the one parenthesis of its bases, inside its position.)
        if not isinstance(old, cst.ClassDef):
            start -= sum(len(context.code(paren, indents)) for paren in getattr(old, "lpar", ()))
            end += sum(len(context.code(paren, indents)) for paren in getattr(old, "rpar", ()))
        old_text = context.source[start:end]
        block_indents = indents
        statement = isinstance(old, cst.BaseCompoundStatement)
        if statement:  # its position starts after its leading blank lines and ends before its last newline
            old = old.with_changes(leading_lines=())
        if old_text != _statement_text(context.code(old, block_indents), statement):
            # A rule may report a node of another block than the one it was visiting (a step found from a return).
            block_indents = _indents_in_source(old, old_text, context, statement)
            if block_indents is None:
                raise ValueError("node position does not match its source text")
        new = replacement.new
        if statement and isinstance(new, cst.BaseCompoundStatement):
            new = new.with_changes(leading_lines=())
        new_text = new if isinstance(new, str) else _statement_text(context.code(new, block_indents), statement)
        edits.append(_minimal_edit(start, old_text, new_text))
    own_first_use = min((edit.start for edit in edits), default=len(context.source))
    imports = []
    for requirement in dict.fromkeys(spec.imports):
        first_use = min(import_uses.get(requirement, own_first_use), own_first_use)
        imports.append(_import_edit(requirement, context, positions, starts, first_use))
    # A stable sort: at one insertion point the imports come first (before a helper a fix writes after the
    # file's last import), whatever the edits' hashes.
    return Fix(spec.applicability, spec.message, tuple(sorted(imports + edits, key=lambda e: (e.start, e.end))))


def _statement_text(code: str, statement: bool) -> str:
    """A compound statement's rendering as its position spans it: without the final newline."""
    return code[:-1] if statement and code.endswith("\n") else code


def _indents_in_source(node: cst.CSTNode, text: str, context: FileContext, statement: bool = False) -> Optional[Tuple[str, ...]]:
    """The block indentation under which ``node`` renders as ``text`` (its text in the file), read
    from its continuation lines; None when no indentation does."""
    rendered = context.code(node).splitlines()
    written = text.splitlines()
    if len(rendered) < 2 or len(rendered) != len(written):
        return None
    for mine, theirs in zip(rendered[1:], written[1:]):
        if mine.strip() and theirs.endswith(mine):
            prefix = theirs[: len(theirs) - len(mine)]
            candidate = (prefix,)
            if not prefix.strip() and _statement_text(context.code(node, candidate), statement) == text:
                return candidate
            return None
    return None


def _line_removal(old: cst.CSTNode, context: FileContext, positions, starts: List[int]) -> Edit:
    """``Replacement(line, cst.RemoveFromParent())``: delete a simple statement line that stands alone on its line(s)."""
    if not isinstance(old, cst.SimpleStatementLine):
        raise ValueError("only a simple statement line can be removed")
    rng = positions[old]
    line_start = starts[rng.start.line - 1]
    if context.source[line_start : _offset(starts, rng.start.line, rng.start.column)].strip():
        raise ValueError("the statement shares its line with other code")
    end = starts[rng.end.line] if rng.end.line < len(starts) else len(context.source)
    return Edit(line_start, end, "")


def _import_edit(requirement: ImportRequirement, context: FileContext, positions, starts: List[int], first_use: int) -> Edit:
    """Insert the import after the last top-level import that ends before its first use (an offset).

    Failing that, after the docstring; failing that, after the comments that open the file
    (a shebang and a coding declaration must stay on lines 1-2). An import placed after a
    module-level use would fail at import time.
    """
    module = context.module
    newline = module.default_newline
    anchor = None
    for index, stmt in enumerate(module.body):
        if _offset(starts, positions[stmt].end.line, positions[stmt].end.column) > first_use:
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            if any(isinstance(small, (cst.Import, cst.ImportFrom)) for small in stmt.body):
                anchor = stmt
            elif index == 0 and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
                anchor = anchor or stmt
    if anchor is None:
        # Module.header holds the blank and comment lines above the first statement, one per line.
        after_header = starts[min(len(module.header), len(starts) - 1)]
        return Edit(after_header, after_header, requirement.statement() + newline)
    end = _offset(starts, positions[anchor].end.line, positions[anchor].end.column)
    source = context.source
    line_index = bisect.bisect_right(starts, end)
    if line_index < len(starts):
        return Edit(starts[line_index], starts[line_index], requirement.statement() + newline)
    # The anchor is on the last line and the file has no final newline.
    return Edit(len(source), len(source), newline + requirement.statement())


# -- fixing ------------------------------------------------------------------------


def _overlaps(a: Edit, b: Edit) -> bool:
    if a == b:
        return False  # the same import asked for by two fixes is applied once
    if a.start == a.end and b.start == b.end:
        return a.start == b.start  # two insertions at one point: their order would be arbitrary
    return a.start < b.end and b.start < a.end


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    pieces = []
    position = 0
    # Duplicates (an import two fixes ask for) are applied once; insertions at one point keep the order the
    # fixes give them (a set's order would follow the edits' hashes, which change from run to run).
    for edit in sorted(dict.fromkeys(edits), key=lambda e: (e.start, e.end)):
        pieces.append(source[position : edit.start])
        pieces.append(edit.content)
        position = edit.end
    pieces.append(source[position:])
    return "".join(pieces)


def apply_fix(source: str, path: str, fix: Fix) -> Optional[str]:
    """``source`` with this one fix applied, or None when the result does not parse (it is never offered)."""
    fixed = apply_edits(source, fix.edits)
    return fixed if parse(fixed, path)[0] is not None else None


def touches_frozen(fix: Fix, frozen: Sequence[Tuple[int, int]]) -> bool:
    """Whether applying ``fix`` would change or split a frozen span of the text.

    A frozen span [start, end) must come out verbatim, whole and still starting a line: no edit may
    overlap it or insert inside it, and text inserted at its start must end with a line break.  An
    empty span (start == end) is a boundary that no edit may straddle.  (A notebook freezes its
    masked magics and the boundaries between its cells.)
    """
    for edit in fix.edits:
        for start, end in frozen:
            if start == end:
                touched = edit.start < start < edit.end
            elif edit.start == edit.end:  # an insertion
                touched = start < edit.start < end or (edit.start == start and not edit.content.endswith(("\n", "\r")))
            else:
                touched = edit.start < end and start < edit.end
            if touched:
                return True
    return False


def _moved(frozen: Sequence[Tuple[int, int]], edits: Sequence[Edit]) -> Tuple[Tuple[int, int], ...]:
    """Where the frozen spans stand once ``edits`` (none touching them) are applied: text inserted at a
    span's start goes before it (a boundary between cells then ends the earlier cell after the insertion)."""
    moved = []
    for start, end in frozen:
        shift = sum(len(edit.content) - (edit.end - edit.start) for edit in edits if edit.end <= start)
        moved.append((start + shift, end + shift))
    return tuple(moved)


def _choose_fixes(findings: Sequence[Finding], unsafe: bool, rejected: Set[Tuple], frozen: Sequence[Tuple[int, int]] = ()) -> List[Finding]:
    """A set of applicable fixes whose edits do not overlap (nor touch a frozen span), earliest first."""
    chosen: List[Finding] = []
    taken: List[Edit] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or not fix.applicability.applied_by(unsafe) or _fix_key(finding) in rejected:
            continue
        if frozen and touches_frozen(fix, frozen):
            continue
        if any(_overlaps(edit, other) for edit in fix.edits for other in taken):
            continue
        chosen.append(finding)
        taken.extend(fix.edits)
    return chosen


def _fix_key(finding: Finding) -> Tuple:
    return (finding.code, finding.fix.edits if finding.fix else ())


def fix_text(
    source: str,
    path: str,
    settings: Settings,
    unsafe: Optional[bool] = None,
    frozen: Sequence[Tuple[int, int]] = (),
    use_triggers: bool = True,
) -> FixResult:
    """Apply fixes in passes until none applies; never produce text that does not parse.

    ``frozen``: spans of ``source`` that no applied fix may touch (see ``touches_frozen``);
    the result says where they stand in the fixed text. ``use_triggers``: as for :func:`lint_text`.
    """
    unsafe = settings.unsafe_fixes if unsafe is None else unsafe
    applied: List[str] = []
    rejected: Set[Tuple] = set()
    extra: List[Diagnostic] = []
    current = source
    frozen = tuple(frozen)
    result = lint_text(current, path, settings, use_triggers=use_triggers)
    for _ in range(MAX_FIX_PASSES):
        chosen = _choose_fixes(result.findings, unsafe, rejected, frozen)
        if not chosen:
            break
        candidate = apply_edits(current, (e for f in chosen for e in f.fix.edits))
        if parse(candidate, path)[0] is None:
            # Find the culprits one by one; keep the fixes that are fine alone.
            good = []
            for finding in chosen:
                if apply_fix(current, path, finding.fix) is None:
                    rejected.add(_fix_key(finding))
                    extra.append(
                        Diagnostic(
                            path,
                            f"the fix for {finding.code} produced code that does not parse; it was not applied",
                            finding.location.line,
                            finding.location.column,
                            "internal",
                        )
                    )
                else:
                    good.append(finding)
            if not good:
                continue
            chosen = good[:1]
            candidate = apply_edits(current, chosen[0].fix.edits)
        applied.extend(finding.code for finding in chosen)
        current = candidate
        if frozen:
            frozen = _moved(frozen, sorted({e for f in chosen for e in f.fix.edits}, key=lambda e: (e.start, e.end)))
        result = lint_text(current, path, settings, use_triggers=use_triggers)
    result.diagnostics.extend(extra)
    return FixResult(current, tuple(applied), result, frozen)
