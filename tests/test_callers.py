"""Unit tests of analysis/flow/callers.py: which calls of a function the file shows, and what each passes."""
from __future__ import annotations

import textwrap
from typing import Dict, Optional

import libcst as cst

from torchlint import config
from torchlint.analysis.flow.callers import argument_for, call_sites
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.model.project_index import file_context


def _context(source: str) -> FileContext:
    source = textwrap.dedent(source).lstrip("\n")
    return file_context("snippet.py", source, cst.parse_module(source), config.Settings(enabled=frozenset()))


def _defs(node: cst.CSTNode, found: Optional[Dict[str, cst.FunctionDef]] = None) -> Dict[str, cst.FunctionDef]:
    """Every def by qualified-ish name (``Class.method``, ``outer.inner``)."""
    found = {} if found is None else found

    class _Defs(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack = []

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            self.stack.append(node.name.value)

        def leave_ClassDef(self, node: cst.ClassDef) -> None:
            self.stack.pop()

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            found[".".join(self.stack + [node.name.value])] = node
            self.stack.append(node.name.value)

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.stack.pop()

    node.visit(_Defs())
    return found


def _passed(context: FileContext, function: cst.FunctionDef, parameter: str):
    sites = call_sites(context, function)
    if sites is None:
        return None
    return [
        None if (value := argument_for(function, parameter, site)) is None else context.module.code_for_node(value)
        for site in sites
    ]


def test_positional_keyword_and_default_arguments():
    context = _context(
        """
        def reduce_loss(loss, mask, scale=2.0, *, floor=1e-6):
            return loss
        def caller(x, m, rest):
            reduce_loss(x, m)
            reduce_loss(x, mask=m * 2, floor=1e-3)
            reduce_loss(x, *rest)
        """
    )
    function = _defs(context.module)["reduce_loss"]
    assert _passed(context, function, "mask") == ["m", "m * 2", None]
    assert _passed(context, function, "scale") == ["2.0", "2.0", None]
    assert _passed(context, function, "floor") == ["1e-6", "1e-3", None]


def test_methods_called_through_self_skip_self():
    context = _context(
        """
        class Rotation:
            def forward(self, w):
                return self._project(w, 1e-5)
            def _project(self, q, eps):
                return q
        class Other:
            def forward(self, w):
                return self._project(w)
            def _project(self, q):
                return q
        """
    )
    defs = _defs(context.module)
    assert _passed(context, defs["Rotation._project"], "q") == ["w"]
    assert _passed(context, defs["Rotation._project"], "eps") == ["1e-5"]
    assert _passed(context, defs["Other._project"], "q") == ["w"]


def test_no_answer_when_the_file_may_reach_the_function_otherwise():
    context = _context(
        """
        import functools
        def _as_value(x):
            return x
        def _through_object(x):
            return x
        def _recursive_loss(x, n):
            return _recursive_loss(x, n - 1) if n else x
        def public_helper(x):
            return x
        @functools.lru_cache()
        def _decorated(x):
            return x
        def _uncalled(x):
            return x
        class Base:
            def _inherited(self, x):
                return x
        class Child(Base):
            def forward(self, x):
                return self._inherited(x)
        def use(items, obj):
            callbacks = [_as_value]
            obj._through_object(1)
            _through_object(2)
            return public_helper(3), _decorated(4), _as_value(5)
        """
    )
    defs = _defs(context.module)
    for name in ("_as_value", "_through_object", "_recursive_loss", "public_helper", "_decorated", "_uncalled"):
        assert call_sites(context, defs[name]) is None, name
    # Base._inherited's only call is Child's self._inherited(...): not tied to a def of Child's class.
    assert call_sites(context, defs["Base._inherited"]) is None


def test_nested_helpers_and_loss_functions_are_judged_by_their_calls():
    context = _context(
        """
        def mel_filterbank(f_min, f_max):
            def hz_to_mel(freq):
                return freq
            return hz_to_mel(f_min) + hz_to_mel(f_max)
        def masked_loss(x, mask):
            return x
        def total(x, m):
            return masked_loss(x, m)
        """
    )
    defs = _defs(context.module)
    assert _passed(context, defs["mel_filterbank.hz_to_mel"], "freq") == ["f_min", "f_max"]
    assert _passed(context, defs["masked_loss"], "mask") == ["m"]


def test_a_loss_module_is_called_through_the_attributes_holding_its_instances():
    context = _context(
        """
        import torch
        class LikelihoodLoss(torch.nn.Module):
            def forward(self, sigma, error):
                return sigma
        class PoseLoss(torch.nn.Module):
            def __init__(self, on):
                super().__init__()
                self.likelihood = LikelihoodLoss().to("cpu") if on else None
            def forward(self, s, e):
                if self.likelihood is None:
                    return e
                return self.likelihood(s.exp(), e)
        class Layer(torch.nn.Module):
            def forward(self, x):
                return x
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = Layer()
            def forward(self, x):
                return self.layer(x)
        class EscapedLoss(torch.nn.Module):
            def forward(self, sigma):
                return sigma
        class Trainer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = EscapedLoss()
                self.losses = [self.criterion]
            def forward(self, s):
                return self.criterion(s)
        """
    )
    defs = _defs(context.module)
    assert _passed(context, defs["LikelihoodLoss.forward"], "sigma") == ["s.exp()"]
    assert call_sites(context, defs["Layer.forward"]) is None  # not a loss module: its callers are not read
    assert call_sites(context, defs["EscapedLoss.forward"]) is None  # the instance is handed to a list


def test_old_style_super_naming_the_class_is_not_a_use_of_it():
    context = _context(
        """
        import torch
        class SpectralLoss(torch.nn.Module):
            def __init__(self):
                super(SpectralLoss, self).__init__()
            def forward(self, x_mag, y_mag):
                return x_mag / y_mag
        class STFTLoss(torch.nn.Module):
            def __init__(self):
                super(STFTLoss, self).__init__()
                self.spectral = SpectralLoss()
            def forward(self, x, y):
                return self.spectral(x.exp(), y.exp())
        class OtherLoss(torch.nn.Module):
            def forward(self, z):
                return z
        class Wrapper(OtherLoss):
            def __init__(self):
                super(OtherLoss, self).__init__()
                self.inner = OtherLoss()
            def forward(self, z):
                return self.inner(z)
        """
    )
    defs = _defs(context.module)
    assert _passed(context, defs["SpectralLoss.forward"], "y_mag") == ["y.exp()"]
    # a subclass (whose super() names OtherLoss too) may reach OtherLoss.forward through self: no answer
    assert call_sites(context, defs["OtherLoss.forward"]) is None
