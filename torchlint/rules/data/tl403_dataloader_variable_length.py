from __future__ import annotations

import ast
from dataclasses import replace
from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.model.calls import NOT_A_LITERAL, add_keyword, argument, has_star_args, keyword_arg, literal_value, positional_args
from torchlint.analysis.model.dataflow import Site, bindings, site_of
from torchlint.analysis.model.dataset_items import ItemShape, collection_varies, library_items, mapped_tokenizer_varies
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.literals import number_value
from torchlint.analysis.model.project_index import constructor_parameters, dataset_item, file_facts
from torchlint.analysis.model.returns import called_function, returned_values
from torchlint.analysis.model.scope import assignments
from torchlint.analysis.model.tokenizers import builds_tokenizer
from torchlint.rule import WHOLE_FILE, Applicability, Confidence, FixSpec, ImportRequirement, Replacement, Rule

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Wrappers whose items are the wrapped dataset's items.
WRAPPERS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})
CONCATENATIONS = frozenset({"torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset"})
# ``train, val = random_split(dataset, ...)``: each part holds the dataset's items.
SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})
# Methods of Hugging Face datasets that keep the items as they are.
ITEM_KEEPING_METHODS = frozenset(
    {"shuffle", "select", "filter", "with_format", "remove_columns", "rename_column", "rename_columns", "sort", "flatten_indices"}
)
MAX_STEPS = 8
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, ...)
BATCH_SIZE_POSITION, BATCH_SAMPLER_POSITION, COLLATE_POSITION = 1, 4, 6
COLLATE_NAME = "pad_collate"
# Marks the collate function the fix writes, so that later fixes reuse it.
COLLATE_MARK = "(torchlint TL403)"

COLLATE_TEMPLATE = '''def {name}(batch, padding_value):
{i}"""Pad the batch's sequences to its longest one with padding_value {mark}."""
{i}first = batch[0]
{i}if isinstance(first, dict) or hasattr(first, "keys"):
{i}{i}return {{key: {name}([item[key] for item in batch], padding_value) for key in first}}
{i}if isinstance(first, tuple):
{i}{i}return tuple({name}(list(field), padding_value) for field in zip(*batch))
{i}tensors = [{torch}.as_tensor(item) for item in batch]
{i}if tensors[0].dim() == 0:
{i}{i}return {torch}.stack(tensors)
{i}return {torch}.nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=padding_value)
'''


class DataLoaderVariableLength(Rule):
    """
    ## What it does
    Flags `DataLoader(ds, batch_size=n)` with `n` greater than 1 or not
    known (a name, a parameter, `cfg.batch_size`; positional or keyword), no
    `collate_fn` (given, or set later as `loader.collate_fn = ...`) and no
    `batch_sampler`, where the items of `ds` have lengths that depend on the
    item. For a dataset class (defined in the same file or imported from
    another module of the project), its `__getitem__` returns, directly or in
    a dict or tuple, through local names, helper methods and attributes that
    `__init__` sets (analysis/model/dataset_items.py says how):

    - a Hugging Face tokenizer call without `padding="max_length"` (or with
      `padding=True` / `"longest"`, which pads a single item to itself);
    - `torch.tensor(ids)` of split or tokenized text, a list built over it;
    - a slice whose bounds are looked up from the data
      (`self.tokens[self.starts[i]:self.starts[i + 1]]`);
    - one element of a collection whose elements vary: `self.samples[i]`
      where `__init__` stored `[tokenizer.encode(t) for t in texts]` or
      appended tokenized lines in a loop, labels built per item
      (`[[alphabet.index(c) for c in word] for word in words]`), or a corpus
      the code building the dataset tokenized without padding
      (`{k: torch.tensor(v[i]) for k, v in self.encodings.items()}` with
      `Encoded(tokenizer(texts, truncation=True), labels)`);
    - an image read from its file (`Image.open`, `cv2.imread`) and kept at
      its own size, or resized by a factor of it (medium confidence).

    Datasets other libraries build are recognised too: Hugging Face
    `dataset.map(tokenize, batched=True)` whose function tokenizes without
    fixed-length padding (then indexed `["train"]`, shuffled, filtered), and
    torchtune's `*_dataset` builders without `packed=True`. `ds` is followed
    through names, `self.` attributes, `Subset`, `ConcatDataset`, the parts
    of `random_split(...)`, and same-file functions that return it. Classes
    of other modules come from the project index that the CLI builds once
    per run from the files it checks (the flake8 plugin, from the project
    root); without an index (one text linted alone) only classes of the
    same file are seen.

    ## Why is this bad?
    The default collate stacks the items of a batch with `torch.stack`,
    which needs equal sizes: the first batch holding two lengths raises
    "RuntimeError: stack expects each tensor to be equal size, but got [32]
    at entry 0 and [24] at entry 1" (or "each element in list of batch
    should be of equal size" for lists) - often only after an epoch of
    lucky batches, or only on real data after tests with toy inputs.

    ## Example
    ```python
    class TextDataset(Dataset):
        def __getitem__(self, i):
            return self.tokenizer(self.texts[i], truncation=True, max_length=128)

    loader = DataLoader(TextDataset(texts, tokenizer), batch_size=32)
    ```

    ## Use instead
    ```python
    loader = DataLoader(TextDataset(texts, tokenizer), batch_size=32,
                        collate_fn=DataCollatorWithPadding(tokenizer))
    ```

    ## Fix safety
    Unsafe: it changes what a batch holds (padded tensors instead of an
    error). A fix needs the padding value, and 0 is a real token id in many
    vocabularies, so one is offered only where a tokenizer built by
    `transformers` or `tokenizers` is bound in the same scope
    (`tokenizer = AutoTokenizer.from_pretrained(...)`): with items that are
    the tokenizer's output, `collate_fn=DataCollatorWithPadding(tokenizer)`
    (importing `transformers`); with other items, a short `pad_collate(batch,
    padding_value)` written once per module after the imports (per key for
    dict items, per position for tuples, `pad_sequence` for each field) and
    `collate_fn=functools.partial(pad_collate,
    padding_value=tokenizer.pad_token_id)`. Elsewhere the finding says to
    pass a collate function that pads with the data's own pad id, and no
    fix is offered. No fix either when a different `pad_collate` already
    exists in the module or the module has no top-level import to anchor
    the function.

    Not seen: datasets of other libraries beyond those above, classes created
    at run time, lengths decided inside a library call or by data the code
    does not show (`self.targets[i]` where the caller's targets come from
    elsewhere), and modules outside the checked files. Not flagged: a
    `batch_sampler` (it may bucket items of equal length), `batch_size=1`
    (also through a constant) or `None`, fixed-size items (`padding="max_length"`
    with `truncation=True`, a whole corpus padded once with `padding=True`,
    ids padded by hand to a constant, images resized to a constant size or
    passed through a transform, windows `x[i : i + block_size]`).
    """

    code = "TL403"
    name = "dataloader-variable-length"
    message = (
        "DataLoader batches items of different lengths with the default collate: "
        "'stack expects each tensor to be equal size' at run time"
    )
    fix_applicability = Applicability.UNSAFE
    confidence_levels = """
- **high**: the lengths vary by construction: tokenizer output without fixed-length padding, split
  text, slices bounded by the data, a library builder that yields unpadded token lists.
- **medium**: they vary with the data: images kept at their files' own sizes, lists as long as each
  item's own source sequence (each word's characters); the files or words may all be one size. Also a
  call the code shows nothing of but a receiver named `tokenizer` (the naming convention).
- **low**: a callable the analysis cannot identify, applied to the item's own element
  (`torch.tensor(self.encode(self.texts[i]))`): a suspect for `torchlint trace` to confirm.
"""
    triggers = ("DataLoader",)

    @classmethod
    def prepass(cls, scan):
        return WHOLE_FILE if scan.regions_calling_qualified(DATALOADERS) else None

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualified_name(node.func) not in DATALOADERS or has_star_args(node):
            return
        if keyword_arg(node, "collate_fn") is not None or len(positional_args(node)) > COLLATE_POSITION:
            return
        sampler = argument(node, BATCH_SAMPLER_POSITION, "batch_sampler")
        if sampler is not None and not _is_none(sampler.value):
            return
        batch_size = argument(node, BATCH_SIZE_POSITION, "batch_size")
        if batch_size is None or _is_none(batch_size.value) or self._literal(batch_size.value) == 1:
            return  # the default batch_size is 1: nothing is stacked
        dataset = argument(node, 0, "dataset")
        if dataset is None:
            return
        site = site_of(list(self.context.ancestors) + [node])
        found = self._items(dataset.value, site, 0)
        if found is None or self._collate_set_later(node):
            return
        label, item = found
        message = (
            f"DataLoader batches {label} items of different lengths ({item.reason}) with the default collate: "
            "torch.stack raises 'stack expects each tensor to be equal size'"
        )
        confidence = Confidence(item.confidence)
        fix = self._fix(node, item)
        if fix is None and self._tokenizer_in_scope() is None:
            message += "; pass a collate_fn that pads with the data's pad id (none is shown here, and 0 is a real id in many vocabularies)"
        self.report(node, message, fix, confidence=confidence)

    # -- what the dataset holds ---------------------------------------------------------

    def _items(self, expression: cst.BaseExpression, site: Optional[Site], depth: int) -> Optional[Tuple[str, ItemShape]]:
        """(a name for the message, the item shape) when the dataset ``expression`` has items of different lengths."""
        if depth > MAX_STEPS:
            return None
        depth += 1
        if isinstance(expression, cst.Name):
            value, at = self._value_of(expression.value, site)
            return self._items(value, at, depth) if value is not None else None
        if isinstance(expression, cst.Attribute) and isinstance(expression.value, cst.Name) and expression.value.value == "self":
            value = self.context.self_attribute_value(expression.attr.value)
            return self._items(value, None, depth) if value is not None else None
        if isinstance(expression, cst.Subscript):
            return self._items(expression.value, site, depth)  # tokenized["train"]
        if not isinstance(expression, cst.Call) or has_star_args(expression):
            return None
        func = expression.func
        qualified = self.context.qualified_name(func)
        if qualified in WRAPPERS:
            inner = argument(expression, 0, "dataset")
            return self._items(inner.value, site, depth) if inner is not None else None
        if qualified in CONCATENATIONS:
            inner = argument(expression, 0, "datasets")
            if inner is not None and isinstance(inner.value, (cst.List, cst.Tuple)):
                return next(filter(None, (self._items(e.value, site, depth) for e in inner.value.elements)), None)
            return None
        if isinstance(func, cst.Attribute) and qualified is None:
            if func.attr.value == "map":
                return self._mapped(expression, site)
            if func.attr.value in ITEM_KEEPING_METHODS:
                return self._items(func.value, site, depth)
        built = library_items(qualified, {a.keyword.value: _literal_ast(a.value) for a in expression.args if a.keyword is not None})
        if built is not None:
            return qualified.rsplit(".", 1)[-1], ItemShape("dict", built)
        helper = called_function(self.context, expression, site) if site is not None else None
        if helper is not None:
            returned = returned_values(self.context, helper)
            if returned is None or len(returned) != 1:
                return None
            value, at = returned[0]
            return self._items(value, at, depth)
        return self._class_items(expression, site)

    def _class_items(self, call: cst.Call, site: Optional[Site]) -> Optional[Tuple[str, ItemShape]]:
        facts = file_facts(self.context)
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        qualified = self.context.qualified_name(call.func) or (facts.qualify_dotted(dotted) if facts is not None else None)
        if qualified is None:
            return None
        found = dataset_item(qualified, facts, self.context.project)
        if found is None:
            return None
        cls, item = found
        if not item.parameters:
            return cls.name, item
        # The items vary only if the dataset is built with a collection of sequences of different lengths.
        parameters = constructor_parameters(qualified, facts, self.context.project)
        for parameter in item.parameters:
            passed = _passed_for(call, parameters, parameter)
            reason = self._collection_reason(passed, site, 0) if passed is not None else None
            if reason:
                return cls.name, replace(item, reason=reason, parameters=())
        return None

    def _collection_reason(self, expression: cst.BaseExpression, site: Optional[Site], depth: int) -> Optional[str]:
        """Why ``expression`` (an argument building the dataset) is a collection of sequences of different lengths."""
        if depth > MAX_STEPS:
            return None
        if isinstance(expression, cst.Name):
            value, at = self._value_of(expression.value, site)
            return self._collection_reason(value, at, depth + 1) if value is not None else None
        parsed = _as_ast(self.context, expression)
        return collection_varies(parsed, file_facts(self.context)) if parsed is not None else None

    def _mapped(self, call: cst.Call, site: Optional[Site]) -> Optional[Tuple[str, ItemShape]]:
        """``dataset.map(tokenize, batched=True)`` (Hugging Face datasets) with a tokenizer that does not pad to one length."""
        function = argument(call, 0, "function")
        if function is None:
            return None
        batched = keyword_arg(call, "batched")
        batched_value = _literal_ast(batched.value) if batched is not None else None
        if batched is not None and not isinstance(batched_value, ast.Constant):
            return None  # batched decided at run time
        facts = file_facts(self.context)
        if isinstance(function.value, cst.Lambda):
            target = _as_ast(self.context, function.value)
        elif isinstance(function.value, cst.Name) and facts is not None and site is not None:
            reaching = bindings(site, function.value.value)
            target = facts.functions.get(function.value.value) if len(reaching) == 1 and reaching[0].kind == "opaque" else None
        else:
            target = None
        if target is None:
            return None
        reason = mapped_tokenizer_varies(target, batched=bool(batched_value is not None and batched_value.value))
        return ("mapped", ItemShape("dict", reason, True)) if reason else None

    def _value_of(self, name: str, site: Optional[Site]) -> Tuple[Optional[cst.BaseExpression], Optional[Site]]:
        """The one value ``name`` holds at ``site`` (an element of ``random_split(...)`` is its dataset)."""
        if site is None:
            return None, None
        reaching = bindings(site, name)
        if len(reaching) != 1 or reaching[0].value is None:
            return None, None
        binding = reaching[0]
        if binding.kind in ("assign", "module"):
            return binding.value, binding.site
        if (
            binding.kind == "unpack"
            and isinstance(binding.value, cst.Call)
            and self.context.qualified_name(binding.value.func) in SPLITS
        ):
            inner = argument(binding.value, 0, "dataset")
            return (inner.value, binding.site) if inner is not None else (None, None)
        return None, None

    def _literal(self, node: cst.BaseExpression) -> Optional[float]:
        """A number written here or bound once to a name (``BATCH_SIZE = 1``)."""
        if isinstance(node, cst.Name):
            value, _ = self._value_of(node.value, site_of(list(self.context.ancestors)))
            return number_value(value) if value is not None else None
        return number_value(node)

    def _collate_set_later(self, node: cst.Call) -> bool:
        """``loader = DataLoader(...)`` then ``loader.collate_fn = ...`` in the same function or module."""
        parent = self.context.parent
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return False
        target = dotted_name(parent.targets[0].target)
        if target is None:
            return False
        scope = self.context.enclosing(cst.FunctionDef)
        body = scope.body.body if scope is not None else self.context.module.body
        return any(
            isinstance(assigned, cst.Attribute) and assigned.attr.value == "collate_fn" and dotted_name(assigned.value) == target
            for assigned, _ in assignments(body)
        )

    # -- the fix ------------------------------------------------------------------------

    def _fix(self, node: cst.Call, item: ItemShape) -> Optional[FixSpec]:
        """A collate function that pads with the tokenizer's own pad id; None where no tokenizer is shown (0 is a
        real token id in many vocabularies, so no padding value is guessed)."""
        tokenizer = self._tokenizer_in_scope()
        if tokenizer is None:
            return None
        if item.from_tokenizer and item.kind == "dict":
            existing = self.context.imports.reference_to("transformers.DataCollatorWithPadding")
            imports: Tuple[ImportRequirement, ...] = ()
            if existing is None:
                module, requirement = self.context.reference("transformers", "transformers")
                existing = f"{module}.DataCollatorWithPadding"
                imports = tuple(r for r in (requirement,) if r)
            value = f"{existing}({tokenizer})"
            return FixSpec(
                Applicability.UNSAFE,
                f"Add `collate_fn={value}`",
                (Replacement(node, add_keyword(node, "collate_fn", cst.parse_expression(value))),),
                imports,
            )
        functools, requirement = self.context.reference("functools", "functools")
        value = f"{functools}.partial({COLLATE_NAME}, padding_value={tokenizer}.pad_token_id)"
        replacements = [Replacement(node, add_keyword(node, "collate_fn", cst.parse_expression(value)))]
        existing_def = self._module_def(COLLATE_NAME)
        if existing_def is None:
            if self.context.imports.is_bound(COLLATE_NAME) or self.context.binds_name(COLLATE_NAME):
                return None
            insertion = self._collate_insertion()
            if insertion is None:
                return None
            replacements.append(insertion)
        elif COLLATE_MARK not in self.context.code(existing_def):
            return None  # the module's own pad_collate: not ours to reuse
        return FixSpec(
            Applicability.UNSAFE,
            f"Add `collate_fn={value}`, a collate function that pads with the tokenizer's pad id",
            tuple(replacements),
            tuple(r for r in (requirement,) if r),
        )

    def _tokenizer_in_scope(self) -> Optional[str]:
        """A name the enclosing function or the module binds to a tokenizer built by ``transformers`` or
        ``tokenizers`` (``AutoTokenizer.from_pretrained(...)``): the fact, not the name, shows the tokenizer."""
        function = self.context.enclosing(cst.FunctionDef)
        bound = list(assignments(function.body.body)) if function is not None else []
        bound += list(assignments(self.context.module.body))
        for target, value in bound:
            if isinstance(target, cst.Name) and isinstance(value, cst.Call):
                if builds_tokenizer(self.context.qualified_name(value.func)):
                    return target.value
        return None

    def _module_def(self, name: str) -> Optional[cst.FunctionDef]:
        for stmt in self.context.module.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
                return stmt
        return None

    def _collate_insertion(self) -> Optional[Replacement]:
        """The collate function, written after the module's last top-level import."""
        module = self.context.module
        anchor = None
        for stmt in module.body:
            if isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                anchor = stmt
        if anchor is None:
            return None
        newline = module.default_newline
        torch, requirement = self.context.reference("torch", "torch")
        import_line = f"import {torch}{newline}" if requirement is not None and torch == "torch" else ""
        if requirement is not None and not import_line:
            return None
        function = COLLATE_TEMPLATE.format(name=COLLATE_NAME, i=module.default_indent, mark=COLLATE_MARK, torch=torch)
        function = function.replace("\n", newline)
        trailing = anchor.trailing_whitespace
        text = f"{self.context.code(trailing)}{import_line}{newline}{newline}{function}"
        return Replacement(trailing, text)


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _literal_ast(node: cst.BaseExpression) -> Optional[ast.expr]:
    """A literal argument as ``ast`` (``True``, ``"max_length"``), None for anything else."""
    value = literal_value(node)
    return None if value is NOT_A_LITERAL else ast.Constant(value)


def _as_ast(context, node: cst.CSTNode) -> Optional[ast.expr]:
    """``node`` read again with ``ast`` (the item analyses are written for ``ast``)."""
    try:
        return ast.parse("(" + context.module.code_for_node(node) + ")", mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _passed_for(call: cst.Call, parameters: Tuple[str, ...], parameter: str) -> Optional[cst.BaseExpression]:
    """What the constructor call passes for ``parameter`` (positional by the ``__init__`` signature, or keyword)."""
    given = keyword_arg(call, parameter)
    if given is not None:
        return given.value
    if parameter in parameters:
        positional = positional_args(call)
        index = parameters.index(parameter)
        if index < len(positional):
            return positional[index].value
    return None
