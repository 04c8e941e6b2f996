from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.tokenizers import is_tokenizer_name
from torchlint.analysis.model.scope import self_attributes, statements
from torchlint.rule import WHOLE_FILE, Applicability, FixSpec, Replacement, Rule
from torchlint.walk_order import visit

GROWING_METHODS = frozenset({"add_tokens", "add_special_tokens"})
# ``AutoTokenizer.from_pretrained(name, additional_special_tokens=[...])`` adds the tokens it does not know.
GROWING_KEYWORD = "additional_special_tokens"
RESIZE_METHOD = "resize_token_embeddings"
_MODEL_NAME = re.compile(r"(^|_)model$", re.IGNORECASE)
_NOT_A_MODEL = re.compile(r"tokeni[sz]er|config|processor|extractor", re.IGNORECASE)


class VocabGrownWithoutResize(Rule):
    """
    ## What it does
    Flags `tokenizer.add_tokens(...)` / `tokenizer.add_special_tokens(...)`
    (also when the returned count is kept: `n = tokenizer.add_tokens(...)`),
    and a tokenizer loaded with new tokens
    (`AutoTokenizer.from_pretrained(name, additional_special_tokens=[...])`),
    in a function, or module, that also holds a model, when no
    `resize_token_embeddings` call follows it there.

    A model is a parameter or variable named `model` / `*_model`, or a name
    (or `self.` attribute) bound to `SomethingModel...from_pretrained(...)` /
    `...For....from_pretrained(...)`. A tokenizer is a receiver whose name says
    so (`tokenizer`, `self.tokenizer`, `processor.tokenizer`) or a name bound
    to `...Tokenizer....from_pretrained(...)`.

    ## Why is this bad?
    The new tokens get ids `len(old vocabulary)` and up, but the model's
    input embedding (and a tied output layer) still has one row per old
    token. The first batch that contains a new token indexes past the
    table: "IndexError: index out of range in self" on CPU, "CUDA error:
    device-side assert triggered" or a CUBLAS failure on a GPU, usually far
    from the line that caused it.

    ## Example
    ```python
    tokenizer = AutoTokenizer.from_pretrained(name)
    tokenizer.add_special_tokens({"pad_token": "[PAD]"})
    model = AutoModelForCausalLM.from_pretrained(name)
    ```

    ## Use instead
    ```python
    tokenizer = AutoTokenizer.from_pretrained(name)
    tokenizer.add_special_tokens({"pad_token": "[PAD]"})
    model = AutoModelForCausalLM.from_pretrained(name)
    model.resize_token_embeddings(len(tokenizer))
    ```

    ## Fix safety
    Unsafe: the fix inserts `model.resize_token_embeddings(len(tokenizer))`
    on its own line after the later of the vocabulary change and the model's
    binding. Old tokens keep their embeddings, but the output layer gains a
    column per new token, so logits change shape. No fix is offered when the
    model is not unambiguous (two model variables in scope) or the call is
    not a statement of its own.

    Not reported: when a function or method of the same file that calls
    `resize_token_embeddings` is called after the change (a helper does it),
    or calls the function that makes the change (the caller does it), when `len(tokenizer)` is used after the
    change (a model built from the grown vocabulary), when no model is in
    the same function or module (the tokenizer may be handed on). Not seen:
    tokenizers and models created by factories or passed through
    containers, resizes done in another module, and calls that add no new
    token at run time (`add_special_tokens` of a token already present).
    """

    code = "TL404"
    name = "vocab-grown-without-resize"
    message = (
        "the tokenizer's vocabulary grows but the model's embedding is not resized: "
        "new token ids index past it (IndexError, CUDA device-side assert)"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("add_tokens", "add_special_tokens", GROWING_KEYWORD)

    @classmethod
    def prepass(cls, scan):
        # Its checks read the whole file (helpers that resize, callers); it runs only where a receiver
        # may be a tokenizer: its name says so, or some assignment binds it to a ``...Tokenizer...`` call.
        candidates = [
            call
            for i in scan.regions_calling(GROWING_METHODS)
            for call in scan.regions[i].callees
            if isinstance(call.func, ast.Attribute) and call.func.attr in GROWING_METHODS
        ]
        if any(
            keyword.arg == GROWING_KEYWORD
            for i in scan.regions_calling({"from_pretrained"})
            for call in scan.regions[i].callees
            for keyword in call.keywords
        ):
            return WHOLE_FILE
        receivers = {ast_dotted_name(call.func.value) for call in candidates} - {None}
        if any(is_tokenizer_name(receiver) for receiver in receivers):
            return WHOLE_FILE
        if receivers and not receivers.isdisjoint(_ast_tokenizer_bindings(scan.tree)):
            return WHOLE_FILE
        return None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        growing = func.attr.value in GROWING_METHODS
        if not growing and not _loaded_with_extra_tokens(node):
            return
        function = self.context.enclosing(cst.FunctionDef)
        body = function.body.body if function is not None else self.context.module.body
        ordered = list(statements(body))
        statement = self._enclosing_statement(ordered)
        if statement is None:
            return
        tokenizer = dotted_name(func.value) if growing else _assigned_name(statement, node)
        if tokenizer is None or (growing and not self._is_tokenizer(tokenizer, ordered)):
            return
        index = _index_of(ordered, statement)
        after = ordered[index:]
        if any(_calls_method(stmt, RESIZE_METHOD) for stmt in after) or any(
            _calls_len_of(stmt, tokenizer) for stmt in after[1:]
        ):
            return
        resizing = self.context.memoized("functions that resize embeddings", self.context.module, _resizing_functions)
        helpers = frozenset(member.name.value for member in resizing)
        if helpers and any(_calls_one_of(stmt, helpers) for stmt in after):
            return  # a helper of this file does the resize
        if function is not None and _resized_by_a_caller(resizing, function.name.value):
            return  # the caller resizes after calling this function
        models = _models_in_scope(function, ordered)
        class_def = self.context.enclosing(cst.ClassDef)
        if function is not None and class_def is not None and not models:
            # A method: the model may be an attribute the class sets elsewhere (``self.model``).
            models = [
                (f"self.{attr}", -1)
                for attr, value in self_attributes(class_def).items()
                if not _NOT_A_MODEL.search(attr) and (_MODEL_NAME.search(attr) or _is_pretrained_model(value))
            ]
        if not models:
            return
        fix = None
        if len({name for name, _ in models}) == 1:
            fix = self._fix(statement, models, ordered, index, tokenizer)
        self.report(node, fix=fix)

    def _enclosing_statement(self, ordered: Sequence[cst.CSTNode]) -> Optional[cst.CSTNode]:
        members = {id(stmt) for stmt in ordered}
        for ancestor in reversed(self.context.ancestors):
            if id(ancestor) in members:
                return ancestor
        return None

    def _is_tokenizer(self, receiver: str, ordered: Sequence[cst.CSTNode]) -> bool:
        if is_tokenizer_name(receiver):
            return True
        for target, value in _bindings(ordered):
            if target == receiver and isinstance(value, cst.Call):
                callee = dotted_name(value.func) or ""
                if "Tokenizer" in callee:
                    return True
        return False

    def _fix(
        self,
        statement: cst.CSTNode,
        models: List[Tuple[str, int]],
        ordered: Sequence[cst.CSTNode],
        index: int,
        tokenizer: str,
    ) -> Optional[FixSpec]:
        model, bound_at = models[-1]
        anchor = statement if bound_at <= index else ordered[bound_at]
        if not isinstance(anchor, cst.SimpleStatementLine) or not self.context.module.has_trailing_newline:
            return None
        if bound_at > index and not _same_block(self.context.module, statement, anchor):
            return None
        trailing = anchor.trailing_whitespace
        newline = trailing.newline.value or self.context.module.default_newline
        indent = "".join(self.context.current_indents())
        text = f"{self.context.code(trailing)}{indent}{model}.{RESIZE_METHOD}(len({tokenizer})){newline}"
        return FixSpec(
            Applicability.UNSAFE,
            f"Insert `{model}.{RESIZE_METHOD}(len({tokenizer}))`",
            (Replacement(trailing, text),),
        )


@dataclass
class _Finder(cst.CSTVisitor):
    method: Optional[str] = None
    len_of: Optional[str] = None
    found: bool = False

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        func = node.func
        if self.method and isinstance(func, cst.Attribute) and func.attr.value == self.method:
            self.found = True
        if (
            self.len_of
            and isinstance(func, cst.Name)
            and func.value == "len"
            and len(node.args) == 1
            and dotted_name(node.args[0].value) == self.len_of
        ):
            self.found = True
        return not self.found


def _calls_method(node: cst.CSTNode, method: str) -> bool:
    finder = _Finder(method=method)
    _visit_header_or_line(node, finder)
    return finder.found


def _calls_len_of(node: cst.CSTNode, name: str) -> bool:
    finder = _Finder(len_of=name)
    _visit_header_or_line(node, finder)
    return finder.found


def _visit_header_or_line(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """Visit a simple statement whole, a compound statement's header only (its body is listed separately)."""
    if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        visit(node, visitor)
        return
    for attribute in ("test", "iter", "target", "items"):
        value = getattr(node, attribute, None)
        if isinstance(value, cst.CSTNode):
            visit(value, visitor)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item, visitor)
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        visit(node, visitor)  # nested definitions are not listed by `statements`


def _resizing_functions(module: cst.Module) -> Tuple[cst.FunctionDef, ...]:
    """The file's top-level functions and methods whose body calls ``resize_token_embeddings``
    (once per file: every growing call asks)."""
    found = []
    for stmt in module.body:
        members = [stmt]
        if isinstance(stmt, cst.ClassDef):
            members = [m for m in stmt.body.body if isinstance(m, cst.FunctionDef)]
        for member in members:
            if isinstance(member, cst.FunctionDef) and _calls_anywhere(member):
                found.append(member)
    return tuple(found)


def _resized_by_a_caller(resizing: Sequence[cst.FunctionDef], name: str) -> bool:
    """Whether a function or method of the file both calls ``name`` and resizes the embeddings."""
    return any(
        member.name.value != name and _calls_one_of(member, frozenset({name}), whole=True) for member in resizing
    )


def _calls_one_of(node: cst.CSTNode, names: frozenset, whole: bool = False) -> bool:
    found = []

    class _Search(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> bool:
            func = call.func
            name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
            if name in names:
                found.append(call)
            return not found

    if whole:
        visit(node, _Search())
    else:
        _visit_header_or_line(node, _Search())
    return bool(found)


def _calls_anywhere(node: cst.CSTNode) -> bool:
    finder = _Finder(method=RESIZE_METHOD)
    visit(node, finder)
    return finder.found


def _ast_tokenizer_bindings(tree: ast.Module) -> set:
    """Dotted targets of the file's assignments of a call whose callee names a Tokenizer (over ``ast``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            if "Tokenizer" in (ast_dotted_name(node.value.func) or ""):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found.update(ast_dotted_name(target) for target in targets)
    return found


def _bindings(ordered: Sequence[cst.CSTNode]):
    """(dotted target, value) of each plain assignment, in order."""
    for stmt in ordered:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    name = dotted_name(target.target)
                    if name is not None:
                        yield name, small.value
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                name = dotted_name(small.target)
                if name is not None:
                    yield name, small.value


def _models_in_scope(function: Optional[cst.FunctionDef], ordered: Sequence[cst.CSTNode]) -> List[Tuple[str, int]]:
    """(model name, index of the statement binding it; -1 for a parameter), in binding order."""
    models: List[Tuple[str, int]] = []
    if function is not None:
        params = function.params
        for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            if _MODEL_NAME.search(param.name.value):
                models.append((param.name.value, -1))
    for index, stmt in enumerate(ordered):
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for name, value in _bindings([stmt]):
            if _NOT_A_MODEL.search(name.rsplit(".", 1)[-1]):
                continue
            if _MODEL_NAME.search(name.rsplit(".", 1)[-1]) or _is_pretrained_model(value):
                models.append((name, index))
    # Keep each name's latest binding, ordered by where it is bound.
    latest = {}
    for name, index in models:
        latest[name] = index
    return sorted(latest.items(), key=lambda item: item[1])


def _is_pretrained_model(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    if value.func.attr.value != "from_pretrained":
        return False
    owner = (dotted_name(value.func.value) or "").rsplit(".", 1)[-1]
    return ("Model" in owner or "For" in owner) and not _NOT_A_MODEL.search(owner)


def _loaded_with_extra_tokens(call: cst.Call) -> bool:
    """``...Tokenizer....from_pretrained(..., additional_special_tokens=[...])`` with a non-empty list."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained"):
        return False
    if "Tokenizer" not in (dotted_name(func.value) or ""):
        return False
    given = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == GROWING_KEYWORD), None)
    if given is None:
        return False
    return not (isinstance(given, (cst.List, cst.Tuple)) and not given.elements)


def _assigned_name(statement: cst.CSTNode, call: cst.Call) -> Optional[str]:
    """The dotted name ``statement`` binds to ``call`` (``tokenizer = AutoTokenizer.from_pretrained(...)``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return None
    for small in statement.body:
        if isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1:
            return dotted_name(small.targets[0].target)
        if isinstance(small, cst.AnnAssign) and small.value is call:
            return dotted_name(small.target)
    return None


def _index_of(ordered: Sequence[cst.CSTNode], statement: cst.CSTNode) -> int:
    for index, stmt in enumerate(ordered):
        if stmt is statement:
            return index
    raise ValueError("statement not in its scope")


def _same_block(module: cst.Module, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Whether two statements are members of one statement list (the fix's indentation is the first's)."""
    found = []

    class _Blocks(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            body = getattr(node, "body", None)
            if isinstance(body, (list, tuple)):
                ids = {id(stmt) for stmt in body}
                if id(first) in ids and id(second) in ids:
                    found.append(node)
            return not found

    visit(module, _Blocks())
    return bool(found)
