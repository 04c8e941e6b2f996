from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.api.api_drift import (
    DATASET_ATTRIBUTE_RENAMES,
    DATASET_RENAMES_SINCE,
    RENAMED_DATASETS,
    effective_target,
)
from torchlint.analysis.api.version_guards import is_version_guarded
from torchlint.analysis.model.dataflow import named_call
from torchlint.rule import Applicability, FixSpec, Replacement, Rule


class RenamedDatasetAttribute(Rule):
    """
    ## What it does
    Flags `train_data`, `test_data`, `train_labels` and `test_labels` read
    or written on a torchvision MNIST-family dataset (`MNIST`,
    `FashionMNIST`, `KMNIST`, `EMNIST`, `QMNIST`) or a CIFAR dataset
    (`CIFAR10`, `CIFAR100`): an object built from one of these classes in
    the same function or at the script's top level, inline
    (`datasets.MNIST(...).train_labels`), or `self` in a class of the file
    that derives from one.

    ## Why is this bad?
    torchvision 0.2.2 (paired with torch 1.0) renamed them `data` and
    `targets`. The MNIST family keeps the old names as read-only properties
    that warn at every read (`train_labels has been renamed targets`);
    assigning to one raises `AttributeError`. `CIFAR10`/`CIFAR100` dropped
    them: reading `train_labels` raises `AttributeError: 'CIFAR10' object has
    no attribute 'train_labels'`.

    ## Example
    ```python
    train_set = datasets.MNIST(root, train=True, download=True)
    counts = torch.bincount(train_set.train_labels)
    images = train_set.train_data.float() / 255
    ```

    ## Use instead
    ```python
    train_set = datasets.MNIST(root, train=True, download=True)
    counts = torch.bincount(train_set.targets)
    images = train_set.data.float() / 255
    ```

    ## Fix safety
    Safe: the MNIST properties return `self.data` / `self.targets`, and
    CIFAR's `data`/`targets` hold what its old attributes held; `test_data`
    is `data` of a dataset built with `train=False`. An object whose class is
    not known (a dataset passed in as a parameter, a class not defined in
    the file) is not flagged: other datasets define their own `train_data`.
    """

    code = "TL612"
    name = "renamed-dataset-attribute"
    message = "torchvision renamed this dataset attribute to `data`/`targets`: it warns (MNIST family) or raises AttributeError (CIFAR)"
    fix_applicability = Applicability.SAFE
    triggers = tuple(DATASET_ATTRIBUTE_RENAMES)

    @classmethod
    def prepass(cls, scan):
        names = set(DATASET_ATTRIBUTE_RENAMES)
        return scan.regions_where(lambda region: not region.attributes.isdisjoint(names) or not region.attribute_stores.isdisjoint(names)) or None

    def visit_Attribute(self, node: cst.Attribute) -> None:
        old = node.attr.value
        new = DATASET_ATTRIBUTE_RENAMES.get(old)
        if new is None:
            return
        dataset = self._dataset_class(node.value)
        if dataset is None:
            return
        # A removed attribute (the CIFAR family's) read where ``hasattr`` found it runs only on old releases; the MNIST
        # family's still exist as warning aliases, so a probe of them finds them and the read warns.
        removed = None if RENAMED_DATASETS[dataset] else node
        if effective_target(self.context.settings.target_torch_version) < DATASET_RENAMES_SINCE or is_version_guarded(self.context, removed=removed):
            return
        parent = self.context.parent
        stored = isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is node
        shown = dataset.rsplit(".", 1)[-1]
        if RENAMED_DATASETS[dataset]:
            effect = "assigning to it raises AttributeError (a read-only alias)" if stored else "it warns at every read"
        else:
            effect = f"it raises AttributeError ('{shown}' object has no attribute '{old}')"
        self.report(
            node,
            f"`{old}` of torchvision's {shown} was renamed `{new}` in torchvision 0.2.2 (torch 1.0): {effect}; use `.{new}`",
            FixSpec(Applicability.SAFE, f"Use `.{new}`", (Replacement(node.attr, cst.Name(new)),)),
        )

    def _dataset_class(self, node: cst.BaseExpression) -> Optional[str]:
        """The torchvision dataset class ``node`` is an instance of, when the code shows it."""
        if isinstance(node, cst.Name) and node.value == "self":
            return self._enclosing_dataset_base()
        call: Optional[cst.BaseExpression] = node
        if isinstance(node, cst.Name):
            found = named_call(self.context, node.value)
            call = found[0] if found is not None else None
        if not isinstance(call, cst.Call):
            return None
        qualified = self.context.qualified_name(call.func)
        if qualified in RENAMED_DATASETS:
            return qualified
        if isinstance(call.func, cst.Name):
            return self._file_class_base(call.func.value)
        return None

    def _enclosing_dataset_base(self) -> Optional[str]:
        if self.context.enclosing(cst.FunctionDef) is None:
            return None
        class_def = self.context.enclosing(cst.ClassDef)
        return self._bases_dataset(class_def) if class_def is not None else None

    def _file_class_base(self, name: str) -> Optional[str]:
        for statement in self.context.module.body:
            if isinstance(statement, cst.ClassDef) and statement.name.value == name:
                return self._bases_dataset(statement)
        return None

    def _bases_dataset(self, class_def: cst.ClassDef) -> Optional[str]:
        for base in class_def.bases:
            qualified = self.context.qualified_name(base.value)
            if qualified in RENAMED_DATASETS:
                return qualified
        return None
