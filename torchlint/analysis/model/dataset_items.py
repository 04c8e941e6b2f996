"""What a dataset's items look like: do their lengths (or sizes) vary from item to item?

``DataLoader``'s default collate stacks the items of a batch with ``torch.stack``, which needs equal
sizes.  TL403 asks, of the class a ``DataLoader`` batches, :func:`item_shape` of its ``__getitem__``
(read with ``ast``, in the linted file or another module of the project), and of datasets that other
libraries build, :func:`library_items`.

An item varies when ``__getitem__`` returns (directly, in a dict or a tuple, through local names, helper
methods and attributes that ``__init__`` sets):

- a tokenizer call on the item without fixed-length padding (no ``padding="max_length"``; ``padding=True``
  or ``"longest"`` pads one item to itself);
- ``torch.tensor(ids)`` / ``list(...)`` / a comprehension over split or tokenized text;
- a slice whose bound is looked up from the data (``x[self.starts[i]:self.starts[i + 1]]``);
- an element of a collection whose elements vary: ``self.ids[i]`` where ``__init__`` stored
  ``[tokenizer.encode(t) for t in texts]``, appended tokenized lines in a loop, or tokenized the whole
  corpus without padding (``{k: torch.tensor(v[i]) for k, v in self.encodings.items()}``); when the
  collection is a constructor argument, the item varies if the argument does (:attr:`ItemShape.parameters`:
  the caller checks what the code building the dataset passes, :func:`collection_varies`);
- an image read from a file and kept at the file's own size (``Image.open``, ``cv2.imread``; resized by a
  factor of its own size or not at all): medium confidence, the files may all be one size.

Anything else is taken as fixed: fixed-length padding or truncation to a constant, windows
``x[i : i + block]``, a user transform (``self.transform(img)`` may resize), images resized to a size
that is not the image's own.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Optional, Tuple

from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.model.tokenizers import TOKENIZER_KEYWORDS, TOKENIZER_METHODS, builds_tokenizer, is_tokenizer_name

# How many steps (names, calls, attributes, helpers) a question follows: a bound for odd code, not a budget.
MAX_STEPS = 40

HIGH, MEDIUM, LOW = "high", "medium", "low"


@dataclass(frozen=True)
class ItemShape:
    """What ``__getitem__`` returns when its items vary in length.

    kind: "dict" (a mapping of sequences, e.g. tokenizer output), "tuple", or "tensor"/"list" (one
    sequence); reason: what makes the length vary, for the message; from_tokenizer: the item is a
    tokenizer's output (a dict that a ``DataCollatorWithPadding`` can pad); confidence: "high" by
    construction, "medium" when it depends on data the code does not show (image files' sizes);
    parameters: the items vary only when the constructor's argument for one of these ``__init__``
    parameters is a collection of sequences of different lengths (to be checked where the dataset is built).
    """

    kind: str
    reason: str
    from_tokenizer: bool = False
    confidence: str = HIGH
    parameters: Tuple[str, ...] = ()


@dataclass(frozen=True)
class _Variation:
    reason: str
    confidence: str = HIGH
    parameter: Optional[str] = None


_ENCODE_METHODS = frozenset({"encode", "encode_plus", "__call__"})
_TENSOR_FROM_LIST = frozenset(
    {"torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.Tensor", "torch.FloatTensor", "torch.IntTensor", "torch.from_numpy"}
)
_ARRAY_FROM = frozenset({"numpy.array", "numpy.asarray", "numpy.float32", "numpy.int64", "numpy.ascontiguousarray", "numpy.expand_dims", "numpy.transpose"})
# Factories whose positional arguments are the tensor's size (the fill value comes after it for ``full``).
_FILLED_FACTORIES = frozenset({"torch.full", "numpy.full"})
_SIZED_FACTORIES = frozenset({
    "torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty", "torch.arange", "torch.full",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.arange", "numpy.full", "numpy.random.randn", "numpy.random.rand",
}) | _FILLED_FACTORIES
# Methods that keep a sequence's length (and an image's size).
_KEEPING_METHODS = frozenset(
    {"squeeze", "flatten", "long", "to", "clone", "float", "int", "type", "astype", "copy", "convert", "permute", "transpose", "contiguous", "numpy", "tolist"}
)
_SPLITTING_METHODS = frozenset({"split", "tokenize", "convert_tokens_to_ids", "encode", "findall"})
# Readers of image files: the image has the file's own size.
IMAGE_READERS = frozenset(
    {
        "PIL.Image.open",
        "cv2.imread",
        "imageio.imread",
        "imageio.v2.imread",
        "imageio.v3.imread",
        "skimage.io.imread",
        "matplotlib.pyplot.imread",
        "torchvision.io.read_image",
        "torchvision.io.decode_image",
    }
)
_RESIZERS = frozenset({"resize"})  # ``img.resize(size)`` (PIL); cv2.resize(img, size) below
_IMAGE_SIZE_ATTRIBUTES = frozenset({"size", "shape", "width", "height"})

# Dataset builders of other libraries whose items are token lists of their text's length unless packed.
# (qualified-name prefix, keyword that makes items fixed when True)
VARIABLE_LENGTH_BUILDERS: Tuple[Tuple[str, str], ...] = (("torchtune.datasets.", "packed"),)


def item_shape(function: ast.AST, facts=None, owner: Optional[ast.ClassDef] = None) -> Optional[ItemShape]:
    """Whether ``__getitem__`` (``function``, a method of ``owner``) returns sequences whose length depends on
    the item, and their shape (see the module docs); ``facts``: the module's imports (project.ModuleFacts)."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    reader = _Reader(facts, owner)
    scope = reader.scope(function)
    index_names = {p.arg for p in function.args.args[1:2]}
    reader.index_names = index_names
    for value in scope.returns:
        found = reader.shape(value, scope, 0)
        if found is not None:
            return found
    return None


def collection_varies(node: ast.expr, facts=None) -> Optional[str]:
    """Why ``node`` (an expression passed to a dataset's constructor) is a collection whose elements vary in
    length (``tokenizer(texts, truncation=True)``, ``[t.split() for t in texts]``), or None."""
    reader = _Reader(facts, None)
    found = reader.elements_vary(node, _Scope.of_expression(node), 0)
    return found.reason if found is not None and found.parameter is None else None


def library_items(qualified: Optional[str], keywords: Dict[str, Optional[ast.expr]]) -> Optional[str]:
    """Why a dataset built by another library's ``qualified`` builder has items of different lengths, or None.
    ``keywords``: the builder call's keyword arguments (None for a value that is not a literal)."""
    if not qualified:
        return None
    for prefix, fixing_keyword in VARIABLE_LENGTH_BUILDERS:
        if qualified.startswith(prefix) and qualified.endswith("_dataset"):
            fixing = keywords.get(fixing_keyword)
            if fixing_keyword in keywords and not (isinstance(fixing, ast.Constant) and fixing.value is False):
                return None  # packed=True (or decided at run time)
            return f"{qualified.rsplit('.', 1)[-1]} yields token lists as long as each text unless {fixing_keyword}=True"
    return None


def mapped_tokenizer_varies(function: ast.AST, batched: bool) -> Optional[str]:
    """Why the items of ``dataset.map(function, batched=...)`` vary in length: ``function`` returns a
    tokenizer's output without fixed-length padding (``padding=True`` pads one example to itself, or with
    ``batched=True`` each map batch to its own longest text, which differs from map batch to map batch)."""
    reader = _Reader(None, None)
    if isinstance(function, ast.Lambda):
        returns = [function.body]
        scope = _Scope.of_expression(function.body)
    elif isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        scope = reader.scope(function)
        returns = scope.returns
    else:
        return None
    for value in returns:
        for call in reader.tokenizer_outputs(value, scope, 0):
            reason = unpadded(call)
            if reason and batched and reason.endswith("on a single item"):
                return reason.replace("on a single item", "on each map batch, padded to its own longest")
            if reason:
                return reason
    return None


# -- tokenizer padding --------------------------------------------------------------------------


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def unpadded(call: ast.Call, per_item: bool = True) -> Optional[str]:
    """Why a tokenizer call gives lengths that vary, or None when it pads to one length.  ``per_item``: the
    call encodes one item, where ``padding=True``/``"longest"`` pads it to itself; on a whole corpus
    (``per_item=False``) those pad every text to the longest, one length."""
    if any(k.arg is None for k in call.keywords):
        return None  # **kwargs may hold the padding
    padding = _keyword(call, "padding")
    pad_to_max = _keyword(call, "pad_to_max_length")
    if isinstance(pad_to_max, ast.Constant) and pad_to_max.value is True:
        return None
    if padding is None:
        return "tokenizer output without padding='max_length'"
    value = padding.value if isinstance(padding, ast.Constant) else padding.attr if isinstance(padding, ast.Attribute) else None
    if value in ("max_length", "MAX_LENGTH"):
        return None
    if value in (False, "do_not_pad", "DO_NOT_PAD"):
        return f"tokenizer output with padding={value!r}"
    if value in (True, "longest", "LONGEST"):
        return f"tokenizer output with padding={value!r} on a single item" if per_item else None
    return None  # padding decided elsewhere


def _returns_dict(call: ast.Call) -> bool:
    func = call.func
    return not (isinstance(func, ast.Attribute) and func.attr == "encode")


# -- the reader ---------------------------------------------------------------------------------


class _Scope:
    """One function's bindings, for the questions asked inside it."""

    def __init__(self, function: Optional[ast.AST], env: Optional[Dict[str, Tuple[ast.expr, "_Scope"]]] = None) -> None:
        self.function = function
        self.env = env or {}
        self.params: List[str] = []
        # name -> [(statement line, statement, value or None when unpacked from something else)]
        self.assigned: Dict[str, List[Tuple[ast.stmt, Optional[ast.expr], Optional[ast.expr]]]] = {}
        self.appended: Dict[str, List[ast.expr]] = {}  # ``xs.append(v)`` / ``self.xs.append(v)``
        self.comprehended: Dict[str, Tuple[ast.expr, Optional[int]]] = {}  # comprehension target -> (iterable, position)
        self.looped: Dict[str, Tuple[ast.expr, Optional[int]]] = {}  # ``for`` statement target -> (iterable, position)
        self.returns: List[ast.expr] = []
        self.enclosing: Dict[int, Tuple[ast.stmt, ...]] = {}  # id(statement) -> its enclosing compound statements
        if function is None:
            return
        arguments = function.args
        self.params = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
        self._walk(function.body, ())

    @classmethod
    def empty(cls) -> "_Scope":
        return cls(None)

    @classmethod
    def of_expression(cls, node: ast.expr) -> "_Scope":
        """A scope for an expression read on its own: only its comprehensions bind names."""
        scope = cls(None)
        for inner in ast.walk(node):
            if isinstance(inner, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for generator in inner.generators:
                    scope._comprehension_target(generator.target, generator.iter, None)
        return scope

    def _walk(self, body: Iterable[ast.stmt], outer: Tuple[ast.stmt, ...]) -> None:
        for statement in body:
            self.enclosing[id(statement)] = outer
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            self._note(statement)
            inner = outer + ((statement,) if isinstance(statement, (ast.If, ast.For, ast.While, ast.Try, ast.With, ast.AsyncFor)) else ())
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    self._walk(block, inner)
            for handler in getattr(statement, "handlers", ()) or ():
                self._walk(handler.body, inner)

    def _note(self, statement: ast.stmt) -> None:
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            targets = [statement.target] if isinstance(statement.target, ast.Name) else getattr(statement.target, "elts", [])
            for position, element in enumerate(targets):
                if isinstance(element, ast.Name):
                    self.looped[element.id] = (statement.iter, None if element is statement.target else position)
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                self._bind(target, statement.value, statement)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            self._bind(statement.target, statement.value, statement)
        elif isinstance(statement, ast.Return) and statement.value is not None:
            self.returns.append(statement.value)
        for node in ast.walk(statement):
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                for generator in node.generators:
                    self._comprehension_target(generator.target, generator.iter, None)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" and node.args:
                holder = ast_dotted_name(node.func.value)
                if holder is not None:
                    self.appended.setdefault(holder, []).append(node.args[0])

    def _bind(self, target: ast.expr, value: ast.expr, statement: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append((statement, value, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            same_length = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for position, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    # The element itself when both sides are tuples; else unknown, but kept whole for slices.
                    self.assigned.setdefault(element.id, []).append((statement, value.elts[position] if same_length else None, value))
        elif isinstance(target, ast.Attribute):
            holder = ast_dotted_name(target)
            if holder is not None:
                self.assigned.setdefault(holder, []).append((statement, value, value))

    def _comprehension_target(self, target: ast.expr, iterable: ast.expr, position: Optional[int]) -> None:
        if isinstance(target, ast.Name):
            self.comprehended[target.id] = (iterable, position)
        elif isinstance(target, ast.Tuple):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    self.comprehended[element.id] = (iterable, index)

    def reaching(self, name: str, use: ast.AST) -> List[Optional[ast.expr]]:
        """The values of ``name``'s assignments that may reach ``use``: the last one before it, and the earlier
        ones too when that one sits in a block (an ``if``, a loop) that does not also hold the use."""
        line = getattr(use, "lineno", None)
        at = (line, getattr(use, "col_offset", 0))
        candidates = [
            entry for entry in self.assigned.get(name, ()) if line is None or (entry[0].end_lineno, entry[0].end_col_offset) <= at
        ]
        if not candidates:
            return []
        found = []
        for statement, value, _ in reversed(candidates):
            found.append(value)
            blocks = self.enclosing.get(id(statement), ())
            if line is None or all(block.lineno <= line <= (block.end_lineno or block.lineno) for block in blocks):
                break
        return found

    def whole_values(self, name: str) -> List[ast.expr]:
        """Every right-hand side that binds ``name`` (whole tuples for unpacked names)."""
        return [whole for _, _, whole in self.assigned.get(name, ()) if whole is not None]


class _Reader:
    def __init__(self, facts, owner: Optional[ast.ClassDef]) -> None:
        self.facts = facts
        self.owner = owner
        self.index_names: set = set()
        self._scopes: Dict[int, _Scope] = {}
        # Tokenizer calls recognised by their receiver's name alone (the naming convention).
        self.named_only: set = set()

    def scope(self, function: ast.AST) -> _Scope:
        if id(function) not in self._scopes:
            self._scopes[id(function)] = _Scope(function)
        return self._scopes[id(function)]

    def qualify(self, node: ast.expr) -> Optional[str]:
        dotted = ast_dotted_name(node)
        if dotted is None:
            return None
        if self.facts is None:
            return dotted
        return self.facts.imported(dotted) or dotted

    # -- the item -------------------------------------------------------------------

    def shape(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[ItemShape]:
        if depth > MAX_STEPS:
            return None
        if isinstance(node, ast.Name):
            for value in scope.reaching(node.id, node):
                if value is not None:
                    found = self.shape(value, scope, depth + 1)
                    if found is not None:
                        return found
            return None
        if isinstance(node, ast.Dict):
            found = []
            for value in node.values:
                varies = self.varies(value, scope, depth + 1) if value is not None else None
                if varies:
                    found.append(_shape("dict", varies, self._is_tokenizer_output(value, scope, depth + 1)))
            return _strongest(found)
        if isinstance(node, ast.DictComp):
            varies = self.varies(node.value, scope, depth + 1) or self._comprehension_varies(node, scope, depth + 1)
            if varies:
                return _shape("dict", varies, self._comprehension_over_tokenizer(node, scope, depth + 1))
            return None
        if isinstance(node, ast.Tuple):
            found = []
            for element in node.elts:
                inner = self.shape(element, scope, depth + 1)
                if inner is not None:
                    found.append(replace(inner, kind="tuple", from_tokenizer=False))
                    continue
                varies = self.varies(element, scope, depth + 1)
                if varies:
                    found.append(_shape("tuple", varies, False))
            return _strongest(found)
        call = self._tokenizer_call(node)
        if call is not None:
            reason = unpadded(call)
            if reason and _returns_dict(call):
                return ItemShape("dict", reason, True, self.tokenizer_level(call))
            return ItemShape("list", reason, confidence=self.tokenizer_level(call)) if reason else None
        varies = self.varies(node, scope, depth + 1)
        if varies:
            return _shape("tensor" if isinstance(node, ast.Call) else "list", varies, False)
        return None

    # -- one sequence ---------------------------------------------------------------------

    def varies(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        """Why the sequence (or image) ``node`` has an item-dependent length (or size), or None; a call of a
        callable nothing identifies on the item's own element is a low suspect when nothing else explains it."""
        return self._varies(node, scope, depth) or self._suspect_call(node)

    def _varies(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        if depth > MAX_STEPS:
            return None
        depth += 1
        if isinstance(node, ast.Name):
            found = self._through_name(node, scope, depth, self.varies)
            if found or node.id not in scope.comprehended:
                return found
            iterable, position = scope.comprehended[node.id]
            return self._element_of(iterable, position, scope, depth)
        call = self._tokenizer_call(node)
        if call is not None:
            reason = unpadded(call)
            return _Variation(reason, self.tokenizer_level(call)) if reason else None
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                if self._data_dependent_slice(node.slice, scope):
                    return _Variation("a slice whose bounds are looked up from the data")
                return None
            if _is_key(node.slice):
                # enc["input_ids"] of a tokenizer output, enc["input_ids"][0] of one with return_tensors.
                return self.varies(node.value, scope, depth)
            return self.elements_vary(node.value, scope, depth)  # xs[i]: one element of a collection
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult, ast.Sub, ast.Add)):
            if _is_constant(node.right):
                return self.varies(node.left, scope, depth)
            if _is_constant(node.left):
                return self.varies(node.right, scope, depth)
            return None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension_varies(node, scope, depth)
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        qualified = self.qualify(func)
        first = node.args[0] if node.args else None
        if qualified in IMAGE_READERS:
            return _Variation("images kept at their files' own sizes", MEDIUM)
        if qualified in _SIZED_FACTORIES:
            return self._sized_by_loop(node, scope)
        if qualified in _TENSOR_FROM_LIST or qualified in _ARRAY_FROM:
            if first is None:
                return None
            inner = self.varies(first, scope, depth) or self._split_text(first, scope, depth)
            if inner and qualified in _TENSOR_FROM_LIST and not inner.reason.startswith(("torch.tensor", "images")):
                return replace(inner, reason=f"torch.tensor of {inner.reason}")
            return inner
        if qualified == "cv2.resize" and len(node.args) >= 2:
            return self._resized(node.args[0], node.args[1], scope, depth)
        if isinstance(func, ast.Attribute):
            receiver = func.value
            if func.attr in _RESIZERS and node.args:
                return self._resized(receiver, node.args[0], scope, depth)
            if func.attr in _KEEPING_METHODS:
                return self.varies(receiver, scope, depth)
            if func.attr in ("view", "reshape"):
                return self.varies(receiver, scope, depth) if node.args and _is_minus_one(node.args[-1]) else None
            if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls") and self.owner is not None:
                return self._helper(func.attr, node, scope, depth)
        if isinstance(func, ast.Name) and func.id == "list" and first is not None:
            return self.varies(first, scope, depth) or self._split_text(first, scope, depth)
        return None

    def _sized_by_loop(self, call: ast.Call, scope: _Scope) -> Optional[_Variation]:
        """``torch.randn(i % 10 + 1, 4)`` in ``[... for i in range(n)]``, ``torch.zeros(n)`` in ``for n in lengths``:
        a tensor whose size reads the loop's variable differs from item to item."""
        sizes = call.args[:1] if self.qualify(call.func) in _FILLED_FACTORIES else call.args
        for size in sizes:
            for inner in ast.walk(size):
                if not isinstance(inner, ast.Name):
                    continue
                loop = scope.comprehended.get(inner.id) or scope.looped.get(inner.id)
                if loop is None:
                    continue
                counted = isinstance(loop[0], ast.Call) and ast_dotted_name(loop[0].func) == "range"
                return _Variation("tensors sized by the loop's variable", HIGH if counted else MEDIUM)
        return None

    def _through_name(self, node: ast.Name, scope: _Scope, depth: int, ask) -> Optional[_Variation]:
        """``ask`` of what a name holds: the argument a helper's call passed for it, or the assignments reaching it."""
        if node.id in scope.env and not scope.reaching(node.id, node):
            value, outer = scope.env[node.id]
            return ask(value, outer, depth)
        for value in scope.reaching(node.id, node):
            if value is not None:
                found = ask(value, scope, depth)
                if found:
                    return found
        return None

    def _helper(self, name: str, call: ast.Call, scope: _Scope, depth: int) -> Optional[_Variation]:
        """What ``self.name(args)`` returns, its parameters bound to the call's arguments."""
        method = next((s for s in self.owner.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name), None)
        if method is None or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        params = [a.arg for a in method.args.posonlyargs + method.args.args]
        if params and params[0] in ("self", "cls") and not _is_static(method):
            params = params[1:]
        env = {param: (arg, scope) for param, arg in zip(params, call.args)}
        env.update((k.arg, (k.value, scope)) for k in call.keywords if k.arg is not None)
        inner = _Scope(method, env)
        for value in inner.returns:
            found = self.varies(value, inner, depth + 1)
            if found:
                return found
        return None

    def _resized(self, image: ast.expr, size: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        """An image resized to a size computed from its own keeps a size of its own; any other size is fixed."""
        if not self._from_own_size(size, scope, depth):
            return None
        return self.varies(image, scope, depth)

    def _from_own_size(self, node: ast.expr, scope: _Scope, depth: int) -> bool:
        """Whether ``node`` reads an image's own size (``img.size``, ``img.shape``), through names."""
        if depth > MAX_STEPS:
            return False
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute) and inner.attr in _IMAGE_SIZE_ATTRIBUTES:
                return True
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Load):
                for value in scope.reaching(inner.id, inner):
                    if value is not None and value is not node and self._from_own_size(value, scope, depth + 1):
                        return True
                for _, value, whole in scope.assigned.get(inner.id, ()):
                    if value is None and whole is not None and self._from_own_size(whole, scope, depth + 1):
                        return True
        return False

    def _comprehension_varies(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        for generator in node.generators:
            if isinstance(node, ast.DictComp):
                continue  # a dict comprehension's keys are fixed; its values were checked
            source = self._split_text(generator.iter, scope, depth) or self.varies(generator.iter, scope, depth)
            if source and source.parameter is None:
                return source
            if self._is_one_element(generator.iter, scope, depth):
                # ``[vocab[c] for c in word]`` for one word of a list: as long as that word, which others may not be.
                return _Variation("a list as long as each item's own sequence", MEDIUM)
            if source:
                return source
        return None

    def _is_one_element(self, node: ast.expr, scope: _Scope, depth: int) -> bool:
        """``xs[i]`` (an element picked from a collection), or a name bound to one or iterating over one."""
        if depth > MAX_STEPS:
            return False
        if isinstance(node, ast.Subscript):
            return not isinstance(node.slice, ast.Slice) and not _is_key(node.slice)
        if isinstance(node, ast.Name):
            if node.id in scope.comprehended:
                iterable, position = scope.comprehended[node.id]
                return position is None and not isinstance(iterable, ast.Call)  # ``for w in words``, not ``range(n)``
            return any(value is not None and self._is_one_element(value, scope, depth + 1) for value in scope.reaching(node.id, node))
        return False

    def _split_text(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        """``text.split()`` / ``tokenizer.tokenize(text)`` / ``list(text)``: as many items as the text has."""
        if depth > MAX_STEPS:
            return None
        if isinstance(node, ast.Name):
            for value in scope.reaching(node.id, node):
                if value is not None:
                    found = self._split_text(value, scope, depth + 1)
                    if found:
                        return found
            return None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension_varies(node, scope, depth + 1)
        call = self._tokenizer_call(node)
        if call is not None:  # ``tokenizer.encode(text, padding="max_length", ...)`` is one length
            reason = unpadded(call)
            return _Variation(reason, self.tokenizer_level(call)) if reason else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SPLITTING_METHODS:
            return _Variation("split or tokenized text")
        return None

    # -- collections of sequences -------------------------------------------------------------

    def elements_vary(self, node: ast.expr, scope: _Scope, depth: int) -> Optional[_Variation]:
        """Why ``node`` is a collection (one element per item) whose elements vary in length, or None."""
        if depth > MAX_STEPS:
            return None
        depth += 1
        if isinstance(node, ast.Name):
            found = self._through_name(node, scope, depth, self.elements_vary)
            if found:
                return found
            if node.id in scope.comprehended:
                iterable, position = scope.comprehended[node.id]
                return self._value_of_mapping(iterable, position, scope, depth)
            found = self._appended(node.id, scope, depth)
            if found:
                return found
            if scope.function is not None and node.id in scope.params and _is_constructor(scope.function):
                return _Variation("", parameter=node.id)  # decided by what the dataset is built with
            return None
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return self._attribute_elements(node.attr, depth)
        if isinstance(node, ast.Subscript) and _is_key(node.slice):
            return self.elements_vary(node.value, scope, depth)  # encodings["input_ids"]
        call = self._tokenizer_call(node)
        if call is not None:
            reason = unpadded(call, per_item=False)
            return _Variation(reason, self.tokenizer_level(call)) if reason else None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self.varies(node.elt, scope, depth) or self._split_text(node.elt, scope, depth)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") and node.args:
            return self.elements_vary(node.args[0], scope, depth)
        return None

    def _appended(self, holder: str, scope: _Scope, depth: int) -> Optional[_Variation]:
        for value in scope.appended.get(holder, ()):
            found = self.varies(value, scope, depth) or self._split_text(value, scope, depth)
            if found:
                return found
        return None

    def _attribute_elements(self, attribute: str, depth: int) -> Optional[_Variation]:
        """``self.<attribute>`` as the class's methods build it: assigned, or appended to in a loop."""
        if self.owner is None:
            return None
        key = f"self.{attribute}"
        for method in self.owner.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            scope = self.scope(method)
            for statement, value, _ in scope.assigned.get(key, ()):
                if value is not None:
                    found = self.elements_vary(value, scope, depth + 1)
                    if found is None and isinstance(value, (ast.List, ast.Tuple)) and not value.elts:
                        found = self._appended(key, scope, depth + 1)  # ``self.xs = []`` then ``self.xs.append(...)``
                    if found:
                        return found
        return None

    def _value_of_mapping(self, iterable: ast.expr, position: Optional[int], scope: _Scope, depth: int) -> Optional[_Variation]:
        """``val`` in ``for key, val in encodings.items()``: one of the mapping's values, a collection."""
        if (
            position == 1
            and isinstance(iterable, ast.Call)
            and isinstance(iterable.func, ast.Attribute)
            and iterable.func.attr == "items"
        ):
            return self.elements_vary(iterable.func.value, scope, depth)
        return None

    def _element_of(self, iterable: ast.expr, position: Optional[int], scope: _Scope, depth: int) -> Optional[_Variation]:
        """A comprehension variable that is one element of ``iterable`` (or a value of its ``.items()``)."""
        if position is None:
            return self.elements_vary(iterable, scope, depth)
        return None

    # -- tokenizers ------------------------------------------------------------------------

    def _tokenizer_call(self, node: ast.expr) -> Optional[ast.Call]:
        """``self.tokenizer(text, truncation=True)``, ``tok.encode_plus(...)``, ``tokenizer.encode(text)``: a call
        of a tokenizer (see analysis/model/tokenizers.py). One recognised by its receiver's name alone is
        remembered in ``named_only``: what it makes is one level less sure."""
        if not isinstance(node, ast.Call):
            return None
        func = node.func
        receiver = func
        method = func.attr if isinstance(func, ast.Attribute) else None
        if method in _ENCODE_METHODS or method in TOKENIZER_METHODS:
            receiver = func.value  # ``tok.encode(text)``; else the callee is the tokenizer (``self.tok(text)``)
        if method in TOKENIZER_METHODS or any(k.arg in TOKENIZER_KEYWORDS for k in node.keywords):
            return node
        if self._built_as_tokenizer(receiver):
            return node
        name = ast_dotted_name(receiver)
        if name is not None and is_tokenizer_name(name):
            self.named_only.add(id(node))
            return node
        return None

    def _suspect_call(self, node: ast.expr) -> Optional[_Variation]:
        """A callable the dataset holds and the analysis cannot identify (``self.encode``), applied straight to the
        item's own element (``self.encode(self.texts[i])``): a suspect (low), asked only when nothing else
        explains the item."""
        if not isinstance(node, ast.Call) or self._tokenizer_call(node) is not None:
            return None
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"):
            return None
        if self.owner is not None and any(
            isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == func.attr for member in self.owner.body
        ):
            return None  # a method of the dataset: its body is read, not guessed
        if not any(self._is_item_element(arg) for arg in node.args):
            return None
        return _Variation("the output of a callable the code does not identify, applied to each item's own element", LOW)

    def _is_item_element(self, node: ast.expr) -> bool:
        """``self.texts[i]``: an element of a collection at the item's index."""
        return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id in self.index_names

    def _built_as_tokenizer(self, receiver: ast.expr) -> bool:
        """``self.tok`` assigned ``AutoTokenizer.from_pretrained(...)`` in the dataset class (or ``tok`` at the
        module's top level): a tokenizer whatever it is called."""
        if isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and receiver.value.id == "self" and self.owner:
            for node in ast.walk(self.owner):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and any(
                    isinstance(t, ast.Attribute) and t.attr == receiver.attr for t in node.targets
                ):
                    if builds_tokenizer(self.qualify(node.value.func)):
                        return True
        if isinstance(receiver, ast.Name) and self.facts is not None:
            value = self.facts.values.get(receiver.id)
            return isinstance(value, ast.Call) and builds_tokenizer(self.qualify(value.func))
        return False

    def tokenizer_level(self, call: ast.Call) -> str:
        """How sure what a tokenizer call makes is: one level less when only the receiver's name said so."""
        return MEDIUM if id(call) in self.named_only else HIGH

    def tokenizer_outputs(self, node: ast.expr, scope: _Scope, depth: int) -> List[ast.Call]:
        """The tokenizer calls whose output ``node`` is (or holds, in a dict)."""
        if depth > MAX_STEPS:
            return []
        call = self._tokenizer_call(node)
        if call is not None:
            return [call]
        if isinstance(node, ast.Name):
            return [c for value in scope.reaching(node.id, node) if value is not None for c in self.tokenizer_outputs(value, scope, depth + 1)]
        if isinstance(node, ast.Dict):
            return [c for value in node.values if value is not None for c in self.tokenizer_outputs(value, scope, depth + 1)]
        if isinstance(node, ast.Subscript) and _is_key(node.slice):
            return self.tokenizer_outputs(node.value, scope, depth + 1)
        return []

    def _is_tokenizer_output(self, node: ast.expr, scope: _Scope, depth: int) -> bool:
        if depth > MAX_STEPS:
            return False
        if isinstance(node, ast.Name):
            return any(value is not None and self._is_tokenizer_output(value, scope, depth + 1) for value in scope.reaching(node.id, node))
        if isinstance(node, ast.Subscript):
            return self._is_tokenizer_output(node.value, scope, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("squeeze", "flatten"):
            return self._is_tokenizer_output(node.func.value, scope, depth + 1)
        return self._tokenizer_call(node) is not None

    def _comprehension_over_tokenizer(self, node: ast.DictComp, scope: _Scope, depth: int) -> bool:
        for generator in node.generators:
            iterated = generator.iter
            if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute) and iterated.func.attr == "items":
                if self._is_tokenizer_output(iterated.func.value, scope, depth):
                    return True
        return False

    # -- slices ----------------------------------------------------------------------------

    def _data_dependent_slice(self, node: ast.Slice, scope: _Scope) -> bool:
        """A bound read from the data at the item's index: ``self.offsets[idx]``, ``lengths[i]``."""
        for bound in (node.lower, node.upper):
            if bound is None:
                continue
            values = [bound]
            if isinstance(bound, ast.Name):
                values.extend(scope.whole_values(bound.id))
            for value in values:
                for sub in ast.walk(value):
                    if isinstance(sub, ast.Subscript) and any(
                        isinstance(n, ast.Name) and n.id in self.index_names for n in ast.walk(sub.slice)
                    ):
                        return True
        return False


def _shape(kind: str, variation: _Variation, from_tokenizer: bool) -> ItemShape:
    parameters = (variation.parameter,) if variation.parameter else ()
    return ItemShape(kind, variation.reason, from_tokenizer, variation.confidence, parameters)


def _strongest(found: List[ItemShape]) -> Optional[ItemShape]:
    """Of the parts of one item that may vary: one that varies whatever the dataset is built with (high before
    medium), else every constructor parameter some part depends on."""
    settled = [shape for shape in found if not shape.parameters]
    if settled:
        return min(settled, key=lambda shape: (HIGH, MEDIUM, LOW).index(shape.confidence))
    if not found:
        return None
    return replace(found[0], parameters=tuple(dict.fromkeys(p for shape in found for p in shape.parameters)))


def _is_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, int))


def _is_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _is_minus_one(node: ast.expr) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and node.operand.value == 1


def _is_constructor(function: ast.AST) -> bool:
    return getattr(function, "name", None) == "__init__"


def _is_static(method: ast.AST) -> bool:
    return any(ast_dotted_name(d) == "staticmethod" for d in getattr(method, "decorator_list", ()))
