"""Is this code guarded against the torch release it runs on?

Compatibility code names an old API on purpose and runs it only where it exists::

    try:
        from torch._six import inf
    except ImportError:
        from torch import inf

    if version.parse(torch.__version__) < version.parse("1.9"):
        w, v = torch.symeig(a, eigenvectors=True)
    else:
        w, v = torch.linalg.eigh(a)

A use is guarded when it sits in the body of a ``try`` whose handlers catch what a missing or
removed API raises (ImportError, ModuleNotFoundError, AttributeError, the RuntimeError of a removed
function's stub, or a bare ``except:``), in such a handler (the fallback for old releases:
``except AttributeError: scaler = torch.cuda.amp.GradScaler()``), in an ``except TypeError:`` handler of a ``try``
of at most three plain statements that call torch (``try: scaler = torch.amp.GradScaler("cuda")``: the running
release's signature is probed, and the handler serves the releases that lack it), or in either branch of an ``if`` (or conditional
expression) whose test reads a version (``torch.__version__``, ``TORCH_VERSION``,
``is_torch_greater_than("2.0")``) or probes torch for a name (``hasattr(torch, "symeig")``,
``getattr(torch.linalg, "eigh", None)``), or after such an ``if`` that always returns or raises (its implicit
``else``).  ``except Exception`` around a training loop is not a
guard: it swallows the break, it does not plan for it; nor is ``getattr(outputs, "loss", None)``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchlint.analysis.api.api_drift import in_watched_package
from torchlint.analysis.values.domain import structurally_equal

if TYPE_CHECKING:  # pragma: no cover
    from torchlint.analysis.model.file_context import FileContext

# What a missing or removed API raises, and the handlers that catch it.
_CAUGHT = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "RuntimeError"})
# A test that reads which release this is.
_VERSION_WORDS = re.compile(r"version|TORCH_\w*|_TORCH\w*|torch_\w*(?:greater|less|newer|older)", re.IGNORECASE)
_PROBES = frozenset({"hasattr", "getattr"})
# What a call raises on a release whose signature lacks an argument it passes (``torch.amp.GradScaler("cuda")``
# before torch 2.3), and how many plain statements a ``try`` that probes a signature holds at most.
_SIGNATURE_ERRORS = frozenset({"TypeError"})
_PROBE_STATEMENTS = 3


def is_version_guarded(context: "FileContext", present_on_target: bool = False, removed: Optional[cst.Attribute] = None) -> bool:
    """Whether the node being visited runs only on some releases of torch (or functorch, torchvision).

    ``present_on_target``: the use is of an API the target release still has (deprecated, not removed). A ``try``
    body that plans for its absence then runs on the target all the same (``try: from torch.cuda.amp import
    autocast`` ``except ImportError: ...`` imports it and warns at each call): only the handlers and the version
    tests guard it.

    ``removed``: the use is ``obj.name`` of an attribute the target release no longer has; the branch an ``if``
    (or conditional expression) takes when ``hasattr(obj, "name")`` holds never runs there (``ds.train_data if
    hasattr(ds, "train_data") else ds.data``)."""
    ancestors = context.ancestors
    for index, node in enumerate(ancestors):
        child = ancestors[index + 1] if index + 1 < len(ancestors) else None
        if removed is not None and isinstance(node, (cst.If, cst.IfExp)) and (child or removed) is node.body and _probes(context, node.test, removed):
            return True
        if isinstance(node, cst.Try) and child is node.body and not present_on_target and any(
            _catches_missing_api(h) for h in node.handlers
        ):
            return True
        if isinstance(node, cst.ExceptHandler) and _catches_missing_api(node):
            return True  # the fallback for the releases where the try's API is missing
        if isinstance(node, cst.ExceptHandler) and index > 0 and _catches(node, _SIGNATURE_ERRORS) and _probes_a_signature(context, ancestors[index - 1]):
            return True  # ``except TypeError:`` after a newer signature of a torch call: the old releases' fallback
        if isinstance(node, (cst.If, cst.IfExp)) and child is not node.test and _asks_for_release(context, node.test):
            return True
        if isinstance(node, (cst.IndentedBlock, cst.Module)) and child is not None and _after_a_release_exit(context, node.body, child):
            return True
    return False


def _probes(context: "FileContext", test: cst.BaseExpression, use: cst.Attribute) -> bool:
    """``hasattr(obj, "name")`` (alone, or as a term of an ``and``) for the use ``obj.name``."""
    terms = [test]
    while terms:
        term = terms.pop()
        if isinstance(term, cst.BooleanOperation) and isinstance(term.operator, cst.And):
            terms += [term.left, term.right]
            continue
        if (
            isinstance(term, cst.Call) and isinstance(term.func, cst.Name) and term.func.value == "hasattr"
            and len(term.args) == 2 and isinstance(term.args[1].value, cst.SimpleString)
            and term.args[1].value.evaluated_value == use.attr.value
            and structurally_equal(term.args[0].value, use.value)
        ):
            return True
    return False


def _after_a_release_exit(context: "FileContext", body, statement: cst.CSTNode) -> bool:
    """``statement`` follows, in the same block, an ``if`` that asks for the release and always returns or raises
    (``if hasattr(torch.amp, "GradScaler"): return torch.amp.GradScaler(...)``): it is that ``if``'s else branch."""
    for earlier in body:
        if earlier is statement:
            return False
        if isinstance(earlier, cst.If) and earlier.orelse is None and _always_leaves(earlier.body) and _asks_for_release(context, earlier.test):
            return True
    return False


def _always_leaves(block: cst.BaseSuite) -> bool:
    last = block.body[-1] if isinstance(block, cst.IndentedBlock) and block.body else None
    if isinstance(block, cst.SimpleStatementSuite):
        last = block
    if not isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) or not last.body:
        return False
    return isinstance(last.body[-1], (cst.Return, cst.Raise))


def _asks_for_release(context: "FileContext", test: cst.BaseExpression) -> bool:
    if _VERSION_WORDS.search(context.module.code_for_node(test)):
        return True
    finder = _Probes(context)
    test.visit(finder)
    return finder.found


class _TorchCalls(cst.CSTVisitor):
    def __init__(self, context: "FileContext") -> None:
        super().__init__()
        self.context, self.found = context, False

    def visit_Call(self, node: cst.Call) -> None:
        if in_watched_package(self.context.qualified_name(node.func) or ""):
            self.found = True


class _Probes(cst.CSTVisitor):
    """``hasattr(torch, ...)`` / ``getattr(torch.linalg, ...)``: a probe of torch itself."""

    def __init__(self, context: "FileContext") -> None:
        super().__init__()
        self.context, self.found = context, False

    def visit_Call(self, node: cst.Call) -> None:
        probe = isinstance(node.func, cst.Name) and node.func.value in _PROBES and node.args
        if probe and in_watched_package(self.context.qualified_name(node.args[0].value) or ""):
            self.found = True


def _catches_missing_api(handler: cst.ExceptHandler) -> bool:
    return handler.type is None or _catches(handler, _CAUGHT)


def _catches(handler: cst.ExceptHandler, kinds_caught: frozenset) -> bool:
    if handler.type is None:
        return False
    kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    for kind in kinds:
        value = kind.value if isinstance(kind, cst.Element) else kind
        name = value.attr.value if isinstance(value, cst.Attribute) else getattr(value, "value", None)
        if name in kinds_caught:
            return True
    return False


def _probes_a_signature(context: "FileContext", statement: cst.CSTNode) -> bool:
    """A ``try`` whose body is a few plain statements that call torch (``scaler = torch.amp.GradScaler("cuda")``): a
    probe of the signature the running release accepts, not a block of work whose errors the handler swallows."""
    if not isinstance(statement, cst.Try) or not isinstance(statement.body, cst.IndentedBlock):
        return False
    body = statement.body.body
    if not body or len(body) > _PROBE_STATEMENTS or not all(isinstance(line, cst.SimpleStatementLine) for line in body):
        return False
    finder = _TorchCalls(context)
    statement.body.visit(finder)
    return finder.found
