"""Devices: where a project's tensors live, and whether a checkpoint can meet a machine without its GPU.

``torch.load`` without ``map_location`` fails only when the file holds CUDA tensors and the loading machine
lacks the GPU they were saved from.  What the code shows about that (TL401 asks :func:`load_device_risk`):

- **The project chooses its device at run time** (``torch.cuda.is_available()``, a ``"cpu"`` device, a
  ``--no-cuda`` / ``--cpu`` option, ``map_location`` elsewhere): it runs on machines without the GPU its
  checkpoints were saved from.  A load is a sure hazard.
- **The project requires a GPU** (``.cuda()`` / ``"cuda"`` with no such choice anywhere, or a model built with
  ``.cuda()`` whatever else it tests): it runs only where a GPU is, and a checkpoint saved from ``cuda:0``
  loads there; only one saved from another index fails.
- **Nothing in the project mentions CUDA**: the file comes from elsewhere (a released checkpoint), and its
  device is unknown; a load is a hazard, unless the same file writes that path from what it computes on the
  CPU.
- **The value is used as CPU data right away** (``torch.load(p).numpy()``): the author knows what it holds.
- **The same function wrote the path just before** (``torch.save(best, path)``, then ``torch.load(path)``):
  the run that saved is the run that loads, on the same devices.

The project facts are read from the text of its modules (no parse), once per run.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import libcst as cst

from torchlint.analysis.flow.callers import argument_for, every_call_site
from torchlint.analysis.model.calls import argument
from torchlint.analysis.model.checkpoints import SAVE_FUNCTIONS
from torchlint.analysis.values.domain import structurally_equal
from torchlint.walk_order import visit

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# A device chosen at run time, or a CPU run offered.
_CHOOSES_DEVICE = re.compile(
    rb"is_available\(\)|device_count\(\)|['\"]cpu['\"]|map_location|no[-_]cuda|['\"]--cpu['\"]|use_cuda|\.cpu\(\)\.numpy"
)
# Tensors or modules put on a GPU (not ``autocast("cuda")``, which only says where autocast applies).
_USES_CUDA = re.compile(rb"\.cuda\(|\.to\(\s*['\"]cuda|device\(\s*['\"]cuda|device\s*=\s*['\"]cuda")
# Conversions that work only on CPU tensors, or leave tensors altogether.
_CPU_ONLY_USES = frozenset({"numpy", "tolist"})

CHOSEN, GPU_REQUIRED, UNSEEN = "chosen", "gpu-required", "unseen"


# A model built on the GPU with nothing to choose (``self.G = Generator(...).cuda()``, not in a conditional
# expression): the file that loads needs a GPU whatever else its project tests.
_BUILT_ON_GPU = re.compile(rb"(?m)^[ \t]*[\w.]+\s*=\s*[A-Z]\w*\([^\n]*\)\.cuda\(\)[ \t]*(#[^\n]*)?\r?$")


def device_policy(context: "FileContext") -> str:
    """:data:`CHOSEN`, :data:`GPU_REQUIRED` or :data:`UNSEEN` for the project of ``context`` (the file alone
    when it is linted without one)."""
    own = context.source.encode("utf-8", "replace")

    def compute(texts) -> str:
        chooses = uses = False
        for data in texts:
            chooses = chooses or bool(_CHOOSES_DEVICE.search(data))
            uses = uses or bool(_USES_CUDA.search(data))
        return CHOSEN if chooses else GPU_REQUIRED if uses else UNSEEN

    # The loading file's own evidence first: its model built on the GPU, or its own choice of device.
    if _BUILT_ON_GPU.search(own):
        return GPU_REQUIRED
    if _CHOOSES_DEVICE.search(own):
        return CHOSEN
    project = context.project
    if project is None:
        return compute([own])
    policy = project.fact("devices.policy", lambda: compute(project.module_texts()))
    if policy == UNSEEN and _USES_CUDA.search(own):
        return GPU_REQUIRED  # a notebook or a file outside the project's modules
    return policy


def used_as_cpu_data(ancestors: Sequence[cst.CSTNode], call: cst.Call) -> bool:
    """``torch.load(p).numpy()`` / ``.tolist()``: only CPU tensors (or none) convert there."""
    parent = ancestors[-1] if ancestors else None
    if not isinstance(parent, cst.Attribute) or parent.value is not call or len(ancestors) < 2:
        return False
    outer = ancestors[-2]
    return isinstance(outer, cst.Call) and outer.func is parent and parent.attr.value in _CPU_ONLY_USES


def saved_before_in_same_run(context: "FileContext", call: cst.Call, path: cst.BaseExpression) -> bool:
    """The function that loads the path writes it itself: a ``torch.save(..., <same path>)`` earlier in it (the
    saving run is the loading run), or a cache it fills (``if os.path.isfile(p): load(p) else: ... save(p)``:
    the file is what this same code wrote on an earlier run, with the same devices)."""
    function = context.enclosing(cst.FunctionDef)
    if function is None:
        return False  # a notebook's later cell, or a script's top level: often run again on its own
    saves, reached = _saves_to(context, function, path, stop=call)
    if saves and reached:
        return True
    return _loaded_when_present(context, path) and bool(_saves_to(context, function, path)[0])


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


def written_here_on_cpu(context: "FileContext", path: cst.BaseExpression) -> bool:
    """The file writes that path itself and never puts anything on a GPU: its checkpoint holds CPU tensors.

    A path that is a parameter of the loading function (``def load_checkpoint(filepath)``) is judged by what
    every call in the file hands in (``load_checkpoint("checkpoint.pth")``)."""
    if _USES_CUDA.search(context.source.encode("utf-8", "replace")):
        return False
    return all(_written_on_cpu(context, candidate) for candidate in _paths_loaded(context, path) or (None,))


def _paths_loaded(context: "FileContext", path: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, ...]]:
    """The expressions ``path`` stands for: itself, or for a parameter of the loading function what every call of
    that function in the file passes (None when a call hides it, or the file never calls the function)."""
    function = context.enclosing(cst.FunctionDef)
    if not isinstance(path, cst.Name) or function is None:
        return (path,)
    if path.value not in {param.name.value for param in function.params.params}:
        return (path,)
    sites = every_call_site(context, function)
    if not sites:
        return None
    passed = tuple(argument_for(function, path.value, site) for site in sites)
    return None if any(value is None for value in passed) else passed


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


def _saves_to(context: "FileContext", scope: cst.CSTNode, path: cst.BaseExpression, stop: Optional[cst.CSTNode] = None):
    """(the ``torch.save`` calls in ``scope`` that write ``path``, in source order up to ``stop``; whether
    ``stop`` was reached)."""
    found = []
    reached = []

    class _Saves(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if reached:
                return False
            if node is stop:
                reached.append(node)
                return False
            if isinstance(node, cst.Call) and context.qualified_name(node.func) in SAVE_FUNCTIONS:
                target = argument(node, 1, "f")
                if target is not None and structurally_equal(target.value, path):
                    found.append(node)
            return True

    visit(scope, _Saves())
    return found, bool(reached)
