"""Generate torchlint/data/torch_api.json: torch's public API in each release, from the real packages.

    python tools/gen_api_table.py --dump OUT.json      # dump the installed torch (run once per release)
    python tools/gen_api_table.py --bracket WHEEL --dumps DIR --trees OLDER NEWER
                                                       # a release not installable here, read from its wheel
    python tools/gen_api_table.py --from-dumps DIR     # merge DIR/*.json into the table
    python tools/gen_api_table.py --check              # exit 1 if the table disagrees with the installed torch

The table serves the API-drift rules: for every public name of the modules in
MODULES (and every attribute of ``torch.Tensor``) it gives the first and last
release that has it, the release from which it is deprecated and the replacement
its deprecation note names, and the same intervals for each keyword it takes.
The linter reads it through ``torchlint/analysis/api/api_table.py``; it never imports
torch.

A dump is made inside an environment that has one torch release installed, so
this script runs on every Python a torch release needs (3.9 for 1.13) and
imports nothing of torchlint.  Which names a module exports: its ``__all__``,
else the public callables defined in it, plus the built-in (C++) functions it
re-exports.  Keywords come from ``inspect.signature``; built-in functions have
none, so theirs are the documented signatures of the docstring united with the
argument names of their ATen schemas, as in ``tools/gen_signatures.py``.
Deprecations are read, not run: a ``typing_extensions.deprecated`` marker, a
deprecation warning the function's source raises unconditionally (one under a
test of a parameter deprecates that parameter), or a ``.. warning::`` /
``.. deprecated::`` note saying the API itself is deprecated (an argument's
entry saying "Deprecated" deprecates that keyword).  Deprecations that only C++
code reports, with no note in the docstring, are not seen.

How the dumps were made: tools/README-api-table.md.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import re
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Set, Tuple

# the keyword readers TL405's table uses too
from doc_signatures import documented_keywords, schema_keywords

OUTPUT = Path(__file__).resolve().parent.parent / "torchlint" / "data" / "torch_api.json"

# Modules whose public names the table lists; of torch.nn and torch.distributions only the classes.
MODULES = (
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.nn.utils",
    "torch.nn.utils.rnn",
    "torch.linalg",
    "torch.fft",
    "torch.special",
    "torch.autograd",
    "torch.autograd.functional",
    "torch.utils.checkpoint",
    "torch.utils.data",
    "torch.cuda",
    "torch.cuda.amp",
    "torch.amp",
    "torch.optim",
    "torch.optim.lr_scheduler",
    "torch.distributions",
    "torch.testing",
    "torch.func",
)
CLASSES_ONLY = ("torch.nn", "torch.distributions")

# The ATen operator a built-in function of these modules binds: ``torch.linalg.det`` is ``aten::linalg_det``.
SCHEMA_PREFIX = {"torch.linalg": "linalg_", "torch.fft": "fft_", "torch.special": "special_"}

DEPRECATION_WORDS = re.compile(r"deprecat|will be removed|to be removed|scheduled for removal", re.IGNORECASE)
DEPRECATION_CATEGORIES = {"DeprecationWarning", "PendingDeprecationWarning"}
# FutureWarning counts only with the words: torch also uses it for a default about to change.
WARNING_CATEGORIES = DEPRECATION_CATEGORIES | {"FutureWarning"}

# "in favor of X", "use X instead", "see X": the replacement a deprecation note names.
_CUE = r"(?:in\s+favou?r\s+of|[Uu]se|replaced\s+(?:by|with)|migrate\s+to|switch\s+to|[Ss]ee|renamed?\s+to)"
_MARKED = r"(?::\w+:)?`{1,2}~?([^`]+?)`{1,2}"
_PLAIN = r"((?:torch|nn|F)\.[\w.]*\w(?:\([^)]*\))?)"
REPLACEMENT = re.compile(rf"{_CUE}\s+(?:{_MARKED}|{_PLAIN})")
# "This function will be deprecated in a future version" (spectral_norm): announced, not done; no warning.
FUTURE_DEPRECATION = re.compile(r"\b(?:will|may|might|could|shall)\s+(?:\w+\s+)?be\s+$|\bgoing\s+to\s+be\s+$", re.IGNORECASE)
# "this function is deprecated": the note is about the API itself.
SELF_SUBJECT = re.compile(r"\b(?:this|the)\s+(?:function|method|class|module|api|operator|op)\b", re.IGNORECASE)
# "the use of Tensor.T on ... is deprecated", "passing low==high is deprecated": a way of calling it is.
USAGE_SUBJECT = re.compile(r"\b(?:use of|using|passing|calling|when|if)\b", re.IGNORECASE)
# "is ignored now", "has no effect", "is not used": a deprecated argument that changes nothing.
IGNORED = re.compile(r"\b(?:is|are)\s+(?:now\s+)?ignored\b|\bhas\s+no\s+effect\b|\b(?:is\s+)?(?:not|no\s+longer)\s+used\b", re.IGNORECASE)
# ``embedding_bag(weight, input, ...)`` in a message: an argument order, not the keywords.
CALL_SNIPPET = re.compile(r"\w+\([^)]*\)")
_REF = re.compile(r"~?[A-Za-z_][\w.]*")


# --- dumping the installed torch -------------------------------------------------------------


def _release(version: str) -> str:
    """``2.0`` for ``2.0.1+cpu``: the table is per minor release."""
    major, minor = version.split("+")[0].split(".")[:2]
    return f"{major}.{minor}"


def _public_names(module_name: str, module, known: Set[str]) -> Iterator[Tuple[str, object, bool]]:
    """(name, object, exported) of the public callables of ``module``, and of its ``known`` names.

    Exported: in its ``__all__``, or defined in it, or a built-in it re-exports.  The others are
    kept too (``torch.cuda.OutOfMemoryError`` left ``__all__`` in 2.4 but still works), and so are
    the ``known`` names another release had, which a module ``__getattr__`` may still serve
    unlisted by ``dir()``: a name is removed only when it no longer resolves.
    """
    exported = getattr(module, "__all__", None)
    for name in sorted(set(dir(module)) | known):
        if name.startswith("_"):
            continue
        obj = getattr(module, name, None)  # None: gone, or a lazy attribute that fails on this build
        if obj is None or inspect.ismodule(obj):
            continue
        wanted = callable(obj) and (module_name not in CLASSES_ONLY or inspect.isclass(obj))
        if not wanted and name not in known:  # a known name counts while it resolves (torch.cuda.Device became an alias)
            continue
        listed = exported is not None and name in exported
        yield name, obj, listed or _defined_in(obj, module_name) or _is_reexported_builtin(obj)


def _defined_in(obj, module_name: str) -> bool:
    home = getattr(obj, "__module__", None) or ""
    if module_name == "torch":  # torch's namespace gathers its API from many submodules, and the JIT's types
        return home == "torch" or (home.startswith("torch.") and not home.startswith("torch._C"))
    return home == module_name or home.startswith(module_name + ".")


def _is_reexported_builtin(obj) -> bool:
    """A C++ function bound into a Python module (``torch.nn.functional.conv2d``), but not a dispatch helper."""
    return inspect.isbuiltin(obj) and (getattr(obj, "__module__", None) or "torch") not in ("torch._C", "torch.overrides")


def _parameters(obj) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _signature_keywords(signature: inspect.Signature) -> Tuple[Set[str], bool]:
    """Names that can be passed by keyword, and whether ``**kwargs`` takes any other."""
    names: Set[str] = set()
    takes_any = False
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            takes_any = True
        elif parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY) and parameter.name != "self":
            names.add(parameter.name)
    return names, takes_any


def _builtin_keywords(obj, name: str, operator: str, is_method: bool) -> Set[str]:
    return documented_keywords(name, _doc(obj), module_prefix=True) | schema_keywords(operator, is_method)


def _sentences(text: str) -> List[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`:])", " ".join(text.split())) if s]


def _replacement(text: str) -> Optional[str]:
    """The API a deprecation note says to use instead, as the note writes it."""
    match = REPLACEMENT.search(text)
    if match is None:
        return None
    return (match.group(1) or match.group(2)).strip()


def _names_itself(qualified: str, subject: str) -> bool:
    """Whether the text before "deprecated" names the API ``qualified`` (not another one it mentions)."""
    if USAGE_SUBJECT.search(subject):
        return False
    if SELF_SUBJECT.search(subject):
        return True
    own = qualified.rsplit(".", 1)[1]
    for ref in _REF.findall(subject):
        ref = ref.lstrip("~").rstrip(".")
        if ref == own or (("." in ref) and qualified.endswith("." + ref.split("torch.", 1)[-1])):
            return True
    return False


def _directive_blocks(doc: str) -> Iterator[Tuple[str, str]]:
    """(directive, text) of each top-level ``.. warning::`` / ``.. deprecated::`` / ``.. note::`` block."""
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^\.\.\s+(warning|deprecated|note)::(.*)$", line)
        if not match:
            continue  # one indented deeper belongs to an argument's entry
        body = [match.group(2)]
        for following in lines[index + 1 :]:
            if following.strip() and not following[0].isspace():
                break
            body.append(following)
        yield match.group(1), "\n".join(body)


def _argument_entries(doc: str, parameters: Iterable[str]) -> Iterator[Tuple[str, str]]:
    """(parameter, text) of each ``name (type): text`` entry of an Args section."""
    wanted = set(parameters)
    lines = doc.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^(\s+)(\w+)\s*(?:\([^)]*\))?\s*:(?!:)\s*(.*)$", line)
        if not match or match.group(2) not in wanted:
            continue
        indent = len(match.group(1))
        body = [match.group(3)]
        for following in lines[index + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        yield match.group(2), "\n".join(body)


def _docstring_deprecations(
    qualified: str, doc: str, parameters: Iterable[str]
) -> Tuple[Optional[str], Dict[str, Optional[str]], Set[str]]:
    """(the note deprecating the API, or None; {keyword: replacement} for deprecated keywords; the keywords
    the note says are ignored) from a docstring."""
    doc = inspect.cleandoc(doc)
    note: Optional[str] = None
    for directive, text in _directive_blocks(doc):
        sentences = _sentences(text)
        for index, sentence in enumerate(sentences):
            found = re.search(r"deprecat", sentence, re.IGNORECASE)
            if directive == "deprecated" and index == 0:
                # ``.. deprecated:: 2.1`` says it of the API unless its text starts with a parameter's name
                about_itself = not any(re.search(rf"\b{re.escape(p)}\b", sentence) for p in parameters)
            else:
                about_itself = (
                    found is not None
                    and not FUTURE_DEPRECATION.search(sentence[: found.start()])
                    and _names_itself(qualified, sentence[: found.start()])
                )
            if about_itself:
                note = " ".join(sentences[index:])
                break
        if note is not None:
            break
    keywords: Dict[str, Optional[str]] = {}
    ignored: Set[str] = set()
    for parameter, text in _argument_entries(doc, parameters):
        flat = " ".join(text.split())
        said = re.search(
            rf"^Deprecated\b|(?:``|`|:attr:`)?\b{re.escape(parameter)}\b`{{0,2}}\s+(?:\w+\s+)?"
            r"(?:is|has been|was)\s+(?:now\s+)?deprecated",
            flat,
        )
        if said:
            keywords[parameter] = _replacement(flat[said.start() :])
            if IGNORED.search(flat[said.start() :]):
                ignored.add(parameter)
    return note, keywords, ignored


def _own_function(obj):
    """The Python function whose source says what calling ``obj`` does: the function, or a class's own __init__."""
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__")
        return inspect.unwrap(init) if inspect.isfunction(init) else None
    target = inspect.unwrap(obj) if callable(obj) else None
    return target if inspect.isfunction(target) else None


def _message_text(node: ast.expr, globals_: dict) -> str:
    """The literal parts of a warning message: a string, an f-string, a sum of them, a module constant."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_message_text(part, globals_) for part in node.values)
    if isinstance(node, ast.BinOp):
        return _message_text(node.left, globals_) + _message_text(node.right, globals_)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _message_text(node.func.value, globals_)
    if isinstance(node, ast.Name) and isinstance(globals_.get(node.id), str):
        return globals_[node.id]
    return ""


def _deprecation_warning(call: ast.Call, globals_: dict, words_required: bool) -> Optional[str]:
    """The message of a ``warnings.warn`` call that warns of a deprecation, or None.

    A DeprecationWarning counts whatever it says, unless ``words_required``: a class's __init__ also
    warns so of a way of using the class ("should not be instantiated"), and it must say "deprecated".
    """
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name != "warn" or not call.args:
        return None
    message = _message_text(call.args[0], globals_)
    category_node = next((k.value for k in call.keywords if k.arg == "category"), None)
    if len(call.args) > 1:
        category_node = call.args[1]
    category = ""
    if isinstance(category_node, ast.Name):
        category = category_node.id
    elif isinstance(category_node, ast.Attribute):
        category = category_node.attr
    if words_required or category not in DEPRECATION_CATEGORIES:
        return message if DEPRECATION_WORDS.search(message) else None
    return message or category


def _function_tree(function) -> Optional[ast.FunctionDef]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    return next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)


def _is_tombstone(obj, forwarded: bool = True) -> bool:
    """A name kept only to raise "... is now removed" (torch.solve since 1.13): gone, for the table.

    So is a method that only forwards to one (``Tensor.solve`` calls ``torch._linalg_utils.solve``).
    """
    function = _own_function(obj)
    definition = _function_tree(function) if function is not None else None
    if definition is None:
        return False
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    imports = [s for s in body if isinstance(s, ast.ImportFrom)]
    body = [s for s in body if not isinstance(s, ast.ImportFrom)]
    if len(body) != 1:
        return False
    if isinstance(body[0], ast.Raise):
        return True
    call = body[0].value if isinstance(body[0], ast.Return) else None
    if not forwarded or not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        return False
    callee = _imported_function(call.func.id, imports, function)
    return callee is not None and _is_tombstone(callee, forwarded=False)


def _imported_function(name: str, imports: List[ast.ImportFrom], function):
    """What ``name`` means in ``function``: a function-level ``from .x import name``, else a global."""
    package = function.__module__.rpartition(".")[0]
    for statement in imports:
        for alias in statement.names:
            if (alias.asname or alias.name) == name:
                try:
                    relative = "." * statement.level + (statement.module or "")
                    module = importlib.import_module(importlib.util.resolve_name(relative, package))
                    return getattr(module, alias.name, None)
                except (ImportError, ValueError):
                    return None
    return function.__globals__.get(name)


# How deep a parameter is followed into the helpers it is passed to (StepLR -> LRScheduler.__init__ -> a check).
FORWARDING_DEPTH = 3


def _callee(call: ast.Call, function, owner: Optional[type]) -> Tuple[Optional[object], Optional[type]]:
    """The Python function a call in ``function`` runs, when it is a module-level function or
    ``super().__init__`` (``owner``: the class whose __init__ ``function`` is); and that callee's owner."""
    func = call.func
    if isinstance(func, ast.Name):
        target = function.__globals__.get(func.id)
        return (target, None) if inspect.isfunction(target) else (None, None)
    is_super_init = (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    )
    if is_super_init and owner is not None:
        for base in owner.__mro__[1:]:
            init = base.__dict__.get("__init__")
            if init is not None:
                return (inspect.unwrap(init), base) if inspect.isfunction(inspect.unwrap(init)) else (None, None)
    return None, None


def _forwarded(call: ast.Call, callee, parameters: Set[str]) -> Dict[str, str]:
    """{the callee's parameter: the caller's parameter passed to it as is} for one call."""
    try:
        names = [p.name for p in inspect.signature(callee).parameters.values()]
    except (TypeError, ValueError):
        return {}
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    mapping = {}
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if isinstance(arg, ast.Name) and arg.id in parameters and index < len(names):
            mapping[names[index]] = arg.id
    for keyword in call.keywords:
        if keyword.arg is not None and isinstance(keyword.value, ast.Name) and keyword.value.id in parameters:
            mapping[keyword.arg] = keyword.value.id
    return mapping


def _warning_condition(parameter: str, test: ast.expr, in_else: bool) -> dict:
    """For which values of ``parameter`` a warning under ``test`` (in its else branch: ``in_else``) is
    raised: ``{"unless": v}`` (any value but v), ``{"if": v}``, ``{"when": "truthy"|"falsy"}``, or ``{}``
    when the test is not one of these simple forms."""
    if isinstance(test, ast.Name) and test.id == parameter:
        return {"when": "falsy" if in_else else "truthy"}
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name) and test.operand.id == parameter:
        return {"when": "truthy" if in_else else "falsy"}
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and test.left.id == parameter
        and isinstance(test.comparators[0], ast.Constant)
    ):
        value = test.comparators[0].value
        differs = isinstance(test.ops[0], (ast.NotEq, ast.IsNot))
        equals = isinstance(test.ops[0], (ast.Eq, ast.Is))
        if differs or equals:
            return {"unless": value} if differs != in_else else {"if": value}
    return {}


def _source_deprecations(
    function, words_required: bool, owner: Optional[type] = None, depth: int = 0
) -> Tuple[Optional[str], Dict[str, Optional[str]], Dict[str, dict], Set[str]]:
    """(the message of an unconditional deprecation warning, {keyword: replacement}, {keyword: the
    values that warn, see _warning_condition}, the keywords the warning says are ignored) from a
    function's source.

    A warning under a test of a parameter is about that parameter, when its message names it; a
    test of ``param is None`` is about leaving it out (a default to change), not about the keyword.
    A parameter passed as is to a module-level helper or to ``super().__init__`` that warns about
    its own parameter is deprecated too (the schedulers' ``verbose`` warns in a shared check).
    """
    definition = _function_tree(function)
    if definition is None:
        return None, {}, {}, set()
    arguments = definition.args
    parameters = {a.arg for a in arguments.args + arguments.kwonlyargs} - {"self", "cls"}
    globals_ = getattr(function, "__globals__", {})
    itself: List[Optional[str]] = []
    keywords: Dict[str, Optional[str]] = {}
    conditions: Dict[str, dict] = {}
    ignored: Set[str] = set()

    # guards: parameter -> the innermost test naming it, and whether the statement is in its else branch
    def visit(statements: List[ast.stmt], guards: Dict[str, Tuple[ast.expr, bool]]) -> None:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # runs only when called
            if isinstance(statement, (ast.If, ast.While)):
                tested = {n.id for n in ast.walk(statement.test) if isinstance(n, ast.Name)} & parameters
                only_absence = _tests_only_none(statement.test)
                if only_absence and tested:
                    continue  # a warning about leaving the argument out
                visit(statement.body, {**guards, **{p: (statement.test, False) for p in tested}})
                visit(statement.orelse, {**guards, **{p: (statement.test, True) for p in tested}})
                continue
            for node in ast.walk(statement) if not hasattr(statement, "body") else _own_expressions(statement):
                if isinstance(node, ast.Call):
                    message = _deprecation_warning(node, globals_, words_required)
                    if message is None:
                        forward(node)
                        continue
                    prose = CALL_SNIPPET.sub("", message)
                    named = {p for p in guards if re.search(rf"\b{re.escape(p)}\b", prose)}
                    if not guards:
                        itself.append(message)
                    for parameter in named:
                        keywords[parameter] = _replacement(message)
                        conditions[parameter] = _warning_condition(parameter, *guards[parameter])
                        if IGNORED.search(prose):
                            ignored.add(parameter)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(statement, field, []) or [], guards)
            for handler in getattr(statement, "handlers", []) or []:
                visit(handler.body, guards)

    def forward(call: ast.Call) -> None:
        if depth >= FORWARDING_DEPTH:
            return
        callee, callee_owner = _callee(call, function, owner)
        if callee is None or callee is function:
            return
        mapping = _forwarded(call, callee, parameters)
        if not mapping:
            return
        _, deprecated, warned_if, unused = _source_deprecations(callee, words_required, callee_owner, depth + 1)
        for theirs, ours in mapping.items():
            # only a warning about the value as such (not one about, say, a Tensor passed to SparseAdam)
            if theirs in deprecated and warned_if.get(theirs) and ours not in keywords:
                keywords[ours] = deprecated[theirs]
                conditions[ours] = warned_if[theirs]
                if theirs in unused:
                    ignored.add(ours)

    visit(definition.body, {})
    return (itself[0] if itself else None), keywords, conditions, ignored


def _own_expressions(statement: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a compound statement's header (``with warn(...)``), not of its body."""
    for field, value in ast.iter_fields(statement):
        if field in ("body", "orelse", "finalbody", "handlers"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.AST):
                yield from ast.walk(item)


def _tests_only_none(test: ast.expr) -> bool:
    """``x is None`` (or several joined by and/or): a test of whether an argument was left out."""
    if isinstance(test, ast.BoolOp):
        return all(_tests_only_none(value) for value in test.values)
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _doc(obj) -> str:
    doc = getattr(obj, "__doc__", None)
    return doc if isinstance(doc, str) else ""  # some classes make __doc__ a property


def _describe(qualified: str, obj, operator: str, is_method: bool) -> dict:
    """What the table records of one API in one release."""
    entry: dict = {}
    signature = _parameters(obj)
    if signature is not None:
        keywords, takes_any = _signature_keywords(signature)
    elif inspect.isbuiltin(obj) or inspect.ismethoddescriptor(obj):
        keywords, takes_any = _builtin_keywords(obj, qualified.rsplit(".", 1)[1], operator, is_method), False
    else:
        keywords, takes_any = set(), False  # a property or an opaque class: no keyword to check
    if keywords:
        entry["keywords"] = sorted(keywords)
    if takes_any:
        entry["any_keyword"] = True
    marker = getattr(obj, "__deprecated__", None) or getattr(getattr(obj, "__init__", None), "__deprecated__", None)
    note, deprecated_keywords, ignored = _docstring_deprecations(qualified, _doc(obj), keywords)
    function = _own_function(obj)
    owner = obj if inspect.isclass(obj) else None
    warned, warned_keywords, warning_conditions, ignored_in_source = (
        _source_deprecations(function, owner is not None, owner) if function is not None else (None, {}, {}, set())
    )
    ignored |= ignored_in_source
    for parameter, replacement in warned_keywords.items():
        if parameter in keywords:
            deprecated_keywords[parameter] = deprecated_keywords.get(parameter) or replacement
    warning_keywords = {k: condition for k, condition in sorted(warning_conditions.items()) if k in keywords}
    reason = marker if isinstance(marker, str) else note or warned
    if reason is not None:
        entry["deprecated"] = True
        entry["replacement"] = _replacement(reason) if reason else None
    if deprecated_keywords:
        entry["deprecated_keywords"] = dict(sorted(deprecated_keywords.items()))
    if ignored & set(deprecated_keywords):
        entry["ignored_keywords"] = sorted(ignored & set(deprecated_keywords))  # deprecated and without effect
    if warning_keywords:
        # their deprecation warns at run time (not only documented): keyword -> the values that warn
        entry["warning_keywords"] = warning_keywords
    # Where a static reading of another release finds it (see bracket()); not copied into the table.
    entry["where"] = _locator(obj, operator)
    return entry


def _locator(obj, operator: str) -> dict:
    """The file and qualified name defining ``obj`` (and its signature), or the operator of a built-in."""
    found: dict = {}
    source = obj if inspect.isclass(obj) else _own_function(obj)
    for key, target in (("source", source), ("signature", _signature_function(obj))):
        try:
            path = Path(inspect.getsourcefile(target) or "")
        except TypeError:
            continue
        if "torch" in path.parts:
            relative = Path(*path.parts[len(path.parts) - 1 - path.parts[::-1].index("torch") :])
            found[key] = [relative.as_posix(), target.__qualname__]
    if "source" not in found:
        found["operator"] = operator
    return found


def _signature_function(obj):
    """The Python function whose parameters are ``obj``'s keywords: itself, or the __init__ a class inherits."""
    if inspect.isclass(obj):
        init = getattr(obj, "__init__", None)
        return inspect.unwrap(init) if inspect.isfunction(init) else None
    return inspect.unwrap(obj) if inspect.isfunction(inspect.unwrap(obj)) else None


def _tensor_entries(apis: Dict[str, dict], known: Set[str], stubs: List[str]) -> None:
    import torch

    for name in sorted(set(dir(torch.Tensor)) | known):
        if name.startswith("_") or not hasattr(torch.Tensor, name):
            continue
        qualified = f"torch.Tensor.{name}"
        if _is_tombstone(getattr(torch.Tensor, name)):
            stubs.append(qualified)
            continue
        entry = _describe(qualified, getattr(torch.Tensor, name), name, is_method=True)
        # A method documented as "See :func:`torch.cholesky`" shares that function's deprecation.
        doc = _doc(getattr(torch.Tensor, name))
        pointed = re.search(r"See :func:`torch\.(\w+)`", doc)
        function = apis.get(f"torch.{pointed.group(1)}", {}) if pointed and pointed.group(1) == name else {}
        if function.get("deprecated") and not entry.get("deprecated"):
            entry["deprecated"] = True
            entry["replacement"] = function.get("replacement")
        apis[qualified] = entry


def _import(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ImportError:
        return None


def dump(known_names: Iterable[str] = ()) -> dict:
    """Every API of MODULES and torch.Tensor in the installed torch; ``known_names`` (of other releases) are
    looked up even where ``dir()`` does not list them."""
    import torch

    known: Dict[str, Set[str]] = {}
    for qualified in known_names:
        owner, _, attr = qualified.rpartition(".")
        known.setdefault(owner, set()).add(attr)
    apis: Dict[str, dict] = {}
    stubs: List[str] = []  # names kept only to raise "... is now removed": absent, but importable
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # importing old submodules warns; reading them must not
        for module_name in MODULES:
            module = _import(module_name)
            if module is None:
                continue  # not in this release (torch.func before 2.0)
            if module_name != "torch":
                apis[module_name] = {}
            for name, obj, exported in _public_names(module_name, module, known.get(module_name, set())):
                if _is_tombstone(obj):
                    stubs.append(f"{module_name}.{name}")
                    continue
                operator = SCHEMA_PREFIX.get(module_name, "") + name
                entry = _describe(f"{module_name}.{name}", obj, operator, is_method=False)
                if not exported:
                    entry["exported"] = False  # in the table only if another release exports it
                apis[f"{module_name}.{name}"] = entry
        _tensor_entries(apis, known.get("torch.Tensor", set()), stubs)
    return {
        "torch_version": torch.__version__.split("+")[0],
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "apis": dict(sorted(apis.items())),
        "raising_stubs": sorted(stubs),
    }


# --- merging the dumps -----------------------------------------------------------------------


def _version_key(release: str) -> Tuple[int, int]:
    major, minor = release.split(".")
    return int(major), int(minor)


def _interval(present: List[str], releases: List[str]) -> Tuple[str, str]:
    found = [r for r in releases if r in present]
    return found[0], found[-1]


def _deprecated_since(flagged: List[str], present: List[str]) -> Optional[str]:
    """The first release of the run of deprecated releases that ends at the last one having the API."""
    since = None
    for release in present:
        if release in flagged:
            since = since or release
        else:
            since = None
    return since


def merge(dumps: List[dict]) -> dict:
    by_release = {_release(d["torch_version"]): d["apis"] for d in dumps}
    # dumps made before stubs were recorded carry no list: unknown there, not "no stub"
    stubs_by_release = {_release(d["torch_version"]): set(d.get("raising_stubs", ())) for d in dumps}
    releases = sorted(by_release, key=_version_key)
    names = sorted({name for apis in by_release.values() for name, entry in apis.items() if entry.get("exported", True)})
    table: Dict[str, dict] = {}
    for name in names:
        present = [r for r in releases if name in by_release[r]]
        entries = [by_release[r][name] for r in present]
        first, last = present[0], present[-1]
        record: dict = {"first": first, "last": last}
        between = releases[releases.index(first) : releases.index(last) + 1]
        if len(present) < len(between):  # gone for a while (torch.cuda.Device only under TYPE_CHECKING in 2.8-2.10)
            record["absent"] = [r for r in between if r not in present]
        flagged = [r for r, e in zip(present, entries) if e.get("deprecated")]
        since = _deprecated_since(flagged, present)
        if since:
            record["deprecated"] = since
            replacement = by_release[last][name].get("replacement")
            if replacement:
                record["replacement"] = replacement
        keyword_names = sorted({k for e in entries for k in e.get("keywords", [])})
        keywords = {}
        for keyword in keyword_names:
            keyword_present = [r for r, e in zip(present, entries) if keyword in e.get("keywords", [])]
            keywords[keyword] = list(_interval(keyword_present, releases))
        any_keyword = [r for r, e in zip(present, entries) if e.get("any_keyword")]
        if any_keyword:
            keywords["**"] = list(_interval(any_keyword, releases))
        if keywords:
            record["keywords"] = keywords
        deprecated_keywords = {}
        for keyword in sorted({k for e in entries for k in e.get("deprecated_keywords", {})}):
            keyword_flagged = [r for r, e in zip(present, entries) if keyword in e.get("deprecated_keywords", {})]
            keyword_present = [r for r, e in zip(present, entries) if keyword in e.get("keywords", [])]
            keyword_since = _deprecated_since(keyword_flagged, keyword_present)
            if keyword_since:
                replacement = next(
                    (e["deprecated_keywords"][keyword] for e in reversed(entries) if e.get("deprecated_keywords", {}).get(keyword)),
                    None,
                )
                deprecated_keywords[keyword] = {"deprecated": keyword_since, "replacement": replacement}
                if any(keyword in e.get("ignored_keywords", ()) for e in entries):
                    # torch ignores it: removing it is the advice, whatever else the note mentions
                    deprecated_keywords[keyword].update(replacement=None, ignored=True)
                warned = [e["warning_keywords"][keyword] for e in entries if keyword in e.get("warning_keywords", {})]
                if warned:
                    # passing it warns at run time, for the values the newest such release says
                    deprecated_keywords[keyword]["warns"] = warned[-1]
        if deprecated_keywords:
            record["deprecated_keywords"] = deprecated_keywords
        raising = [r for r in releases if name in stubs_by_release.get(r, ())]
        if raising:
            record["raising_stub"] = raising
        table[name] = record
    return {
        "generated_by": "tools/gen_api_table.py",
        "note": "first/last: the releases having the name (removed in the release after last), but those in absent; "
        "a missing deprecated/replacement is null; keywords '**': the releases where it takes **kwargs; "
        "raising_stub: releases that keep the removed name only to raise when it is called",
        "torch_versions": {r: next(d["torch_version"] for d in dumps if _release(d["torch_version"]) == r) for r in releases},
        "versions": releases,
        # releases not installed but read from their wheel between two dumped ones (see bracket())
        "read_statically": sorted({_release(d["torch_version"]) for d in dumps if d["python"] == "static"}, key=_version_key),
        "apis": table,
    }


def render(table: dict) -> str:
    """Compact JSON, one API a line: small in the wheel, readable in a diff."""
    head = {k: v for k, v in table.items() if k != "apis"}
    lines = [json.dumps(head, separators=(",", ":"))[:-1] + ',"apis":{']
    items = list(table["apis"].items())
    for index, (name, record) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append(f"{json.dumps(name)}:{json.dumps(record, separators=(',', ':'))}{comma}")
    lines.append("}}")
    return "\n".join(lines) + "\n"


def gaps(dumps: List[dict]) -> List[str]:
    """Names and keywords absent from a release between two that have them: first/last cannot say so."""
    by_release = {_release(d["torch_version"]): d["apis"] for d in dumps}
    releases = sorted(by_release, key=_version_key)
    found = []
    for name in sorted({n for apis in by_release.values() for n, entry in apis.items() if entry.get("exported", True)}):
        facts = {"": [i for i, r in enumerate(releases) if name in by_release[r]]}
        for keyword in sorted({k for apis in by_release.values() for k in apis.get(name, {}).get("keywords", [])}):
            facts[keyword] = [i for i, r in enumerate(releases) if keyword in by_release[r].get(name, {}).get("keywords", [])]
        for keyword, present in facts.items():
            missing = [releases[i] for i in range(present[0], present[-1]) if i not in present]
            if missing:
                found.append(f"{name}{' keyword ' + keyword if keyword else ''}: absent from {missing}")
    return found


# --- releases that could not be installed: read statically between two dumps ---------------
#
# A release whose only wheels for this machine are CUDA builds is not installed.  Its dump is the
# two dumped releases around it where they agree; where they differ (a name, a keyword or a
# deprecation came or went), a probe reads the release's wheel as text: the defining ``def``, the
# type stubs of built-ins, the docstring source.  A probe is trusted only where it tells the two
# dumped releases apart the way their dumps do; otherwise the item keeps the older release's value
# and is listed as a guess.


class _SourceTree:
    """The text files of a torch release: an unpacked site-packages folder or a wheel."""

    def __init__(self, location: Path):
        import zipfile

        self._zip = zipfile.ZipFile(location) if location.suffix == ".whl" else None
        self._root = location
        self._cache: Dict[str, Optional[str]] = {}
        self._native: Optional[bytes] = None

    def read(self, relative: str) -> Optional[str]:
        if relative not in self._cache:
            try:
                if self._zip is not None:
                    self._cache[relative] = self._zip.read(relative).decode("utf-8")
                else:
                    self._cache[relative] = (self._root / relative).read_text(encoding="utf-8")
            except (KeyError, OSError):
                self._cache[relative] = None
        return self._cache[relative]

    def native_strings(self) -> bytes:
        """The bytes of libtorch_python, whose method tables name every built-in function and method."""
        if self._native is None:
            self._native = b""
            for name in self.names(include_binaries=True):
                if re.search(r"torch/lib/libtorch_python\.(so|dylib)$", name):
                    self._native = self._zip.read(name) if self._zip is not None else (self._root / name).read_bytes()
        return self._native

    def names(self, include_binaries: bool = False) -> List[str]:
        if self._zip is not None:
            return self._zip.namelist()
        pattern = "*" if include_binaries else "*.py*"
        return [p.relative_to(self._root).as_posix() for p in (self._root / "torch").rglob(pattern)]


def _find_definition(tree: _SourceTree, where: List[str]) -> Optional[ast.AST]:
    text = tree.read(where[0])
    if text is None:
        return None
    nodes: List[ast.AST] = [ast.parse(text)]
    for part in where[1].split("."):
        if part == "<locals>":
            continue
        nodes = [
            child
            for node in nodes
            for child in getattr(node, "body", [])
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == part
        ]
    return nodes[-1] if nodes else None


def _stub_definitions(tree: _SourceTree, operator: str, is_method: bool) -> List[ast.AST]:
    """The type-stub ``def``s (or annotated attributes) of a built-in: of class TensorBase for a method."""
    found: List[ast.AST] = []
    for name in tree.names():
        if not (name.startswith("torch/_C/") or name == "torch/nn/functional.pyi") or not name.endswith(".pyi"):
            continue
        module = ast.parse(tree.read(name) or "")
        tensor_classes = [n for n in module.body if isinstance(n, ast.ClassDef) and n.name in ("TensorBase", "_TensorBase")]
        scopes = tensor_classes if is_method else [module]
        for scope in scopes:
            for node in scope.body:
                defined = getattr(node, "name", None) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                annotated = node.target.id if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) else None
                if operator in (defined, annotated):
                    found.append(node)
    return found


def _docstring_source(tree: _SourceTree, operator: str, name: str) -> str:
    """The ``add_docstr`` text of a built-in, from torch's docstring modules."""
    pattern = re.compile(
        rf"add_docstr\(\s*torch\.(?:\w+\.)?{re.escape(operator)}\s*,|add_docstr_all\(\s*\"{re.escape(name)}\"\s*,"
        rf"|\b{re.escape(name)}\s*=\s*_add_docstr\("
    )
    for relative in ("torch/_torch_docs.py", "torch/_tensor_docs.py", "torch/nn/functional.py", "torch/linalg/__init__.py",
                     "torch/fft/__init__.py", "torch/special/__init__.py"):
        text = tree.read(relative) or ""
        match = pattern.search(text)
        if match:
            end = text.find("add_docstr", match.end())
            return text[match.start() : end if end > 0 else len(text)]
    return ""


def _keyword_names(node: ast.AST) -> Set[str]:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    return {a.arg for a in node.args.args + node.args.kwonlyargs} - {"self", "cls"}


def _probe_native(tree: _SourceTree, name: str, where: dict, question: Tuple[str, str]) -> Optional[bool]:
    """Whether the native library names a built-in: a second opinion where the type stubs do not tell."""
    if question[0] != "exists" or "operator" not in where:
        return None
    return b"\0" + where["operator"].encode() + b"\0" in tree.native_strings()


def _probe(tree: _SourceTree, name: str, where: dict, question: Tuple[str, str]) -> Optional[bool]:
    """What ``tree`` says of one fact about API ``name``: ("exists", ""), ("keyword", k), ("deprecated", ""),
    ("deprecated_keyword", k); None when it cannot tell."""
    kind, keyword = question
    is_method = name.startswith("torch.Tensor.")
    if not where:
        return None  # a module's own entry
    if "source" in where:
        definition = _find_definition(tree, where["source"])
        signature = _find_definition(tree, where.get("signature", where["source"]))
        text = tree.read(where["source"][0]) or ""
        segment = (ast.get_source_segment(text, definition) or "") if definition is not None else ""
        if kind == "exists":
            body = [
                s for s in getattr(definition, "body", []) if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            ]
            return definition is not None and not (len(body) == 1 and isinstance(body[0], ast.Raise))
        keywords = _keyword_names(signature) if signature is not None else set()
    else:
        operator = where["operator"]
        stubs = _stub_definitions(tree, operator, is_method)
        if kind == "exists":
            return bool(stubs)
        keywords = set().union(*(_keyword_names(s) for s in stubs)) if stubs else set()
        segment = _docstring_source(tree, operator, name.rsplit(".", 1)[1])
    if kind == "keyword":
        return keyword in keywords
    if kind == "deprecated":
        return bool(re.search(r"deprecat", segment, re.IGNORECASE))
    return bool(re.search(rf"\b{re.escape(keyword)}\b[^.]{{0,80}}deprecat", segment, re.IGNORECASE))


def _facts(entry: Optional[dict]) -> Dict[Tuple[str, str], bool]:
    if entry is None:
        return {("exists", ""): False}
    facts = {("exists", ""): True, ("deprecated", ""): bool(entry.get("deprecated"))}
    facts.update({("keyword", k): True for k in entry.get("keywords", [])})
    facts.update({("deprecated_keyword", k): True for k in entry.get("deprecated_keywords", {})})
    return facts


def bracket(
    wheel: Path, older: dict, newer: dict, older_tree: _SourceTree, newer_tree: _SourceTree, domain: Set[str]
) -> Tuple[dict, List[str]]:
    """The dump of the release in ``wheel``, from the dumps around it and probes of its text; and the guesses.

    Only the names of ``domain`` (those some release exports: the table's) are read.
    """
    version = re.match(r"torch-([\d.]+)", wheel.name).group(1)
    tree = _SourceTree(wheel)
    apis: Dict[str, dict] = {}
    guesses: List[str] = []
    for name in sorted((set(older["apis"]) | set(newer["apis"])) & domain):
        before, after = older["apis"].get(name), newer["apis"].get(name)
        before_facts, after_facts = _facts(before), _facts(after)
        questions = sorted(set(before_facts) | set(after_facts))
        differing = [q for q in questions if before_facts.get(q, False) != after_facts.get(q, False)]
        if before is None or after is None:
            differing = [("exists", "")]  # if the release has it, it has it as the one dump that does
        answers = dict(before_facts)
        for question in differing:
            where = ((after or before) if question[0] == "exists" and after else (before or after)).get("where", {})
            expected = [before_facts.get(question, False), after_facts.get(question, False)]
            for probe in (_probe, _probe_native):
                told = [probe(t, name, where, question) for t in (older_tree, newer_tree)]
                if told == expected:  # the probe tells the dumped releases apart as their dumps do
                    answers[question] = expected[1] if probe(tree, name, where, question) == told[1] else expected[0]
                    break
            else:
                guesses.append(f"{name} {question[0]} {question[1]}".strip())
        if not answers.get(("exists", ""), False):
            continue
        if before is None or after is None:
            apis[name] = dict(before or after)
            continue
        base = dict(before)
        base["keywords"] = sorted(k for (kind, k), yes in answers.items() if kind == "keyword" and yes)
        base["deprecated"] = answers.get(("deprecated", ""), False)
        if not base["deprecated"]:
            base.pop("replacement", None)
        notes = {**(after or {}).get("deprecated_keywords", {}), **(before or {}).get("deprecated_keywords", {})}
        base["deprecated_keywords"] = {
            k: notes.get(k) for (kind, k), yes in answers.items() if kind == "deprecated_keyword" and yes
        }
        # a keyword whose deprecation warns in both releases around it
        warning = set(before.get("warning_keywords", {})) & set(after.get("warning_keywords", {}))
        base["warning_keywords"] = {k: before["warning_keywords"][k] for k in sorted(warning & set(base["deprecated_keywords"]))}
        apis[name] = base
    dump_ = {"torch_version": version, "python": "static", "apis": apis}
    stubs = bracketed_stubs(older, newer)
    if stubs is not None:
        dump_["raising_stubs"] = stubs
    return dump_, guesses


def bracketed_stubs(older: dict, newer: dict) -> Optional[List[str]]:
    """The raising stubs a release between two dumps surely has: those of both (None if either dump lacks the list)."""
    if "raising_stubs" not in older or "raising_stubs" not in newer:
        return None
    return sorted(set(older["raising_stubs"]) & set(newer["raising_stubs"]))


# --- checking the table against the installed torch ------------------------------------------


def check(table: dict, fresh: dict) -> List[str]:
    """How the table's view of the installed release differs from a fresh dump of it."""
    release = _release(fresh["torch_version"])
    if release not in table["versions"]:
        return [f"release {release} is not in the table"]
    key = _version_key(release)
    problems = []
    for name, record in table["apis"].items():
        listed = _version_key(record["first"]) <= key <= _version_key(record["last"]) and release not in record.get("absent", [])
        if listed != (name in fresh["apis"]):
            problems.append(f"{name}: table says {'present' if listed else 'absent'} in {release}")
    for name, entry in fresh["apis"].items():
        record = table["apis"].get(name)
        if record is None:
            if entry.get("exported", True):
                problems.append(f"{name}: missing from the table")
            continue
        keywords = {
            k
            for k, (first, last) in record.get("keywords", {}).items()
            if k != "**" and _version_key(first) <= key <= _version_key(last)
        }
        if keywords != set(entry.get("keywords", [])):
            problems.append(f"{name}: keywords differ: {sorted(keywords ^ set(entry.get('keywords', [])))}")
        deprecated = record.get("deprecated") is not None and _version_key(record["deprecated"]) <= key
        if release == table["versions"][-1] and deprecated != bool(entry.get("deprecated")):
            problems.append(f"{name}: table says {'' if deprecated else 'not '}deprecated in {release}")
    stubs = set(fresh.get("raising_stubs", ()))
    for name, record in table["apis"].items():
        listed = release in record.get("raising_stub", ())
        if listed != (name in stubs):
            problems.append(f"{name}: table says {'' if listed else 'no '}stub that raises in {release}")
    return problems


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dump", type=Path, metavar="OUT.json", help="write the installed torch's API to OUT.json")
    mode.add_argument("--from-dumps", type=Path, metavar="DIR", help="merge the dumps DIR/*.json into the table")
    mode.add_argument("--check", action="store_true", help="exit 1 if the table disagrees with the installed torch")
    mode.add_argument("--bracket", type=Path, metavar="WHEEL", help="write DIR/torch-X.Y.json for a wheel not installed")
    parser.add_argument("--dumps", type=Path, metavar="DIR", help="with --bracket: the dumps around it")
    parser.add_argument(
        "--trees", type=Path, nargs=2, metavar="SITE", help="with --bracket: site-packages (or wheels) of the releases around it"
    )
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    if args.dump:
        # the names other releases have, from the dumps beside this one (torch-X.Y.json)
        siblings = [other for other in args.dump.parent.glob("torch-*.json") if other != args.dump]
        known = {name for other in siblings for name in json.loads(other.read_text(encoding="utf-8"))["apis"]}
        args.dump.write_text(json.dumps(dump(known), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.dump}")
        return 0
    if args.from_dumps:
        dumps = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.from_dumps.glob("torch-*.json"))]
        for line in gaps(dumps):
            print(f"note: {line}", file=sys.stderr)
        args.output.write_text(render(merge(dumps)), encoding="utf-8")
        print(f"wrote {args.output} from {len(dumps)} dumps")
        return 0
    if args.bracket:
        release = _release(re.match(r"torch-([\d.]+)", args.bracket.name).group(1))
        loaded = [json.loads(p.read_text(encoding="utf-8")) for p in args.dumps.glob("torch-*.json")]
        dumps = {_release(d["torch_version"]): d for d in loaded}
        ran = sorted((r for r, d in dumps.items() if d["python"] != "static"), key=_version_key)
        older = max((r for r in ran if _version_key(r) < _version_key(release)), key=_version_key)
        newer = min((r for r in ran if _version_key(r) > _version_key(release)), key=_version_key)
        trees = _SourceTree(args.trees[0]), _SourceTree(args.trees[1])
        domain = {n for d in loaded for n, entry in d["apis"].items() if entry.get("exported", True)}
        dump_, guesses = bracket(args.bracket, dumps[older], dumps[newer], *trees, domain)
        for line in guesses:
            print(f"guess (as in {older}): {line}", file=sys.stderr)
        target = args.dumps / f"torch-{release}.json"
        target.write_text(json.dumps(dump_, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {target} between {older} and {newer} ({len(guesses)} guesses)")
        return 0
    table = json.loads(args.output.read_text(encoding="utf-8"))
    problems = check(table, dump(table["apis"]))
    for line in problems[:50]:
        print(line)
    print(f"{args.output}: {'stale' if problems else 'up to date'} ({len(problems)} differences)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
