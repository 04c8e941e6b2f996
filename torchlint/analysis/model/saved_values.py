"""What a checkpoint holds that weights-only loading refuses, read from the code that writes it.

Since torch 2.6 ``torch.load`` unpickles with ``weights_only=True`` unless told otherwise.  That unpickler
accepts tensors (Parameters too), ``torch.Size``, dtypes and devices, ``str``/``bytes``/``int``/``float``/
``complex``/``bool``/``None``, and ``dict``, ``list``, ``tuple``, ``set``, ``collections.OrderedDict`` and
``collections.Counter`` of them (``random.getstate()``, ``vars(args)``, every ``state_dict()`` are such
values).  Any other object in the file stops the load: "Weights only load failed ... Unsupported global".

:func:`refused_value` says which value of a ``torch.save`` is such an object, from what the code does
(qualified names through imports, values followed through assignments), never from what a name is called.
Each fact below was checked with torch 2.13 and NumPy 2.4 (TL406's runtime proofs in
tests/test_runtime_data.py rerun the ones its fixtures rely on):

- ``module``: modules, optimizers and LR schedulers (torch.nn / torch.optim classes, torchvision and timm
  builders, classes of the project deriving from them);
- ``object``: an instance of any other class of the project (a vocabulary, a tokenizer, a corpus, a
  dataclass, a NamedTuple: the class is pickled by name).  A ``TypedDict`` builds a plain dict: allowed;
- ``numpy``: NumPy arrays and scalars: ``np.array(...)``, ``np.float64(...)``, ``np.random.get_state()`` (a
  tuple holding an array), what NumPy's functions compute (``np.mean(xs)`` is a ``np.float64``),
  ``tensor.numpy()``, and what indexing, arithmetic and methods make of them.  ``.item()`` and
  ``.tolist()`` give Python values (allowed); so do the ``numpy.random`` samplers called without a size
  (``np.random.rand()`` is a ``float``, ``np.random.rand(3)`` an array), so only the ``numpy.random`` calls
  of :data:`NUMPY_RANDOM_VALUES` and the samplers of :data:`NUMPY_RANDOM_SIZE_AT` given a size count;
  ``np.pi`` is a ``float``;
- ``generator``: NumPy random generators (``np.random.default_rng()``, ``np.random.RandomState()``);
- ``namespace``: ``argparse.Namespace`` (``parser.parse_args()``; ``vars(args)`` is a dict, allowed) and
  ``types.SimpleNamespace``;
- ``config``: configuration objects of yacs (``CfgNode``), OmegaConf, EasyDict and ml_collections, also
  through ``cfg.clone()``; a parameter annotated ``DictConfig``, and the config Hydra passes to a
  ``@hydra.main`` function;
- ``container``: ``collections.defaultdict``, ``collections.deque``, ``frozenset``;
- ``value``: ``pathlib`` paths, ``datetime`` values;
- ``global``: a function or a class of the project itself (``{"loss_fn": focal_loss}``).

The ``__dict__`` (or ``vars()``) of an object is a plain dict: refused only when one of the fields its
class assigns (``self.mean = np.zeros(3)`` in any of its methods) is.  A lambda is not reported: pickle
cannot save one, so ``torch.save`` fails before any load.

Where a value comes from: a dict, list, tuple or set literal holding it (``{"model": m.state_dict(),
"rng": np.random.get_state()}``), ``dict(...)``, ``copy.deepcopy(...)``, a name bound once in the saving
function (or at the module's top level, unless the function binds it too), an entry added to that name
before the save (``ckpt["args"] = args``, ``ckpt.update(...)``), an attribute ``self.x`` its class assigns
once, what a function of the project returns when each of its ``return``s gives the same kind
(``args = parse_options()``), what every call of a top-level function, or construction of a top-level class
(its subclasses' too), passes for a parameter (``Trainer(config=cfg)`` for ``self.config = config``), and the element of a returned tuple that an unpacking binds
(``acc, n = evaluate(...)`` where ``evaluate`` returns ``np.mean(accs), len(accs)``).  What a value may be on one path only (``x if c else y``, a name bound twice) is not followed.

:func:`saved_layouts` reads the other half of a match: the literal keys of each dict a module saves (whatever
its path), so that a load read by those keys is known to read a file of that layout.

The project index imports this module only when a question reaches it (a warm run that reads only its
cache loads no LibCST, which analysis/model/checkpoints.py and ops.py import).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from torchlint.analysis.model.ast_names import BUILTIN_NAMES, ast_dotted_name, every_node
from torchlint.analysis.model.calls import arguments_passed, constructor_arguments_passed
from torchlint.analysis.model.checkpoints import (
    COMPOSITE_KEY_PREFIX,
    LOAD_FUNCTIONS,
    SAVE_FUNCTIONS,
    ast_file_name,
    ast_path_key,
    composite_path_names,
)
from torchlint.analysis.model.ops import MODULE_MOVES

# How many steps (names, fields, containers, calls) a value is followed through.
MAX_DEPTH = 12
# How long the code shown in a message may be.
_SHOWN = 48

# kind -> what to save instead (the message's advice; the weights_only=False alternative is the rule's).
ADVICE: Dict[str, str] = {
    "module": "save and load state_dict()",
    "object": "save its fields as tensors and plain containers",
    "numpy": "save tensors or Python values instead (torch.from_numpy, .tolist(), .item())",
    "generator": "save its state as Python values (rng.bit_generator.state)",
    "namespace": "save vars(args)",
    "container": "save it as a dict or a list",
    "value": "save it as a string",
    "global": "save its name",
    "config": "save it as a plain dict or its YAML text",
}

# Calls (qualified) whose results weights_only refuses: kind and how a message names the value.
REFUSED_CALLS: Dict[str, Tuple[str, str]] = {
    "argparse.Namespace": ("namespace", "an `argparse.Namespace`"),
    "collections.defaultdict": ("container", "a `collections.defaultdict`"),
    "collections.deque": ("container", "a `collections.deque`"),
    "numpy.random.default_rng": ("generator", "a NumPy random generator"),
    "numpy.random.Generator": ("generator", "a NumPy random generator"),
    "numpy.random.RandomState": ("generator", "a NumPy random generator"),
    "pathlib.Path": ("value", "a `pathlib.Path`"),
    "pathlib.PurePath": ("value", "a `pathlib.Path`"),
    "pathlib.PosixPath": ("value", "a `pathlib.Path`"),
    "pathlib.WindowsPath": ("value", "a `pathlib.Path`"),
    "datetime.datetime": ("value", "a `datetime`"),
    "datetime.datetime.now": ("value", "a `datetime`"),
    "datetime.datetime.today": ("value", "a `datetime`"),
    "datetime.datetime.utcnow": ("value", "a `datetime`"),
    "datetime.datetime.fromtimestamp": ("value", "a `datetime`"),
    "datetime.date": ("value", "a `datetime.date`"),
    "datetime.date.today": ("value", "a `datetime.date`"),
    "datetime.timedelta": ("value", "a `datetime.timedelta`"),
    # Configuration objects of common libraries: classes (dict subclasses among them) the unpickler of
    # weights_only does not allow.
    "types.SimpleNamespace": ("namespace", "a `types.SimpleNamespace`"),
    "yacs.config.CfgNode": ("config", "a yacs `CfgNode`"),
    "yacs.config.load_cfg": ("config", "a yacs `CfgNode`"),
    "omegaconf.OmegaConf.create": ("config", "an OmegaConf config"),
    "omegaconf.OmegaConf.load": ("config", "an OmegaConf config"),
    "omegaconf.OmegaConf.merge": ("config", "an OmegaConf config"),
    "omegaconf.DictConfig": ("config", "an OmegaConf config"),
    "hydra.compose": ("config", "an OmegaConf config"),
    "easydict.EasyDict": ("config", "an `EasyDict`"),
    "ml_collections.ConfigDict": ("config", "an `ml_collections.ConfigDict`"),
    "ml_collections.config_dict.ConfigDict": ("config", "an `ml_collections.ConfigDict`"),
}
# Types a parameter may be annotated with that make it an OmegaConf config.
CONFIG_TYPES: FrozenSet[str] = frozenset({"omegaconf.DictConfig", "omegaconf.ListConfig", "omegaconf.OmegaConf"})
# Decorators of a function to which Hydra passes its config (an OmegaConf ``DictConfig``) as the first argument.
HYDRA_MAIN: FrozenSet[str] = frozenset({"hydra.main"})
# Methods that return another object of their receiver's kind (``cfg = _C.clone()``).
CONFIG_COPIES = frozenset({"clone", "copy"})
# Builtins whose results weights_only refuses.
REFUSED_BUILTINS: Dict[str, Tuple[str, str]] = {"frozenset": ("container", "a `frozenset`")}

# numpy.random: its samplers return Python numbers when called without a size and None when they seed or
# shuffle, so only these calls are known to give NumPy values (arrays, NumPy scalars).
NUMPY_RANDOM_VALUES: FrozenSet[str] = frozenset(
    {"numpy.random.get_state", "numpy.random.permutation", "numpy.random.choice"}
)
# numpy.random samplers and the position of their ``size`` argument: given a size (positionally or as
# ``size=``) they return arrays, without one Python numbers.
NUMPY_RANDOM_SIZE_AT: Dict[str, int] = {
    "numpy.random.rand": 0, "numpy.random.randn": 0, "numpy.random.random": 0, "numpy.random.random_sample": 0,
    "numpy.random.ranf": 0, "numpy.random.sample": 0, "numpy.random.standard_normal": 0,
    "numpy.random.poisson": 1, "numpy.random.exponential": 1,
    "numpy.random.uniform": 2, "numpy.random.normal": 2, "numpy.random.randint": 2, "numpy.random.binomial": 2,
    "numpy.random.beta": 2, "numpy.random.gamma": 2, "numpy.random.lognormal": 2, "numpy.random.laplace": 2,
}
# Other NumPy calls whose results are Python values or None.
NUMPY_PYTHON_RESULTS: FrozenSet[str] = frozenset(
    {
        "numpy.allclose", "numpy.array_equal", "numpy.array_equiv", "numpy.ndim", "numpy.shape", "numpy.size",
        "numpy.isscalar", "numpy.seterr", "numpy.geterr", "numpy.get_printoptions", "numpy.set_printoptions",
        "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "numpy.printoptions",
    }
)
# NumPy namespaces that compute no values (tests, typing).
_NUMPY_SILENT_PREFIXES = ("numpy.testing.", "numpy.typing.")
# How a message names what a NumPy call returns.
_NUMPY_SCALAR_TYPES: FrozenSet[str] = frozenset(
    {
        "numpy.float64", "numpy.float32", "numpy.float16", "numpy.double", "numpy.single", "numpy.half",
        "numpy.int64", "numpy.int32", "numpy.int16", "numpy.int8", "numpy.uint8", "numpy.uint16", "numpy.uint32",
        "numpy.uint64", "numpy.bool_", "numpy.str_", "numpy.longlong", "numpy.intc",
    }
)
_NUMPY_ARRAY_BUILDERS: FrozenSet[str] = frozenset(
    {
        "numpy.array", "numpy.asarray", "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.arange",
        "numpy.linspace", "numpy.concatenate", "numpy.stack", "numpy.vstack", "numpy.hstack", "numpy.load",
        "numpy.zeros_like", "numpy.ones_like", "numpy.stack", "numpy.random.get_state", "numpy.random.permutation",
        "numpy.eye", "numpy.frombuffer", "numpy.fromfile", "numpy.loadtxt", "numpy.genfromtxt",
    }
)
# Methods of a NumPy value that give Python values; every other one gives a NumPy value (``a.mean()``).
NUMPY_PYTHON_METHODS: FrozenSet[str] = frozenset({"item", "tolist", "tobytes", "tostring", "dump", "dumps", "tofile"})
# Calls that return a copy of their argument.
_COPIES: FrozenSet[str] = frozenset({"copy.deepcopy", "copy.copy"})
# Builtins that build a container of their argument's elements.
_CONTAINER_BUILDERS: FrozenSet[str] = frozenset({"list", "tuple", "set", "sorted"})
# Where whole-object classes come from when they are not the project's own.
MODULE_NAMESPACES = ("torch.nn.", "torch.optim.", "torchvision.models.", "timm.")
# torch.nn classes whose instances are tensors (allowed).
_TENSOR_CLASSES: FrozenSet[str] = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.parameter.Buffer", "torch.nn.Buffer"}
)
# Bases whose classes build plain dicts.
_DICT_BASES: FrozenSet[str] = frozenset({"typing.TypedDict", "typing_extensions.TypedDict"})
# Methods that add entries to the container they are called on (``ckpt.update(...)``, ``states.append(x)``).
_ADDERS: FrozenSet[str] = frozenset({"update", "setdefault", "append", "extend", "insert", "add"})


def is_module_class(qualified: Optional[str], is_project_class: bool) -> bool:
    """A class whose instances are whole objects to pickle: one of the project's, or a torch.nn / torch.optim
    class (``nn.Linear``, ``optim.lr_scheduler.StepLR``), a torchvision or timm model builder (not timm's
    helpers: ``timm.utils.get_state_dict`` returns a state dict)."""
    if is_project_class:
        return True
    if not qualified or qualified in _TENSOR_CLASSES or not qualified.startswith(MODULE_NAMESPACES):
        return False
    last = qualified.rsplit(".", 1)[-1]
    return last[:1].isupper() or qualified.startswith(("torchvision.models.", "timm.models.")) or qualified == "timm.create_model"


@dataclass(frozen=True)
class Refused:
    """A value weights_only refuses: its kind (a key of :data:`ADVICE`), how a message names it, the code
    that makes it."""

    kind: str
    label: str
    shown: str
    # The value holds it (a container, an object's fields) rather than being it.
    inside: bool = False

    def within(self) -> "Refused":
        return self if self.inside else Refused(self.kind, self.label, self.shown, True)

    def itself(self, kind: str) -> bool:
        """Whether the value is (not merely holds) a value of ``kind``."""
        return self.kind == kind and not self.inside

    @property
    def advice(self) -> str:
        return ADVICE[self.kind]


@dataclass(frozen=True)
class RefusedSave:
    """A ``torch.save`` whose file weights_only cannot load: the path key (checkpoints.ast_path_key's), what
    it holds, the function (``Class.method``, or None at the top level), the module and file holding it."""

    key: str
    value: Refused
    saver: Optional[str]
    module: str
    path: str
    # The path is a name local to the saving function (``def save(stats, path)``): the same name elsewhere is
    # another value, so only loads in that function read this file.
    local: bool = False

    def describe(self, shown_path: Optional[str] = None) -> str:
        """``NumPy arrays (np.random.get_state() in save_state)``; ``shown_path``: the saving file, named when
        it is not the loading one (``... in save_state, trainer/state.py``)."""
        where = "at the top level" if self.saver is None else f"in {self.saver}"
        if shown_path:
            where = f"{where}, {shown_path}"
        return f"{self.value.label} ({self.value.shown} {where})"


# -- statements and bindings of a scope -----------------------------------------------


def own_statements(scope: ast.AST) -> Iterator[ast.stmt]:
    """The statements of a function or module, nested blocks included, nested functions and classes not."""
    pending = list(getattr(scope, "body", ()))
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody", "handlers"):
            pending.extend(child for child in getattr(node, block, ()) or () if isinstance(child, (ast.stmt, ast.excepthandler)))


def header_nodes(statement: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a statement outside its nested blocks (a loop's target and iterable, not its body)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    pending: List[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        yield node
        for name, value in ast.iter_fields(node):
            if node is statement and name in ("body", "orelse", "finalbody", "handlers"):
                continue
            if isinstance(value, list):
                pending.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                pending.append(value)


def bound_names(function: ast.AST) -> Set[str]:
    """The names a function binds: its parameters and every assignment target."""
    names = {arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg)} if hasattr(function, "args") else set()
    for node in own_statements(function):
        for target in getattr(node, "targets", None) or [getattr(node, "target", None)]:
            if target is not None:
                names.update(inner.id for inner in ast.walk(target) if isinstance(inner, ast.Name))
    return names


def single_assignments(scope: ast.AST) -> Dict[str, ast.expr]:
    """The names ``scope`` binds exactly once by a plain assignment, with the value (a name bound by a loop,
    a ``with``, an augmented assignment or an unpacking too is left out: which value reaches a use is not known)."""
    built: Dict[str, List[Optional[ast.expr]]] = {}
    for node in own_statements(scope):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            built.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            built.setdefault(node.target.id, []).append(node.value)
        else:
            for target in _other_targets(node):
                for name in _target_names(target):
                    built.setdefault(name, []).append(None)
    return {name: values[0] for name, values in built.items() if len(values) == 1 and values[0] is not None}


def _target_names(target: ast.expr) -> Iterator[str]:
    """The names an assignment target binds (``a, *b``), not those it only reads (``d[k]``, ``o.x``)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)


def _other_targets(node: ast.stmt) -> List[ast.expr]:
    """The names a statement binds other than by ``name = value``: unpacking, loops, ``with ... as``, ``+=``."""
    if isinstance(node, ast.Assign):
        return [t for t in node.targets if not isinstance(t, ast.Name) or len(node.targets) > 1]
    if isinstance(node, ast.AnnAssign) and node.value is None:
        return []
    if isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


# -- the values of one module -------------------------------------------------------------

# ``(qualified, facts) -> (facts of the defining module, its name there)``: where a class or function is
# defined, in the file or the project (project_index.definition with the run's index).
Locate = Callable[[str, object], Optional[Tuple[object, str]]]


class Scope:
    """A function (or a module's top level) of one module, read for what its names hold.  ``facts`` is the
    module's project_index.ModuleFacts (imports, top-level definitions); ``owner`` the class of a method."""

    def __init__(self, facts, node: ast.AST, locate: Locate, owner: Optional[ast.ClassDef] = None) -> None:
        self.facts = facts
        self.node = node
        self.locate = locate
        self.owner = owner
        self.is_module = node is facts.tree
        own = single_assignments(node)
        if self.is_module:
            self.single, self.shadowed = own, set()
        else:
            module_single = _module_single(facts)
            self.shadowed = bound_names(node)
            self.single = {**{k: v for k, v in module_single.items() if k not in self.shadowed}, **own}
        arguments = getattr(node, "args", None)
        positional = (arguments.posonlyargs + arguments.args) if arguments is not None else []
        self.self_name = positional[0].arg if owner is not None and positional else None
        self._statements: Optional[List[ast.stmt]] = None

    @property
    def name(self) -> Optional[str]:
        if self.is_module:
            return None
        return f"{self.owner.name}.{self.node.name}" if self.owner is not None else self.node.name

    def statements(self) -> List[ast.stmt]:
        if self._statements is None:
            self._statements = sorted(own_statements(self.node), key=lambda statement: statement.lineno)
        return self._statements

    def reaches(self, name: str, value: ast.expr, before: int) -> bool:
        """Whether the single assignment of ``name`` to ``value`` is what ``name`` holds at line ``before``:
        it comes first, and does not rebind a parameter on one branch only (``if c: x = np.array(x)``)."""
        if self.is_module or name not in self.shadowed:
            return True
        if value.lineno >= before:
            return False
        if name in self.parameters():
            return any(isinstance(s, ast.Assign) and s.value is value for s in getattr(self.node, "body", ()))
        return True

    def parameters(self) -> Set[str]:
        arguments = getattr(self.node, "args", None)
        return {arg.arg for arg in ast.walk(arguments) if isinstance(arg, ast.arg)} if arguments is not None else set()

    def module_scope(self) -> "Scope":
        return self if self.is_module else _module_scope(self.facts, self.locate)

    def is_builtin(self, name: str) -> bool:
        facts = self.facts
        return (
            name in BUILTIN_NAMES
            and name not in self.shadowed
            and name not in self.single
            and name not in facts.imports
            and name not in facts.classes
            and name not in facts.functions
            and name not in facts.values
            and facts.imported(name) is None
        )

    def entries(self, name: str, before: int) -> Iterator[ast.expr]:
        """The values added to ``name`` before line ``before``: ``name[k] = v`` (nested keys too),
        ``name.update({...})`` / ``name.update(k=v)``, ``name.setdefault(k, v)``, ``name.append(v)``."""
        for statement in self.statements():
            if getattr(statement, "lineno", before) >= before:
                continue
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Subscript) and _root_name(target) == name:
                        yield statement.value
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                call = statement.value
                if isinstance(call.func, ast.Attribute) and call.func.attr in _ADDERS and _root_name(call.func.value, True) == name:
                    yield from call.args
                    yield from (keyword.value for keyword in call.keywords)


def _root_name(node: ast.expr, allow_plain: bool = False) -> Optional[str]:
    """``ckpt`` for ``ckpt["a"]["b"]`` (and for ``ckpt`` itself when ``allow_plain``)."""
    if not allow_plain:
        if not isinstance(node, ast.Subscript):
            return None
        node = node.value
    while isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _module_single(facts) -> Dict[str, ast.expr]:
    found = facts.memo.get("saved_values.module_single")
    if found is None:
        found = facts.memo["saved_values.module_single"] = single_assignments(facts.tree)
    return found  # type: ignore[return-value]


def _module_scope(facts, locate: Locate) -> Scope:
    found = facts.memo.get("saved_values.module_scope")
    if found is None:
        found = facts.memo["saved_values.module_scope"] = Scope(facts, facts.tree, locate)
    return found  # type: ignore[return-value]


def _shown(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - ast.unparse handles every parsed tree
        return "..."
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def refused_value(expr: ast.expr, scope: Scope, before: int, depth: int = 0) -> Optional[Refused]:
    """What ``expr`` (read in ``scope``, at line ``before``) holds that weights_only refuses; None when the
    code shows nothing of the kind (tensors, state dicts, Python values, or values the analysis cannot see)."""
    if depth > MAX_DEPTH:
        return None
    step = depth + 1
    if isinstance(expr, ast.Dict):
        return _inside(refused_value(value, scope, before, step) for value in expr.values)
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return _inside(
            refused_value(e.value if isinstance(e, ast.Starred) else e, scope, before, step) for e in expr.elts
        )
    if isinstance(expr, ast.Name):
        return _name(expr, scope, before, step)
    if isinstance(expr, ast.Attribute):
        if expr.attr == "__dict__":
            return _fields(expr.value, scope, step)
        return _attribute(expr, scope, step)
    if isinstance(expr, ast.Subscript):
        chosen = _element_of_literal(expr, scope, before, step)
        if chosen is not None:
            return chosen
        inner = refused_value(expr.value, scope, before, step)
        return Refused("numpy", _NUMPY_VALUES, _shown(expr)) if inner is not None and inner.itself("numpy") else None
    if isinstance(expr, ast.BinOp):
        sides = [refused_value(side, scope, before, step) for side in (expr.left, expr.right)]
        numpy = [side is not None and side.itself("numpy") for side in sides]
        numbers = [isinstance(side, ast.Constant) and isinstance(side.value, (int, float)) for side in (expr.left, expr.right)]
        if all(n or m for n, m in zip(numpy, numbers)) and any(numpy):
            return Refused("numpy", _NUMPY_VALUES, _shown(expr))
        return None
    if isinstance(expr, ast.Call):
        return _call(expr, scope, before, step)
    return None


_NUMPY_VALUES = "NumPy values"


def _element_of_literal(expr: ast.Subscript, scope: Scope, before: int, depth: int) -> Optional[Refused]:
    """An element picked from a dict, list or tuple written out (``{'FNN': Net(), 'CNN': CNet()}[name]``, also
    through a name bound once to it) whose every element is a value of one refused kind: that value itself."""
    container = expr.value
    if isinstance(container, ast.Name):
        bound = scope.single.get(container.id)
        if bound is None or not scope.reaches(container.id, bound, before):
            return None
        container = bound
    if isinstance(container, ast.Dict):
        elements = list(container.values)
    elif isinstance(container, (ast.List, ast.Tuple)):
        elements = list(container.elts)
    else:
        return None
    if not elements or any(element is None or isinstance(element, ast.Starred) for element in elements):
        return None
    found = [refused_value(element, scope, before, depth + 1) for element in elements]
    if any(value is None or value.inside for value in found) or len({value.kind for value in found}) != 1:
        return None
    labels = {value.label for value in found}
    label = found[0].label if len(labels) == 1 else _KIND_LABELS.get(found[0].kind)
    return Refused(found[0].kind, label, _shown(expr)) if label is not None else None


# How a message names a value of a kind when the code shows one of several (``{'a': Net(), 'b': CNet()}[k]``).
_KIND_LABELS = {"module": "a whole module or optimizer", "numpy": _NUMPY_VALUES}


def _first(found: Iterator[Optional[Refused]]) -> Optional[Refused]:
    return next((value for value in found if value is not None), None)


def _inside(found: Iterator[Optional[Refused]]) -> Optional[Refused]:
    """The first refused element of a container, as a value the container holds."""
    first = _first(found)
    return first.within() if first is not None else None


def _name(expr: ast.Name, scope: Scope, before: int, depth: int) -> Optional[Refused]:
    name = expr.id
    value = scope.single.get(name)
    if value is not None and not scope.reaches(name, value, before):
        return None
    if value is not None:
        owner = scope if name in scope.shadowed or scope.is_module else scope.module_scope()
        found = refused_value(value, owner, before if owner is scope else 10**9, depth)
        if found is not None:
            return found
    if name in scope.shadowed or scope.is_module or value is None:
        found = _inside(refused_value(entry, scope, before, depth) for entry in scope.entries(name, before))
        if found is not None:
            return found
    if value is None:
        found = _unpacked(name, scope, before, depth)
        if found is not None:
            return found
        found = _bound_before(name, scope, before, depth)
        if found is not None:
            return found
        origin = _rebound_to_itself(name, scope)
        if origin is not None and origin.lineno < before:
            found = refused_value(origin, scope, before, depth + 1)
            if found is not None:
                return found
    if value is None and name not in scope.shadowed and name != scope.self_name:
        return _global(name, scope)
    if value is None and name != scope.self_name:
        found = _passed_by_every_caller(name, scope, depth)
        if found is not None:
            return found
    if name != scope.self_name and _module_methods_called(name, scope, before):
        return Refused("module", "a whole module or optimizer", name)
    return None


def _bound_before(name: str, scope: Scope, before: int, depth: int) -> Optional[Refused]:
    """A name bound several times whose every plain assignment before line ``before`` holds a refused value, and
    that no loop around that line rebinds: ``args = parser.parse_args()`` ... ``torch.save(args, p)`` ...
    ``args = torch.load(p)`` saves the Namespace."""
    if scope.is_module:
        if name in scope.single:
            return None  # bound once: _name read it
    elif name not in scope.shadowed or name in scope.parameters():
        return None
    earlier, loops = [], []
    for statement in own_statements(scope.node):
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)) and statement.lineno <= before <= (statement.end_lineno or 0):
            loops.append(statement)
        elif isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
            if len(statement.targets) != 1:
                return None
            if statement.lineno < before:
                earlier.append(statement)
        elif any(name in _target_names(target) for target in _other_targets(statement)):
            return None  # bound by a loop, a with or an unpacking too: which value reaches is not shown
    rebound_in_loop = any(
        isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
        for loop in loops for statement in own_statements(loop)
    )
    if not earlier or rebound_in_loop:
        return None
    reaching = _reaching(earlier, scope.node, before)
    if not reaching:
        return None  # every earlier binding sits in the other arm: the name reaching the save is bound elsewhere
    found = [refused_value(statement.value, scope, statement.lineno, depth + 1) for statement in reaching]
    return found[-1] if all(value is not None for value in found) else None


def _blocks_holding(function: ast.AST, line: int) -> List[Tuple[List[ast.stmt], int, Optional[ast.If], str]]:
    """From the function's body inward, each block holding ``line``: (the block, the index of the statement in
    it that holds the line, the ``if`` the block belongs to, and which of its arms: body or orelse)."""
    chain: List[Tuple[List[ast.stmt], int, Optional[ast.If], str]] = []
    block, owner, arm = list(getattr(function, "body", ())), None, "body"
    while block:
        index = next(
            (i for i, s in enumerate(block) if s.lineno <= line <= (s.end_lineno or s.lineno)), None
        )
        if index is None:
            break
        chain.append((block, index, owner, arm))
        statement = block[index]
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        inner = None
        for name in ("body", "orelse", "finalbody"):
            candidate = getattr(statement, name, None) or []
            if any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in candidate):
                inner = (candidate, statement if isinstance(statement, ast.If) else None, name)
                break
        if inner is None:
            for handler in getattr(statement, "handlers", ()) or ():
                if any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in handler.body):
                    inner = (handler.body, None, "body")
                    break
        if inner is None:
            break
        block, owner, arm = list(inner[0]), inner[1], inner[2]
    return chain


def _reaching(earlier: List[ast.Assign], function: ast.AST, before: int) -> List[ast.Assign]:
    """The assignments among ``earlier`` that can reach line ``before``: one in the other arm of an ``if`` whose
    arm holds the line cannot (``if cached: x = torch.load(p) else: x = build(); torch.save(x, p)``), and a
    plain assignment in a block holding the line, before it, kills every earlier one."""
    chain = _blocks_holding(function, before)
    arms = {(id(owner), arm) for _, _, owner, arm in chain if owner is not None}
    owners = {id(owner): owner for _, _, owner, _ in chain if owner is not None}

    def in_other_arm(statement: ast.stmt) -> bool:
        for key, owner in owners.items():
            for arm in ("body", "orelse"):
                if (key, arm) in arms:
                    continue
                if any(s.lineno <= statement.lineno <= (s.end_lineno or s.lineno) for s in getattr(owner, arm)):
                    return True
        return False

    killing = [
        statement for statement in earlier
        if any(statement in block[:index] for block, index, _, _ in chain)
    ]
    start = max(statement.lineno for statement in killing) if killing else 0
    return [statement for statement in earlier if statement.lineno >= start and not in_other_arm(statement)]


# Methods only a module or an optimizer answers: a tensor, a dict, a list or a number has none of them.
_MODULE_ONLY_METHODS = frozenset({
    "state_dict", "load_state_dict", "parameters", "named_parameters", "modules", "named_modules", "children",
    "named_children", "zero_grad", "param_groups", "buffers", "named_buffers", "register_forward_hook",
})


def _module_methods_called(name: str, scope: Scope, before: int) -> bool:
    """The function calls a module's or optimizer's own method on ``name`` (``net.state_dict()``,
    ``model.parameters()``) by line ``before``, and binds ``name`` at most to itself (``net = net.train()``):
    what ``name`` holds answers them, so it is a module or an optimizer, whatever built it."""
    if scope.is_module:
        return False
    value = scope.single.get(name)
    if name in scope.shadowed and name not in scope.parameters() and value is None and _rebound_to_itself(name, scope) is None:
        return False  # bound on several paths: the evidence may be of another value
    if value is not None and not _returns_its_receiver(value, name):
        return False
    for node in ast.walk(scope.node):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MODULE_ONLY_METHODS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
            and getattr(node, "lineno", before + 1) <= before
        ):
            return True
    return False


def _rebound_to_itself(name: str, scope: Scope) -> Optional[ast.expr]:
    """The value of the one assignment of ``name`` in a function whose other bindings only give it back to itself
    (``model = Net(); model = model.to(device)``): what ``name`` holds is that value, moved; None otherwise."""
    if scope.is_module or name in scope.parameters():
        return None
    origins: List[ast.expr] = []
    for statement in own_statements(scope.node):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            if statement.targets[0].id == name and not _returns_its_receiver(statement.value, name):
                origins.append(statement.value)
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.target.id == name:
            if statement.value is None:
                continue
            if not _returns_its_receiver(statement.value, name):
                origins.append(statement.value)
        elif any(name in _target_names(target) for target in _other_targets(statement)):
            return None
    return origins[0] if len(origins) == 1 else None


def _returns_its_receiver(value: ast.expr, name: str) -> bool:
    """``name.train()``, ``name.to(device)``, ``name.cuda()``, and chains of them (``name.to(device).train()``):
    a module's methods that return the module itself."""
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("train", "eval", "to", "cuda", "cpu", "float", "half", "double", "requires_grad_")
    ):
        return False
    receiver = value.func.value
    return (isinstance(receiver, ast.Name) and receiver.id == name) or _returns_its_receiver(receiver, name)


def _passed_by_every_caller(name: str, scope: Scope, depth: int) -> Optional[Refused]:
    """A parameter the function never rebinds: a config by what the code shows of it (:func:`_config_parameter`),
    else, for a top-level function, what the calls of the function in the project pass there
    (``main(parser.parse_args())`` under ``__main__``), and for the ``__init__`` of a top-level class what its
    constructions pass (``Trainer(config=config)``, also of the project's subclasses that keep that ``__init__``),
    when those shown to hold a refused value all hold one kind. A call whose argument is not known
    (``main(self.args)`` from a job launcher) does not undo the others: the run through them saves what they pass."""
    function = scope.node
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or _rebinds(function, name):
        return None
    found = _config_parameter(function, name, scope.facts)
    if found is not None:
        return found
    if scope.owner is None and function in scope.facts.tree.body:
        passed_at_calls = arguments_passed(scope.facts, function, name)
    elif scope.owner is not None and function.name == "__init__" and scope.owner in scope.facts.tree.body:
        subclasses = _subclasses_keeping_init(scope.facts, scope.owner)
        passed_at_calls = constructor_arguments_passed(scope.facts, scope.owner, function, name, subclasses)
    else:
        return None
    if passed_at_calls is None:
        return None
    passed: List[Optional[Refused]] = []
    scopes_by_module: Dict[int, Dict[int, Scope]] = {}
    for facts, call, given in passed_at_calls:
        if any(given is default for default in (*function.args.defaults, *function.args.kw_defaults)):
            return None  # a call that leaves it to the default passes nothing of the caller's
        caller = _scope_holding(facts, call, scope.locate, scopes_by_module.setdefault(id(facts), {}))
        passed.append(refused_value(given, caller, getattr(call, "lineno", 10**9), depth + 1))
    known = [value for value in passed if value is not None]
    if not known or len({value.kind for value in known}) != 1:
        return None
    return known[0]


def omegaconf_name(qualified: Optional[str]) -> Optional[str]:
    """``omegaconf.DictConfig`` for the names omegaconf's submodules give it too (``omegaconf.dictconfig.DictConfig``)."""
    if qualified is None:
        return None
    for inner in ("omegaconf.omegaconf.", "omegaconf.dictconfig.", "omegaconf.listconfig."):
        if qualified.startswith(inner):
            return "omegaconf." + qualified[len(inner):]
    return qualified


def annotated_config_type(function: ast.FunctionDef, name: str, facts) -> Optional[str]:
    """The OmegaConf type (:data:`CONFIG_TYPES`) the parameter ``name`` of ``function`` is annotated with, if any."""
    arguments = function.args
    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
        if arg.arg == name and arg.annotation is not None:
            qualified = omegaconf_name(facts.qualify(arg.annotation))
            return qualified if qualified in CONFIG_TYPES else None
    return None


def _config_parameter(function: ast.FunctionDef, name: str, facts) -> Optional[Refused]:
    """A parameter the code shows to hold an OmegaConf config: annotated with its type (``cfg: DictConfig``), or
    the one Hydra passes to a ``@hydra.main`` function (its first)."""
    if annotated_config_type(function, name, facts) is not None:
        return Refused("config", "an OmegaConf config", name)
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    if every and every[0].arg == name and any(
        facts.qualify(d.func if isinstance(d, ast.Call) else d) in HYDRA_MAIN for d in function.decorator_list
    ):
        return Refused("config", "an OmegaConf config", name)
    return None


def _subclasses_keeping_init(facts, cls: ast.ClassDef) -> List[Tuple[object, ast.ClassDef]]:
    """The project's top-level classes derived from ``cls`` (directly or through others of them) that define no
    ``__init__`` of their own: constructing one runs ``cls.__init__``."""
    project = facts.project
    modules = [facts] if project is None else [
        found for found in (
            project.module_facts(module) for module in sorted(project.module_paths())
            if cls.name.encode("utf-8") in project.module_bytes(module)
        ) if found is not None
    ]
    wanted = {(facts.path, cls.name)}
    found: List[Tuple[object, ast.ClassDef]] = []
    grown = True
    while grown:
        grown = False
        for module in modules:
            for statement in module.tree.body:
                if not isinstance(statement, ast.ClassDef) or (module.path, statement.name) in wanted:
                    continue
                if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__" for s in statement.body):
                    continue
                if any(_names_class(module, base, wanted, modules) for base in statement.bases):
                    wanted.add((module.path, statement.name))
                    found.append((module, statement))
                    grown = True
    return found


def _names_class(module, base: ast.expr, wanted: Set[Tuple[str, str]], modules) -> bool:
    """Whether the base ``base`` written in ``module`` is one of the ``wanted`` (path, class name) classes."""
    if isinstance(base, ast.Name) and (module.path, base.id) in wanted and base.id in module.classes:
        return True
    qualified = module.qualify(base)
    return qualified is not None and any(
        qualified == f"{other.module}.{name}" for other in modules for path, name in wanted if other.path == path
    )


def refused_at_call(facts, call: ast.Call, value: ast.expr, locate: Locate) -> Optional[Refused]:
    """What ``value``, an argument of ``call`` in module ``facts``, holds that weights_only refuses (read in the
    top-level function holding the call, or the module's top level)."""
    return refused_value(value, _scope_holding(facts, call, locate, {}), getattr(call, "lineno", 10**9))


def _scope_holding(facts, call: ast.Call, locate: Locate, cache: Dict[int, "Scope"]) -> "Scope":
    """The scope of the top-level function of ``facts`` whose body holds ``call``, else the module's."""
    for statement in facts.tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.lineno <= call.lineno <= (statement.end_lineno or call.lineno):
            if id(statement) not in cache:
                cache[id(statement)] = Scope(facts, statement, locate)
            return cache[id(statement)]
    if 0 not in cache:
        cache[0] = Scope(facts, facts.tree, locate)
    return cache[0]


def _unpacked(name: str, scope: Scope, before: int, depth: int) -> Optional[Refused]:
    """``a, b = f(...)``, the only binding of ``name`` in the scope, before ``before``: the element of what the
    project function ``f`` returns at that position, when every ``return`` of it is a tuple of that length."""
    bindings = [
        statement for statement in scope.statements()
        if any(name in _target_names(t) for t in _other_targets(statement) + list(getattr(statement, "targets", []) or []))
    ]
    if len(bindings) != 1 or not isinstance(bindings[0], ast.Assign) or bindings[0].lineno >= before:
        return None
    statement = bindings[0]
    if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Tuple) or not isinstance(statement.value, ast.Call):
        return None
    elements = statement.targets[0].elts
    if any(isinstance(e, ast.Starred) for e in elements):
        return None
    position = next((i for i, e in enumerate(elements) if isinstance(e, ast.Name) and e.id == name), None)
    qualified = scope.facts.qualify(statement.value.func)
    found = scope.locate(qualified, scope.facts) if qualified and position is not None else None
    if found is None or found[1] not in found[0].functions:
        return None
    function = found[0].functions[found[1]]
    returns = [s for s in own_statements(function) if isinstance(s, ast.Return)]
    if not returns or any(not isinstance(r.value, ast.Tuple) or len(r.value.elts) != len(elements) for r in returns):
        return None
    inner = Scope(found[0], function, scope.locate)
    values = [refused_value(r.value.elts[position], inner, r.lineno + 1, depth + 1) for r in returns]  # type: ignore[union-attr]
    if any(v is None for v in values) or len({v.kind for v in values}) != 1:
        return None
    return values[0]


def _global(name: str, scope: Scope) -> Optional[Refused]:
    """A function or a class of the project named by ``name`` (the object itself, pickled by name)."""
    facts = scope.facts
    if name in facts.functions:
        return Refused("global", f"the function `{name}`", name)
    if name in facts.classes:
        return Refused("global", f"the class `{name}`", name)
    qualified = facts.imports.get(name)
    if qualified is None:
        return None
    found = scope.locate(qualified, facts)
    if found is None:
        return None
    defining, defined = found
    if defined in defining.functions:
        return Refused("global", f"the function `{name}`", name)
    if defined in defining.classes:
        return Refused("global", f"the class `{name}`", name)
    return None


def _attribute(expr: ast.Attribute, scope: Scope, depth: int) -> Optional[Refused]:
    """``self.x`` in a method: the value its class assigns to it, when it assigns it once."""
    if not (isinstance(expr.value, ast.Name) and expr.value.id == scope.self_name and scope.owner is not None):
        return None
    assigned = [
        (value, method) for attribute, value, method in _assigned_fields(scope.owner, scope.facts, scope.locate)
        if attribute == expr.attr
    ]
    if len(assigned) != 1:
        # ``self.fc = None`` until ``create_fc`` builds a layer, and ``self.fc = checkpoint["fc"]`` when a load
        # restores it: what the field holds when it is more than nothing is what the other assignment builds.
        assigned = [
            (value, method) for value, method in assigned
            if not (isinstance(value, ast.Constant) and value.value is None) and not _restored_by_a_load(value, method)
        ]
    if len(assigned) != 1:
        return None
    value, method = assigned[0]
    return refused_value(value, method, 10**9, depth)


def _restored_by_a_load(value: ast.expr, scope: Scope) -> bool:
    """``checkpoint["fc"]`` (or ``.fc``) where ``checkpoint`` is bound once in ``scope`` to a ``torch.load``: a
    value restored from a file, not a new one."""
    root = value
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if not isinstance(root, ast.Name):
        return False
    bound = scope.single.get(root.id)
    while isinstance(bound, (ast.Subscript, ast.Attribute)):
        bound = bound.value
    return isinstance(bound, ast.Call) and scope.facts.qualify(bound.func) in LOAD_FUNCTIONS


def _assigned_fields(cls: ast.ClassDef, facts, locate: Locate) -> List[Tuple[str, ast.expr, Scope]]:
    """``(attribute, value, method scope)`` for each ``self.attribute = value`` in the methods of ``cls``."""
    key = ("saved_values.fields", cls.name, cls.lineno)
    found = facts.memo.get(key)
    if found is None:
        found = []
        for method in cls.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            scope = Scope(facts, method, locate, owner=cls)
            if scope.self_name is None or any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in method.decorator_list
            ):
                continue
            for statement in scope.statements():
                if not isinstance(statement, ast.Assign):
                    continue
                for target in statement.targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == scope.self_name:
                        found.append((target.attr, statement.value, scope))
        facts.memo[key] = found
    return found  # type: ignore[return-value]


def _fields(owner: ast.expr, scope: Scope, depth: int) -> Optional[Refused]:
    """``obj.__dict__`` / ``vars(obj)``: a field its class assigns that weights_only refuses."""
    found = _class_of_instance(owner, scope, depth)
    if found is None:
        return None
    facts, cls = found
    for attribute, value, method in _assigned_fields(cls, facts, scope.locate):
        inner = refused_value(value, method, 10**9, depth + 1)
        if inner is not None:
            return Refused(inner.kind, inner.label, f"self.{attribute} = {inner.shown}", True)
    return None


def _class_of_instance(expr: ast.expr, scope: Scope, depth: int) -> Optional[Tuple[object, ast.ClassDef]]:
    """The class (its module's facts and node) whose instance ``expr`` is: ``self`` in a method, a name bound
    once to ``ProjectClass(...)``."""
    if isinstance(expr, ast.Name) and expr.id == scope.self_name and scope.owner is not None:
        return scope.facts, scope.owner
    if isinstance(expr, ast.Name) and depth <= MAX_DEPTH:
        value = scope.single.get(expr.id)
        if value is not None:
            owner = scope if expr.id in scope.shadowed or scope.is_module else scope.module_scope()
            return _class_of_instance(value, owner, depth + 1)
    if isinstance(expr, ast.Call):
        qualified = scope.facts.qualify(expr.func)
        found = scope.locate(qualified, scope.facts) if qualified else None
        if found is not None and found[1] in found[0].class_nodes:
            return found[0], found[0].class_nodes[found[1]]
    return None


def _call(expr: ast.Call, scope: Scope, before: int, depth: int) -> Optional[Refused]:
    func = expr.func
    facts = scope.facts
    if isinstance(func, ast.Attribute):
        method = func.attr
        if method == "numpy" and not expr.args:
            return Refused("numpy", "NumPy arrays", _shown(expr))
        if method == "parse_args":
            return Refused("namespace", "an `argparse.Namespace`", _shown(expr))
        if method in CONFIG_COPIES and not expr.args:
            inner = refused_value(func.value, scope, before, depth)
            if inner is not None and (inner.itself("config") or inner.itself("namespace")):
                return inner
        if method in MODULE_MOVES:
            inner = refused_value(func.value, scope, before, depth)
            if inner is not None and (inner.itself("module") or inner.itself("object")):
                return inner
        elif method not in NUMPY_PYTHON_METHODS:
            # A method of a NumPy value gives a NumPy value (``a.mean()``, ``a.astype(...)``).
            inner = refused_value(func.value, scope, before, depth)
            if inner is not None and inner.itself("numpy"):
                return Refused("numpy", _NUMPY_VALUES, _shown(expr))
    if isinstance(func, ast.Name) and scope.is_builtin(func.id):
        builtin = func.id
        if builtin in REFUSED_BUILTINS:
            kind, label = REFUSED_BUILTINS[builtin]
            return Refused(kind, label, _shown(expr))
        if builtin == "vars" and len(expr.args) == 1:
            return _fields(expr.args[0], scope, depth)
        if builtin == "dict":
            return _inside(
                refused_value(value, scope, before, depth)
                for value in list(expr.args) + [keyword.value for keyword in expr.keywords]
            )
        if builtin in _CONTAINER_BUILDERS and len(expr.args) == 1:
            inner = refused_value(expr.args[0], scope, before, depth)
            return inner.within() if inner is not None else None
        return None
    qualified = facts.qualify(func)
    if not qualified:
        return None
    if qualified in _COPIES and expr.args:
        return refused_value(expr.args[0], scope, before, depth)
    if qualified in REFUSED_CALLS:
        kind, label = REFUSED_CALLS[qualified]
        return Refused(kind, label, _shown(expr))
    if qualified.startswith("numpy."):
        return _numpy(qualified, expr)
    if qualified.startswith(MODULE_NAMESPACES):
        if is_module_class(qualified, False):
            return Refused("module", f"a whole `{ast_dotted_name(func) or qualified}`", _shown(expr))
        return None
    found = scope.locate(qualified, facts) if not qualified.startswith("torch.") else None
    if found is not None and found[1] in found[0].functions:
        return _returned(found[0], found[0].functions[found[1]], scope.locate, depth)
    if found is not None and found[1] in found[0].class_nodes:
        family = _class_family(found[0], found[0].class_nodes[found[1]], scope.locate, 0)
        shown_name = ast_dotted_name(func) or found[1]
        if family == "module":
            return Refused("module", f"a whole `{shown_name}`", _shown(expr))
        if family == "object":
            return Refused("object", f"an object of the project's class `{shown_name}`", _shown(expr))
    return None


def _returned(facts, function: ast.AST, locate: Locate, depth: int) -> Optional[Refused]:
    """What a project function returns that weights_only refuses, when every ``return`` of it says the same kind
    (``def parse_option(): ...; return parser.parse_args()``)."""
    if depth > MAX_DEPTH:
        return None
    returns = [s for s in own_statements(function) if isinstance(s, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return None
    scope = Scope(facts, function, locate)
    values = [refused_value(r.value, scope, r.lineno + 1, depth + 1) for r in returns]
    if any(v is None for v in values) or len({v.kind for v in values}) != 1:
        return None
    return values[0]


def _numpy(qualified: str, expr: ast.Call) -> Optional[Refused]:
    if qualified in NUMPY_PYTHON_RESULTS or qualified.startswith(_NUMPY_SILENT_PREFIXES):
        return None
    if qualified in NUMPY_RANDOM_SIZE_AT:
        size = next((k.value for k in expr.keywords if k.arg == "size"), None)
        position = NUMPY_RANDOM_SIZE_AT[qualified]
        if size is None and len(expr.args) > position:
            size = expr.args[position]
        if size is None or (isinstance(size, ast.Constant) and size.value is None):
            return None
        return Refused("numpy", "NumPy arrays", _shown(expr))
    if qualified.startswith("numpy.random.") and qualified not in NUMPY_RANDOM_VALUES:
        return None
    if qualified in _NUMPY_SCALAR_TYPES:
        label = "a NumPy scalar"
    elif qualified in _NUMPY_ARRAY_BUILDERS:
        label = "NumPy arrays"
    else:
        label = _NUMPY_VALUES
    return Refused("numpy", label, _shown(expr))


def _class_family(facts, cls: ast.ClassDef, locate: Locate, depth: int) -> Optional[str]:
    """``module`` for a class deriving (in the project) from a torch.nn / torch.optim class, ``dict`` for a
    ``TypedDict`` (its instances are plain dicts), ``object`` for any other class of the project."""
    for base in cls.bases:
        qualified = facts.qualify(base)
        if not qualified:
            continue
        if qualified in _DICT_BASES:
            return "dict"
        if qualified.startswith(MODULE_NAMESPACES):
            return "module"
        found = locate(qualified, facts) if depth < MAX_DEPTH else None
        if found is not None and found[1] in found[0].class_nodes:
            family = _class_family(found[0], found[0].class_nodes[found[1]], locate, depth + 1)
            if family != "object":
                return family
    return "object"


# -- the saves of one module ----------------------------------------------------------------


def _calls_by_scope(facts, locate: Locate) -> Iterator[Tuple[ast.Call, Callable[[], Scope]]]:
    """Every call of a module (outside nested blocks' own scopes), with the scope it is read in, built on demand."""
    methods: Dict[int, ast.ClassDef] = {}
    scopes: List[ast.AST] = []
    for node in every_node(facts.tree):
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[id(member)] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            scopes.append(node)
    for node in scopes:
        built: List[Scope] = []

        def scope_of(node: ast.AST = node, built: List[Scope] = built) -> Scope:
            if not built:
                built.append(_module_scope(facts, locate) if node is facts.tree else Scope(facts, node, locate, methods.get(id(node))))
            return built[0]

        for statement in own_statements(node):
            for call in header_nodes(statement):
                if isinstance(call, ast.Call):
                    yield call, scope_of


def refused_saves(facts, locate: Locate) -> List[RefusedSave]:
    """Each ``torch.save(obj, path)`` of a module whose ``obj`` holds a value weights_only refuses, with the
    path's key (checkpoints.ast_path_key's: a literal's text, a dotted name otherwise)."""
    found: List[RefusedSave] = []
    for call, scope_of in _calls_by_scope(facts, locate):
        if len(call.args) < 2 or facts.qualify(call.func) not in SAVE_FUNCTIONS:
            continue
        scope = scope_of()
        key = ast_path_key(call.args[1], scope.single, facts.values)
        if key is None:
            continue
        path = call.args[1]
        if isinstance(path, ast.Name) and scope.is_module and path.id not in scope.single:
            continue  # a top-level name bound several times (``with open(a) as f`` ... ``with open(b) as f``)
        if key.startswith(COMPOSITE_KEY_PREFIX):
            # A built path names one file only within its function, and only while none of its names is reassigned.
            names = composite_path_names(path) or frozenset()
            if scope.is_module or names & (scope.shadowed - scope.parameters()):
                continue
        value = refused_value(call.args[0], scope, call.lineno)
        if value is not None:
            local = (
                isinstance(path, ast.Name) and path.id in scope.shadowed and not key.startswith(("'", '"'))
            ) or key.startswith(COMPOSITE_KEY_PREFIX)
            found.append(RefusedSave(key, value, scope.name, facts.module, facts.path, local))
    found.sort(key=lambda save: (save.key, save.saver or ""))
    return found


@dataclass(frozen=True)
class NamedSave:
    """A ``torch.save`` whose path ends in a file name the code spells whole (checkpoints.ast_file_name):
    that name, what the saved value holds that weights_only refuses (None: nothing it can see), the saving
    function and the file."""

    file_name: str
    value: Optional[Refused]
    saver: Optional[str]
    path: str

    def describe(self, shown_path: Optional[str] = None) -> str:
        where = "at the top level" if self.saver is None else f"in {self.saver}"
        if shown_path:
            where = f"{where}, {shown_path}"
        assert self.value is not None
        return f"{self.value.label} ({self.value.shown} {where}, saved as {self.file_name})"


def saves_by_file_name(facts, locate: Locate) -> List[NamedSave]:
    """Every ``torch.save(obj, path)`` of a module whose path ends in a file name written whole, with what
    ``obj`` holds: another module that loads a path ending in the same name reads one of these files."""
    found: List[NamedSave] = []
    for call, scope_of in _calls_by_scope(facts, locate):
        if len(call.args) < 2 or facts.qualify(call.func) not in SAVE_FUNCTIONS:
            continue
        scope = scope_of()
        name = ast_file_name(call.args[1], facts.qualify, scope.single, facts.values)
        if name is not None:
            found.append(NamedSave(name, refused_value(call.args[0], scope, call.lineno), scope.name, facts.path))
    return found


# -- the layout of the dicts a module saves ----------------------------------------------------------


@dataclass(frozen=True)
class SavedLayout:
    """The string keys of a dict a ``torch.save`` writes (directly, or through a helper of the project that
    saves what it is given: ``save_checkpoint({...}, path)``), and what in it weights_only refuses (None:
    nothing the analysis can show).  A load that reads these keys reads a file of this layout."""

    keys: FrozenSet[str]
    refused: Optional[Refused]
    saver: Optional[str]
    module: str
    path: str

    def describe(self, shown_path: Optional[str] = None) -> str:
        """``NumPy values (np.mean(accs), in the dict main saves with the keys read here, in train.py)``."""
        who = "the top level" if self.saver is None else self.saver
        where = f", in {shown_path}" if shown_path else ""
        assert self.refused is not None
        return f"{self.refused.label} ({self.refused.shown}, in the dict {who} saves with the keys read here{where})"


def saving_functions(facts) -> FrozenSet[str]:
    """The names of a module's top-level functions that ``torch.save`` a parameter as they receive it."""
    return frozenset(name for name in facts.functions if _saving_parameter(f"{facts.module}.{name}", facts, lambda q, f: (f, name)) is not None)


def saved_layouts(facts, locate: Locate, savers: Optional[FrozenSet[str]] = None) -> List[SavedLayout]:
    """Each dict with literal keys that a module saves with ``torch.save`` (whatever the path), or hands to a
    project function that saves the parameter it receives it as (``savers``: the names such functions may
    have, when known: other calls are not looked up)."""
    key = ("saved_values.layouts", savers)
    found = facts.memo.get(key)
    if found is not None:
        return found  # type: ignore[return-value]
    found = []
    for call, scope_of in _calls_by_scope(facts, locate):
        if not call.args or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
        if savers is not None and callee not in savers and callee != "save":
            continue
        qualified = facts.qualify(call.func)
        if qualified in SAVE_FUNCTIONS:
            saved = call.args[0]
        else:
            position = _saving_parameter(qualified, facts, locate) if qualified else None
            if position is None or position >= len(call.args):
                continue
            saved = call.args[position]
        scope = scope_of()
        keys = _dict_keys(saved, scope, call.lineno, 0)
        if keys:
            found.append(SavedLayout(keys, refused_value(saved, scope, call.lineno), scope.name, facts.module, facts.path))
    facts.memo[key] = found
    return found


def _saving_parameter(qualified: str, facts, locate: Locate) -> Optional[int]:
    """The position of the parameter a project function passes, unchanged, as what ``torch.save`` writes."""
    located = locate(qualified, facts)
    if located is None:
        return None
    defining, name = located
    function = defining.functions.get(name)
    if function is None:
        return None
    key = ("saved_values.saving_parameter", name)
    if key not in defining.memo:
        positional = [arg.arg for arg in function.args.posonlyargs + function.args.args]
        rebound = bound_names(function) - set(positional)
        position = None
        star = function.args.vararg.arg if function.args.vararg is not None else None
        for statement in own_statements(function):
            for call in header_nodes(statement):
                if not (isinstance(call, ast.Call) and call.args and defining.qualify(call.func) in SAVE_FUNCTIONS):
                    continue
                first = call.args[0]
                if (
                    isinstance(first, ast.Name) and first.id in positional
                    and first.id not in rebound and not _reassigned(function, first.id)
                ):
                    position = positional.index(first.id)
                elif (
                    isinstance(first, ast.Starred) and isinstance(first.value, ast.Name) and first.value.id == star
                    and not positional and not _reassigned(function, star)
                ):
                    position = 0  # ``def save_on_master(*args, **kwargs): torch.save(*args, **kwargs)``
        defining.memo[key] = position
    return defining.memo[key]  # type: ignore[return-value]


def _rebinds(function: ast.AST, name: str) -> bool:
    """Whether the function binds ``name`` again (``args.lr = ...`` sets an attribute of the same object: no)."""
    for statement in own_statements(function):
        for target in getattr(statement, "targets", None) or [getattr(statement, "target", None)]:
            pending = [target] if target is not None else []
            while pending:
                node = pending.pop()
                if isinstance(node, ast.Name) and node.id == name:
                    return True
                if isinstance(node, (ast.Tuple, ast.List)):
                    pending.extend(node.elts)
                elif isinstance(node, ast.Starred):
                    pending.append(node.value)
    return False


def _reassigned(function: ast.AST, name: str) -> bool:
    """Whether the function assigns ``name`` (a parameter) anywhere: what it saves may then be another value."""
    for statement in own_statements(function):
        for target in getattr(statement, "targets", None) or [getattr(statement, "target", None)]:
            if target is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return True
    return False


def _dict_keys(expr: ast.expr, scope: Scope, before: int, depth: int) -> Optional[FrozenSet[str]]:
    """The string keys of the dict ``expr`` holds at line ``before``: a display with literal keys, ``dict(k=v)``,
    a name bound once to one of these, with the ``name["k"] = v`` entries added before; None when any key is
    not a literal (``**extra``) or the value is not seen to be such a dict."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, ast.Dict):
        if any(key is None or not (isinstance(key, ast.Constant) and isinstance(key.value, str)) for key in expr.keys):
            return None
        return frozenset(key.value for key in expr.keys)  # type: ignore[union-attr]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict" and scope.is_builtin("dict"):
        if expr.args or any(keyword.arg is None for keyword in expr.keywords):
            return None
        return frozenset(keyword.arg for keyword in expr.keywords)  # type: ignore[misc]
    if isinstance(expr, ast.Name):
        value = scope.single.get(expr.id)
        if value is None or not scope.reaches(expr.id, value, before):
            return None
        keys = _dict_keys(value, scope, before, depth + 1)
        if keys is None:
            return None
        added = set()
        for statement in scope.statements():
            if getattr(statement, "lineno", before) >= before or not isinstance(statement, ast.Assign):
                continue
            for target in statement.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id == expr.id:
                    if not (isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)):
                        return None
                    added.add(target.slice.value)
        return keys | frozenset(added)
    return None
