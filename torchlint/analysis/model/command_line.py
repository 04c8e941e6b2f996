"""What a file's command line holds: the options ``argparse`` parses into Python numbers.

``parser.add_argument("--l1_lambda", type=float, default=100)`` then ``opt = parser.parse_args()``: ``opt.l1_lambda``
is a float whatever the command line says (argparse converts it or exits). An option is a number when
``add_argument`` gives it ``type=int``/``float``, a flag action (``store_true``/``store_false``, a bool), or a numeric
default with no ``type`` and no other action; ``nargs`` (a list) makes it none. Its name is ``dest=``, else the
first long option (``--l1-lambda`` is ``l1_lambda``), else the first short one.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, FrozenSet, Optional

import libcst as cst

from torchlint.analysis.model.dataflow import Site, bindings
from torchlint.analysis.model.project_index import file_facts

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

_NUMBER_TYPES = frozenset({"int", "float"})
_FLAG_ACTIONS = frozenset({"store_true", "store_false"})
_PARSING_METHODS = frozenset({"parse_args", "parse_known_args"})


def numeric_option(context: "FileContext", node: cst.Attribute, site: Optional[Site]) -> bool:
    """``opt.name`` where every binding of ``opt`` that may reach ``site`` is what ``parse_args()`` returns and the
    file declares ``name`` a numeric option."""
    if site is None or not isinstance(node.value, cst.Name):
        return False
    if node.attr.value not in context.memoized("command-line.numeric-options", context.module, lambda _: _numeric_options(context)):
        return False
    found = bindings(site, node.value.value)
    return bool(found) and all(_parsed(binding.value) for binding in found)


def _parsed(value: Optional[cst.BaseExpression]) -> bool:
    """``parser.parse_args(...)``, or the namespace of ``parser.parse_known_args(...)[0]``."""
    if isinstance(value, cst.Subscript) and len(value.slice) == 1 and isinstance(value.slice[0].slice, cst.Index):
        index = value.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and index.value == "0"):
            return False
        value = value.value
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _PARSING_METHODS
    )


def _numeric_options(context: "FileContext") -> FrozenSet[str]:
    facts = file_facts(context)
    if facts is None:
        return frozenset()
    return frozenset(
        name
        for node in ast.walk(facts.tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        for name in [_numeric_dest(node)]
        if name is not None
    )


def _numeric_dest(call: ast.Call) -> Optional[str]:
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg is not None}
    if any(keyword.arg is None for keyword in call.keywords) or "nargs" in keywords:
        return None
    kind, action, default = keywords.get("type"), keywords.get("action"), keywords.get("default")
    action_name = action.value if isinstance(action, ast.Constant) else None if action is None else ""
    if kind is not None:
        numeric = isinstance(kind, ast.Name) and kind.id in _NUMBER_TYPES and action_name in (None, "store")
    elif action_name in _FLAG_ACTIONS:
        numeric = True
    else:
        numeric = (
            action_name in (None, "store")
            and isinstance(default, ast.Constant)
            and type(default.value) in (int, float)
        )
    return _dest(call, keywords) if numeric else None


def _dest(call: ast.Call, keywords) -> Optional[str]:
    given = keywords.get("dest")
    if given is not None:
        return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if len(flags) != len(call.args) or not flags:
        return None
    long = [flag for flag in flags if flag.startswith("--")]
    chosen = long[0][2:] if long else flags[0].lstrip("-")
    return chosen.replace("-", "_") or None
