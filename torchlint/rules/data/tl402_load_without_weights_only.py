from __future__ import annotations

import libcst as cst

from torchlint.analysis.model.calls import add_keyword, argument, has_star_args, keyword_arg
from torchlint.analysis.model.checkpoints import LOAD_FUNCTIONS, WEIGHTS_ONLY_DEFAULT_SINCE, is_project_path
from torchlint.analysis.api.signatures import gives_keyword
from torchlint.rule import Applicability, Confidence, FixSpec, Replacement, Rule

# torch.load has defaulted to weights_only=True since this release.
SAFE_DEFAULT_SINCE = WEIGHTS_ONLY_DEFAULT_SINCE


class LoadWithoutWeightsOnly(Rule):
    """
    ## What it does
    Flags `torch.load` calls that may unpickle arbitrary objects:

    - when `target-torch-version` is below 2.6, a `torch.load(f)` without an
      explicit `weights_only` (before 2.6 the default was `False`);
    - for every target, `weights_only=False` on a path that is not a literal
      of the project (a string literal, `Path("...")`, `os.path.join` of
      literals or of `os.path.dirname(__file__)`, or a name bound to one of
      these in the same function or module).

    With no `target-torch-version` configured the newest torch is assumed,
    whose default is already `weights_only=True`: only the second case is
    reported.

    ## Why is this bad?
    `torch.load` is `pickle.load` underneath. With `weights_only=False` (the
    default before torch 2.6) a checkpoint can name any callable to run
    while it is unpickled, so loading a file downloaded from a hub, sent by a
    user, or found in a shared directory executes code chosen by whoever
    wrote that file. `weights_only=True` restricts unpickling to tensors,
    primitive containers and allow-listed types.

    ## Example
    ```python
    # target-torch-version = "2.4"
    state = torch.load(path, map_location="cpu")
    # any target
    state = torch.load(downloaded, map_location="cpu", weights_only=False)
    ```

    ## Use instead
    ```python
    state = torch.load(path, map_location="cpu", weights_only=True)
    state = torch.load(downloaded, map_location="cpu", weights_only=True)
    ```

    ## Fix safety
    Unsafe: with `weights_only=True` a checkpoint that pickles whole
    objects (a saved `nn.Module`, an optimizer with custom classes, numpy
    scalars) fails to load with an `UnpicklingError` until its types are
    allow-listed (`torch.serialization.add_safe_globals`) or the code saves
    `state_dict()`s instead. The keyword is appended after the arguments
    already given (it composes with TL401's `map_location` on the same call);
    `weights_only=False` becomes `weights_only=True`. Calls with `*args` or
    `**kwargs` are not flagged (the keyword may be among them), nor is
    `weights_only=` given a variable.

    Not seen: a path whose trust cannot be read from the code (a literal
    path is taken as the project's own file, though the file may have been
    replaced; a variable path is taken as untrusted, though it may be a
    file the program wrote itself), `pickle.load` and other loaders.
    """

    code = "TL402"
    name = "load-without-weights-only"
    message = "torch.load may unpickle arbitrary objects: a crafted checkpoint runs code when it is loaded"
    fix_applicability = Applicability.UNSAFE
    triggers = ("load",)
    confidence_levels = """
- **high**: for a `target-torch-version` before 2.6, a `torch.load` without `weights_only` (the default
  unpickles).
- **medium**: `weights_only=False` on a path the code does not write out: it may be a file from elsewhere,
  or the program's own checkpoint named on the command line.
"""

    @classmethod
    def prepass(cls, scan):
        return scan.regions_calling_qualified(LOAD_FUNCTIONS) or None

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.context.qualified_name(node.func)
        if qualified not in LOAD_FUNCTIONS or has_star_args(node):
            return
        path = argument(node, 0, "f")
        if path is None:
            return  # not a valid call at all
        given = keyword_arg(node, "weights_only")
        if given is not None:
            if _is_false(given.value) and not is_project_path(self.context, path.value):
                self.report(
                    given,
                    "torch.load(..., weights_only=False) on a path that is not the project's own file: "
                    "a crafted checkpoint runs code when it is unpickled",
                    FixSpec(
                        Applicability.UNSAFE,
                        "Set `weights_only=True`",
                        (Replacement(given.value, cst.Name("True")),),
                    ),
                    # Found at medium: a path the code does not write out may still be the program's own
                    # checkpoint (a command-line default naming what its trainer saved).
                    confidence=Confidence.MEDIUM,
                )
            return
        target = self.context.settings.target_torch_version
        if target is None or target >= SAFE_DEFAULT_SINCE or gives_keyword(qualified, node, "weights_only"):
            return
        self.report(
            node,
            f"torch.load without weights_only unpickles arbitrary objects on torch {target[0]}.{target[1]} "
            "(the default is False before 2.6): a crafted checkpoint runs code when it is loaded",
            FixSpec(
                Applicability.UNSAFE,
                "Add `weights_only=True`",
                (Replacement(node, add_keyword(node, "weights_only", cst.Name("True"))),),
            ),
        )


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"
