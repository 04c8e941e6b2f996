from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.calls import add_keyword, argument, has_star_args, keyword_arg, positional_args
from torchlint.analysis.names import dotted_name
from torchlint.analysis.ops import number_value
from torchlint.analysis.project import DatasetClass, ItemShape, dataset_item, facts_of_source
from torchlint.analysis.tokenizers import is_tokenizer_name
from torchlint.analysis.scope import assignments
from torchlint.prepass import WHOLE_FILE
from torchlint.rule import Applicability, FixSpec, ImportRequirement, Replacement, Rule

DATALOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# Wrappers whose items are the wrapped dataset's items.
WRAPPERS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, ...)
BATCH_SIZE_POSITION, BATCH_SAMPLER_POSITION, COLLATE_POSITION = 1, 4, 6
COLLATE_NAME = "pad_collate"
# Marks the collate function the fix writes, so that later fixes reuse it.
COLLATE_MARK = "(torchlint TL403)"

COLLATE_TEMPLATE = '''def {name}(batch, padding_value=0):
{i}"""Batch items of different lengths: pad every tensor to the longest in the batch {mark}."""
{i}first = batch[0]
{i}if hasattr(first, "keys"):  # dicts and tokenizer outputs
{i}{i}return {{key: {name}([item[key] for item in batch], padding_value) for key in first}}
{i}if isinstance(first, tuple):
{i}{i}return tuple({name}(list(field), padding_value) for field in zip(*batch))
{i}if isinstance(first, str):
{i}{i}return list(batch)
{i}tensors = [{torch}.as_tensor(item) for item in batch]
{i}if tensors[0].dim() == 0:
{i}{i}return {torch}.stack(tensors)
{i}if all(t.shape[1:] == tensors[0].shape[1:] for t in tensors):
{i}{i}return {torch}.nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=padding_value)
{i}longest = [max(sizes) for sizes in zip(*(t.shape for t in tensors))]
{i}return {torch}.stack(
{i}{i}[
{i}{i}{i}{torch}.nn.functional.pad(
{i}{i}{i}{i}t, [pad for have, want in zip(reversed(t.shape), reversed(longest)) for pad in (0, want - have)], value=padding_value
{i}{i}{i})
{i}{i}{i}for t in tensors
{i}{i}]
{i})
'''


class DataLoaderVariableLength(Rule):
    """
    ## What it does
    Flags `DataLoader(ds, batch_size=n)` with `n` greater than 1 or not a
    literal, no `collate_fn` and no `batch_sampler`, where the class of `ds`
    (defined in the same file or imported from another module of the
    project) has a `__getitem__` that returns sequences whose length depends
    on the item:

    - a Hugging Face tokenizer call without `padding="max_length"` (or with
      `padding=True` / `"longest"`, which pads a single item to itself);
    - `torch.tensor(ids)` of split or tokenized text;
    - a slice whose bounds are looked up from the data
      (`self.tokens[self.starts[i]:self.starts[i + 1]]`);
    - a list built over split or tokenized text.

    `ds` is followed through a name bound in the same function or module, a
    `self.` attribute, and `Subset(...)`; the class through imports
    (relative ones too), package re-exports and base classes, using the
    project index that the CLI builds once per run from the files it checks
    (the flake8 plugin, from the project root). Without an index (one text
    linted alone) only classes of the same file are seen.

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
    error). With a Hugging Face tokenizer bound in the same scope and items
    that are the tokenizer's output, the fix passes
    `collate_fn=DataCollatorWithPadding(tokenizer)` (importing
    `transformers`). Otherwise it writes, once per module after the imports,
    a `pad_collate(batch, padding_value=0)` function that pads every tensor
    (per key for dict items, per position for tuples) to the longest in the
    batch with `pad_sequence`, and passes `collate_fn=pad_collate`; change
    `padding_value` (e.g. `functools.partial(pad_collate, padding_value=-100)`
    for labels) where 0 is a real value. No fix when a different
    `pad_collate` already exists in the module or the module has no
    top-level import to anchor the function.

    Not seen: datasets built by factories or returned by functions,
    datasets of other libraries (`datasets.load_dataset`), classes created at
    run time, `__getitem__` whose variation comes through helper methods or
    attributes prepared elsewhere (a tokenizer call in `__init__` that pads
    the whole corpus with `padding=True` gives one length, and is not
    flagged), and modules outside the checked files. Not flagged: a
    `batch_sampler` (it may bucket items of equal length), `batch_size=1` or
    `None`, fixed-size items (`padding="max_length"` with `truncation=True`,
    images of one size, windows `x[i : i + block_size]`).
    """

    code = "TL403"
    name = "dataloader-variable-length"
    message = (
        "DataLoader batches items of different lengths with the default collate: "
        "'stack expects each tensor to be equal size' at run time"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("DataLoader",)

    @classmethod
    def prepass(cls, scan):
        return WHOLE_FILE if scan.regions_calling_qualified(DATALOADERS) else None

    def __init__(self, context) -> None:
        super().__init__(context)
        self._facts = None
        self._facts_read = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualified_name(node.func) not in DATALOADERS or has_star_args(node):
            return
        if keyword_arg(node, "collate_fn") is not None or len(positional_args(node)) > COLLATE_POSITION:
            return
        sampler = argument(node, BATCH_SAMPLER_POSITION, "batch_sampler")
        if sampler is not None and not _is_none(sampler.value):
            return
        batch_size = argument(node, BATCH_SIZE_POSITION, "batch_size")
        if batch_size is None or _is_none(batch_size.value) or number_value(batch_size.value) == 1:
            return  # the default batch_size is 1: nothing is stacked
        dataset = argument(node, 0, "dataset")
        if dataset is None:
            return
        found = self._dataset_item(dataset.value)
        if found is None:
            return
        cls, item = found
        message = (
            f"DataLoader batches {cls.name} items of different lengths ({item.reason}) with the default collate: "
            "torch.stack raises 'stack expects each tensor to be equal size'"
        )
        self.report(node, message, self._fix(node, item))

    # -- which class ------------------------------------------------------------------

    def _dataset_item(self, expression: cst.BaseExpression) -> Optional[Tuple[DatasetClass, ItemShape]]:
        call = self._constructor(expression, 0)
        if call is None:
            return None
        facts = self._local_facts()
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        qualified = facts.qualify_dotted(dotted) if facts is not None else self.context.qualified_name(call.func)
        if qualified is None:
            return None
        return dataset_item(qualified, facts, getattr(self.context, "project", None))

    def _constructor(self, expression: cst.BaseExpression, depth: int) -> Optional[cst.Call]:
        """The call that built the dataset: directly, through a name, a ``self.`` attribute or ``Subset``."""
        if depth > 4:
            return None
        if isinstance(expression, cst.Call):
            if self.context.qualified_name(expression.func) in WRAPPERS:
                inner = argument(expression, 0, "dataset")
                return self._constructor(inner.value, depth + 1) if inner is not None else None
            return expression
        if isinstance(expression, cst.Name):
            value = self._bound_value(expression.value)
            return self._constructor(value, depth + 1) if value is not None else None
        if (
            isinstance(expression, cst.Attribute)
            and isinstance(expression.value, cst.Name)
            and expression.value.value == "self"
        ):
            value = self.context.self_attribute_value(expression.attr.value)
            return self._constructor(value, depth + 1) if value is not None else None
        return None

    def _bound_value(self, name: str) -> Optional[cst.BaseExpression]:
        """The single value assigned to ``name`` in the enclosing function, else the module."""
        function = self.context.enclosing(cst.FunctionDef)
        scopes = ([function.body.body] if function is not None else []) + [self.context.module.body]
        for body in scopes:
            values = [value for target, value in assignments(body) if isinstance(target, cst.Name) and target.value == name]
            if len(values) == 1:
                return values[0]
            if values:
                return None
        return None

    def _local_facts(self):
        if not self._facts_read:
            self._facts_read = True
            self._facts = facts_of_source(self.context.source, self.context.path)
        return self._facts

    # -- the fix ------------------------------------------------------------------------

    def _fix(self, node: cst.Call, item: ItemShape) -> Optional[FixSpec]:
        tokenizer = self._tokenizer_in_scope()
        if tokenizer is not None and item.from_tokenizer and item.kind == "dict":
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
        replacements = [Replacement(node, add_keyword(node, "collate_fn", cst.Name(COLLATE_NAME)))]
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
            f"Add `collate_fn={COLLATE_NAME}`, a padding collate function",
            tuple(replacements),
        )

    def _tokenizer_in_scope(self) -> Optional[str]:
        function = self.context.enclosing(cst.FunctionDef)
        names = []
        if function is not None:
            params = function.params
            names += [p.name.value for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params)]
            names += [t.value for t, _ in assignments(function.body.body) if isinstance(t, cst.Name)]
        names += [t.value for t, _ in assignments(self.context.module.body) if isinstance(t, cst.Name)]
        for name in names:
            if is_tokenizer_name(name):
                return name
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
