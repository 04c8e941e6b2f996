"""Checkpoints: ``torch.load`` / ``torch.save`` calls, where their files come from, and what they hold.

TL401, TL402 and TL406 ask these questions of a ``torch.load`` call:

- :func:`is_project_path`: is the file named in the code itself (a literal, ``Path("...")``, a join of
  literals or of ``os.path.dirname(__file__)``, a name bound once to one of these)?  Such a file is taken
  as the project's own, to be trusted; a variable path as untrusted.
- what does ``torch.save(obj, ...)`` write that weights-only loading refuses (a module, an optimizer, NumPy
  arrays, an ``argparse.Namespace``, an object of the project's classes)?  Since torch 2.6 ``torch.load``
  restricts unpickling to tensors, containers and allow-listed types (``weights_only=True`` by default), so
  loading such a file raises "Weights only load failed": analysis/model/saved_values.py reads it from the
  code, and the project index (``refused_saves_in``) asks it for every module.
- :data:`MODULE_METHODS`: calls on a loaded value that only a module or an optimizer answers (``.eval()``,
  ``.parameters()``, ``.zero_grad()``): the checkpoint held a whole object.
"""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Callable, FrozenSet, Optional

import libcst as cst

from torchlint.analysis.model.ast_names import ast_dotted_name
from torchlint.analysis.model.calls import has_star_args
from torchlint.analysis.model.names import dotted_name
from torchlint.analysis.model.scope import assignments

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

LOAD_FUNCTIONS: FrozenSet[str] = frozenset({"torch.load", "torch.serialization.load"})
SAVE_FUNCTIONS: FrozenSet[str] = frozenset({"torch.save", "torch.serialization.save"})
# torch.load has defaulted to weights_only=True since this release.
WEIGHTS_ONLY_DEFAULT_SINCE = (2, 6)
# Calls that let weights_only unpickle the types they name.
ALLOW_LISTS: FrozenSet[str] = frozenset(
    {"torch.serialization.add_safe_globals", "torch.serialization.safe_globals"}
)
# Methods and attributes only a module or an optimizer has (a tensor, a dict or a list answers none of them).
MODULE_METHODS: FrozenSet[str] = frozenset(
    {
        "eval", "train", "parameters", "named_parameters", "modules", "named_modules", "children", "named_children",
        "forward", "state_dict", "load_state_dict", "zero_grad", "step", "param_groups", "apply", "requires_grad_",
        "buffers", "named_buffers", "register_forward_hook",
    }
)

# Calls that build a path from their arguments without adding anything of their own.
PATH_BUILDERS = frozenset(
    {"os.path.join", "os.path.abspath", "os.path.dirname", "os.path.expanduser", "os.path.realpath", "pathlib.Path", "pathlib.PurePath"}
)
PATH_METHODS = frozenset({"joinpath", "with_suffix", "with_name", "resolve", "absolute", "expanduser"})


def is_project_path(context: "FileContext", node: cst.BaseExpression, depth: int = 0) -> bool:
    """A path spelled in the code: literals, joins of literals, paths next to ``__file__``, names bound to one."""
    if depth > 5:
        return False
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.FormattedString):
        return all(
            is_project_path(context, part.expression, depth + 1)
            for part in node.parts
            if isinstance(part, cst.FormattedStringExpression)
        )
    if isinstance(node, cst.Name):
        if node.value == "__file__":
            return True
        value = bound_value(context, node.value)
        return value is not None and is_project_path(context, value, depth + 1)
    if isinstance(node, cst.Attribute) and node.attr.value == "parent":
        return is_project_path(context, node.value, depth + 1)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Divide, cst.Add)):
        return is_project_path(context, node.left, depth + 1) and is_project_path(context, node.right, depth + 1)
    if isinstance(node, cst.Call) and not has_star_args(node) and node.args:
        qualified = context.qualified_name(node.func)
        if qualified in PATH_BUILDERS or (qualified or "").startswith("pathlib.Path."):
            return all(arg.keyword is None and is_project_path(context, arg.value, depth + 1) for arg in node.args)
        if qualified is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in PATH_METHODS:
            return is_project_path(context, node.func.value, depth + 1) and all(
                is_project_path(context, arg.value, depth + 1) for arg in node.args
            )
    return False


def bound_value(context: "FileContext", name: str) -> Optional[cst.BaseExpression]:
    """The value of the single assignment to ``name`` in the enclosing function, else in the module
    (None for a parameter, or a name bound more than once: which binding reaches the use is not known)."""
    function = context.enclosing(cst.FunctionDef)
    if function is not None and any(p.name.value == name for p in _parameters(function)):
        return None
    scopes = ([function.body.body] if function is not None else []) + [context.module.body]
    for body in scopes:
        values = [value for target, value in assignments(body) if dotted_name(target) == name]
        if len(values) == 1:
            return values[0]
        if values:
            return None
    return None


def _parameters(function: cst.FunctionDef):
    params = function.params
    every = list(params.params) + list(params.kwonly_params) + list(params.posonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            every.append(star)
    return every


def path_key(context: "FileContext", node: cst.BaseExpression) -> Optional[str]:
    """What a checkpoint path is, to match a save with a load: the text of a literal (or of a name bound
    once to one), else the dotted name (``args.model_path``, ``MODEL_PATH``), else the expression that builds
    it from such parts (:func:`composite_path_key`); None otherwise."""
    if isinstance(node, cst.SimpleString):
        return repr(node.evaluated_value)
    dotted = dotted_name(node)
    if dotted is None:
        try:
            parsed = ast.parse(context.module.code_for_node(node).strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return None
        return composite_path_key(parsed)
    if isinstance(node, cst.Name):
        value = bound_value(context, node.value)
        if isinstance(value, cst.SimpleString):
            return repr(value.evaluated_value)
    return dotted


def ast_path_key(node: ast.expr, local: Optional[dict] = None, module: Optional[dict] = None) -> Optional[str]:
    """:func:`path_key` read with ``ast``: ``local`` and ``module`` map the names assigned once in the function
    and at the module's top level to their values."""
    if isinstance(node, ast.Name):
        value = (local or {}).get(node.id)
        if value is None and node.id not in (local or {}):
            value = (module or {}).get(node.id)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return repr(value.value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return repr(node.value)
    dotted = ast_dotted_name(node)
    return dotted if dotted is not None else composite_path_key(node)


# A file name the code spells in full: a stem and an extension (``vae.pkl``, ``best_model.pth.tar``).
_FILE_NAME = re.compile(r"[A-Za-z0-9_][\w\-.]*\.[A-Za-z][A-Za-z0-9]{0,7}")


def ast_file_name(
    node: ast.expr,
    qualify: Callable[[ast.expr], Optional[str]],
    local: Optional[dict] = None,
    module: Optional[dict] = None,
    depth: int = 0,
) -> Optional[str]:
    """The file name a checkpoint path ends in, when the code writes that name whole: ``vae.pkl`` for
    ``os.path.join(base, "vae.pkl")``, ``f"{out}/vae.pkl"``, ``out + "/vae.pkl"``, ``Path(out) / "vae.pkl"`` or
    ``"runs/vae.pkl"``; a name bound once (``local``, then ``module``) is followed.  None when the last part is
    built at run time (``f"{out}/epoch_{e}.pt"``) or glued to a name without a separator (``out + "vae.pkl"``)."""
    if depth > 4:
        return None
    if isinstance(node, ast.Name):
        value = (local or {}).get(node.id)
        if value is None and node.id not in (local or {}):
            value = (module or {}).get(node.id)
        return None if value is None else ast_file_name(value, qualify, local, module, depth + 1)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _last_part(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # pathlib: the right side is a whole part
        return ast_file_name(node.right, qualify, local, module, depth + 1)
    if isinstance(node, ast.Call) and node.args and not node.keywords:
        builder = qualify(node.func)
        if builder in _JOINS:  # each argument is a whole part
            return ast_file_name(node.args[-1], qualify, local, module, depth + 1)
        if isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
            return ast_file_name(node.args[0], qualify, local, module, depth + 1)
        return None
    # Text glued on: the file name counts only after a separator of its own (``out + "/vae.pkl"``).
    tail = node.values[-1] if isinstance(node, ast.JoinedStr) and node.values else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        tail = node.right
    if isinstance(tail, ast.Constant) and isinstance(tail.value, str) and "/" in tail.value.replace("\\", "/"):
        return _last_part(tail.value)
    return None


_JOINS = frozenset({"os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath"})


def _last_part(text: str) -> Optional[str]:
    last = text.replace("\\", "/").rsplit("/", 1)[-1]
    return last if _FILE_NAME.fullmatch(last) else None


# Keys of paths built from parts start with this: they match only within one function (see refused_saves).
COMPOSITE_KEY_PREFIX = "built:"
_PATH_BUILDERS = frozenset({"os.path.join", "str"})


def composite_path_key(node: ast.expr) -> Optional[str]:
    """The key of a path built from names, attributes and literals (``dir + args.model_name + ".model"``,
    ``f"{out}/ckpt.pt"``, ``os.path.join(out, "ckpt.pt")``): its normalised text. The same text names the same
    file only where none of its names is rebound in between, which the caller checks
    (:func:`composite_path_names`)."""
    if not isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call)) or composite_path_names(node) is None:
        return None
    return COMPOSITE_KEY_PREFIX + ast.unparse(node)


def composite_path_names(node: ast.expr) -> Optional[FrozenSet[str]]:
    """The root names a path built from parts reads; None when it holds anything but names, attributes,
    literals, ``+``/``%``, f-strings and ``os.path.join``/``str`` of them."""
    if isinstance(node, ast.Constant):
        return frozenset() if isinstance(node.value, (str, int)) else None
    if isinstance(node, (ast.Name, ast.Attribute)):
        dotted = ast_dotted_name(node)
        return None if dotted is None else frozenset({dotted.split(".")[0]})
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod, ast.Div)):
        parts = [node.left, node.right]
    elif isinstance(node, ast.JoinedStr):
        parts = list(node.values)
    elif isinstance(node, ast.FormattedValue):
        parts = [node.value]
    elif isinstance(node, ast.Call) and not node.keywords and ast_dotted_name(node.func) in _PATH_BUILDERS:
        parts = list(node.args)
    else:
        return None
    names: FrozenSet[str] = frozenset()
    for part in parts:
        inner = composite_path_names(part)
        if inner is None:
            return None
        names |= inner
    return names
