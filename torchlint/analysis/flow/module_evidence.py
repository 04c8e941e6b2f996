"""Which names hold modules (``self.fc = nn.Linear(...)``, classes deriving from ``nn.Module``, names the file
calls ``.parameters()`` on), and where the node being visited runs: under ``no_grad``, in a debug branch, in a
test file.  Read by the per-function flow (gradflow.py) and by rules directly."""
from __future__ import annotations

import ast
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, Optional, Set

import libcst as cst

from torchlint.analysis.flow.autograd_terms import (
    DEBUG_WORD,
    LOSS_NAME,
    MODEL_NAME,
    MODULE_BASES,
    MODULE_ONLY_METHODS,
    NOT_MODULE_CLASSES,
    NO_GRAD_CONTEXTS,
    PARAMETER_CLASSES,
    SET_GRAD_ENABLED,
    STOP_GRADIENT_NAME,
    TEST_PATH,
)
from torchlint.analysis.model import conventions
from torchlint.analysis.model.autograd_functions import FUNCTION_BASES
from torchlint.analysis.model.calls import argument
from torchlint.analysis.model.project_index import file_facts
from torchlint.analysis.model.names import dotted_name

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

def is_test_path(path: str) -> bool:
    """``tests/...``, ``test_x.py``, ``x_test.py``, ``conftest.py`` (a naming convention)."""
    return conventions.says(bool(TEST_PATH.search(path)))


# Names of functions that hand back a model rather than run one (``accelerator.unwrap_model(m)``).
_MODEL_GETTER = re.compile(r"^(?:get|build|create|load|unwrap|wrap|make|init|prepare|save|copy|clone)_", re.I)


def looks_like_model(name: str) -> bool:
    return bool(MODEL_NAME.match(name)) and not STOP_GRADIENT_NAME.search(name) and not _MODEL_GETTER.match(name)


def looks_like_loss(name: str) -> bool:
    return bool(LOSS_NAME.search(name))


def last_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def truthy_literal(node: cst.BaseExpression) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return node.value == "True"
    if isinstance(node, cst.Integer):
        return node.evaluated_value != 0
    return None


# -- classes: which attributes are layers ------------------------------------------------------


@dataclass(frozen=True)
class ClassAttributes:
    modules: Dict[str, cst.Call]  # attr -> the constructor call (nn.Linear(...), MyBlock(...))
    parameters: Set[str]  # attrs holding an nn.Parameter
    other: Set[str]  # attrs assigned something else (known not to be a module)
    methods: FrozenSet[str] = frozenset()  # the methods the class defines
    is_module: bool = False  # the class is an nn.Module (LightningModule, PreTrainedModel)


def module_attributes(context: "FileContext", class_def: cst.ClassDef) -> ClassAttributes:
    """``self.x = nn.Layer(...)`` (or a module class of this file) anywhere in the class's methods."""
    from torchlint.analysis.model.scope import assignments

    local_modules = module_classes(context)
    modules: Dict[str, cst.Call] = {}
    parameters: Set[str] = set()
    other: Set[str] = set()
    methods = frozenset(stmt.name.value for stmt in class_def.body.body if isinstance(stmt, cst.FunctionDef))
    for stmt in class_def.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        for target, value in assignments(stmt.body.body):
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self"):
                continue
            attr = target.attr.value
            kind = constructed_kind(context, value, local_modules)
            if kind == "module":
                modules[attr] = value
            elif kind == "parameter":
                parameters.add(attr)
            elif _known_not_module(context, value):
                other.add(attr)  # what a parameter or a builder hands in may be a module: not known
    is_module = class_def.name.value in local_modules or any(
        is_nn_class(context.qualified_name(base.value) or "") for base in class_def.bases
    )
    return ClassAttributes(modules, parameters, other - set(modules) - parameters, methods, is_module)


_NOT_MODULE_VALUES = (
    cst.BaseNumber, cst.BaseString, cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.DictComp,
    cst.SetComp, cst.Comparison, cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Lambda,
)


_MODEL_BUILDER = re.compile(r"(?:^|_)(?:build|create|get|load|make|init)_?(?:model|net|network|backbone|encoder|decoder)", re.I)


def _known_not_module(context: "FileContext", value: cst.BaseExpression) -> bool:
    """Literals, displays, arithmetic, ``None``/``True``, and what a call builds that is not a model
    (``WatermarkEncoder()``, ``ct.models.MLModel(path)``, ``torch.zeros(3)``): values that are not
    modules.  A name hands in what the caller passed; ``AutoModel.from_pretrained(...)`` and
    ``build_model(cfg)`` build models."""
    if isinstance(value, _NOT_MODULE_VALUES):
        return True
    if isinstance(value, cst.Name):
        return value.value in ("None", "True", "False")
    if not isinstance(value, cst.Call):
        return False
    func = value.func
    name = last_name(func) or ""
    if name == "from_pretrained" and isinstance(func, cst.Attribute):
        owner = last_name(func.value) or ""
        return not ("Model" in owner or "For" in owner)
    return not _MODEL_BUILDER.search(name)


def constructed_kind(context: "FileContext", value: cst.BaseExpression, local_modules: Set[str]) -> Optional[str]:
    if not isinstance(value, cst.Call):
        return None
    qualified = context.qualified_name(value.func)
    if qualified in PARAMETER_CLASSES:
        return "parameter"
    if qualified is not None and is_nn_class(qualified):
        return "module"
    if isinstance(value.func, cst.Name) and value.func.value in local_modules:
        return "module"
    return None


# Base classes, by name, of the frameworks' modules when an import the table cannot resolve brings
# them in (``from ...modeling_utils import PreTrainedModel``).
_MODULE_BASE_NAMES = frozenset({"Module", "LightningModule", "PreTrainedModel", "ModelMixin", "BaseModule"})


def _names_module_base(name: str) -> bool:
    return name in _MODULE_BASE_NAMES or name.endswith("PreTrainedModel")


def is_nn_class(qualified: str) -> bool:
    if qualified in MODULE_BASES:
        return True
    if not qualified.startswith("torch.nn.") or qualified in NOT_MODULE_CLASSES:
        return False
    last = qualified.rsplit(".", 1)[-1]
    return last[:1].isupper() and ".functional." not in qualified and ".init." not in qualified


_module_class_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def module_classes(context: "FileContext") -> Set[str]:
    """Names of the top-level classes of this file that subclass ``nn.Module`` (directly or via each other)."""
    cached = _module_class_cache.get(context)
    if cached is not None:
        return cached
    classes = [stmt for stmt in context.module.body if isinstance(stmt, cst.ClassDef)]
    found: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for class_def in classes:
            if class_def.name.value in found:
                continue
            for base in class_def.bases:
                qualified = context.qualified_name(base.value)
                name = last_name(base.value) or ""
                if (qualified is not None and is_nn_class(qualified)) or name in found or _names_module_base(name):
                    found.add(class_def.name.value)
                    changed = True
                    break
    _module_class_cache[context] = found
    return found


_MODULE_EVIDENCE = re.compile(
    r"(?<![\w.])((?:self\.)?[A-Za-z_]\w*)\s*\.\s*(?:"
    + "|".join(sorted(MODULE_ONLY_METHODS | {"train", "eval"}))
    + r")\s*\("
)


def evidenced_modules(context: "FileContext") -> FrozenSet[str]:
    """Names (``D``) and ``self`` attributes (``self.disc``) on which the file calls a method only a
    module has (``D.parameters()``, ``self.disc.named_parameters()``, ``netG.train()``): they hold
    modules whatever they are called.  Read from the whole file's text, whatever the pre-pass keeps."""
    return context.memoized(
        "gradflow.module-evidence", context.module, lambda _: frozenset(m.group(1) for m in _MODULE_EVIDENCE.finditer(context.source))
    )


# -- regions of the node being visited ---------------------------------------------------------


def is_no_grad_item(context: "FileContext", expr: cst.BaseExpression) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)`` (also undecorated forms)."""
    call = expr if isinstance(expr, cst.Call) else None
    qualified = context.qualified_name(call.func if call is not None else expr)
    if qualified in NO_GRAD_CONTEXTS:
        if call is not None and qualified.endswith("inference_mode"):
            mode = argument(call, 0, "mode")
            return mode is None or truthy_literal(mode.value) is not False
        return True
    if call is not None and qualified in SET_GRAD_ENABLED:
        mode = argument(call, 0, "mode")
        return mode is not None and truthy_literal(mode.value) is False
    return False


def function_is_no_grad(context: "FileContext", function: cst.FunctionDef) -> bool:
    return any(is_no_grad_item(context, d.decorator) for d in function.decorators)


def in_no_grad_region(context: "FileContext") -> bool:
    """Whether the node being visited runs with gradients off (a ``with`` block or a decorated function)."""
    for node in reversed(context.ancestors):
        if isinstance(node, cst.With) and any(is_no_grad_item(context, item.item) for item in node.items):
            return True
        if isinstance(node, cst.FunctionDef):
            if function_is_no_grad(context, node):
                return True
            return False  # gradients inside a def depend on its caller, not on the enclosing blocks
    return False


def in_debug_condition(context: "FileContext") -> bool:
    """Whether the node being visited sits under an ``if`` (or a function) that only runs when debugging.

    Any ``if``/``elif``/conditional expression on something other than a constant or
    ``__name__ == "__main__"`` counts (a flag, an argument, an environment variable); so does a
    function whose name says debug/check/anomaly.
    """
    for node in reversed(context.ancestors):
        if isinstance(node, (cst.If, cst.IfExp)):
            if _is_runtime_condition(node.test):
                return True
        elif isinstance(node, cst.FunctionDef):
            if conventions.says(bool(DEBUG_WORD.search(node.name.value))):
                return True
    return False


def _is_runtime_condition(test: cst.BaseExpression) -> bool:
    if truthy_literal(test) is not None or isinstance(test, (cst.SimpleString, cst.Integer, cst.Float)):
        return False
    if isinstance(test, cst.Comparison) and dotted_name(test.left) == "__name__":
        return False
    return True




def defines_a_backward_method(context: "FileContext") -> bool:
    """Whether a class of the project (of the file, when it is checked on its own) that is not an autograd
    ``Function`` defines a ``backward`` method taking an argument (``def backward(self, y)``: a normalising
    flow's inverse).  Then ``flow.backward(z)`` calls that method, which frees no graph; a ``Tensor.backward`` call
    of the same shape cannot be told from it by the call alone.  Read once per run (per file without a project)."""
    return _some_module_holds(context, "flow.defines-backward-method", b"def backward", _defines_backward)


def defines_a_method(context: "FileContext", name: str) -> bool:
    """Whether a class of the project (of the file, when it is checked on its own) defines a method ``name``:
    then ``x.name(...)`` may call that method rather than torch's of the same name.  Read once per run."""

    def in_facts(facts) -> bool:
        return any(
            isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name == name
            for node in ast.walk(facts.tree)
            if isinstance(node, ast.ClassDef)
            for member in node.body
        )

    return _some_module_holds(context, f"flow.defines-method.{name}", f"def {name}".encode(), in_facts)


def _some_module_holds(context: "FileContext", key: str, definition: bytes, holds: Callable[[Any], bool]) -> bool:
    """Whether ``holds`` is true of a module of the project (of the file, without one), asked only of the modules
    whose text holds ``definition`` (a cost gate: the definition is what is looked for); once per run."""
    project = getattr(context, "project", None)
    if project is None:
        facts = file_facts(context)
        return facts is not None and context.memoized(key, context.module, lambda _: holds(facts))

    def compute() -> bool:
        for module in sorted(project.module_paths()):
            if definition not in project.module_bytes(module):
                continue
            facts = project.module_facts(module)
            if facts is not None and holds(facts):
                return True
        return False

    return project.fact(key, compute)


def _defines_backward(facts) -> bool:
    for node in ast.walk(facts.tree):
        if not isinstance(node, ast.ClassDef):
            continue
        if any((facts.qualify(base) or "") in FUNCTION_BASES for base in node.bases):
            continue
        for member in node.body:
            if isinstance(member, ast.FunctionDef) and member.name == "backward" and not member.decorator_list:
                arguments = member.args
                if len(arguments.posonlyargs) + len(arguments.args) >= 2 or arguments.vararg is not None:
                    return True
    return False
