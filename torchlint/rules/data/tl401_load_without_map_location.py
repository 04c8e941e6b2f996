from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.model.calls import add_keyword, argument, calls_in, has_star_args, keyword_arg, positional_args
from torchlint.analysis.model.checkpoints import LOAD_FUNCTIONS, SAVE_FUNCTIONS
from torchlint.analysis.project.devices import (
    CHOSEN,
    GPU_REQUIRED,
    device_policy,
    holds_cpu_tensors,
    is_cuda_device_text,
    loaded_before_in_same_run,
    opened_path,
    other_branch_maps_location,
    saved_before_in_same_run,
    used_as_cpu_data,
)
from torchlint.analysis.api.signatures import gives_keyword
from torchlint.analysis.model.dataflow import bindings, site_of
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule



class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(f)` called without `map_location` (neither as a keyword
    nor as the second positional argument), or with `map_location=None`, which
    is the default; and `torch.load(f, map_location="cuda")` (or `"cuda:0"`,
    `torch.device("cuda")`) in a program that chooses its device at run time,
    which sends every tensor to a GPU the machines it also runs on lack (fixed
    to `"cpu"` where the load goes straight into `load_state_dict`, to the
    program's `device` where the code moves what it loads itself).

    ## Why is this bad?
    `torch.save` records the device of every storage. Without `map_location`,
    `torch.load` puts each tensor back on that device, so a checkpoint saved
    on `cuda:2` raises "Attempting to deserialize object on CUDA device 2 but
    torch.cuda.device_count() is 1" on a machine with one GPU, and "Attempting
    to deserialize object on a CUDA device but torch.cuda.is_available() is
    False" on a CPU-only machine (CI, a laptop, a data-loading worker). Even
    where it loads, every process of a multi-GPU job first materialises the
    weights on the saving GPU.

    ## Example
    ```python
    model.load_state_dict(torch.load("checkpoint.pt"))
    state = torch.load(path, weights_only=True)
    ```

    ## Use instead
    ```python
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu"))
    state = torch.load(path, weights_only=True, map_location=device)
    ```

    ## Fix safety
    Safe when the loaded object goes straight into `load_state_dict` (also
    through a subscript such as `torch.load(p)["model"]`): `load_state_dict`
    copies each tensor onto the parameter's own device, so loading onto the
    CPU changes nothing but where the temporary copy lives. Elsewhere the fix
    is unsafe: it changes the device of the loaded tensors, to the `device`
    variable when every binding of it that reaches the load is a device (a
    parameter, `torch.device(...)`, a string, an attribute such as
    `args.device`, or a choice among those; a name bound after the load or
    to an argument group is not), and only where the code itself puts what it
    loads on a device (`torch.load(p).to(device)`, or a name it later moves
    with `.to(...)`/`.cuda()` or uses as a module with `.eval()`/`.train()`).
    Otherwise there is no fix: a whole object moved to the CPU may then be fed
    CUDA inputs by the code that loads it, and data loaded onto `device` may
    meet the CPU tensors of the file's other loads. The keyword is appended after the arguments already given
    (`weights_only=` is kept); a call with `*args` or `**kwargs` is not flagged,
    since `map_location` may be among them.
    """

    code = "TL401"
    name = "load-without-map-location"
    message = (
        "torch.load without map_location restores tensors to the device they were saved on; "
        "it fails on a machine without that GPU"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("load",)
    confidence_levels = """
- **high**: the program chooses its device at run time (`torch.cuda.is_available()`, a `"cpu"` device, a
  `--no-cuda` option, `map_location` elsewhere), or nothing in it mentions a device (the file comes from
  elsewhere, a released checkpoint): the load meets machines without the GPU the file was saved from.
  (Validation draws found the second kind real 1 time in 6, the bug reports of users 5 times in 5.)
  The program is the loading module, the modules that import it and what they import: another script
  of the same repository that shares no module with it is another program.
- **low**: the loading file builds its model with `.cuda()`, or the program always uses CUDA (it runs only
  where a GPU is, and a file saved from `cuda:0` loads there); the run that loads wrote the path (the same
  function saved it just before or fills it as a cache, the function that saved it is the only caller of
  the loading one, every caller of the loading one first called a function of the file that writes the same
  module-level path, or a script's top level saves then loads it); the same function (or script) loaded the
  same path before, under no condition this load is not under (that load meets a foreign file first: the
  best model reloaded after training reads the same file or the one this run wrote); the checkpoint holds CPU tensors (every
  save of the loading class writes what `.cpu()` returned, or every save of the class to the same file name writes
  a `.cpu()` copy or an attribute the class only builds on the CPU, such as a metrics log grown with
  `torch.cat((self.log, torch.zeros(1, n)))`, or the code that writes the path never uses a GPU).
- not reported: the loaded value is used as CPU data right away (`torch.load(p).numpy()`), or the load
  sits in one branch of an `if` whose other branch loads with `map_location`.
How the device evidence is read: `torchlint/analysis/project/devices.py`.
"""

    @classmethod
    def prepass(cls, scan):
        loads = scan.regions_calling_qualified(LOAD_FUNCTIONS)
        if not loads:
            return None
        # The fix reads whether the module binds `device` (scope.binds_name); the confidence, where the file
        # saves the path it loads (analysis/project/devices.py).
        saves = scan.regions_calling_qualified(SAVE_FUNCTIONS)
        # The run that loads may have written the path through a function called before the loading one: the
        # regions calling the savers and the loaders are where that order is read.
        functions = {name for region in loads | saves for name in scan.regions[region].function_names}
        return (
            loads
            | saves
            | scan.regions_calling(functions)
            | scan.regions_where(lambda region: region.enclosing_class is None and "device" in region.binds)
        )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in LOAD_FUNCTIONS:
            return
        given = argument(node, 1, "map_location")
        # `map_location=None` is the default: the tensors go back where they were saved.
        given_none = given is not None and isinstance(given.value, cst.Name) and given.value.value == "None"
        if given is not None and not has_star_args(node) and _names_cuda(self.context, given.value):
            self._cuda_map_location(node, given)
            return
        # A misspelt `map_locat=` counts as given: TL405 renames it (adding one would repeat the keyword).
        if has_star_args(node) or (
            not given_none and (gives_keyword(qualified, node, "map_location") or len(positional_args(node)) >= 2)
        ):
            return
        if not positional_args(node) and keyword_arg(node, "f") is None:
            return  # not a valid call at all; nothing to say about devices
        confidence = self._confidence(node)
        if confidence is None:
            return
        if self._feeds_load_state_dict(node):
            applicability, value = Applicability.SAFE, '"cpu"'
        elif self._device_reaches(node) and self._placed_on_a_device(node):
            applicability, value = Applicability.UNSAFE, "device"
        else:
            # A whole object moved to the CPU stays there while the code may feed it CUDA inputs, and data
            # loaded onto `device` may meet CPU tensors the file's other loads return: no fix.
            self.report(node, self._message(given_none), confidence=confidence)
            return
        edit = (
            Replacement(given.value, cst.parse_expression(value))
            if given_none
            else Replacement(node, add_keyword(node, "map_location", cst.parse_expression(value)))
        )
        fix = FixSpec(applicability, f"{'Pass' if given_none else 'Add'} `map_location={value}`", (edit,))
        self.report(node, self._message(given_none), fix=fix, confidence=confidence)

    def _cuda_map_location(self, node: cst.Call, given: cst.Arg) -> None:
        """``map_location="cuda"`` in a program that chooses its device at run time: every tensor goes to a GPU,
        which the machines it also runs on lack (a program that always uses CUDA loads where one is)."""
        if device_policy(self.context) != CHOSEN or used_as_cpu_data(self.context.ancestors, node):
            return
        message = (
            "torch.load with a CUDA map_location puts every tensor on a GPU; it fails on a machine without one, "
            "where this program otherwise runs"
        )
        if self._feeds_load_state_dict(node):
            fix = FixSpec(Applicability.SAFE, 'Load to `"cpu"` (load_state_dict copies onto the model\'s device)',
                          (Replacement(given.value, cst.parse_expression('"cpu"')),))
        elif self._device_reaches(node):
            fix = FixSpec(Applicability.UNSAFE, "Load onto `device`", (Replacement(given.value, cst.Name("device")),))
        else:
            fix = None
        self.report(node, message, fix=fix, confidence=Confidence.HIGH)

    def _message(self, given_none: bool) -> str:
        return self.message.replace("without map_location", "with map_location=None", 1) if given_none else self.message

    def _device_reaches(self, node: cst.Call) -> bool:
        """Every binding of ``device`` that reaches the load is a device: a parameter, a ``torch.device(...)``,
        a string, a tensor's or module's ``.device``, an option's value, or a choice among those. A name bound
        only after the load, or to something else (an argument group), would break the fixed call."""
        found = bindings(site_of(list(self.context.ancestors) + [node]), "device")
        return any(binding.kind != "conditional" for binding in found) and all(
            binding.kind == "param" or (binding.kind in ("assign", "module", "conditional") and _is_device(self.context, binding.value))
            for binding in found
        )

    def _placed_on_a_device(self, node: cst.Call) -> bool:
        """The code itself moves what it loads onto a device, so loading it there keeps the program's meaning:
        ``torch.load(p).to(device)``, or ``x = torch.load(p)`` and later ``x.to(...)``, ``x.cuda()``,
        ``x.eval()``/``x.train()`` (a module, which its inputs meet on its own device)."""
        ancestors = self.context.ancestors
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return parent.attr.value in _PLACING_METHODS
        statement = next((a for a in reversed(ancestors) if isinstance(a, cst.Assign)), None)
        if statement is None or statement.value is not node or len(statement.targets) != 1:
            return False
        target = statement.targets[0].target
        if not isinstance(target, cst.Name):
            return False
        scope = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), self.context.module)
        return target.value in self.context.memoized("tl401.placed-names", scope, _names_placed_on_a_device)

    def _confidence(self, node: cst.Call) -> Optional[Confidence]:
        """How sure the load meets a machine without the GPU its file was saved from (analysis/project/devices.py),
        or None when it holds CPU data."""
        ancestors = self.context.ancestors
        if used_as_cpu_data(ancestors, node) or other_branch_maps_location(self.context, node):
            return None
        path = argument(node, 0, "f")
        loaded = opened_path(self.context, path.value) if path is not None else None
        if loaded is not None and (
            saved_before_in_same_run(self.context, node, loaded)
            or loaded_before_in_same_run(self.context, node, loaded)
            or holds_cpu_tensors(self.context, loaded)
        ):
            return Confidence.LOW
        # A program that needs a GPU to run loads where one is: only a file saved from another index fails.
        return Confidence.LOW if device_policy(self.context) == GPU_REQUIRED else Confidence.HIGH

    def _feeds_load_state_dict(self, node: cst.Call) -> bool:
        """Whether ``node`` (or a subscript of it) is the argument of ``*.load_state_dict(...)``."""
        ancestors = self.context.ancestors
        child: cst.CSTNode = node
        index = len(ancestors) - 1
        while index >= 0 and isinstance(ancestors[index], cst.Subscript) and ancestors[index].value is child:
            child = ancestors[index]
            index -= 1
        if index < 1 or not isinstance(ancestors[index], cst.Arg) or ancestors[index].value is not child:
            return False
        call = ancestors[index - 1]
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "load_state_dict"
            and bool(call.args)
            and call.args[0] is ancestors[index]
        )


# Methods by which the code puts a loaded value on a device (or shows it is a module, which carries its own).
_PLACING_METHODS = frozenset({"to", "cuda", "eval", "train"})


def _names_placed_on_a_device(scope: cst.CSTNode) -> frozenset:
    """The names ``scope`` calls one of ``_PLACING_METHODS`` on (``x.to(device)``, ``net.eval()``): read once per scope."""
    return frozenset(
        call.func.value.value
        for call in calls_in(scope)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _PLACING_METHODS and isinstance(call.func.value, cst.Name)
    )


def _names_cuda(context, value: cst.BaseExpression) -> bool:
    """``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``: a map_location that sends every tensor to a GPU."""
    if isinstance(value, cst.Call) and context.qualified_name(value.func) == "torch.device" and value.args:
        value = value.args[0].value
    return isinstance(value, cst.SimpleString) and is_cuda_device_text(value.evaluated_value)


def _is_device(context, value: Optional[cst.BaseExpression]) -> bool:
    """``torch.device(...)``, a string, ``x.device``, ``args.device``, or a conditional choice among them."""
    if value is None:
        return False
    if isinstance(value, cst.IfExp):
        return _is_device(context, value.body) and _is_device(context, value.orelse)
    if isinstance(value, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(value, cst.Attribute):
        return True  # x.device, args.device, self.device, config.device
    if isinstance(value, cst.Call):
        return context.qualified_name(value.func) == "torch.device"
    return False
