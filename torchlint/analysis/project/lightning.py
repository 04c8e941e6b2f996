"""Lightning checkpoints whose hyper-parameters hold a value weights_only refuses.

A ``LightningModule`` that calls ``self.save_hyperparameters(cfg)`` (or ``save_hyperparameters()``, which
saves every argument of ``__init__`` not ignored) writes those arguments into every checkpoint Lightning
saves for it: an OmegaConf ``DictConfig``, a project object, a module is pickled as it is, and ``torch.load``
under the weights_only default of torch >= 2.6 refuses it ("Unsupported global: omegaconf..."), as does
``load_from_checkpoint``, which loads through it.

An argument is refused when the code shows it: ``__init__`` annotates the parameter with an OmegaConf type,
or a construction of the class in the project passes a value that analysis/model/saved_values.py reads as
refused (an OmegaConf or Hydra config, a project object, a module, NumPy values, ...), the one reader the
checkpoint rules share.  Facts are read from the modules' ``ast`` through their imports; a name says nothing.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import FrozenSet, Iterator, List, Optional, Tuple

from torchlint.analysis.model.project_index import definition
from torchlint.analysis.model.saved_values import ADVICE, annotated_config_type, refused_at_call
from torchlint.analysis.model.saved_values import omegaconf_name as _plain

LIGHTNING_MODULES: FrozenSet[str] = frozenset(
    {
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.lightning.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)
# Lightning's attributes that name a checkpoint file it wrote (ModelCheckpoint's).
CHECKPOINT_PATH_ATTRIBUTES: FrozenSet[str] = frozenset({"best_model_path", "last_model_path", "kth_best_model_path"})


@dataclass(frozen=True)
class RefusedHyperparameters:
    """A LightningModule whose checkpoints hold, among their hyper-parameters, a value weights_only refuses."""

    qualified: str  # the class, as the project's modules name it (module.Class)
    path: str
    parameter: str  # the __init__ parameter saved
    evidence: str  # how the code shows what it holds
    kind: str = "config"  # a key of saved_values.ADVICE
    label: str = "an OmegaConf config"

    def describe(self) -> str:
        name = self.qualified.rpartition(".")[2]
        return f"the hyper-parameters of `{name}`, whose `{self.parameter}` is {self.label} ({self.evidence})"

    @property
    def advice(self) -> str:
        return ADVICE[self.kind]


class _OneFile:
    """A file checked on its own, as the project these facts are read from."""

    def __init__(self, facts) -> None:
        self.facts = facts
        self.project = None

    def modules(self) -> Iterator[object]:
        yield self.facts

    def modules_calling(self, name: str) -> List[object]:
        return [self.facts]


class _Project:
    def __init__(self, project) -> None:
        self.project = project

    def modules(self) -> Iterator[object]:
        for module in sorted(self.project.module_paths()):
            if b"save_hyperparameters" not in self.project.module_bytes(module):
                continue  # a cost gate: the call is what is looked for
            facts = self.project.module_facts(module)
            if facts is not None:
                yield facts

    def modules_calling(self, name: str) -> List[object]:
        return self.project.modules_calling(name)


def refused_hyperparameters(project, facts=None) -> Tuple[RefusedHyperparameters, ...]:
    """Every such class of the project (computed once per run), or of the file of ``facts`` when there is no
    project index (a file checked on its own)."""
    if project is None:
        return tuple(_compute(_OneFile(facts))) if facts is not None else ()
    return project.fact("lightning-refused-hyperparameters", lambda: tuple(_compute(_Project(project))))


def lightning_classes(project, facts=None) -> Tuple[str, ...]:
    """The LightningModule classes that save hyper-parameters (qualified), as :func:`refused_hyperparameters`."""
    if project is None:
        return tuple(q for q, _, _, _ in _saving_classes(_OneFile(facts))) if facts is not None else ()
    return project.fact("lightning-saving-classes", lambda: tuple(q for q, _, _, _ in _saving_classes(_Project(project))))


def _saving_classes(source) -> Iterator[Tuple[str, object, ast.ClassDef, List[str]]]:
    """(qualified class, its module's facts, the class, the __init__ parameters it saves)."""
    for facts in source.modules():
        for statement in facts.tree.body:
            if not isinstance(statement, ast.ClassDef):
                continue
            if not any(_plain(facts.qualify(base)) in LIGHTNING_MODULES for base in statement.bases):
                continue
            saved = _saved_parameters(statement)
            if saved:
                yield f"{facts.module}.{statement.name}", facts, statement, saved


def _compute(source) -> Iterator[RefusedHyperparameters]:
    for qualified, facts, cls, saved in _saving_classes(source):
        init = _method(cls, "__init__")
        if init is None:
            continue
        for parameter in saved:
            evidence = _annotated(facts, init, parameter)
            if evidence is not None:
                yield RefusedHyperparameters(qualified, facts.path, parameter, evidence)
                break
            found = _built_by_callers(source, facts, cls, init, parameter)
            if found is not None:
                refused, evidence = found
                yield RefusedHyperparameters(qualified, facts.path, parameter, evidence, refused.kind, refused.label)
                break


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == name), None)


def _parameters(method: ast.FunctionDef) -> List[ast.arg]:
    """A method's parameters after ``self``."""
    arguments = method.args
    return [*arguments.posonlyargs, *arguments.args][1:] + list(arguments.kwonlyargs)


def _saved_parameters(cls: ast.ClassDef) -> List[str]:
    """The ``__init__`` parameters ``self.save_hyperparameters(...)`` saves in the class."""
    init = _method(cls, "__init__")
    if init is None:
        return []
    names = [arg.arg for arg in _parameters(init)]
    saved: List[str] = []
    for node in ast.walk(cls):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "save_hyperparameters"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        ):
            continue
        positional = [arg for arg in node.args if not isinstance(arg, ast.Starred)]
        if positional:
            saved += [arg.id for arg in positional if isinstance(arg, ast.Name) and arg.id in names]
            continue
        ignored = _ignored(node)
        saved += [name for name in names if name not in ignored]
    return list(dict.fromkeys(saved))


def _ignored(call: ast.Call) -> FrozenSet[str]:
    for keyword in call.keywords:
        if keyword.arg == "ignore":
            value = keyword.value
            items = value.elts if isinstance(value, (ast.List, ast.Tuple, ast.Set)) else [value]
            return frozenset(item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str))
    return frozenset()


def _annotated(facts, init: ast.FunctionDef, parameter: str) -> Optional[str]:
    qualified = annotated_config_type(init, parameter, facts)
    return f"annotated `{qualified.rpartition('.')[2]}`" if qualified is not None else None


def _built_by_callers(source, facts, cls: ast.ClassDef, init: ast.FunctionDef, parameter: str):
    """(what weights_only refuses, where) that a construction of ``cls`` in the project passes as ``parameter``."""
    positional = [arg.arg for arg in [*init.args.posonlyargs, *init.args.args][1:]]
    position = positional.index(parameter) if parameter in positional else None
    wanted = f"{facts.module}.{cls.name}"
    project = source.project
    locate = lambda qualified, local: definition(qualified, local, project)  # noqa: E731
    for caller in source.modules_calling(cls.name):
        for call in caller.calls_of(cls.name):
            if caller.qualify(call.func) != wanted:
                continue
            value = next((k.value for k in call.keywords if k.arg == parameter), None)
            if value is None and position is not None and position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
                value = call.args[position]
            if value is None:
                continue
            refused = refused_at_call(caller, call, value, locate)
            if refused is not None:
                return refused, f"`{refused.shown}` in {os.path.basename(caller.path)}"
    return None
