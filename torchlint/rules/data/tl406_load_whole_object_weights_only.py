from __future__ import annotations

import ast
import os
import re
from typing import FrozenSet, List, Optional, Tuple

import libcst as cst

from torchlint.analysis.model.calls import add_keyword, argument, has_star_args, keyword_arg
from torchlint.analysis.flow.callers import every_call_site
from torchlint.analysis.model.checkpoints import (
    LOAD_FUNCTIONS,
    MODULE_METHODS,
    WEIGHTS_ONLY_DEFAULT_SINCE,
    ast_file_name,
    bound_value,
    is_project_path,
    path_key,
)
from torchlint.analysis.model.dataflow import attribute_assignment_reaches, bindings, path_to, site_of
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.ops import MODULE_MOVES
from torchlint.analysis.model.project_index import definition, file_facts, refused_saves_in
from torchlint.analysis.model.saved_values import ADVICE, saved_layouts, saves_by_file_name
from torchlint.analysis.project.allow_lists import allow_lists_in_file, allow_lists_in_program
from torchlint.analysis.project.lightning import CHECKPOINT_PATH_ATTRIBUTES, lightning_classes, refused_hyperparameters
from torchlint.analysis.api.signatures import gives_keyword
from torchlint.analysis.flow.callers import framework_called
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule
from torchlint.walk_order import visit

# How far a loaded value is followed (names, moves, helpers that return it).
MAX_STEPS = 6
_SAVE_CALL = re.compile(r"\bsave\s*\(")


# How a LightningModule saves its config as plain containers.
_PLAIN_HYPERPARAMETERS = " (save_hyperparameters(OmegaConf.to_container(cfg)))"
# Lightning's loader of a module's checkpoint (a classmethod of every LightningModule).
LIGHTNING_LOAD = "load_from_checkpoint"


class LoadWholeObjectWeightsOnly(Rule):
    """
    ## What it does
    Flags `torch.load(f)` without `weights_only=False` when the file holds
    objects that weights-only loading refuses. Either the loaded value is
    used as a module or an optimizer (called, `.eval()`, `.parameters()`,
    `.zero_grad()`, also after `.to(device)`, through the name it is bound
    to (at `medium` where other bindings of the name may reach the use too:
    `if path: net = torch.load(path)` / `else: net = Net()`, then
    `net.train()`, or a wrapper `net = nn.DataParallel(net)` on every path;
    on the load's path the loaded object is what is used), through the attribute it is stored into when a later statement of
    the same block uses it (`solver.net = torch.load(p)` then
    `solver.net.eval()`), or through a same-file helper that returns it), or a `torch.save` to
    the same path shows what the file holds (in the same file: the same
    literal, constant or attribute path such as `args.checkpoint`, a
    function's own variable within that function, or a path built within
    one function from the same names and literals, none of them reassigned:
    `folder + args.name + ".model"`, `f"{out}/last.pt"`, `run_dir / "last.pt"`; or as the same literal
    path in another module of the project: of the package the file belongs
    to, or of its folder), or the keys the loaded value is read by
    (`ckpt["args"]`, `ckpt.get("epoch")`) are keys of a dict the project
    saves, whatever its path (directly, or handed to a project function that
    saves what it is given: `save_checkpoint({"epoch": e, "args": args},
    folder)`), and every such dict holds, or the load's path ends in a file
    name written whole (`os.path.join(cfg["out"], "vae.pkl")`, `f"{out}/vae.pkl"`)
    and every save of the package to a path ending in that name writes:

    - a whole module, optimizer or LR scheduler (`torch.save(model, path)`);
    - NumPy arrays and scalars: `np.random.get_state()`, `np.float64(acc)`,
      `np.array(xs)`, what a NumPy function computes (`np.mean(losses)`),
      `tensor.numpy()`, and arithmetic, indexing and methods of them;
    - an object of one of the project's own classes (a vocabulary, a
      tokenizer, a corpus), or its `self.__dict__` when a field is one of
      these;
    - the `argparse.Namespace` of parsed options, a `collections.defaultdict`
      or `deque`, a `frozenset`, a `pathlib.Path`, a `datetime`, a NumPy
      random generator, a function of the project;
    - a configuration object (yacs, OmegaConf, EasyDict, ml_collections),
      also the config Hydra passes to a `@hydra.main` function and a
      parameter annotated `DictConfig`.

    The saved value is followed through dict, list and tuple literals, names
    bound once in the saving function (or at the module's top level), entries
    added before the save (`ckpt["args"] = args`), `copy.deepcopy`, what every
    call of a function passes for a parameter, and what every construction of
    a class (or of a subclass keeping its `__init__`) passes for an
    `__init__` parameter a field holds (`self.config = config`). What
    the analysis knows of each kind, checked against torch 2.13, is written
    down in `torchlint/analysis/model/saved_values.py`. Follows
    `target-torch-version`: below 2.6 nothing is reported.

    ## Why is this bad?
    Since torch 2.6 `torch.load` defaults to `weights_only=True`: it
    unpickles tensors, Python numbers and strings, dicts, lists, tuples,
    sets, `OrderedDict`, `Counter` and a few torch types only. A checkpoint
    written by `torch.save(model, path)` pickles the model's class and every
    submodule; one that holds `np.random.get_state()` pickles NumPy's array
    class; one that holds `args` pickles `argparse.Namespace`. Loading any of
    them raises `_pickle.UnpicklingError: Weights only load failed ...
    Unsupported global: GLOBAL torch.nn.modules.linear.Linear` (or
    `numpy._core.multiarray._reconstruct`, `argparse.Namespace`): code that
    worked for years breaks on an upgrade, typically when a run resumes.

    ## Example
    ```python
    torch.save(model, "model.pt")          # train.py
    model = torch.load("model.pt")         # predict.py
    model.eval()

    torch.save({"model": model.state_dict(), "rng": np.random.get_state()}, "last.pt")
    state = torch.load("last.pt")          # fails: the file holds NumPy arrays
    ```

    ## Use instead
    ```python
    torch.save(model.state_dict(), "model.pt")
    model = Net()
    model.load_state_dict(torch.load("model.pt"))
    model.eval()

    torch.save({"model": model.state_dict(), "args": vars(args), "loss": float(np.mean(losses))}, "last.pt")
    ```
    or, for a file you trust: `torch.load("last.pt", weights_only=False)`.

    ## Fix safety
    Unsafe. The fix adds `weights_only=False` (or turns `weights_only=True`
    into it), which unpickles arbitrary code: it is offered only when the
    path is written in the code (a literal, a path next to `__file__`), the
    project's own file; elsewhere the finding has no fix (TL402 would
    rightly flag `weights_only=False` on a path that comes from outside).
    `MyModule.load_from_checkpoint(path)` gets no fix: Lightning releases
    before 2.4 pass unknown keywords to the module's `__init__`, so adding
    `weights_only=False` there could break the call; save plain containers
    (`save_hyperparameters(OmegaConf.to_container(cfg))`) instead.
    The same fix serves every kind, decided kind by kind:

    - modules, optimizers, schedulers: `weights_only=False` loads the object
      as before 2.6. Saving `state_dict()` is better but needs the model's
      class at the load: left to the author.
    - NumPy values and generators: `weights_only=False` is right for a file
      the project writes itself. The narrower allow-list
      (`torch.serialization.safe_globals([np.ndarray, np.dtype, ...,
      np._core.multiarray._reconstruct])`) names NumPy internals that moved
      between NumPy 1 and 2 (`numpy.core` -> `numpy._core`), so it is not
      written for you; converting before the save (`.tolist()`, `.item()`,
      `torch.from_numpy`) is the author's choice.
    - objects of the project's classes, functions: `weights_only=False`
      (the class is the project's own and importable where it loads);
      `safe_globals([Vocabulary])` works too when every field is allowed.
    - `argparse.Namespace`, `defaultdict`, `deque`, paths, dates:
      `weights_only=False`; `safe_globals([argparse.Namespace])` is the
      narrower alternative, `vars(args)` / `dict(counts)` at the save the
      cleaner one: both change other code, left to the author.

    Not reported: a call with `pickle_module=` (then `weights_only` defaults
    to `False`), `weights_only=False` or a variable, files that allow-list
    types (`torch.serialization.add_safe_globals`, `safe_globals`) and
    programs where another module calls `add_safe_globals` (it holds for the
    whole process: a module the loading file imports, or one importing it;
    another script of the repository does not count), loaded
    values used only as dicts or tensors, a `lambda` in a checkpoint (pickle
    cannot save one: the save fails first), a load whose keys are also keys
    of a dict the project saves with allowed values only (which file it is,
    the code does not say). Not seen: objects saved in another module under
    a path that is not a literal and read by no key, values that only one
    branch binds, and uses of the loaded value in other functions than the
    one holding the load or the helper's callers.
    """

    code = "TL406"
    name = "load-whole-object-weights-only"
    message = (
        "torch.load loads weights only by default since torch 2.6: a checkpoint holding a whole module, "
        "NumPy arrays or other pickled objects raises 'Weights only load failed'"
    )
    fix_applicability = Applicability.UNSAFE
    triggers = ("load",)
    confidence_levels = """
`high` when the loaded value is used as a module, or when a save to the same
path shows what the file holds. Found at `medium` when only the keys the load
reads match the saved dicts. The level table shows those at `high`: read
blind on the calibration draws d1-d13 (code the rules were tuned on), 37 of
38 were real; the last validation draw, d13, held none of them. Found at
`low` when only the file name ties the load to the saves (the folders are
built at run time) until validation draws have read such findings.
A Lightning checkpoint (a `.ckpt` path, ModelCheckpoint's `best_model_path`,
or `MyModule.load_from_checkpoint`) of a project whose LightningModules save
among their hyper-parameters a value weights_only refuses (an OmegaConf
config, an object of the project's classes, a module) is found at `high`, the
level of loads a save ties to by path, and shown where the table shows
those; no validation draw has read this form on its own yet.
"""

    @classmethod
    def prepass(cls, scan):
        loads = scan.regions_calling_qualified(LOAD_FUNCTIONS) | scan.regions_calling([LIGHTNING_LOAD])
        if not loads:
            return None
        # Where the loaded value may be used outside its region: a name a script binds at the top level, an
        # attribute other methods of the class read, a helper's callers (``return torch.load(path)``).
        # (Saves and allow-lists are read from the file's ``ast``, outside the pre-pass.)
        names, attributes = set(), {}
        for index in loads:
            region = scan.regions[index]
            in_function = isinstance(region.node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for node in ast.walk(region.node):
                if isinstance(node, ast.Assign) and _calls_load(scan, node.value):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and not in_function:
                            names.add(target.id)
                        elif isinstance(target, ast.Attribute) and region.enclosing_class is not None:
                            attributes.setdefault(region.enclosing_class, set()).add(target.attr)
                elif isinstance(node, ast.Return) and node.value is not None and in_function and _calls_load(scan, node.value):
                    if not framework_called(region.node.name):
                        names.add(region.node.name)
        seeds = set(loads) | set(scan.regions_mentioning(names)) if names else set(loads)
        for owner, owned in attributes.items():
            seeds |= scan.regions_where(lambda region: region.enclosing_class == owner and not region.uses.isdisjoint(owned))
        return frozenset(seeds)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == LIGHTNING_LOAD:
            return self._lightning_load(node)
        qualified = self.context.qualified_name(node.func)
        if qualified not in LOAD_FUNCTIONS or has_star_args(node):
            return
        target = self.context.settings.target_torch_version
        if target is not None and tuple(target) < WEIGHTS_ONLY_DEFAULT_SINCE:
            return
        if keyword_arg(node, "pickle_module") is not None or len([a for a in node.args if a.keyword is None]) > 2:
            return  # a pickle module makes weights_only default to False
        given = keyword_arg(node, "weights_only")
        if given is not None and not _is_true(given.value):
            return
        if given is None and gives_keyword(qualified, node, "weights_only"):
            return  # misspelt: TL405 renames it
        if allow_lists_in_file(self.context):
            return
        level, unmeasured = Confidence.HIGH, False
        self._through_joined_paths = False
        used = self._used_as_module(node, list(self.context.ancestors), 0)
        if used is not None:
            holds, advice = f"a whole object ({used})", ADVICE["module"]
            if self._through_joined_paths:
                # A use the load reaches among other bindings is a form no validation draw has read blind yet:
                # out of the level table's reach until one has.
                level, unmeasured = Confidence.MEDIUM, True
        else:
            saved = self._saved_refused(node)
            if saved is None:
                saved = self._layout_refused(node) or self._named_refused(node) or self._lightning_refused(node)
                if saved is None:
                    return
                holds, advice, level = saved
            else:
                holds, advice = saved
        if allow_lists_in_program(self.context):  # asked last: it reads the program's modules
            return
        message = (
            f"torch.load loads weights only by default since torch 2.6, and this checkpoint holds {holds}: "
            f"loading raises 'Weights only load failed'; {advice}, or pass weights_only=False for a file you trust"
        )
        self.report(node, message, self._fix(node, given), confidence=level, unmeasured=unmeasured)

    # -- the loaded value used as a module --------------------------------------------------------

    def _used_as_module(self, value: cst.CSTNode, ancestors: List[cst.CSTNode], depth: int) -> Optional[str]:
        """Why the value of ``value`` (below ``ancestors``) is a module or an optimizer, judged by its uses."""
        if depth > MAX_STEPS or not ancestors:
            return None
        parent = ancestors[-1]
        if isinstance(parent, cst.Call) and parent.func is value:
            return "it is called"
        if isinstance(parent, cst.Attribute) and parent.value is value:
            attribute = parent.attr.value
            if attribute in MODULE_METHODS:
                return f"`.{attribute}` is used on it"
            grand = ancestors[-2] if len(ancestors) > 1 else None
            if attribute in MODULE_MOVES and isinstance(grand, cst.Call) and grand.func is parent:
                return self._used_as_module(grand, ancestors[:-2], depth + 1)
            return None
        if isinstance(parent, cst.Assign) and parent.value is value and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, (cst.Name, cst.Attribute)) and dotted_name(target) is not None:
                return self._uses_of(dotted_name(target), parent, ancestors[:-1], depth)
            return None
        if isinstance(parent, cst.Return) and parent.value is value:
            return self._returned(ancestors, depth)
        return None

    def _uses_of(self, name: str, assignment: cst.Assign, ancestors: List[cst.CSTNode], depth: int) -> Optional[str]:
        """The uses of ``name`` that the load's assignment reaches, in its function (or the module)."""
        kinds = (cst.ClassDef, cst.Module) if name.startswith("self.") else (cst.FunctionDef, cst.Module)
        scope = next((a for a in reversed(ancestors) if isinstance(a, kinds)), self.context.module)
        for use, use_ancestors in _mentions(scope, name):
            reach = None if name.startswith("self.") else _reaches(self.context, assignment, name, use_ancestors)
            if name.startswith("self.") or reach is not None or (
                "." in name and attribute_assignment_reaches(assignment, name, use_ancestors)
            ):
                found = self._used_as_module(use, use_ancestors, depth + 1)
                if found:
                    self._through_joined_paths = self._through_joined_paths or reach == _JOINED
                    return found
        return None

    def _returned(self, ancestors: List[cst.CSTNode], depth: int) -> Optional[str]:
        """``return torch.load(path)`` in a helper: how the file's own calls of the helper use what it returns."""
        function = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
        if function is None:
            return None
        for site in every_call_site(self.context, function) or ():
            found = self._used_as_module(site.call, list(site.ancestors), depth + 1)
            if found:
                return f"{found}, where `{function.name.value}` returns it"
        return None

    # -- what a save to the same path writes ---------------------------------------------------------

    def _saved_refused(self, node: cst.Call) -> Optional[Tuple[str, str]]:
        """What a ``torch.save`` to the path this load reads writes that weights_only refuses, and what to save
        instead: a save in the file (the same literal, constant or dotted name; a function's own variable only
        in that function) or, for a literal, near it in the project (analysis/model/saved_values.py decides what a saved value holds)."""
        path = argument(node, 0, "f")
        key = path_key(self.context, path.value) if path is not None else None
        if key is None:
            return None
        facts = file_facts(self.context)
        if facts is not None and _SAVE_CALL.search(self.context.source):
            here = _function_name(self.context.ancestors)
            save = next(
                (
                    save for save in refused_saves_in(facts, self.context.project)
                    if save.key == key and (not save.local or save.saver == here)
                ),
                None,
            )
            if save is not None:
                return save.describe(), save.value.advice
        project = self.context.project
        if project is not None and key.startswith(("'", '"')) and self.context.path not in ("-", ""):
            save = project.refused_save_near(self.context.path, key)
            if save is not None:
                return save.describe(_relative(save.path, self.context.path)), save.value.advice
        return None

    def _layout_refused(self, node: cst.Call) -> Optional[Tuple[str, str, Confidence]]:
        """The dicts the project saves (whatever the path) whose keys include every key the loaded value is read
        by: when each of them holds a value weights_only refuses, the file is one of theirs."""
        keys = self._keys_read(node, list(self.context.ancestors))
        if not keys:
            return None
        project = self.context.project
        if project is not None and self.context.path not in ("-", ""):
            layouts = project.saved_layouts_near(self.context.path)
        else:
            facts = file_facts(self.context)
            if facts is None:
                return None
            layouts = tuple(saved_layouts(facts, lambda qualified, local: definition(qualified, local, None)))
        matching = [layout for layout in layouts if keys <= layout.keys]
        if not matching or any(layout.refused is None for layout in matching):
            return None
        layout, shown = _nearest(matching, self.context.path)
        # Found at medium: a match by keys is weaker evidence than a match by path; the level table decides what
        # is shown (read blind on d1-d13: 37 of 38 real, shown at high).
        return layout.describe(shown), layout.refused.advice, Confidence.MEDIUM

    def _named_refused(self, node: cst.Call) -> Optional[Tuple[str, str, Confidence]]:
        """The saves of the project whose paths end in the file name this load's path ends in (``vae.pkl`` in
        ``os.path.join(base, "vae.pkl")``, the folders built elsewhere): when every one of them writes a value
        weights_only refuses, the file read here is one of theirs."""
        file_name = self._loaded_file_name(node)
        facts = file_facts(self.context)
        if file_name is None or facts is None:
            return None
        project = self.context.project
        if project is not None and self.context.path not in ("-", ""):
            saves = project.saves_named_near(self.context.path, file_name)
        else:
            locate = lambda qualified, local: definition(qualified, local, None)  # noqa: E731
            saves = tuple(save for save in saves_by_file_name(facts, locate) if save.file_name == file_name)
        if not saves or any(save.value is None for save in saves):
            return None
        save, shown = _nearest(saves, self.context.path)
        # Found at low: the folders are built at run time, so only the file's name ties the load to the save;
        # the level table decides what is shown once validation draws have read it.
        return save.describe(shown), save.value.advice, Confidence.LOW

    # -- Lightning checkpoints -------------------------------------------------------------------

    def _lightning_refused(self, node: cst.Call) -> Optional[Tuple[str, str, Confidence]]:
        """A Lightning checkpoint (the path names a ``.ckpt`` file, or is a ModelCheckpoint's best or last path)
        of a project whose every LightningModule that saves hyper-parameters saves an OmegaConf config among
        them (analysis/project/lightning.py)."""
        project = self.context.project
        facts = None if project is not None else file_facts(self.context)
        path = argument(node, 0, "f")
        if path is None or (project is None and facts is None):
            return None
        value = path.value
        if isinstance(value, cst.Name):
            value = bound_value(self.context, value.value) or _loop_iterable(self.context, value.value)
        if value is None or not _names_lightning_checkpoint(self.context, value):
            return None
        refused = refused_hyperparameters(project, facts)
        if not refused or {c.qualified for c in refused} != set(lightning_classes(project, facts)):
            return None
        # Found at high, the level of loads a save ties to by path: the table shows them as it shows those.
        return f"{refused[0].describe()} (a Lightning checkpoint)", refused[0].advice, Confidence.HIGH

    def _lightning_load(self, node: cst.Call) -> None:
        """``MyModule.load_from_checkpoint(path)``: Lightning loads through ``torch.load``, under its default."""
        target = self.context.settings.target_torch_version
        if target is not None and tuple(target) < WEIGHTS_ONLY_DEFAULT_SINCE:
            return
        given = keyword_arg(node, "weights_only")
        if given is not None and not _is_true(given.value):
            return
        facts = file_facts(self.context)
        owner = facts.qualify_dotted(dotted_name(node.func.value)) if facts is not None and isinstance(node.func, cst.Attribute) else None
        project = self.context.project
        refused = refused_hyperparameters(project, None if project is not None else facts)
        found = next((c for c in refused if owner is not None and _same_class(owner, c.qualified)), None)
        if found is None or allow_lists_in_file(self.context) or allow_lists_in_program(self.context):
            return
        message = (
            f"load_from_checkpoint loads through torch.load, which loads weights only by default since torch 2.6, and "
            f"this checkpoint holds {found.describe()}: loading raises 'Weights only load failed'; "
            f"{found.advice}{_PLAIN_HYPERPARAMETERS if found.kind == 'config' else ''}, or load a file you trust with weights_only=False"
        )
        self.report(node, message, None, confidence=Confidence.HIGH)

    def _loaded_file_name(self, node: cst.Call) -> Optional[str]:
        path = argument(node, 0, "f")
        if path is None:
            return None
        value = path.value
        if isinstance(value, cst.Name):
            value = bound_value(self.context, value.value)
            if value is None:
                return None
        facts = file_facts(self.context)
        try:
            parsed = ast.parse(self.context.module.code_for_node(value).strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return None
        return ast_file_name(parsed, facts.qualify, None, facts.values) if facts is not None else None

    def _keys_read(self, value: cst.CSTNode, ancestors: List[cst.CSTNode]) -> FrozenSet[str]:
        """The string keys the loaded value is read by: ``torch.load(f)["model"]``, or ``ckpt["model"]`` and
        ``ckpt.get("epoch")`` where the load's assignment to ``ckpt`` reaches, in its function."""
        if not ancestors:
            return frozenset()
        parent = ancestors[-1]
        key = _key_of(value, parent, ancestors[-2] if len(ancestors) > 1 else None)
        if key is not None:
            return frozenset({key})
        if not (isinstance(parent, cst.Assign) and parent.value is value and len(parent.targets) == 1):
            return frozenset()
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return frozenset()
        name = target.value
        scope = next((a for a in reversed(ancestors) if isinstance(a, (cst.FunctionDef, cst.Module))), self.context.module)
        keys = set()
        for use, use_ancestors in _mentions(scope, name):
            # A key read where the load is one of the values that may arrive is a key of the loaded file on that path
            # (`ckpt = hub_load(url) if remote else torch.load(f)`; then `ckpt["model"]`).
            if not use_ancestors or not any(binding.node is parent for binding in bindings(site_of(use_ancestors), name)):
                continue
            key = _key_of(use, use_ancestors[-1], use_ancestors[-2] if len(use_ancestors) > 1 else None)
            if key is not None:
                keys.add(key)
        return frozenset(keys)

    # -- the fix -------------------------------------------------------------------------------------------

    def _fix(self, node: cst.Call, given: Optional[cst.Arg]) -> Optional[FixSpec]:
        path = argument(node, 0, "f")
        if path is None or not is_project_path(self.context, path.value):
            return None
        if given is not None:
            replacement = Replacement(given.value, cst.Name("False"))
        else:
            replacement = Replacement(node, add_keyword(node, "weights_only", cst.Name("False")))
        return FixSpec(Applicability.UNSAFE, "Load it as a whole object (`weights_only=False`): only for a file you trust", (replacement,))


def _key_of(value: cst.CSTNode, parent: cst.CSTNode, grand: Optional[cst.CSTNode]) -> Optional[str]:
    """``"k"`` when ``value`` is read as ``value["k"]`` or ``value.get("k", ...)``."""
    if isinstance(parent, cst.Subscript) and parent.value is value and len(parent.slice) == 1:
        index = parent.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            text = index.value.evaluated_value
            return text if isinstance(text, str) else None
    if (
        isinstance(parent, cst.Attribute) and parent.value is value and parent.attr.value == "get"
        and isinstance(grand, cst.Call) and grand.func is parent and grand.args
        and isinstance(grand.args[0].value, cst.SimpleString) and grand.args[0].keyword is None
    ):
        text = grand.args[0].value.evaluated_value
        return text if isinstance(text, str) else None
    return None


def _function_name(ancestors) -> Optional[str]:
    """``Class.method`` or ``function`` for the innermost function among ``ancestors`` (None at the top level),
    named as analysis/model/saved_values.py names a saving function."""
    for index in range(len(ancestors) - 1, -1, -1):
        node = ancestors[index]
        if isinstance(node, cst.FunctionDef):
            owner = ancestors[index - 2] if index >= 2 else None  # ClassDef > IndentedBlock > FunctionDef
            if isinstance(owner, cst.ClassDef):
                return f"{owner.name.value}.{node.name.value}"
            return node.name.value
    return None


def _nearest(records, near: str):
    """The record written in the loading file ``near`` if one is (else the first), and the path a message shows
    for it: None for the loading file itself, else its path from there."""
    here = os.path.abspath(near)
    record = next((r for r in records if os.path.abspath(r.path) == here), records[0])
    return record, None if os.path.abspath(record.path) == here else _relative(record.path, near)


def _relative(path: str, near: str) -> str:
    """``path`` as seen from the folder of ``near`` (``trainer/state.py``)."""
    try:
        shown = os.path.relpath(path, os.path.dirname(os.path.abspath(near)))
    except ValueError:  # another drive
        shown = path
    return shown.replace(os.sep, "/")


def _loop_iterable(context, name: str) -> Optional[cst.BaseExpression]:
    """What a ``for`` loop around the current node that binds ``name`` iterates over (through ``enumerate``,
    ``sorted``, ``reversed`` and a name bound to the sequence)."""
    for ancestor in reversed(list(context.ancestors)):
        if not isinstance(ancestor, cst.For):
            continue
        targets = [e.value for e in ancestor.target.elements] if isinstance(ancestor.target, cst.Tuple) else [ancestor.target]
        names = {t.value for t in targets if isinstance(t, cst.Name)}
        if name not in names:
            continue
        iterable = ancestor.iter
        while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("enumerate", "sorted", "reversed", "list") and iterable.args:
            iterable = iterable.args[0].value
        if isinstance(iterable, cst.Name):
            return bound_value(context, iterable.value)
        return iterable
    return None


def _names_lightning_checkpoint(context, value: cst.BaseExpression) -> bool:
    """Whether a path expression names a checkpoint Lightning wrote: a ``.ckpt`` file in a string of it, or
    ModelCheckpoint's ``best_model_path``/``last_model_path``."""
    found = [False]

    class Parts(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found[0] |= node.evaluated_value.endswith(".ckpt") if isinstance(node.evaluated_value, str) else False

        def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
            found[0] |= node.value.endswith(".ckpt")

        def visit_Attribute(self, node: cst.Attribute) -> None:
            found[0] |= node.attr.value in CHECKPOINT_PATH_ATTRIBUTES

    value.visit(Parts())
    return found[0]


def _same_class(owner: str, qualified: str) -> bool:
    """``owner`` (as this file names the class) is the project class ``qualified`` (module.Class): the same
    dotted name, or the same class reached by another import path of the same module."""
    return owner == qualified or owner.rpartition(".")[2] == qualified.rpartition(".")[2] and (
        owner.endswith("." + qualified) or qualified.endswith("." + owner)
    )


def _is_true(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def _reaches(context, assignment: cst.Assign, name: str, ancestors: List[cst.CSTNode], depth: int = 0) -> Optional[str]:
    """Whether the value ``assignment`` gave ``name`` may be what it holds at the use below ``ancestors``:
    ``_SOLE`` when every binding that may reach is the assignment or wraps it on some path (``if parallel: net =
    nn.DataParallel(net)``, ``net = net.module``); ``_JOINED`` when other bindings may reach too (``if path: net =
    torch.load(path)`` / ``else: net = Net()``, then ``net.train()``: on the load's path the loaded object is what
    is used), also through a wrap that the assignment reaches (``net = nn.DataParallel(torch.load(p))``'s name);
    None when it cannot reach."""
    reaching = bindings(site_of(ancestors), name)
    if any(binding.node is assignment for binding in reaching):
        sole = all(binding.node is assignment or _wraps(context, binding.value, name) for binding in reaching)
        return _SOLE if sole else _JOINED
    for binding in reaching:
        if depth < MAX_STEPS and _wraps(context, binding.value, name):
            at_wrap = path_to(ancestors[0], binding.node) if ancestors else None
            if at_wrap is not None and _reaches(context, assignment, name, list(at_wrap), depth + 1) is not None:
                return _JOINED
    return None


# How the load's binding reaches a use: alone (with its wraps), or joined with other bindings.
_SOLE, _JOINED = "sole", "joined"


# Module wrappers that hold the module they are given.
_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.DataParallel"})


def _wraps(context, value: Optional[cst.BaseExpression], name: str) -> bool:
    """``value`` is the module ``name`` holds, wrapped or unwrapped: ``nn.DataParallel(name)``, ``name.module``,
    ``name.to(device)``."""
    if isinstance(value, cst.Attribute) and value.attr.value == "module":
        return dotted_name(value.value) == name
    if not isinstance(value, cst.Call):
        return False
    if isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_MOVES:
        return dotted_name(value.func.value) == name
    first = argument(value, 0, "module")
    return context.qualified_name(value.func) in _WRAPPERS and first is not None and dotted_name(first.value) == name


def _mentions(scope: cst.CSTNode, name: str) -> List[Tuple[cst.CSTNode, List[cst.CSTNode]]]:
    """Every read of ``name`` (a plain or a ``self.`` name) in ``scope``, with its ancestors."""
    found: List[Tuple[cst.CSTNode, List[cst.CSTNode]]] = []
    path: List[cst.CSTNode] = []

    class _Reads(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.Name, cst.Attribute)) and dotted_name(node) == name:
                parent = path[-1] if path else None
                stored = isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.Attribute) and parent.attr is node)
                if not stored:
                    found.append((node, list(path)))
                return False
            path.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if path and path[-1] is original_node:
                path.pop()

    visit(scope, _Reads())
    return found


def _calls_load(scan, node: ast.AST) -> bool:
    return any(isinstance(inner, ast.Call) and scan.qualified(inner.func) & LOAD_FUNCTIONS for inner in ast.walk(node))
