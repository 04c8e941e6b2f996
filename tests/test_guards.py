"""Unit tests of the guard analysis (analysis/domain, analysis/guards, analysis/dataflow, analysis/fixes).

Each snippet line that holds a domain-edge op ends with ``# unguarded`` (reported at
any confidence), ``# high``, ``# medium`` or ``# low`` (reported at that confidence) or
``# guarded``; the test walks the tree the way the engine does (keeping the
ancestor chain) and asks ``assess`` about every op found.
"""
from __future__ import annotations

import textwrap
from typing import Dict, List, Tuple

import libcst as cst
import pytest

from torchlint import config
from torchlint.analysis.project import guards, owners
from torchlint.analysis.flow import signs
from torchlint.analysis.model.dataflow import bindings, site_of
from torchlint.analysis.values.domain import DIV, LOG, POW, RSQRT, SQRT
from torchlint.analysis.flow.domain_match import match_domain_op
from torchlint.analysis.values.fixes import clamped, float_literal
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.model.project_index import file_context


class _Walker(cst.CSTVisitor):
    def __init__(self, context: FileContext) -> None:
        super().__init__()
        self.context = context
        self.ops: List[Tuple[cst.CSTNode, object, bool, list]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            self.context.imports.add(node)
        op = match_domain_op(self.context, node, site_of(self.context.ancestors))
        if op is not None:
            verdict = guards.assess(self.context, op)
            self.ops.append((node, op, verdict, list(self.context.ancestors)))
        self.context.ancestors.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.context.ancestors.pop()


def analyse(source: str, path: str = "snippet.py"):
    source = textwrap.dedent(source).lstrip("\n")
    module = cst.parse_module(source)
    context = file_context(path, source, module, config.Settings(enabled=frozenset()))
    walker = _Walker(context)
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    module.visit(walker)
    verdicts: Dict[int, List[bool]] = {}
    kinds: Dict[int, List[str]] = {}
    for node, op, verdict, _ in walker.ops:
        line = positions[node].start.line
        verdicts.setdefault(line, []).append(verdict)
        kinds.setdefault(line, []).append(op.kind)
    return source, verdicts, kinds, context, walker


def check(source: str, path: str = "snippet.py") -> None:
    text, verdicts, _, _, _ = analyse(source, path)
    for number, line in enumerate(text.splitlines(), start=1):
        level = next((level for level in ("high", "medium", "low") if line.rstrip().endswith(f"# {level}")), None)
        if line.rstrip().endswith("# unguarded"):
            assert verdicts.get(number) and all(verdicts[number]), f"line {number} should need a guard: {line}"
        elif level is not None:
            found = [verdict.value if verdict else None for verdict in verdicts.get(number, [])]
            assert found and all(value == level for value in found), f"line {number} should be {level}, is {found}: {line}"
        elif line.rstrip().endswith("# guarded"):
            assert number in verdicts, f"line {number} holds no domain-edge op: {line}"
            assert not any(verdicts[number]), f"line {number} is guarded: {line}"
        elif line.rstrip().endswith("# convention"):
            # Guarded by a name alone (eps, safe_*, *_targets, config.*): a naming convention lowers the finding
            # the facts give by one level and never silences it (analysis/model/conventions.py).
            assert verdicts.get(number) and all(verdicts[number]), f"line {number} is reported, one level down: {line}"


def test_every_form_is_recognised():
    _, _, kinds, _, _ = analyse(
        """
        import torch
        from torch import rsqrt
        def f(x: torch.Tensor, p, mask):
            a = torch.sqrt(x)
            b = x.sqrt()
            c = x ** 0.5
            d = torch.pow(x, 0.5)
            e = x.pow(.5)
            g = rsqrt(x)
            h = torch.log2(x) + x.log10() + x.log()
            i = x ** (1 / p)
            j = torch.pow(x, 0.25)
            k = x / mask.sum()
            l = x / x.norm(dim=1, keepdim=True)
            n = torch.div(x, x.std())
            x /= torch.count_nonzero(mask)
        """
    )
    # A root spelled as a power is a power (TL103): the finding follows the spelling.
    assert kinds[4] == [SQRT] and kinds[5] == [SQRT] and kinds[6] == [POW]
    assert kinds[7] == [POW] and kinds[8] == [POW] and kinds[9] == [RSQRT]
    assert kinds[10] == [LOG, LOG, LOG]
    assert kinds[11] == [POW] and kinds[12] == [POW]
    assert kinds[13] == [DIV] and kinds[14] == [DIV] and kinds[15] == [DIV] and kinds[16] == [DIV]


def test_not_domain_ops():
    _, _, kinds, _, _ = analyse(
        """
        import math
        import numpy as np
        import torch
        def f(x: torch.Tensor, w):
            a = x ** 2
            b = x ** 1.5
            c = x ** -0.5
            d = math.sqrt(3) + np.log(x) + math.log(2)
            f = x / x.max()
            g = x / 3
        """
    )
    assert kinds == {}


def test_divisor_kinds_and_fix_shapes():
    _, _, _, context, walker = analyse(
        """
        import torch
        def f(x, a, b, labels, mask):
            n = (labels != -100).sum()
            p = x.sum() / n
            q = x / x.norm(dim=-1, keepdim=True)
            r = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
            s = x / x.std()
            t = x / (x ** 2).sum()
            u = x / mask.float().sum(1)
        """
    )
    divisors = [op.divisor for _, op, _, _ in walker.ops]
    assert [d.kind for d in divisors] == ["count", "normalize", "cosine", "magnitude", "magnitude", "count"]
    assert divisors[0].through_name


def test_positive_forms_are_guards():
    check(
        """
        import torch
        import torch.nn.functional as F
        EPS = 1e-6
        TINY = 1e-12
        def f(x: torch.Tensor, eps=1e-8, tau=0.07):
            a = torch.sqrt(x + eps)  # convention
            b = torch.sqrt(x + 1e-6)  # guarded
            c = torch.log(1 + x)  # guarded
            d = torch.log(x.clamp(min=EPS))  # guarded
            e = torch.log(x.clamp_min(1e-6))  # guarded
            g = torch.log(torch.clamp(x, TINY, 1.0))  # guarded
            h = torch.log(x.clip(min=eps))  # guarded
            i = torch.sqrt(torch.maximum(x, torch.tensor(1e-6)))  # guarded
            j = torch.log(torch.exp(x))  # guarded
            k = torch.log(F.softplus(x) + eps)  # guarded
            l = torch.sqrt(x.abs() + eps)  # guarded
            m = torch.sqrt(x ** 2 + eps)  # guarded
            o = torch.log(tau)  # guarded
            q = torch.log(F.relu(x) + EPS)  # guarded
        """
    )


def test_non_guards():
    check(
        """
        import torch
        import torch.nn.functional as F
        EPS = 1e-6
        def loss(x: torch.Tensor, p: torch.Tensor, mask):
            a = torch.sqrt(x) + EPS  # unguarded
            b = torch.clamp_min(torch.log(p), -100)  # unguarded
            c = torch.sqrt(x.clamp(min=0))  # unguarded
            d = torch.sqrt(x.clamp_min(0))  # unguarded
            e = torch.log(F.softplus(x))  # unguarded
            g = torch.sqrt(x.abs())  # unguarded
            h = torch.log(x - 1e-6)  # unguarded
            i = x / mask.sum()  # unguarded
            j = torch.log(p * x)  # unguarded
        """
    )


def test_names_bound_earlier():
    check(
        """
        import torch
        def forward(x: torch.Tensor, mask, eps=1e-6):
            v = x.var(0)
            a = v.sqrt()  # unguarded
            v = v + eps
            b = v.sqrt()  # guarded
            s = x.square().sum()
            s += eps
            c = torch.log(s)  # guarded
            d = x.norm(dim=-1)
            d = d + mask * 1e-16
            e = torch.log(d)  # guarded
            n = x.square().sum()
            n.clamp_(min=1e-6)
            g = torch.sqrt(n)  # guarded
            m = x.norm()
            m[m == 0] = 1.0
            h = x / m  # guarded
            w = x.abs()
            with torch.no_grad():
                w = w + eps
            i = torch.log(w)  # guarded
        """
    )


def test_conditions_and_asserts():
    check(
        """
        import torch
        def forward(x: torch.Tensor, mask, d: torch.Tensor):
            if (x > 0).all():
                a = torch.sqrt(x)  # guarded
            if d != 0:
                b = x / d.norm()  # unguarded
            if x.min() > 0:
                c = x.log()  # guarded
            if mask.any():
                e = x.sum() / mask.sum()  # guarded
            n = mask.sum()
            g = x.sum() / n if n > 0 else x.sum()  # guarded
            if n == 0:
                return None
            h = x.sum() / n  # guarded
            assert (d > 0).all()
            i = torch.log(d)  # guarded
            ok = x > 0
            if ok.all():
                j = torch.log(x)  # guarded
            k = torch.log(x)  # unguarded
        """
    )


def test_not_tensors_are_never_flagged():
    check(
        """
        import math
        import torch
        def f(x: torch.Tensor, dim: int, hidden_size):
            a = dim ** 0.5  # guarded
            b = x.size(-1) ** 0.5  # guarded
            c = x.shape[1] ** 0.5  # guarded
            d = x.numel() ** 0.5  # guarded
            e = torch.sqrt(torch.tensor(dim))  # guarded
            B, N, C = x.shape
            g = N ** 0.5  # guarded
            h = len(x) ** (1 / 3)  # guarded
        """
    )


def test_user_defined_log_is_not_torch():
    check(
        """
        import torch
        class Group:
            def log(self):
                return self
            def inverse(self, other):
                return other.log()  # guarded
        def loss(x: torch.Tensor):
            return x.log()  # unguarded
        """
    )


def test_ownership_where_filter_and_fused():
    check(
        """
        import torch
        import torch.nn.functional as F
        def forward(x: torch.Tensor, p: torch.Tensor, logits, w):
            a = torch.where(x > 0, torch.sqrt(x), 0)  # guarded
            b = torch.where(p > 0, p * torch.log(p), torch.zeros_like(p))  # guarded
            c = torch.nan_to_num(torch.log(p))  # guarded
            y = x / x.norm()  # guarded
            y[torch.isnan(y)] = 0
            d = torch.log(F.softmax(logits, -1))  # guarded
            e = torch.log(torch.sigmoid(logits))  # guarded
            g = torch.log(torch.exp(logits).sum(-1))  # guarded
            h = p * torch.log(p)  # guarded
            i = torch.where(w > 0, torch.log(p), 0)  # unguarded
        """
    )
    _, _, _, context, walker = analyse(
        """
        import torch
        def f(x: torch.Tensor, p):
            a = torch.where(x > 0, torch.sqrt(x), 0)
            b = torch.nan_to_num(torch.log(p))
            c = torch.log(torch.softmax(p, -1))
        """
    )
    (_, sqrt_op, _, sqrt_anc), (_, log_op, _, log_anc), (_, fused_op, _, fused_anc) = walker.ops
    context.ancestors[:] = sqrt_anc
    assert owners.where_owner(context, sqrt_op) is not None
    context.ancestors[:] = log_anc
    assert owners.filter_owner(context, log_op) is not None
    context.ancestors[:] = fused_anc
    assert owners.fused_log_owner(context, fused_op) == "TL201"
    context.ancestors[:] = []


def test_gradient_free_code():
    check(
        """
        import torch
        from torch.optim import Optimizer
        @torch.no_grad()
        def update(x: torch.Tensor):
            return x.sqrt()  # guarded
        def training_loss(x: torch.Tensor):
            with torch.no_grad():
                a = x.abs().sqrt()  # guarded
            b = x.abs().sqrt().detach()  # guarded
            r = torch.rand(3)
            c = r.sqrt()  # guarded
            d = torch.sqrt(x.var() - x.mean())  # unguarded
            e = x.abs().sqrt()  # unguarded
            f = torch.log(x.detach())  # unguarded
        """
    )


def test_sigmoid_and_softmax_are_positive_only_as_divisors():
    _, _, _, context, _ = analyse("import torch\n")
    node = cst.parse_expression("torch.sigmoid(x).sum()")
    assert signs.sign_of(context, node, None, division=True) is signs.Sign.POSITIVE
    assert signs.sign_of(context, node, None) is signs.Sign.NONNEGATIVE


def test_confidence_is_read_off_the_operand_and_the_evidence_of_gradients():
    check(
        """
        import torch
        def statistics(x: torch.Tensor):
            a = x.abs().sqrt()  # medium
            b = torch.sqrt(x.var() - x.mean())  # medium
            c = torch.rsqrt(x.abs())  # high
            d = torch.log(x)  # low
            e = x / x.norm()  # medium
            f = x / x.sum()  # low
        def forward(x: torch.Tensor):
            a = x.abs().sqrt()  # high
            return torch.log(x)  # medium
        def helper(x: torch.Tensor):
            return torch.log(x)  # medium
        class Model(torch.nn.Module):
            def forward(self, x: torch.Tensor):
                return helper(x)
        class FocalLoss:
            def __init__(self, counts: torch.Tensor):
                self.prior = torch.log(counts)  # guarded
            def compute(self, x: torch.Tensor):
                root = x.abs().sqrt()  # high
                return root / x.sum()  # medium
        def script_step(model, x):
            loss = torch.log(model(x)).mean()  # medium
            loss.backward()
        """
    )


def test_dataflow_bindings():
    source = textwrap.dedent(
        """
        def f(d, eps=1e-6):
            d = d.norm()
            if d is None:
                d = eps
            d += eps
            return d
        """
    ).lstrip()
    module = cst.parse_module(source)
    function = module.body[0]
    ret = function.body.body[-1]
    site = site_of([module, function, function.body, ret])
    found = bindings(site, "d")
    assert [b.kind for b in found] == ["update"]
    before_update = bindings(found[0].site, "d")
    assert [b.kind for b in before_update] == ["conditional", "assign"]
    assert [b.kind for b in bindings(site, "eps")] == ["param"]


def _bindings_at_return(source: str, name: str):
    module = cst.parse_module(textwrap.dedent(source).lstrip())
    function = module.body[0]
    ret = function.body.body[-1]
    return [module.code_for_node(b.node).strip() for b in bindings(site_of([module, function, function.body, ret]), name)]


# One branch after ``ckpt = first(path)`` and ``if url: ckpt = remote(url)``, and what reaches ``return ckpt``.
BRANCHES = """
def f(url, path):
    ckpt = first(path)
    if url:
        ckpt = remote(url)
    elif path:
        {middle}
    else:
        {last}
    return ckpt
"""


@pytest.mark.parametrize(
    "middle, last, expected",
    [
        # Every branch binds or leaves: the first assignment cannot reach the return.
        ("ckpt = local(path)", "raise ValueError(path)", ["ckpt = remote(url)", "ckpt = local(path)"]),
        # A branch that falls through unbound: the first one still may.
        ("log(path)", "ckpt = local(path)", ["ckpt = remote(url)", "ckpt = local(path)", "ckpt = first(path)"]),
    ],
)
def test_a_binding_in_every_branch_of_an_if_ends_the_search(middle, last, expected):
    assert _bindings_at_return(BRANCHES.format(middle=middle, last=last), "ckpt") == expected


def test_fix_builders():
    assert float_literal(1e-6) == "1e-6" and float_literal(1e-4) == "1e-4" and float_literal(0.5) == "0.5"
    module = cst.Module(body=[])
    assert module.code_for_node(clamped(cst.parse_expression("a - b"), "1e-6")) == "(a - b).clamp_min(1e-6)"
    assert module.code_for_node(clamped(cst.parse_expression("x.var(0)"), "1")) == "x.var(0).clamp_min(1)"
    assert module.code_for_node(clamped(cst.parse_expression("(a + b)"), "1")) == "(a + b).clamp_min(1)"


@pytest.mark.parametrize("value", [1e-6, 2e-5, 1e-4])
def test_default_eps_survives_float16(value):
    torch = pytest.importorskip("torch")
    assert torch.tensor(value, dtype=torch.float16).item() > 0
    assert torch.tensor(1e-8, dtype=torch.float16).item() == 0.0


def test_same_file_helpers_that_guard_their_result():
    check(
        """
        import torch
        def _clamped_power(x):
            power = x.real ** 2 + x.imag ** 2
            return torch.clamp(power, min=1e-8)
        def _raw(x):
            return x.abs()
        def _sometimes(x, flag):
            if flag:
                return x + 1e-6
        def _recursive(x, n):
            if n == 0:
                return x + 1e-6
            return _recursive(x, n - 1)
        def _yields(x):
            yield x + 1e-6
        class Loss(torch.nn.Module):
            def _energy(self, x):
                if x.dim() > 2:
                    return x.pow(2).sum(-1) + 1e-5
                return x.pow(2).sum() + self.eps
            def _plain(self, x):
                return x.sum()
            def forward(self, x):
                a = torch.log(_clamped_power(x))  # guarded
                b = torch.log(self._energy(x))  # convention
                c = torch.sqrt(torch.sqrt(_clamped_power(x)))  # guarded
                d = torch.log(_raw(x))  # unguarded
                e = torch.log(_sometimes(x, True))  # unguarded
                f = torch.log(self._plain(x))  # unguarded
                g = torch.log(_recursive(x, 3))  # unguarded
                h = torch.log(_yields(x))  # unguarded
                _clamped_power = torch.abs
                i = torch.log(_clamped_power(x))  # unguarded
                return a, b, c, d, e, f, g, h, i
        """
    )


def test_owners_ask_the_same_guard_analysis():
    # TL106/TL107 ask reaches_edge: the same sign, condition, per-factor and user-defined-log answers as needs_guard.
    _, _, _, context, walker = analyse(
        """
        import torch
        class Group:
            def log(self):
                return self
        def compose(x: torch.Tensor, p, q, so3):
            a = torch.where(x > 0, torch.sqrt(x), 0)
            b = torch.nan_to_num(torch.log(p + 1e-6))
            c = torch.sqrt(x) if (x > 0).all() else x
            if (p <= 0).any() or (q <= 0).any():
                raise ValueError
            d = torch.nan_to_num(torch.log(p / q))
            e = torch.nan_to_num(so3.log())
        """
    )
    verdicts = []
    for _, op, _, ancestors in walker.ops:
        verdicts.append(guards.reaches_edge(context, op, ancestors))
    assert verdicts == [True, False, False, False, False]


def test_callers_that_hand_in_positive_values_guard_a_parameter():
    check(
        """
        import torch
        def reduce_loss(loss, mask):
            return loss.sum() / mask.sum()  # guarded
        def length_mask(x, lengths):
            return torch.arange(x.size(1))[None, :] < lengths[:, None]
        def frame_loss(x, lengths):
            mask = length_mask(x, lengths).float()
            return reduce_loss(x * mask, mask) + reduce_loss(x, mask=length_mask(x, lengths))
        def scaled_loss(x, scale, floor=1e-3):
            return torch.log(scale) + x / scale.sum()  # guarded
        def weighted_loss(x, w):
            return scaled_loss(x, w.exp()) + scaled_loss(x, w.clamp_min(1e-3))
        """
    )


def test_callers_that_may_hand_in_zero_leave_the_op_reported():
    check(
        """
        import torch
        def reduce_loss(loss, mask):
            return loss.sum() / mask.sum()  # unguarded
        def token_loss(x, labels, lengths):
            return reduce_loss(x, length_to_mask(lengths)) + reduce_loss(x, labels != -100)
        def passed_around_loss(loss, mask):
            return loss.sum() / mask.sum()  # unguarded
        def frame_loss(x, lengths, table):
            table["reduce"] = passed_around_loss
            return passed_around_loss(x, length_to_mask(lengths))
        def recursive_loss(x, scale, depth):
            if depth:
                return recursive_loss(x, scale - 1, depth - 1)
            return torch.log(scale)  # unguarded
        def outer_loss(x, scale):
            return recursive_loss(x, scale.exp(), 3)
        def uncalled_loss(loss, mask):
            return loss.sum() / mask.sum()  # unguarded
        """
    )


def test_a_method_only_called_under_no_grad_is_not_differentiated():
    check(
        """
        import torch
        class RotationLoss(torch.nn.Module):
            def forward(self, x):
                with torch.no_grad():
                    self.weight.copy_(self._project(self.weight))
                return x @ self.weight
            def _project(self, q):
                return q / q.norm(dim=-1, keepdim=True)  # guarded
        class SometimesProjectedLoss(torch.nn.Module):
            def forward(self, x):
                with torch.no_grad():
                    self.weight.copy_(self._project(self.weight))
                return x @ self._project(self.weight)
            def _project(self, q):
                return q / q.norm(dim=-1, keepdim=True)  # unguarded
        """
    )


def test_a_difference_with_a_number_is_no_cancellation():
    check(
        """
        import torch
        def step(h, sigma, other, noise):
            a = torch.sqrt(torch.exp(2 * h) - 1.0) * noise  # low
            b = torch.sqrt(1.0 - torch.exp(-2 * h)) * noise  # low
            c = torch.sqrt(sigma ** 2 - other ** 2) * noise  # medium
            return a + b + c
        """
    )


def test_a_public_helper_the_file_calls_only_from_init_is_not_differentiated():
    check(
        """
        import torch
        def rescale(betas):
            alphas = torch.cumprod(1.0 - betas, dim=0)
            return alphas.sqrt() / alphas.sum()  # guarded
        class Scheduler:
            def __init__(self, betas):
                self.betas = rescale(betas)
        """
    )


def test_a_file_name_never_silences_a_finding():
    snippet = """
        import torch
        def step(t0, t1, x):
            return torch.sqrt((t1 - t0).abs()) + torch.log(x)  # {level}
        """
    for path in ("diffusers/schedulers/brownian.py", "pkg/scheduling_sde.py", "monai/visualize/saliency.py", "models/brownian.py"):
        check(snippet.format(level="unguarded"), path)
    # A file of losses raises the confidence of an unknown sign; it never decides silence.
    _, verdicts, _, _, _ = analyse(snippet.format(level="unguarded"), "pkg/losses/brownian.py")
    assert [v.value for v in verdicts[3]] == ["high", "medium"]
    _, verdicts, _, _, _ = analyse(snippet.format(level="unguarded"), "pkg/scheduling_sde.py")
    assert [v.value for v in verdicts[3]] == ["medium", "low"]  # a root of 0 is a gradient hazard only


def test_a_hyperparameter_square_under_a_root_is_a_smoothing_term():
    check(
        """
        import torch
        class Huber(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.delta = config.huber_delta
            def forward(self, d, sigma, offset):
                a = torch.sqrt(d * d + self.delta * self.delta)  # convention
                b = torch.sqrt(d ** 2 + offset ** 2)  # unguarded
                return a + b
        """
    )


def test_a_module_forward_is_judged_by_its_instances_calls():
    check(
        """
        import torch
        class LikelihoodLoss(torch.nn.Module):
            def forward(self, sigma):
                return torch.log(sigma)  # guarded
        class PoseLoss(torch.nn.Module):
            def __init__(self, on):
                super().__init__()
                self.eps = 1e-6
                self.likelihood = LikelihoodLoss().to("cpu") if on else None
            def forward(self, s):
                if self.likelihood is not None and not self.likelihood:
                    return s
                return self.likelihood(s.abs() + self.eps)
        class ScaleLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.offset = 1.0
            def forward(self, scale):
                return torch.log(scale)  # unguarded
        class DepthLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.offset = 0.0
                self.scale_loss = ScaleLoss()
            def forward(self, s):
                # ``self.offset`` here is DepthLoss's 0, not ScaleLoss's 1.
                return self.scale_loss(s.abs() + self.offset)
        class HandedAroundLoss(torch.nn.Module):
            def forward(self, sigma):
                return torch.log(sigma)  # unguarded
        class Trainer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = HandedAroundLoss()
                self.losses = [self.loss]
            def forward(self, s):
                return self.loss(s.exp())
        """
    )


def test_only_helpers_the_file_owns_and_loss_functions_are_judged_by_their_callers():
    check(
        """
        import torch
        def weighted(x, w):
            return x / w.norm()  # unguarded
        def _weighted(x, w):
            return x / w.norm()  # guarded
        def total(x, w):
            def nested(v):
                return x / v.norm()  # guarded
            return weighted(x, w.exp()) + _weighted(x, w.exp()) + nested(w.exp())
        """,
        path="pkg/losses.py",  # every function of a losses module is differentiated code
    )


def test_a_lambda_mapped_over_a_tuple_takes_each_element_in_turn():
    check(
        """
        import torch
        def attention_loss(q, k, x):
            q = q.clamp_min(1e-6)
            k = k.exp()
            qs, ks = map(lambda t: t / torch.linalg.norm(t, dim=-1, keepdim=True), (q, k))  # guarded
            qx, kx = map(lambda t: t / torch.linalg.norm(t, dim=-1, keepdim=True), (q, x))  # unguarded
            x = x.clamp_min(1e-6)
            # A lambda's own parameter is not the outer name it shadows.
            f = lambda x: x / x.norm(dim=-1, keepdim=True)  # unguarded
            return qs, ks, qx, kx, f(q)
        """
    )


def test_padding_masks_combined_on_some_paths_stay_padding_masks():
    check(
        """
        import torch
        def loss_a(x, lengths, other):
            mask = length_to_mask(lengths)
            if other is not None:
                mask = mask & length_to_mask(other)
            return x.sum() / mask.sum()  # guarded
        def loss_b(x, lengths, labels):
            mask = length_to_mask(lengths)
            if labels is not None:
                mask = mask & (labels != -100)
            return x.sum() / mask.sum()  # unguarded
        def loss_c(x, lengths):
            mask = torch.ones_like(x)
            if lengths is not None:
                mask *= length_to_mask(lengths)
            return x.sum() / mask.sum(-1)  # guarded
        """
    )


def test_entries_selected_off_zero_have_a_positive_magnitude():
    check(
        """
        import torch
        def weighted_loss(w: torch.Tensor, x: torch.Tensor):
            neg_weight = None
            pos_mask = w >= 0
            if pos_mask.sum() < w.numel():
                neg_weight = w[~pos_mask]
            if neg_weight is not None:
                x = x + neg_weight.abs().log()  # guarded
            a = w[w < 0].abs().log() + w[w != 0].abs().log() + w[~(w <= 0)].abs().log()  # guarded
            b = w[w >= 0].abs().log()  # unguarded
            c = w[~(w > 0)].abs().log()  # unguarded
            d = w[w > -1].abs().log()  # unguarded
            e = w[~(w >= 1)].abs().log()  # unguarded
            # Below zero is not positive: a root or a log of the entries themselves stays reported.
            f = w[w < 0].sqrt()  # unguarded
            g = w[~(w >= 0)].log()  # unguarded
            h = w[w < 0] if x.sum() > 0 else w
            return x, a, b, c, d, e, f, g, h.abs().log()  # unguarded
        """
    )


def test_bounds_written_with_eps_are_strict():
    check(
        """
        import torch
        class FocalLoss(torch.nn.Module):
            def forward(self, p, sims, small_val):
                p = torch.clamp(p, self.eps, 1 - self.eps)
                a = torch.log(p / (1 - p))  # convention
                m = torch.clamp(2.0 * sims, max=2)
                b = torch.sqrt(2.0 + small_val - m)  # convention
                c = torch.sqrt(2.0 - m)  # unguarded
                d = torch.log(1 - torch.clamp(sims, max=1))  # unguarded
                e = torch.log(1 - torch.clamp(sims, max=1 + self.eps))  # unguarded
                return a, b, c, d, e
        """
    )


def test_functions_named_for_a_small_value_lower_by_one_level():
    check(
        """
        import torch
        def ntxent_loss(num, den, c_f, dtype):
            a = torch.log(num / den + c_f.small_val(dtype))  # convention
            b = torch.log(num / den + get_eps(dtype))  # convention
            c = torch.log(num / den + c_f.scale(dtype))  # unguarded
            return a, b, c
        """
    )


def test_arithmetic_spelled_as_calls_is_judged_as_the_operator():
    check(
        """
        import torch
        def mcc_loss(y_pred, y_true, eps: float = 1e-5):
            tp = torch.sum(torch.mul(y_pred, y_true)) + eps
            fp = torch.sum(torch.mul(y_pred, 1 - y_true)) + eps
            a = torch.sqrt(torch.add(tp, fp) * tp.add(fp) * torch.mul(tp, fp))  # convention
            b = torch.sqrt(torch.add(y_pred, y_true))  # unguarded
            c = torch.sqrt(torch.add(tp, fp, alpha=-1))  # unguarded
            d = torch.sqrt(y_pred.mul(tp))  # unguarded
            return a, b, c, d
        """
    )


def test_a_test_on_the_expression_a_name_holds_guards_the_name():
    check(
        """
        import torch
        def tcm_loss(sims, margin):
            kept = sims <= margin
            num = ((margin - sims) * kept).sum()
            denom = kept.sum()
            a = 0 if kept.sum() == 0 else num / denom  # guarded
            b = num / denom if kept.sum() > 0 else 0  # guarded
            c = num / denom if sims.sum() > 0 else 0  # unguarded
            return a, b, c
        """
    )


def test_a_root_whose_name_is_only_compared_is_not_differentiated():
    check(
        """
        import torch
        def p2s_loss(weight, embeddings, rtol=1e-5):
            w_norm = weight.pow(2).sum(0).pow(0.5)  # guarded
            assert torch.all(torch.abs(w_norm - 1.0) < rtol)
            x_norm = embeddings.pow(2).sum(1).pow(0.5)  # unguarded
            cos = embeddings.mm(weight) / x_norm.view(-1, 1)
            never_read = embeddings.abs().sqrt()  # unguarded
            total = 0
            for e in embeddings:
                total = total + carried
                carried = e.abs().sqrt()  # unguarded
            return cos, total
        """
    )


def test_norms_of_random_draws_tests_and_data_transforms():
    check(
        """
        import torch
        def visreg_loss(z, k: int):
            slices = torch.randn(z.shape[1], k)
            a = slices / slices.norm(p=2, dim=0)  # guarded
            b = z / z.norm(p=2, dim=0)  # unguarded
            return a, b
        def test_lognormal_loss(samples):
            return samples.log().mean()  # low
        class AmplitudeRescaleTransform:
            def __call__(self, freq):
                return torch.sqrt(freq.real ** 2 + freq.imag ** 2)  # medium
        class SpectralTransform(torch.nn.Module):
            def forward(self, freq):
                return torch.sqrt(freq.real ** 2 + freq.imag ** 2)  # unguarded
        class SpectralLoss:
            def __call__(self, freq):
                return torch.sqrt(freq.real ** 2 + freq.imag ** 2)  # unguarded
        """
    )


def test_an_assert_that_no_element_is_zero_and_squares_of_positives():
    check(
        """
        import torch
        class SupConLoss(torch.nn.Module):
            def __init__(self, mu=0.02):
                super().__init__()
                self.mu = mu
            def forward(self, positives, pred, target):
                n = positives.sum(dim=1) - 1
                assert (n == 0).sum().item() == 0, "every sample needs another positive"
                a = torch.log(n.float())  # guarded
                b = torch.log(positives.sum(dim=1) - 2)  # unguarded
                mu = self.mu
                diff = pred - target
                c = torch.sqrt(diff * diff + mu * mu) - mu  # guarded
                d = torch.sqrt(diff * diff + diff * diff)  # unguarded
                return a, b, c, d
        def counted_loss(x, n):
            assert (n > 0).sum() == 0
            return torch.log(n)  # unguarded
        """
    )


def test_roots_of_ground_truth_carry_no_gradient():
    check(
        """
        import torch
        def centerness_loss(pred, bbox_reg_targets, target_logit, targets):
            left_right = bbox_reg_targets[:, :, [0, 2]]
            a = torch.sqrt(left_right.min(dim=-1)[0] / left_right.max(dim=-1)[0])  # convention
            b = torch.sqrt(1.0 - torch.pow(target_logit, 2))  # unguarded
            c = torch.log(targets)  # unguarded
            d = torch.sqrt(pred.abs())  # unguarded
            return a, b, c, d
        """
    )


def test_a_name_unpacked_from_a_helpers_tuple_takes_its_element():
    check(
        """
        import torch
        class STFTLoss(torch.nn.Module):
            def stft(self, x):
                s = torch.stft(x, 512, return_complex=True)
                return torch.sqrt(torch.clamp(s.real ** 2 + s.imag ** 2, min=self.eps)), torch.angle(s)
            def raw(self, x):
                s = torch.stft(x, 512, return_complex=True)
                if x.dim() > 2:
                    return s.abs(), None
                return s.abs().clamp_min(1e-6), torch.angle(s)
            def forward(self, x, y):
                x_mag, x_phs = self.stft(x)
                y_mag, y_phs = self.raw(y)
                a = torch.log(x_mag)  # convention
                b = torch.log(y_mag)  # unguarded
                c = torch.log(x_phs)  # unguarded
                return a, b, c
        """
    )


def test_a_square_of_a_value_clamped_strictly_inside_one_stays_below_one():
    check(
        """
        import torch
        class AngularLoss(torch.nn.Module):
            def forward(self, cos):
                inside = cos.clamp(-1 + self.eps, 1 - self.eps)
                a = torch.sqrt(1 - inside ** 2)  # convention
                edge = cos.clamp(-1, 1 - self.eps)
                b = torch.sqrt(1 - edge ** 2)  # unguarded
                c = torch.sqrt(1 - cos.clamp(-1, 1) ** 2)  # unguarded
                return a, b, c
        """
    )


def test_roots_of_relu_outputs_are_masked_by_relus_backward():
    check(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        def signed_sqrt_loss(z: torch.Tensor, w: torch.Tensor):
            a = torch.sqrt(F.relu(z)) - torch.sqrt(F.relu(-z))  # guarded
            r = z.relu()
            b = torch.sqrt(r.sum(-1)) + torch.sqrt(nn.ReLU()(z) + F.relu(w))  # guarded
            c = torch.sqrt(z.clamp(min=0))  # unguarded
            d = torch.sqrt(z.abs())  # unguarded
            e = torch.sqrt(F.relu(z) * w)  # unguarded
            f = torch.log(F.relu(z))  # unguarded
            g = torch.sqrt(F.relu(z) + w.abs())  # unguarded
            return a, b, c, d, e, f, g
        class GeM(nn.Module):
            def __init__(self, p=3.0):
                super().__init__()
                self.p = nn.Parameter(torch.ones(1) * p)
            def forward(self, x):
                a = F.adaptive_avg_pool2d(F.relu(x).pow(3), 1).pow(1.0 / 3)  # guarded
                b = F.adaptive_avg_pool2d(F.relu(x).pow(self.p), 1).pow(1.0 / self.p)  # unguarded
                return a, b
        """
    )


def test_a_root_that_only_reaches_comparisons_through_names_is_not_differentiated():
    check(
        """
        import torch
        def silence_mask_loss(x, y):
            energy = 20 * torch.log10(torch.sqrt(x ** 2) + 1e-8)  # guarded
            top = torch.max(energy)
            mask = energy - top + 40 > 0
            kept = torch.sqrt(y ** 2)  # unguarded
            scale = torch.max(kept)
            return (y * mask).sum() / scale
        """
    )


def test_a_truthy_count_guards_it_and_callers_conditions_guard_parameters():
    check(
        """
        import torch
        def masked_loss(x, mask):
            if mask.sum():
                return (x * mask).sum() / mask.sum()  # guarded
            return (x * mask).sum() / mask.sum()  # unguarded
        class SegLoss(torch.nn.Module):
            def __call__(self, preds, batch):
                fg_mask = batch["fg"]
                if fg_mask.sum():
                    return self.segmentation_loss(fg_mask, preds) + self.other_loss(fg_mask, preds)
                return self.other_loss(fg_mask, preds)
            def segmentation_loss(self, fg_mask, preds):
                return (preds * fg_mask).sum() / fg_mask.sum()  # guarded
            def other_loss(self, fg_mask, preds):
                return (preds * fg_mask).sum() / fg_mask.sum()  # unguarded
        """
    )


def test_an_attention_average_of_positive_values_is_positive():
    check(
        """
        import torch
        import torch.nn.functional as F
        class SimPool(torch.nn.Module):
            def forward(self, q, k, v):
                shifted = v - v.amin(dim=-2, keepdim=True) + 1e-6
                attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
                a = (attn @ shifted.pow(self.gamma)).pow(1.0 / self.gamma)  # guarded
                b = F.scaled_dot_product_attention(q, k, shifted).pow(1.0 / self.gamma)  # guarded
                gates = torch.sigmoid(q @ k.transpose(-2, -1))
                c = (gates @ shifted).pow(1.0 / self.gamma)  # unguarded
                d = F.scaled_dot_product_attention(q, k, shifted, None, 0.1).pow(1.0 / self.gamma)  # unguarded
                return a, b, c, d
        """
    )


def test_a_mask_in_a_product_is_nonnegative():
    check(
        """
        import torch
        class NCE(torch.nn.Module):
            def forward(self, pos, neg, mask_pos):
                mask_neg = 1.0 - mask_pos
                top = neg.max(dim=1, keepdim=True)[0]
                neg_sumexp = (mask_neg * torch.exp(neg - top)).sum(dim=1, keepdim=True)
                a = torch.log(torch.exp(pos - top) + neg_sumexp)  # convention
                b = torch.log((mask_neg * neg.abs()).sum(dim=1))  # unguarded
                weights = 2.0 - mask_pos
                c = torch.log(torch.exp(pos - top) + (weights * neg).sum(dim=1))  # unguarded
                return a, b, c
        """
    )


def test_a_test_of_a_name_guards_the_same_expression_recomputed_from_the_same_inputs():
    check(
        """
        import torch
        def masked_loss(x, labels):
            mask = (labels != -100).int()
            count = torch.sum(mask.view(-1), dim=0)
            if count == 0:
                return x.sum() * 0
            a = (x * mask).sum() / torch.sum(mask.view(-1), dim=0)  # guarded
            b = (x * mask).sum() / torch.sum(mask, dim=0)  # unguarded
            return a + b
        def shifted_loss(x, labels):
            mask = (labels != -100).int()
            count = mask.sum()
            if count == 0:
                return x.sum() * 0
            mask = mask[:, 1:]
            return (x[:, 1:] * mask).sum() / mask.sum()  # unguarded
        def rebound_loss(x, labels, weights):
            mask = (labels != -100).int()
            count = weights.sum()
            if count == 0:
                return x.sum() * 0
            count = mask.sum()
            return (x * mask).sum() / mask.sum()  # unguarded
        """
    )


def test_minus_expm1_of_a_value_bounded_below_zero_is_positive():
    check(
        """
        import torch
        def tail_loss(log_probs):
            log_s = torch.logsumexp(log_probs, dim=-1, keepdim=True)
            capped = torch.clamp(log_s, max=-1e-7)
            a = torch.log(-torch.expm1(capped))  # guarded
            b = torch.log(-torch.expm1(log_s))  # unguarded
            c = torch.log(-torch.expm1(log_s.clamp(max=0)))  # unguarded
            return a + b + c
        """
    )


def test_arithmetic_of_constant_tensors_is_a_configuration_value():
    check(
        """
        import torch
        def mixture_loss(student, teacher, alpha: float):
            alpha_t = torch.tensor(alpha, dtype=student.dtype, device=student.device)
            student_part = student + torch.log(1 - alpha_t)  # guarded
            teacher_part = teacher + torch.log(alpha_t)  # guarded
            scale = torch.sqrt(torch.FloatTensor([0.5]).to(student.device))  # guarded
            mixed = torch.logsumexp(torch.stack([student_part, teacher_part]), 0)
            weight = alpha_t * student.sum()
            return mixed + torch.log(weight)  # unguarded
        """
    )
