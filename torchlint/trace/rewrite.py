"""Instrument one module's source in memory: a probe call around each site's expressions.

``instrument`` parses the file with ``ast``, finds the node of every span of the plan and wraps it:
``torch.sqrt(x)`` becomes ``__torchlint__.output(3, torch.sqrt(__torchlint__.operand(3, x)))``.
Each probe returns its argument object unchanged, so the program computes what it computes without
them; the new nodes take the positions of the nodes they wrap, so line numbers and traceback carets
are the file's own.  The operand of an augmented assignment (``x **= 0.5``) is its target, which
cannot be wrapped: a statement of its own reads it just before.  Nothing here imports torch.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import re
from types import CodeType
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint.trace.plan import SitePlan, Span

# The name the probes are reached by (a builtin, so that no module's globals change).
PROBES_NAME = "__torchlint__"
_NEWLINE = re.compile(r"\r\n?|\n")  # the line breaks Python's tokenizer (and LibCST) count

# The probe of a site's second value, by rule (TL104 and TL106 divisions: "numerator").
_PARTNER_PROBES = {"TL103": "exponent", "TL105": "eps"}
# (the object holding the node, the field, the index in a list field or None)
_Slot = Tuple[ast.AST, str, Optional[int]]


def instrument(
    data: bytes, filename: str, sites: Sequence[SitePlan], probes_name: str = PROBES_NAME
) -> Tuple[CodeType, List[Tuple[int, str]]]:
    """The module's code with ``sites`` instrumented, and (site, reason) for each site left out.  The probes
    are reached by the builtin ``probes_name`` (each in-process watch has its own).

    Raises what ``compile`` raises for a file that does not parse, as an import would.
    """
    tree = ast.parse(data, filename)
    problems = instrument_tree(tree, importlib.util.decode_source(data), sites, probes_name) if sites else []
    return compile(tree, filename, "exec", dont_inherit=True), problems


def instrument_tree(tree: ast.Module, text: str, sites: Sequence[SitePlan], probes_name: str = PROBES_NAME) -> List[Tuple[int, str]]:
    """Instrument ``tree`` (parsed from ``text``) in place; (site, reason) for each site left out."""
    problems: List[Tuple[int, str]] = []
    _Instrumenter(tree, text, probes_name).apply(sites, problems)
    ast.fix_missing_locations(tree)
    return problems


class _Instrumenter:
    def __init__(self, tree: ast.Module, text: str, probes_name: str = PROBES_NAME) -> None:
        self.tree = tree
        self.probes_name = probes_name
        self.lines = _NEWLINE.split(text)
        self.by_span: Dict[Tuple[int, int, int, int], List[ast.AST]] = {}
        self.slots: Dict[int, _Slot] = {}
        # What now fills a node's slot: the node, or the outermost probe call around it.
        self.current: Dict[int, ast.expr] = {}
        for parent in ast.walk(tree):
            for field, value in ast.iter_fields(parent):
                if isinstance(value, ast.AST):
                    self._index(value, (parent, field, None))
                elif isinstance(value, list):
                    for position, item in enumerate(value):
                        if isinstance(item, ast.AST):
                            self._index(item, (parent, field, position))

    def _index(self, node: ast.AST, slot: _Slot) -> None:
        self.slots[id(node)] = slot
        if isinstance(node, (ast.expr, ast.stmt)) and getattr(node, "end_lineno", None) is not None:
            key = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
            self.by_span.setdefault(key, []).append(node)

    def _byte_column(self, line: int, column: int) -> int:
        """A 1-based character column as ``ast``'s 0-based UTF-8 offset."""
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return len(text[: column - 1].encode("utf-8"))

    def node_at(self, span: Span) -> Optional[ast.expr]:
        line, column, end_line, end_column = span
        key = (line, self._byte_column(line, column), end_line, self._byte_column(end_line, end_column))
        for node in self.by_span.get(key, []):
            if isinstance(node, ast.expr):
                return node
        return None

    def apply(self, sites: Sequence[SitePlan], problems: List[Tuple[int, str]]) -> None:
        for site in sites:
            reason = self._site(site)
            if reason is not None:
                problems.append((site.site, reason))

    def _site(self, site: SitePlan) -> Optional[str]:
        operand = self.node_at(site.operand)
        if operand is None:
            return "the operand's position is not an expression of the file as imported"
        partner = self.node_at(site.partner) if site.partner else None
        gradient = self.node_at(site.gradient) if site.gradient else None
        if site.operand_before:
            reason = self._read_before(operand, site.site)
        elif isinstance(getattr(operand, "ctx", None), (ast.Store, ast.Del)):
            reason = "the operand is assigned to, not read"
        else:
            self._wrap(operand, "operand", site.site)
            reason = None
        if reason is not None:
            return reason
        if partner is not None and not isinstance(getattr(partner, "ctx", None), (ast.Store, ast.Del)):
            self._wrap(partner, _PARTNER_PROBES.get(site.code, "numerator"), site.site)
        if gradient is not None:
            self._wrap(gradient, "output", site.site)
        return None

    def _probe(self, method: str, site: int, value: ast.expr, where: ast.AST) -> ast.Call:
        name = ast.copy_location(ast.Name(id=self.probes_name, ctx=ast.Load()), where)
        func = ast.copy_location(ast.Attribute(value=name, attr=method, ctx=ast.Load()), where)
        number = ast.copy_location(ast.Constant(value=site), where)
        return ast.copy_location(ast.Call(func=func, args=[number, value], keywords=[]), where)

    def _wrap(self, node: ast.expr, method: str, site: int) -> None:
        holder, field, position = self.slots[id(node)]
        inner = self.current.get(id(node), node)
        wrapped = self._probe(method, site, inner, node)
        if position is None:
            setattr(holder, field, wrapped)
        else:
            getattr(holder, field)[position] = wrapped
        self.current[id(node)] = wrapped

    def _read_before(self, target: ast.expr, site: int) -> Optional[str]:
        """Probe an augmented assignment's target by a statement just before the assignment."""
        holder, _, _ = self.slots[id(target)]
        if not isinstance(holder, ast.AugAssign) or not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
            return "the operand is an assignment target"
        statement_holder, field, _ = self.slots[id(holder)]
        body = getattr(statement_holder, field)
        if not isinstance(body, list):
            return "the operand is an assignment target"
        read = copy.deepcopy(target)
        read.ctx = ast.Load()
        probe = ast.Expr(value=self._probe("operand", site, read, holder))
        ast.copy_location(probe, holder)
        index = next(i for i, statement in enumerate(body) if statement is holder)
        body.insert(index, probe)
        # Later slots in this body moved one place down.
        for key, (owner, owner_field, position) in list(self.slots.items()):
            if owner is statement_holder and owner_field == field and position is not None and position >= index:
                self.slots[key] = (owner, owner_field, position + 1)
        return None
