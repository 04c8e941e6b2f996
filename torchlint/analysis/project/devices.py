"""Devices: where a program's tensors live, and whether a checkpoint can meet a machine without its GPU.

``torch.load`` without ``map_location`` fails only when the file holds CUDA tensors and the loading machine
lacks the GPU they were saved from. What the code shows about that (TL401 asks these questions):

- **The program chooses its device at run time** (it calls ``torch.cuda.is_available()`` or
  ``device_count()``, names the ``"cpu"`` device, passes ``map_location`` somewhere, or offers a CPU
  run with a command-line option such as ``--no-cuda``; not a ``store_true`` flag whose default is already
  True, which no command line turns off): it runs on machines without the GPU its
  checkpoints were saved from. A load is a sure hazard.
- **The program requires a GPU** (it calls ``.cuda()`` or names a ``"cuda"`` device, with no such choice,
  or the loading file builds a model with ``Net(...).cuda()`` unconditionally, or one of its functions (or its
  script's own top level) moves what it makes to the GPU outside any ``if``: ``images, labels = images.cuda(),
  labels.cuda()`` in the batch loop): it runs only where a GPU is, and a checkpoint saved from ``cuda:0`` loads there; only one saved from
  another index fails.
- **Nothing in the program mentions CUDA**: the file comes from elsewhere (a released checkpoint), and its
  device is unknown; a load is a hazard, unless the project writes that path from what it computes on the
  CPU.
- **The value is used as CPU data right away** (``torch.load(p).numpy()``): the author knows what it holds.
- **The run that saved is the run that loads**: the loading function wrote the path just before, fills it
  as a cache, or is called only from the function that wrote it; a script's top level saves and then
  loads the path.
- **The checkpoint holds CPU tensors**: every ``torch.save`` of the loading class (or file) writes what
  ``.cpu()`` returned, or every save of the class to the same file name writes a CPU copy or an attribute the class
  only builds on the CPU (``self.log = torch.Tensor()``, ``torch.cat((self.log, torch.zeros(1, n)))``), or the
  project module that writes the path never puts anything on a GPU.
- **The author handles the device already**: the load sits in one branch of an ``if`` whose other branch
  loads with ``map_location``.

A *program* is what runs in one process with the loading module: the modules that import it (directly or
through others) and everything they import (``ProjectIndex.program_of``); a repository of independent
scripts holds several. Its facts are read with ``ast`` from code, never from comments, docstrings or
names, once per module.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.flow.callers import arguments_at_calls, every_call_site
from torchlint.analysis.flow.gradflow import read_names
from torchlint.analysis.model.ast_names import ast_dotted_name, every_node
from torchlint.analysis.model.bindings import all_params, bound_names
from torchlint.analysis.model.calls import argument, keyword_arg
from torchlint.analysis.model.checkpoints import LOAD_FUNCTIONS, SAVE_FUNCTIONS
from torchlint.analysis.model.dataflow import site_of
from torchlint.analysis.model.project_index import facts_of_tree
from torchlint.analysis.model.returns import called_function
from torchlint.analysis.model.scope import is_self_attribute, self_attribute_assignments
from torchlint.analysis.values.domain import structurally_equal
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

CHOSEN, GPU_REQUIRED, UNSEEN = "chosen", "gpu-required", "unseen"

# Conversions that work only on CPU tensors, or leave tensors altogether.
_CPU_ONLY_USES = frozenset({"numpy", "tolist"})
# Calls that ask at run time whether a GPU is there.
_DEVICE_QUERIES = frozenset({"torch.cuda.is_available", "torch.cuda.device_count", "torch.backends.mps.is_available"})
# Command-line options that offer a run on the CPU (``parser.add_argument("--no-cuda", ...)``).
_CPU_OPTIONS = frozenset({
    "--no-cuda", "--no_cuda", "--nocuda", "--cpu", "--use-cuda", "--use_cuda", "--cuda", "--use-gpu", "--use_gpu",
    "--device", "--gpu", "--gpus", "--no-gpu", "--no_gpu",
})
# Bytes without which a module holds none of the facts below (a cheap test before its tree is read).
_DEVICE_WORDS = (b"cuda", b"cpu", b"map_location", b"device", b"gpu", b"is_available")


@dataclass(frozen=True)
class DeviceFacts:
    chooses: bool = False  # picks its device at run time, or offers a CPU run
    uses_cuda: bool = False  # puts tensors or modules on a GPU
    built_on_gpu: bool = False  # builds an object with ``Cls(...).cuda()`` on no condition
    # moves a value to the GPU in a function's body, outside any ``if``/``try`` (``x, y = x.cuda(), y.cuda()``
    # in the batch loop): the function cannot run without a GPU
    moves_in_body: bool = False


NO_DEVICE_FACTS = DeviceFacts()


def device_facts(tree: ast.Module, qualify: Callable[[ast.expr], Optional[str]]) -> DeviceFacts:
    """What a module's code says about devices (``qualify``: its import-resolved name of an expression)."""
    chooses = uses = built = False
    for node in every_node(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if qualify(func) in _DEVICE_QUERIES:
                chooses = True
            if any(keyword.arg == "map_location" and not _sends_to_cuda(keyword.value, qualify) for keyword in node.keywords):
                chooses = True  # a load placed by the program (map_location="cuda" places it on a GPU: no choice)
            if isinstance(func, ast.Attribute) and func.attr == "add_argument" and not _always_on(node):
                chooses = chooses or any(
                    isinstance(arg, ast.Constant) and arg.value in _CPU_OPTIONS for arg in node.args
                )
            if isinstance(func, ast.Attribute) and func.attr == "cuda":
                uses = True
        for named in _device_names(node, qualify):
            chooses = chooses or named == "cpu"
            uses = uses or named == "cuda"
    for statement in _unconditional_statements(tree):
        if isinstance(statement, ast.Assign) and _built_on_gpu(statement.value, qualify):
            built = True
    # A script's own top level that moves something to the GPU on no condition cannot run without one.
    for statement in _script_statements(tree):
        if _moves_everything_to_gpu(statement):
            built = True
    moved = any(_moves_everything_to_gpu(statement) for statement in _function_statements(tree))
    return DeviceFacts(chooses, uses or built or moved, built, moved)


def _function_statements(tree: ast.Module) -> Iterable[ast.stmt]:
    """The statements of the module's functions (methods too) that no ``if``/``try``/``while`` makes optional; a
    ``for`` over batches runs its body."""
    pending: List[Tuple[ast.stmt, bool]] = [(statement, False) for statement in tree.body]
    while pending:
        statement, in_function = pending.pop()
        if in_function:
            yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            pending.extend((inner, True) for inner in statement.body)
        elif isinstance(statement, ast.ClassDef):
            pending.extend((inner, False) for inner in statement.body)
        elif isinstance(statement, (ast.With, ast.For)) and in_function:
            pending.extend((inner, True) for inner in statement.body)


def _moves_everything_to_gpu(statement: ast.stmt) -> bool:
    """``x = x.cuda()``, ``x, y = x.cuda(), y.cuda()``, ``model.cuda()``: every value the statement makes goes to
    the GPU."""
    if isinstance(statement, ast.Expr):
        return _moves_to_gpu(statement.value)
    if isinstance(statement, ast.Assign):
        value = statement.value
        if isinstance(value, ast.Tuple):
            return bool(value.elts) and all(_moves_to_gpu(element) for element in value.elts)
        return _moves_to_gpu(value)
    return False


def is_cuda_device_text(text: object) -> bool:
    """``"cuda"`` or ``"cuda:N"``: a device string that names a GPU."""
    return isinstance(text, str) and text.split(":")[0] == "cuda"


def _sends_to_cuda(value: ast.expr, qualify: Callable[[ast.expr], Optional[str]]) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``."""
    if isinstance(value, ast.Call) and qualify(value.func) == "torch.device" and value.args:
        value = value.args[0]
    return isinstance(value, ast.Constant) and is_cuda_device_text(value.value)


def _always_on(call: ast.Call) -> bool:
    """``add_argument("--cuda", action="store_true", default=True)``: a flag no command line can turn off, so it
    offers no CPU run."""
    keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
    action, default = keywords.get("action"), keywords.get("default")
    return (
        isinstance(action, ast.Constant) and action.value == "store_true"
        and isinstance(default, ast.Constant) and default.value is True
    )


def _moves_to_gpu(value: ast.expr) -> bool:
    """``x.cuda()`` or ``x.to("cuda")``: raises where no GPU is."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    if value.func.attr == "cuda":
        return True
    if value.func.attr == "to" and value.args:
        first = value.args[0]
        return isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.split(":")[0] == "cuda"
    return False


def _script_statements(tree: ast.Module) -> Iterable[ast.stmt]:
    """The statements a script's top level runs on no condition: the module's own, those of its ``with``
    blocks and of its ``if __name__ == "__main__":`` block; a ``for`` over batches runs its body (as in a
    function: :func:`_function_statements`)."""
    pending: List[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        yield statement
        if isinstance(statement, (ast.With, ast.For)) or (isinstance(statement, ast.If) and _is_main_guard(statement.test)):
            pending.extend(statement.body)


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and len(test.comparators) == 1 and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _device_names(node: ast.AST, qualify: Callable[[ast.expr], Optional[str]]) -> Iterable[str]:
    """The device types (``"cuda"``, ``"cpu"``) that ``node`` names where a device goes: the argument of
    ``torch.device(...)`` and ``x.to(...)``, a ``device=``/``map_location=`` keyword, a value assigned or
    given as a default (``device = "cuda" if ... else "cpu"``, ``def f(device="cuda")``)."""
    places: List[ast.expr] = []
    if isinstance(node, ast.Call):
        if qualify(node.func) == "torch.device" or (isinstance(node.func, ast.Attribute) and node.func.attr == "to"):
            places += node.args[:1]
        places += [keyword.value for keyword in node.keywords if keyword.arg in ("device", "map_location", "default")]
    elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        places.append(node.value)
    elif isinstance(node, ast.arguments):
        places += [default for default in node.defaults + node.kw_defaults if default is not None]
    while places:
        place = places.pop()
        if isinstance(place, ast.IfExp):
            places += [place.body, place.orelse]
        elif isinstance(place, ast.Constant) and isinstance(place.value, str):
            yield place.value.split(":")[0]


def _built_on_gpu(value: ast.expr, qualify: Callable[[ast.expr], Optional[str]]) -> bool:
    """``Net(...).cuda()``: an object built and moved to the GPU in one expression."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "cuda"):
        return False
    built = value.func.value
    if not isinstance(built, ast.Call):
        return False
    name = ast_dotted_name(built.func) or ""
    return name.rsplit(".", 1)[-1][:1].isupper()


def _unconditional_statements(tree: ast.Module) -> Iterable[ast.stmt]:
    """The statements of the module and of its functions' bodies that no ``if``/``try``/loop makes optional."""
    pending: List[ast.stmt] = list(tree.body)
    while pending:
        statement = pending.pop()
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With)):
            pending.extend(statement.body)


def module_device_facts(context: "FileContext", module: str) -> DeviceFacts:
    """The device facts of a project module (read once per run)."""
    project = context.project
    if project is None:
        return NO_DEVICE_FACTS

    def compute() -> DeviceFacts:
        data = project.module_bytes(module)
        if not any(word in data for word in _DEVICE_WORDS):
            return NO_DEVICE_FACTS
        facts = project.module_facts(module)
        return NO_DEVICE_FACTS if facts is None else device_facts(facts.tree, facts.qualify)

    return project.fact(f"devices:{module}", compute)


def own_device_facts(context: "FileContext") -> DeviceFacts:
    def compute(_) -> DeviceFacts:
        try:
            tree = context.ast_tree if context.ast_tree is not None else ast.parse(context.source)
        except (SyntaxError, ValueError, RecursionError):
            return NO_DEVICE_FACTS
        return device_facts(tree, facts_of_tree(tree, context.path).qualify)

    return context.memoized("devices.own", context.module, compute)


def device_policy(context: "FileContext") -> str:
    """:data:`CHOSEN`, :data:`GPU_REQUIRED` or :data:`UNSEEN` for the program of ``context`` (the file and its
    own imports when it is no module of the run's project)."""
    own = own_device_facts(context)
    # The loading file's own evidence first: its model built on the GPU, or its own choice of device.
    if own.built_on_gpu or own.moves_in_body:
        return GPU_REQUIRED
    if own.chooses:
        return CHOSEN
    project = context.project
    if project is None:
        return GPU_REQUIRED if own.uses_cuda else UNSEEN
    module = project.module_of(context.path)
    if module is None:
        modules = sorted(_imported_project_modules(context))
    else:
        modules = sorted(project.program_of(module))
    uses_cuda = own.uses_cuda
    for name in modules:  # read one module at a time: the first that chooses its device answers
        fact = module_device_facts(context, name)
        if fact.chooses:
            return CHOSEN
        uses_cuda = uses_cuda or fact.uses_cuda
    return GPU_REQUIRED if uses_cuda else UNSEEN


def _imported_project_modules(context: "FileContext") -> Iterable[str]:
    """For a file outside the project's modules (a notebook): the project modules it imports and theirs."""
    project = context.project
    seen: set = set()
    pending = []
    for bound in context.imports.bindings.values():
        parts = (bound or "").split(".")
        pending += [".".join(parts[:end]) for end in range(1, len(parts) + 1) if project.is_module(".".join(parts[:end]))]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(project.imports_of(name))
    return seen


# -- what one load shows ---------------------------------------------------------------------------


def used_as_cpu_data(ancestors: Sequence[cst.CSTNode], call: cst.Call) -> bool:
    """``torch.load(p).numpy()`` / ``.tolist()``: only CPU tensors (or none) convert there."""
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.Attribute) or parent.value is not call or len(ancestors) < 2:
        return False
    outer = ancestors[-2]
    return isinstance(outer, cst.Call) and outer.func is parent and parent.attr.value in _CPU_ONLY_USES


def other_branch_maps_location(context: "FileContext", call: cst.Call) -> bool:
    """The load is in one branch of an ``if`` whose other branch loads with ``map_location``
    (``if torch.cuda.is_available(): load(p) else: load(p, map_location="cpu")``)."""
    ancestors = context.ancestors
    for index in range(len(ancestors) - 1, 0, -1):
        node, child = ancestors[index - 1], ancestors[index]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False
        if not isinstance(node, cst.If):
            continue
        other: Optional[cst.CSTNode] = None
        if child is node.body:
            other = node.orelse
        elif child is node.orelse:
            other = node.body
        if other is not None and _loads_with_map_location(context, other):
            return True
    return False


def _loads_with_map_location(context: "FileContext", scope: cst.CSTNode) -> bool:
    found = []

    class _Loads(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if context.qualified_name(node.func) in LOAD_FUNCTIONS and (
                keyword_arg(node, "map_location") is not None or len([a for a in node.args if a.keyword is None]) >= 2
            ):
                found.append(node)

    visit(scope, _Loads())
    return bool(found)


def opened_path(context: "FileContext", path: cst.BaseExpression) -> cst.BaseExpression:
    """The path a file handle was opened from, when ``path`` is the name an enclosing ``with open(p) as f``
    binds (``torch.load(f)``), else ``path`` itself."""
    if not isinstance(path, cst.Name):
        return path
    for node in reversed(context.ancestors):
        if not isinstance(node, cst.With):
            continue
        for item in node.items:
            call = item.item
            if (
                item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == path.value
                and isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "open" and call.args
            ):
                return call.args[0].value
    return path


def saved_before_in_same_run(context: "FileContext", call: cst.Call, path: cst.BaseExpression) -> bool:
    """The run that loads the path wrote it: a ``torch.save(..., <same path>)`` earlier in the loading function,
    a cache it fills (``if os.path.isfile(p): load(p) else: ... save(p)``), a function of the file that writes
    the path and is the only caller of the loading function (``train()`` saves the best model, then calls
    ``test()``, which loads it), a function every caller of which has first called one that writes the path
    (``for epoch in ...: train(epoch)``, then ``test()``), or a script whose top level saves and then loads it."""
    function = context.enclosing(cst.FunctionDef)
    if function is None:
        # A script's top level, or a notebook's cells in order: read blind, a notebook that trains, saves its
        # best model and loads it a few cells later loaded what the same session wrote (d7: 20 of 20).
        saves, reached = _saves_to(context, context.module, path, stop=call, into_functions=False)
        return bool(saves) and reached
    saves, reached = _saves_to(context, function, path, stop=call)
    if saves and reached:
        return True
    if _loaded_when_present(context, path) and bool(_saves_to(context, function, path)[0]):
        return True
    return _only_called_by_a_saver(context, function, path) or _called_after_a_saver(context, function, path)


def loaded_before_in_same_run(context: "FileContext", call: cst.Call, path: cst.BaseExpression) -> bool:
    """An earlier load of the same path in the same function (or script), under no condition this load is not
    also under: if the file came from a GPU this machine lacks, that load fails first; if it passed, this one
    reads the same file or one the run wrote since (the best model reloaded after training; d18: 22 of 22 such
    repeats read false)."""
    scope = context.enclosing(cst.FunctionDef) or context.module
    loads = context.memoized("devices.loads-under-tests", scope, lambda node: _loads_under_tests(context, node))
    here = next((tests for load, tests in loads if load is call), None)
    if here is None:
        return False
    for load, tests in loads:
        if load is call:
            return False
        earlier = argument(load, 0, "f")
        if earlier is not None and structurally_equal(earlier.value, path) and tests <= here:
            return True
    return False


def _loads_under_tests(context: "FileContext", scope: cst.CSTNode) -> List[Tuple[cst.Call, frozenset]]:
    """The loads of ``scope`` (not of functions nested in it) in source order, each with the ``if`` tests (as
    written, the branch taken) it stands under."""
    found: List[Tuple[cst.Call, frozenset]] = []
    tests: List[str] = []
    empty = cst.Module([])

    class _Loads(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_If(self, node: cst.If) -> bool:
            test = empty.code_for_node(node.test)
            tests.append(test)
            node.test.visit(self)
            node.body.visit(self)
            tests.pop()
            if node.orelse is not None:
                tests.append("not " + test)
                node.orelse.visit(self)
                tests.pop()
            return False

        def visit_Call(self, node: cst.Call) -> None:
            if context.qualified_name(node.func) in LOAD_FUNCTIONS:
                found.append((node, frozenset(tests)))

    scope.visit(_Loads())
    return found


def _called_after_a_saver(context: "FileContext", function: cst.FunctionDef, path: cst.BaseExpression) -> bool:
    """Every call of ``function`` in the file comes after a call, in the same body (or at the script's top level),
    of a function of the file that writes ``path``; the path names only what neither function binds, so both read
    the same module-level (or ``self.``) value."""
    sites = every_call_site(context, function)
    if not sites:
        return False
    free = frozenset(read_names(path))
    if free & _bound_or_parameters(context, function):
        return False
    for site in sites:
        scope = next((node for node in reversed(site.ancestors) if isinstance(node, cst.FunctionDef)), context.module)
        earlier = _calls_before(scope, site.call)
        if earlier is None or not any(
            saver is not None
            and saver is not function
            and not free & _bound_or_parameters(context, saver)
            and bool(_saves_to(context, saver, path)[0])
            for saver in (called_function(context, call, site_of(list(site.ancestors) + [call])) for call in earlier)
        ):
            return False
    return True


def _bound_or_parameters(context: "FileContext", function: cst.FunctionDef) -> frozenset:
    """What ``function`` binds itself: its parameters (bar ``self``, the instance a method's callers share, as the
    call sites' ``self.name(...)`` read it) and the names assigned in its body."""
    def compute(node: cst.FunctionDef) -> frozenset:
        parameters = {param.name.value for param in all_params(node.params)} - {"self"}
        return frozenset(parameters | bound_names(node.body))

    return context.memoized("devices.bound-or-parameters", function, compute)


def _calls_before(scope: cst.CSTNode, stop: cst.Call) -> Optional[List[cst.Call]]:
    """The calls of ``scope``'s own body (not of the functions and classes it defines) that come before ``stop``
    in source order, or None when ``stop`` is not in that body."""
    found: List[cst.Call] = []
    reached: List[bool] = []

    class _Calls(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if reached:
                return False
            if node is stop:
                reached.append(True)
                return False
            if node is not scope and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            if isinstance(node, cst.Call):
                found.append(node)
            return True

    visit(scope, _Calls())
    return found if reached else None


def _only_called_by_a_saver(context: "FileContext", function: cst.FunctionDef, path: cst.BaseExpression) -> bool:
    sites = every_call_site(context, function)
    if not sites:
        return False
    for site in sites:
        caller = next((node for node in reversed(site.ancestors) if isinstance(node, cst.FunctionDef)), None)
        if caller is None or not _saves_to(context, caller, path)[0]:
            return False
    return True


# Tests that a file is there: ``os.path.isfile(p)``, ``os.path.exists(p)``, ``Path(p).exists()``.
_PRESENCE_TESTS = frozenset({"os.path.isfile", "os.path.exists"})
_PRESENCE_METHODS = frozenset({"exists", "is_file"})


def _loaded_when_present(context: "FileContext", path: cst.BaseExpression) -> bool:
    """The load stands in the body of an ``if`` that tests that ``path`` exists."""
    ancestors = context.ancestors
    for index in range(len(ancestors) - 1, 0, -1):
        node, child = ancestors[index - 1], ancestors[index]
        if isinstance(node, cst.If) and child is node.body and _tests_presence(context, node.test, path):
            return True
    return False


def _tests_presence(context: "FileContext", test: cst.BaseExpression, path: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Call):
        return False
    tested = argument(test, 0, "path")
    if context.qualified_name(test.func) in _PRESENCE_TESTS:
        return tested is not None and structurally_equal(tested.value, path)
    func = test.func
    if isinstance(func, cst.Attribute) and func.attr.value in _PRESENCE_METHODS and not test.args:
        receiver = func.value
        if isinstance(receiver, cst.Call) and receiver.args:  # Path(p).exists()
            receiver = receiver.args[0].value
        return structurally_equal(receiver, path)
    return False


def holds_cpu_tensors(context: "FileContext", path: cst.BaseExpression) -> bool:
    """The checkpoint holds CPU tensors: every ``torch.save`` of the loading class (the file, outside a class)
    writes what ``.cpu()`` returned; or the file writes that path and never puts anything on a GPU (for a
    path that is a parameter of the loading function, judged by what every call in the file hands in); or
    the project module that writes a literal path never does."""
    owner = context.enclosing(cst.ClassDef) or context.module
    saves = _saves_to(context, owner, None)[0]
    if saves and all(_saves_cpu_copy(save) for save in saves):
        return True
    # The saves of the class that write the same file name (``os.path.join(d, "loss_log.pt")`` for a load of
    # ``d + "/loss_log.pt"``) write a CPU copy, or an attribute the class only ever builds on the CPU.
    same_file = [save for save in saves if _same_file_name(argument(save, 1, "f"), path)]
    if isinstance(owner, cst.ClassDef) and same_file and all(
        _saves_cpu_copy(save) or _saves_attribute_built_on_cpu(context, owner, save) for save in same_file
    ):
        return True
    if not own_device_facts(context).uses_cuda and all(
        _written_on_cpu(context, candidate) for candidate in _paths_loaded(context, path) or (None,)
    ):
        return True
    return _literal_written_without_gpu(context, path)


def _saves_cpu_copy(save: cst.Call) -> bool:
    """``torch.save(net.cpu().state_dict(), p)``, ``torch.save({k: v.cpu() ...}, p)``: what is written went
    through ``.cpu()``."""
    saved = argument(save, 0, "obj")
    if saved is None:
        return False
    found = []

    class _Cpu(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "cpu":
                found.append(node)

    visit(saved.value, _Cpu())
    return bool(found)


def _file_name(path: Optional[cst.BaseExpression]) -> Optional[str]:
    """The file name a path expression ends in: its last string literal (``"loss_log.pt"`` in
    ``os.path.join(d, "loss_log.pt")`` and in ``d + "/loss_log.pt"``), without folders."""
    found: List[str] = []

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            value = node.evaluated_value
            found.append(value if isinstance(value, str) else "")

    if path is not None:
        visit(path, _Strings())
    name = found[-1].rsplit("/", 1)[-1] if found else ""
    return name if "." in name else None


def _same_file_name(written: Optional[cst.Arg], loaded: cst.BaseExpression) -> bool:
    name = _file_name(written.value) if written is not None else None
    return name is not None and name == _file_name(loaded)


# Torch calls that build a tensor on the CPU unless a ``device=`` says otherwise, and those that join tensors.
_CPU_FACTORIES = frozenset({
    "torch.Tensor", "torch.FloatTensor", "torch.LongTensor", "torch.zeros", "torch.ones", "torch.empty", "torch.full",
    "torch.tensor", "torch.arange",
})
_JOINS = frozenset({"torch.cat", "torch.stack"})


def _saves_attribute_built_on_cpu(context: "FileContext", owner: cst.ClassDef, save: cst.Call) -> bool:
    """``torch.save(self.log, ...)`` where every binding of ``self.log`` in the class builds it on the CPU
    (``torch.Tensor()``, ``torch.cat((self.log, torch.zeros(1, n)))``) or reads back what was saved."""
    saved = argument(save, 0, "obj")
    if saved is None or not is_self_attribute(saved.value):
        return False
    name = saved.value.attr.value
    values = self_attribute_assignments(owner).get(name, [])
    return bool(values) and all(value is not None and _built_on_cpu(context, value, name) for value in values)


def _built_on_cpu(context: "FileContext", value: cst.BaseExpression, attribute: str) -> bool:
    if is_self_attribute(value) and value.attr.value == attribute:
        return True  # the attribute itself, joined with more
    if not isinstance(value, cst.Call):
        return False
    qualified = context.qualified_name(value.func)
    if qualified in LOAD_FUNCTIONS:
        return True  # what the class saved, read back
    if qualified in _CPU_FACTORIES:
        return keyword_arg(value, "device") is None
    if qualified in _JOINS and value.args and isinstance(value.args[0].value, (cst.Tuple, cst.List)):
        elements = value.args[0].value.elements
        return bool(elements) and all(
            not isinstance(element, cst.StarredElement) and _built_on_cpu(context, element.value, attribute)
            for element in elements
        )
    return False


def _literal_written_without_gpu(context: "FileContext", path: cst.BaseExpression) -> bool:
    project = context.project
    if project is None or not isinstance(path, cst.SimpleString):
        return False
    writers = project.modules_saving_literal(context.path, path.value)
    return bool(writers) and not any(module_device_facts(context, module).uses_cuda for module in writers)


def _paths_loaded(context: "FileContext", path: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, ...]]:
    """The expressions ``path`` stands for: itself, or for a parameter of the loading function what every call of
    that function in the file passes (None when a call hides it, or the file never calls the function)."""
    function = context.enclosing(cst.FunctionDef)
    if not isinstance(path, cst.Name) or function is None:
        return (path,)
    if path.value not in {param.name.value for param in function.params.params}:
        return (path,)
    passed = arguments_at_calls(context, function, path.value)
    return tuple(value for value, _ in passed) if passed else None


def _written_on_cpu(context: "FileContext", path: Optional[cst.BaseExpression]) -> bool:
    if path is None:
        return False
    saves = _saves_to(context, context.module, path)[0]
    return bool(saves) and all(_computed_here(context, save) for save in saves)


def _computed_here(context: "FileContext", save: cst.Call) -> bool:
    """What ``torch.save`` writes is computed in this file: not a parameter of the saving function (a model
    handed in by a caller elsewhere may live on a GPU)."""
    saved = argument(save, 0, "obj")
    root = saved.value if saved is not None else None
    while isinstance(root, (cst.Call, cst.Attribute, cst.Subscript)):
        root = root.func if isinstance(root, cst.Call) else root.value
    if not isinstance(root, cst.Name):
        return True
    function = next((node for node in _enclosing_chain(context.module, save) if isinstance(node, cst.FunctionDef)), None)
    return function is None or root.value not in {param.name.value for param in function.params.params}


def _enclosing_chain(module: cst.Module, target: cst.CSTNode):
    """The nodes that enclose ``target``, innermost first."""
    path: list = []
    found: list = []

    class _Path(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if found:
                return False
            if node is target:
                found.extend(reversed(path))
                return False
            path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if not found and path and path[-1] is original_node:
                path.pop()

    visit(module, _Path())
    return found


def _handles_opened(node: cst.With) -> Dict[str, cst.BaseExpression]:
    """``f`` -> ``path`` for each ``open(path, ...) as f`` item of one ``with``."""
    found: Dict[str, cst.BaseExpression] = {}
    for item in node.items:
        call = item.item
        if (
            isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "open" and call.args
            and item.asname is not None and isinstance(item.asname.name, cst.Name)
        ):
            found[item.asname.name.value] = call.args[0].value
    return found


def _saves_to(
    context: "FileContext",
    scope: cst.CSTNode,
    path: Optional[cst.BaseExpression],
    stop: Optional[cst.CSTNode] = None,
    into_functions: bool = True,
):
    """(the ``torch.save`` calls in ``scope`` that write ``path`` (any path when None), in source order up to
    ``stop``; whether ``stop`` was reached). ``into_functions=False``: the scope's own statements only."""
    found = []
    reached = []
    handles: List[Dict[str, cst.BaseExpression]] = []  # the ``with open(...) as f`` blocks around the visit

    class _Saves(cst.CSTVisitor):
        def on_leave(self, original_node: cst.CSTNode) -> None:
            if isinstance(original_node, cst.With):
                handles.pop()

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.With):
                handles.append(_handles_opened(node))  # before any return: on_leave pops it
            if reached:
                return False
            if node is stop:
                reached.append(node)
                return False
            if not into_functions and node is not scope and isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(node, cst.Call) and context.qualified_name(node.func) in SAVE_FUNCTIONS:
                target = argument(node, 1, "f")
                written = target.value if target is not None else None
                opened = next((block[written.value] for block in reversed(handles)
                               if isinstance(written, cst.Name) and written.value in block), None)
                if opened is not None:
                    written = opened  # ``with open(path, "wb") as f: torch.save(obj, f)``
                if written is not None and (path is None or structurally_equal(written, path)):
                    found.append(node)
            return True

    visit(scope, _Saves())
    return found, bool(reached)
