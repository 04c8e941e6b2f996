"""What a value is: a tensor, a Python number, a NumPy array, or a constant tensor of configuration values.

The one answer to "is this value a tensor?":

- ``value_kind(context, expr, site) -> "tensor" | "number" | "array" | "unknown"``: Python numbers
  (literals, ``math.*``, ``len``, ``.size(i)``, ``.shape[i]``, ``numel()``, ``.item()``), NumPy values
  (``np.*``), tensors (``torch.*`` calls, tensor methods, a loss module's call, parameters annotated
  ``Tensor``, ``forward`` arguments), every binding that may reach a name joined.  :func:`is_not_tensor`
  is the "never flag" test; operator forms (``x ** 0.5``) are reported only when the operand is known
  to be a tensor.
- ``shown_only=True`` (:func:`is_tensor`) keeps only what the code shows: no parameter, no likely method
  name, only torch functions known to return a tensor, and a name only through its one assignment.
- :func:`is_constant_tensor`: ``torch.tensor(alpha)``, ``torch.FloatTensor([0.5]).to(device)``, names
  bound to them and arithmetic of them with Python numbers hold configuration values.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, FrozenSet, Optional, Sequence

import libcst as cst

from torchlint.analysis.model import conventions
from torchlint.analysis.model.calls import argument, keyword_arg, literal_bool
from torchlint.analysis.model.command_line import numeric_option
from torchlint.analysis.model.dataflow import Site, bindings, site_of, sole_assignment
from torchlint.analysis.model.ops import module_constructor, without_shape_steps
from torchlint.analysis.values.domain import constant_value

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

MAX_DEPTH = 8


# -- what a value is --------------------------------------------------------------


NUMBER_BUILTINS = frozenset({"len", "int", "float", "round", "range", "pow"})
NUMBER_METHODS = frozenset({"size", "numel", "nelement", "dim", "ndimension", "item", "tolist", "element_size", "get_device", "count", "index"})
_NUMBER_ATTRIBUTES = frozenset({"ndim", "shape", "itemsize", "real_size"})
FINFO_ATTRIBUTES = frozenset({"eps", "tiny", "max", "min", "smallest_normal", "resolution"})
_NOT_TENSOR_TORCH = frozenset({
    "torch.numel", "torch.is_tensor", "torch.finfo", "torch.iinfo", "torch.Size", "torch.get_default_dtype",
    "torch.device", "torch.is_floating_point", "torch.is_grad_enabled",
})
TENSOR_METHODS = frozenset({
    "sum", "mean", "norm", "std", "var", "pow", "sqrt", "rsqrt", "exp", "log", "abs", "clamp", "clamp_min", "clip",
    "float", "double", "half", "bfloat16", "to", "type_as", "detach", "view", "reshape", "unsqueeze", "squeeze",
    "expand", "expand_as", "permute", "transpose", "matmul", "softmax", "sigmoid", "masked_fill", "cumsum",
    "amax", "amin", "square", "contiguous", "flatten", "count_nonzero", "nansum", "mul", "add", "sub", "div",
    "relu", "exp2", "logsumexp", "prod", "gather", "index_select", "new_zeros", "new_ones", "new_full",
})
TENSOR_FUNCTIONS: FrozenSet[str] = frozenset(
    f"torch.{name}"
    for name in """
    tensor as_tensor from_numpy zeros ones empty full rand randn randint randperm arange linspace logspace eye
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like cat concat stack where clamp clip
    matmul bmm mm einsum softmax log_softmax sigmoid tanh exp log sqrt abs pow sum mean std var argmax argmin cumsum
    norm cdist masked_fill gather index_select flatten reshape squeeze unsqueeze transpose permute
    """.split()
)
# torch.nn.functional returns tensors but for these.
_FUNCTIONAL_TUPLES: FrozenSet[str] = frozenset({"multi_head_attention_forward", "max_pool1d_with_indices", "max_pool2d_with_indices"})
# Tensor methods whose result is not a tensor (or not always one).
NON_TENSOR_METHODS: FrozenSet[str] = frozenset(
    {
        "item", "tolist", "numpy", "size", "dim", "numel", "split", "chunk", "unbind", "max", "min", "sort", "topk",
        "nonzero", "element_size", "data_ptr", "is_contiguous", "type", "backward", "register_hook", "storage",
        "untyped_storage", "stride", "get_device", "equal", "allclose", "__len__", "keys", "values", "items",
    }
)
# Views of a tensor that are tensors themselves.
_TENSOR_VIEWS = frozenset({"data", "T", "mT", "H", "mH"})
_TENSOR_ANNOTATIONS = re.compile(r"\bTensor\b|\bFloatTensor\b|\bLongTensor\b|\bBoolTensor\b")
_NUMBER_ANNOTATIONS = re.compile(r"^(int|float|Optional\[(int|float)\]|Union\[int, float\])$")


# Libraries whose functions and objects compute on their own arrays, frames and images, never on tensors: what
# their calls return (``np.log(x)``, ``TSNE().fit_transform(x)``, ``pl.col("n")``) has no tensor method.
NON_TENSOR_LIBRARIES = frozenset({
    "numpy", "pandas", "polars", "pyarrow", "sklearn", "scipy", "statsmodels", "cv2", "PIL", "skimage", "imageio",
    "matplotlib", "seaborn", "librosa", "soundfile", "networkx", "xgboost", "lightgbm", "catboost",
})

# Array frameworks other than torch: a file that imports one of them and not torch computes with its values.
_OTHER_FRAMEWORKS = frozenset({"tensorflow", "jax", "mxnet", "paddle", "keras", "theano", "chainer", "cupy", "mindspore"})


def imports_torch(context: "FileContext") -> bool:
    """Whether the file imports torch at all (a module of NumPy or pandas preprocessing does not)."""
    return context.memoized(
        "kinds.imports-torch", context.module,
        lambda _: any(q and q.split(".", 1)[0] == "torch" for q in context.imports.bindings.values()),
    )


def computes_with_other_framework(context: "FileContext") -> bool:
    """The file imports another array framework (TensorFlow, JAX, ...) and not torch: its values are that
    framework's arrays (a GAN written twice, once per framework, keeps its TensorFlow twin beside the torch one)."""

    def compute(module: cst.Module) -> bool:
        roots = {qualified.split(".", 1)[0] for qualified in context.imports.bindings.values() if qualified}
        return "torch" not in roots and not roots.isdisjoint(_OTHER_FRAMEWORKS)

    return context.memoized("kinds.other-framework", context.module, compute)


def value_kind(
    context: "FileContext", node: cst.BaseExpression, site: Optional[Site], _depth: int = 0, *, shown_only: bool = False
) -> str:
    """"tensor", "number", "array" (NumPy's, or another framework's in a file that computes with one) or
    "unknown" (see module docs).  ``shown_only``: only what the code shows, no likely kinds (see :func:`is_tensor`)."""
    if _depth > MAX_DEPTH:
        return "unknown"
    if _depth == 0 and computes_with_other_framework(context):
        return "array"
    again = _depth + 1

    def kind(inner: cst.BaseExpression, at: Optional[Site] = site) -> str:
        return value_kind(context, inner, at, again, shown_only=shown_only)

    if constant_value(node) is not None or isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
        return "number"
    if isinstance(node, cst.Name):
        if node.value in ("True", "False", "None"):
            return "number"
        if site is None:
            return "unknown"
        # ``state['step'] = 0``, ``x[mask] = 0``: the container keeps its kind
        reaching = [binding for binding in bindings(site, node.value) if not _writes_an_element(binding, node.value)]
        if shown_only:
            if len(reaching) == 1 and reaching[0].kind == "assign" and reaching[0].value is not None:
                return kind(reaching[0].value, reaching[0].site)
            return "unknown"
        kinds = set()
        for binding in reaching:
            if binding.kind == "param":
                kinds.add(_parameter_kind(binding.node, site))
            elif binding.value is not None and binding.kind in ("assign", "update", "inplace", "module", "conditional", "each"):
                kinds.add(kind(binding.value, binding.site))
            elif binding.kind == "unpack" and binding.value is not None:
                # B, N, C = x.shape: numbers; q, k = x.chunk(2): tensors.
                whole = kind(binding.value, binding.site)
                shape = isinstance(binding.value, cst.Attribute) and binding.value.attr.value == "shape"
                kinds.add("number" if shape or whole == "number" else "tensor" if whole == "tensor" else "unknown")
            elif binding.kind == "opaque":
                kinds.add("unknown")
        if len(kinds) == 1:
            return kinds.pop()
        return "tensor" if "tensor" in kinds else "unknown"
    if isinstance(node, cst.Attribute):
        if node.attr.value in _NUMBER_ATTRIBUTES:
            return "number"
        if node.attr.value in FINFO_ATTRIBUTES and isinstance(node.value, cst.Call):
            if context.qualified_name(node.value.func) in ("torch.finfo", "torch.iinfo", "numpy.finfo", "numpy.iinfo"):
                return "number"
        qualified = context.qualified_name(node)
        if qualified is not None:
            if qualified.startswith(("math.", "numpy.")):
                return "number"
            return "unknown"
        if shown_only:
            return "tensor" if node.attr.value in _TENSOR_VIEWS and kind(node.value) == "tensor" else "unknown"
        if node.attr.value in _TENSOR_VIEWS or node.attr.value in ("grad", "weight", "bias", "values"):
            inner = kind(node.value)
            return "tensor" if inner == "tensor" or node.attr.value in ("grad",) else "unknown"
        if numeric_option(context, node, site):
            return "number"  # opt.l1_lambda: argparse made it an int or a float
        if _is_config(node.value):
            return "number"  # config.sigma_data: a hyperparameter
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            value = context.self_attribute_value(node.attr.value)
            if isinstance(value, cst.Attribute) and _is_config(value.value):
                return "number"  # self.sigma_data = config.sigma_data
        return "unknown"
    if isinstance(node, cst.Subscript):
        inner = node.value
        if isinstance(inner, cst.Attribute) and inner.attr.value == "shape":
            return "number"
        if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "size":
            return "number"
        found = kind(inner)
        return found if found in ("tensor", "array") else "unknown"
    if isinstance(node, cst.Call):
        func = node.func
        qualified = context.qualified_name(func)
        if qualified is not None:
            if qualified in _NOT_TENSOR_TORCH:
                return "number"
            if qualified.startswith("torch."):
                return "tensor" if not shown_only or _returns_a_tensor(qualified) else "unknown"
            if qualified.startswith("math."):
                return "number"
            if qualified.split(".", 1)[0] in NON_TENSOR_LIBRARIES:
                return "array"  # NumPy arrays, pandas frames, a fitted scikit-learn model: no tensor methods, no gradient
            return "unknown"
        if isinstance(func, cst.Name):
            if func.value in NUMBER_BUILTINS:
                return "number"
            if func.value in ("abs", "max", "min", "sum") and node.args:
                kinds = {kind(arg.value) for arg in node.args if arg.keyword is None}
                return kinds.pop() if len(kinds) == 1 else "unknown"
            return "tensor" if _calls_a_loss_module(context, func) else "unknown"
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in NUMBER_METHODS:
                return "number"
            receiver = kind(func.value)
            if receiver in ("number", "array"):
                return receiver
            if receiver == "tensor" and (not shown_only or method not in NON_TENSOR_METHODS):
                return "tensor"
            if not shown_only and method in TENSOR_METHODS:
                return "tensor"
            return "tensor" if _calls_a_loss_module(context, func) else "unknown"
        return "unknown"
    if isinstance(node, cst.BinaryOperation):
        left = kind(node.left)
        right = kind(node.right)
        if "tensor" in (left, right):
            return "tensor"
        if "array" in (left, right):
            return "array"
        if left == right == "number":
            return "number"
        return "unknown"
    if isinstance(node, cst.UnaryOperation):
        return kind(node.expression)
    if isinstance(node, cst.Comparison):
        # ``out.argmax(1) == y``: elementwise on a tensor or an array, a bool otherwise.
        sides = [node.left] + [target.comparator for target in node.comparisons]
        kinds = {kind(side) for side in sides}
        return "tensor" if "tensor" in kinds else "array" if "array" in kinds else "unknown"
    if isinstance(node, cst.IfExp):
        body = kind(node.body)
        return body if body == kind(node.orelse) else "unknown"
    return "unknown"


def is_tensor(context: "FileContext", node: cst.BaseExpression, ancestors: Optional[Sequence[cst.CSTNode]] = None) -> bool:
    """Whether the code shows ``node`` (read below ``ancestors``, by default the node being visited) to be a tensor:
    the sure answer for rules that check a tensor method's keywords or name, where a wrong guess flags some other
    object's method.  Yes only for a call of a torch function that returns a tensor (:data:`TENSOR_FUNCTIONS`,
    ``torch.nn.functional``'s but the few that return tuples, ``torch.nn.init``'s in-place initialisers), a call
    of a ``torch.nn.*Loss`` module, a tensor method's result on a tensor (not :data:`NON_TENSOR_METHODS`), a
    view (``.data``, ``.T``), element, comparison or arithmetic of a tensor, and a name whose one reaching
    assignment is one of these.  A parameter, an attribute or a model's output is not known to be one."""
    site = site_of(context.ancestors if ancestors is None else ancestors)
    return value_kind(context, node, site, shown_only=True) == "tensor"


def _returns_a_tensor(qualified: str) -> bool:
    if qualified in TENSOR_FUNCTIONS:
        return True
    prefix, _, last = qualified.rpartition(".")
    if prefix == "torch.nn.init" and last.endswith("_") and not last.startswith("_"):
        return True  # the in-place initialisers return the tensor they fill
    return prefix == "torch.nn.functional" and last not in _FUNCTIONAL_TUPLES and not last.startswith("_")


def _calls_a_loss_module(context: "FileContext", func: cst.BaseExpression) -> bool:
    """``criterion`` in ``criterion(out, y)``: built by a ``torch.nn.*Loss`` constructor here, at module level or in
    ``__init__``."""
    constructor = module_constructor(context, func)
    if not isinstance(constructor, cst.Call):
        return False
    qualified = context.qualified_name(constructor.func) or ""
    return qualified.startswith("torch.nn.") and qualified.endswith("Loss")


def _writes_an_element(binding, name: str) -> bool:
    """A binding that only writes into ``name`` (``name[key] = value``, also inside a branch): what it stores is an
    element, not the container (an optimizer's ``state['exp_avg'] = torch.zeros_like(p)`` makes no tensor of
    ``state``, whose ``state['step']`` is a number)."""
    statement = binding.node
    if binding.kind not in ("masked", "conditional") or not isinstance(statement, cst.Assign):
        return False
    return all(
        isinstance(target.target, cst.Subscript)
        for target in statement.targets
        if name in _target_names(target.target)
    ) and any(name in _target_names(target.target) for target in statement.targets)


def _target_names(target: cst.BaseExpression) -> set:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, cst.Subscript):
        return _target_names(target.value)
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_target_names(element.value) for element in target.elements)) if target.elements else set()
    return set()


def _parameter_kind(param: cst.Param, site: Site) -> str:
    if param.annotation is not None:
        text = cst.Module(body=[]).code_for_node(param.annotation.annotation)
        if _TENSOR_ANNOTATIONS.search(text):
            return "tensor"
        if _NUMBER_ANNOTATIONS.match(text.replace(" ", "").replace(",", ", ")):
            return "number"
    if param.default is not None and constant_value(param.default) is not None:
        return "number"
    function = site.function
    if function is not None and function.name.value == "forward" and param.name.value not in ("self", "cls"):
        return "tensor"
    return "unknown"


_CONFIG_WORD = re.compile(r"(^|_)(config|cfg)$", re.IGNORECASE)


def _is_config(node: cst.BaseExpression) -> bool:
    """``config``, ``self.config``, ``diffusion_config``: a model's configuration object."""
    word = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""
    return conventions.says(bool(_CONFIG_WORD.search(word)))


def is_not_tensor(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None) -> bool:
    """Python numbers and NumPy values: never flagged."""
    return value_kind(context, node, site) in ("number", "array")


_CONSTANT_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor", "torch.Tensor", "torch.FloatTensor"})


def is_constant_tensor(context: "FileContext", node: cst.BaseExpression, site: Optional[Site] = None, depth: int = 0) -> bool:
    """``torch.tensor(d)`` built from a Python value: a constant with no gradient, sized by the author; also
    arithmetic of such tensors and Python numbers, and names bound once to either (``alpha_t =
    torch.tensor(alpha)``, then ``log(1 - alpha_t)``): a configuration value, judged as the number it holds."""
    if depth > MAX_DEPTH:
        return False
    node = without_shape_steps(context, node)  # torch.FloatTensor([0.5]).to(x.device)
    if isinstance(node, cst.Name):
        assignment = sole_assignment(site, node.value)
        return assignment is not None and is_constant_tensor(context, assignment.value, assignment.site, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)):
        sides = (node.left, node.right)
        tensors = [is_constant_tensor(context, side, site, depth + 1) for side in sides]  # each side judged once
        return any(tensors) and all(
            tensor or value_kind(context, side, site) == "number" for tensor, side in zip(tensors, sides)
        )
    if not isinstance(node, cst.Call):
        return False
    if context.qualified_name(node.func) not in _CONSTANT_CONSTRUCTORS:
        return False
    data = argument(node, 0, "data")
    return data is not None and value_kind(context, data.value, site) != "tensor"




# -- whether a tensor requires grad -------------------------------------------------

_PARAMETER_CONSTRUCTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Functions that build a new tensor: it requires grad only when the call asks (``requires_grad=True``).
_FACTORIES = frozenset({
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.rand", "torch.randn", "torch.randint",
    "torch.arange", "torch.linspace", "torch.logspace", "torch.eye", "torch.tensor", "torch.as_tensor",
    "torch.from_numpy", "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.full_like",
    "torch.rand_like", "torch.randn_like", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor",
})
# What torch's layers call their parameters.
_LAYER_PARAMETERS = frozenset({"weight", "bias"})
# Methods of a module that hand out its parameters.
_PARAMETER_ITERATORS = frozenset({"parameters", "named_parameters"})


def requires_grad_flag(context: "FileContext", node: cst.BaseExpression, _depth: int = 0) -> Optional[bool]:
    """The ``requires_grad`` a tensor has where ``node`` reads it, when the code shows it: True for an
    ``nn.Parameter``, a layer's ``.weight``/``.bias`` and what a module's ``parameters()``/
    ``named_parameters()`` hand out (a loop variable over them), False for what a factory (``torch.zeros``, ``torch.tensor``, ...) builds without
    ``requires_grad=True`` and for ``.detach()``; names are followed to their one assignment. None when
    the code does not show it."""
    if _depth > MAX_DEPTH:
        return None
    node = without_shape_steps(context, node)  # a cast or a reshape keeps the flag
    if isinstance(node, cst.Call):
        qualified = context.qualified_name(node.func)
        asked = keyword_arg(node, "requires_grad")
        asked_value = literal_bool(asked.value) if asked is not None else None
        if qualified in _PARAMETER_CONSTRUCTORS:
            requested = argument(node, 1, "requires_grad")
            return True if requested is None else literal_bool(requested.value)
        if qualified in _FACTORIES:
            return bool(asked_value) if asked is None or asked_value is not None else None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "detach":
            return False
        return None
    if isinstance(node, cst.Attribute) and node.attr.value in _LAYER_PARAMETERS:
        return True  # ``layer.weight``: torch's layers hold their weights as parameters
    if isinstance(node, cst.Name):
        looped = _loop_over_parameters(context, node.value)
        if looped is not None:
            return looped
        binding = sole_assignment(site_of(context.ancestors), node.value)
        if binding is not None and binding.value is not None and binding.site is not None:
            return requires_grad_flag(context, binding.value, _depth + 1)
    return None


def _loop_over_parameters(context: "FileContext", name: str) -> Optional[bool]:
    """True when ``name`` is the variable of an enclosing ``for`` over a module's parameters
    (``for p in model.parameters()``, ``for n, p in model.named_parameters()``)."""
    for outer in reversed(context.ancestors):
        if isinstance(outer, (cst.FunctionDef, cst.ClassDef)):
            return None
        if not isinstance(outer, cst.For):
            continue
        iterated = outer.iter
        if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)
                and iterated.func.attr.value in _PARAMETER_ITERATORS):
            continue
        target = outer.target
        if isinstance(target, cst.Name) and target.value == name and iterated.func.attr.value == "parameters":
            return True
        if isinstance(target, cst.Tuple) and len(target.elements) == 2:
            second = target.elements[1].value
            if isinstance(second, cst.Name) and second.value == name and iterated.func.attr.value == "named_parameters":
                return True
    return None
