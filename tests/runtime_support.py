"""Runtime proofs: run a rule's bad snippet and the codemod's OWN output under torch.

A runtime proof shows that the bug a rule reports really happens (NaN, Inf,
a broken graph, a wrong value, a load that fails) and that the code the
codemod writes does not have it, while computing the same values on ordinary
inputs. The fixed code is never typed by hand: :func:`fix_and_exec` obtains it
from ``engine.fix_text`` at test time, so a regression in the codemod fails the
proof.

Typical use::

    torch = pytest.importorskip("torch")
    from runtime_support import fix_and_exec, forward_backward

    SNIPPET = '''
    import torch
    import torch.nn.functional as F

    def head(logits):
        return torch.log(F.softmax(logits, dim=-1))
    '''

    def test_nan_gradient_goes_away():
        pair = fix_and_exec(SNIPPET, "TL201", applicability="safe")
        bad, good = pair.functions("head")
        logits = torch.tensor([100.0, 0.0, -100.0])
        _, (grad,) = forward_backward(bad, logits)
        assert torch.isnan(grad).any()
        _, (grad,) = forward_backward(good, logits)
        assert torch.isfinite(grad).all()

Each source runs in a fresh namespace (``__name__`` is ``"runtime_snippet"``),
so classes, module-level state and imports of one never leak into the other.
``pair.fixed_source`` is the codemod's text: put it in assertion messages.

Helpers: :func:`fix_and_exec` (the pair), :func:`forward_backward` (output and
input gradients of a call), :func:`save_as_if_on_cuda` (a checkpoint whose
storages say ``cuda:0``, written on this CPU-only machine) and
:func:`storage_locations` (the device tags inside a checkpoint).

This module does not import torch at import time; test modules call
``pytest.importorskip("torch")`` themselves.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from torchlint import config, engine, registry
from torchlint.rule import Confidence, Finding

SNIPPET_PATH = "snippet.py"


@dataclass
class SnippetPair:
    """A snippet and the codemod's output for it, each executed in its own namespace."""

    codes: Tuple[str, ...]
    source: str
    fixed_source: str
    applied: int
    # The findings in the original source (with their fixes), for assertions on fix classes.
    findings: List[Finding]
    # What the rule still reports on the fixed source (empty unless allow_remaining=True).
    remaining: List[Finding]
    original: Dict[str, Any] = field(repr=False)
    fixed: Dict[str, Any] = field(repr=False)

    def functions(self, name: str) -> Tuple[Any, Any]:
        """``name`` as defined by the original and by the fixed source: ``bad, good = pair.functions("f")``."""
        for label, namespace in (("original", self.original), ("fixed", self.fixed)):
            if name not in namespace:
                raise KeyError(f"{name!r} is not defined by the {label} source:\n{self.describe()}")
        return self.original[name], self.fixed[name]

    def describe(self) -> str:
        return f"--- original\n{self.source}--- fixed by {', '.join(self.codes)}\n{self.fixed_source}"


def settings_for(codes: Union[str, Iterable[str]]) -> config.Settings:
    """Settings with exactly ``codes`` enabled (codes, prefixes or names, as on the command line), at every
    confidence level: a runtime proof shows what a finding's code does and what its fix changes, whatever
    the level (below the default level a numerics fix is offered as unsafe)."""
    selectors = [codes] if isinstance(codes, str) else list(codes)
    return config.Settings(enabled=frozenset(registry.expand_selectors(selectors)), confidence_floor=Confidence.LOW)


def execute(source: str, label: str) -> Dict[str, Any]:
    """Run ``source`` as a module body in a fresh namespace and return that namespace."""
    namespace: Dict[str, Any] = {"__name__": "runtime_snippet", "__file__": f"<{label}>"}
    exec(compile(source, f"<{label}>", "exec"), namespace)
    return namespace


def fix_and_exec(
    source: str,
    codes: Union[str, Sequence[str]],
    *,
    unsafe: bool = False,
    applicability: Optional[Union[str, Iterable[str]]] = None,
    allow_remaining: bool = False,
    settings: Optional[config.Settings] = None,
) -> SnippetPair:
    """Fix ``source`` with the rules ``codes`` selected, check a fix was applied, execute both versions.

    ``source`` is dedented first. ``unsafe`` lets unsafe fixes apply (as
    ``--unsafe-fixes``). ``applicability`` ("safe", "numerics", "unsafe", or a
    set of them) asserts the class of every fix offered on the original.
    Unless ``allow_remaining``, no finding of the selected rules may remain on
    the fixed source. ``settings`` overrides the selection (for eps and
    target-torch-version).
    """
    source = textwrap.dedent(source).lstrip("\n")
    selected = (codes,) if isinstance(codes, str) else tuple(codes)
    settings = settings or settings_for(selected)

    before = engine.lint_text(source, SNIPPET_PATH, settings)
    assert not before.diagnostics, before.diagnostics
    assert before.findings, f"the snippet does not trigger {', '.join(selected)}:\n{source}"
    if applicability is not None:
        wanted = {applicability} if isinstance(applicability, str) else set(applicability)
        offered = {f.fix.applicability.value if f.fix else None for f in before.findings}
        assert offered <= wanted, f"fix classes offered: {offered}, expected only {wanted}"

    result = engine.fix_text(source, SNIPPET_PATH, settings, unsafe=unsafe)
    assert not result.result.diagnostics, result.result.diagnostics
    assert result.applied >= 1 and result.text != source, f"no fix was applied to:\n{source}"
    if not allow_remaining:
        assert not result.result.findings, (
            f"findings remain after fixing: {[(f.code, f.location.line) for f in result.result.findings]}\n"
            + result.text
        )

    return SnippetPair(
        codes=selected,
        source=source,
        fixed_source=result.text,
        applied=result.applied,
        findings=before.findings,
        remaining=result.result.findings,
        original=execute(source, "original snippet"),
        fixed=execute(result.text, "fixed snippet"),
    )


def forward_backward(
    function: Callable,
    *inputs: Any,
    loss: Optional[Callable[[Any], Any]] = None,
) -> Tuple[Any, Tuple[Any, ...]]:
    """Call ``function`` on fresh leaf copies of ``inputs``, back-propagate ``loss(output)``.

    Returns the detached output and the gradient of each floating-point tensor
    input (non-tensor and integer inputs are passed through and get no
    gradient). ``loss`` defaults to ``output.sum()``.
    """
    import torch

    leaves: List[Any] = []
    arguments = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.detach().clone().requires_grad_(True)
            leaves.append(value)
        arguments.append(value)
    output = function(*arguments)
    scalar = loss(output) if loss is not None else output.sum()
    scalar.backward()
    return output.detach(), tuple(leaf.grad for leaf in leaves)


# The device the tagger below names while save_as_if_on_cuda saves; None (inert) otherwise.
_CUDA_TAG: Dict[str, Any] = {"device": None, "registered": False}


def _tag_as_cuda(storage: Any) -> Optional[str]:
    return _CUDA_TAG["device"]


def _never_restore(storage: Any, location: str) -> None:
    return None  # leave every location to torch's own deserializers


def save_as_if_on_cuda(obj: Any, path: Any, device: str = "cuda:0") -> None:
    """``torch.save(obj, path)`` as a GPU machine would write it: every storage tagged ``device``.

    Uses torch's public storage-location registry
    (``torch.serialization.register_package``): a tagger that runs before the
    CPU one names ``device`` while this call saves, and returns None (so it is
    inert) otherwise. Its deserializer always declines, so loading goes through
    torch's own CUDA path, which on a CPU-only machine raises "Attempting to
    deserialize object on a CUDA device but torch.cuda.is_available() is
    False" unless ``map_location`` moves the storages.
    """
    import torch

    if not _CUDA_TAG["registered"]:
        torch.serialization.register_package(0, _tag_as_cuda, _never_restore)
        _CUDA_TAG["registered"] = True
    _CUDA_TAG["device"] = device
    try:
        torch.save(obj, path)
    finally:
        _CUDA_TAG["device"] = None


def storage_locations(path: Any) -> List[str]:
    """The device tags recorded in a checkpoint, read without restoring anything."""
    import torch

    seen: List[str] = []

    def record(storage: Any, location: str) -> Any:
        seen.append(location)
        return storage

    torch.load(path, map_location=record, weights_only=False)
    return seen
