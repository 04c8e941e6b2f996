"""torchlint.analysis.flow.gradflow: the local autograd dataflow TL301-TL304 (and any rule) ask."""
from __future__ import annotations

import textwrap
from typing import List, Optional

import libcst as cst
import pytest

from torchlint import config
from torchlint.analysis.flow import gradflow, module_evidence
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.model.project_index import file_context


def _context(source: str, path: str = "model.py") -> FileContext:
    source = textwrap.dedent(source).lstrip("\n")
    return file_context(path, source, cst.parse_module(source), config.Settings(enabled=frozenset()))


def _flow(source: str, function: str = "f", class_name: Optional[str] = None) -> gradflow.FunctionFlow:
    context = _context(source)
    body = context.module.body
    class_def = None
    if class_name is not None:
        class_def = next(s for s in body if isinstance(s, cst.ClassDef) and s.name.value == class_name)
        body = class_def.body.body
    node = next(s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == function)
    return gradflow.FunctionFlow(context, node, class_def)


def _name_at_end(flow: gradflow.FunctionFlow, name: str) -> bool:
    """Whether ``name`` carries grad where the function's last backward/return reads it."""
    site = flow.returns[-1][1] if flow.returns else flow.backward_calls[-1].site
    return flow.carries_grad(cst.Name(name), at=site)


class _Finder(cst.CSTVisitor):
    """Stops at the first call whose callee text is ``text`` and keeps the ancestors there."""

    def __init__(self, context: FileContext, text: str) -> None:
        super().__init__()
        self.context = context
        self.text = text
        self.stack: List[cst.CSTNode] = []
        self.found: Optional[List[cst.CSTNode]] = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is None and isinstance(node, cst.Call) and self.context.code(node.func) == self.text:
            self.found = list(self.stack)
        self.stack.append(node)
        return self.found is None

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _context_at(source: str, callee: str, path: str = "train.py") -> FileContext:
    context = _context(source, path)
    finder = _Finder(context, callee)
    context.module.visit(finder)
    assert finder.found is not None, callee
    context.ancestors = finder.found
    return context


LAYERS = """
import torch
import torch.nn as nn


class Block(nn.Module):
    pass


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.block = Block()
        self.scale = nn.Parameter(torch.ones(1))
        self.name = "net"
        self.loss = nn.MSELoss(reduction="none")

    def forward(self, x, y):
        h = self.fc(x)
        b = self.block(x)
        s = self.scale * 2
        k = x * 2
        n = h.item()
        d = h.detach() + 1
        shape = h.shape
        label = y.long()
        per_item = self.loss(h, y)
        return h
"""


def test_module_attributes_from_init():
    context = _context(LAYERS)
    net = next(s for s in context.module.body if isinstance(s, cst.ClassDef) and s.name.value == "Net")
    attributes = module_evidence.module_attributes(context, net)
    assert set(attributes.modules) == {"fc", "block", "loss"}
    assert attributes.parameters == {"scale"}
    assert attributes.other == {"name"}


@pytest.mark.parametrize(
    "name, carries",
    [("h", True), ("b", True), ("s", True), ("k", False), ("n", False), ("d", False), ("shape", False),
     ("label", False), ("per_item", True), ("x", False)],
)
def test_which_names_carry_grad(name, carries):
    flow = _flow(LAYERS, "forward", "Net")
    assert _name_at_end(flow, name) is carries


def test_detach_is_seen_through_only_when_asked():
    flow = _flow(LAYERS, "forward", "Net")
    site = flow.returns[-1][1]
    assert flow.carries_grad(cst.Name("d"), at=site) is False
    assert flow.carries_grad(cst.Name("d"), through_detach=True, at=site) is True


def test_no_grad_blocks_and_decorators():
    flow = _flow(
        """
        import torch

        def f(model, x):
            with torch.no_grad():
                frozen = model(x)
            with torch.set_grad_enabled(False):
                off = model(x)
            live = model(x)
            return live
        """
    )
    assert not _name_at_end(flow, "frozen") and not _name_at_end(flow, "off") and _name_at_end(flow, "live")
    decorated = _flow(
        """
        import torch

        @torch.inference_mode()
        def f(model, x):
            return model(x)
        """
    )
    assert not decorated.carries_grad(decorated.returns[0][0])


def test_the_binding_that_reaches_a_use_wins():
    flow = _flow(
        """
        import torch

        def f(model, x, y, criterion):
            loss = criterion(model(x), y)
            loss = torch.tensor(loss.item(), requires_grad=True)
            loss.backward()
        """
    )
    call = flow.backward_calls[0]
    assert flow.carries_grad(call.tensor, at=call.site) is False
    assert flow.carries_grad(call.tensor, through_detach=True, at=call.site) is True
    steps = [flow.context.code(step) for step in flow.detaching_steps(call.tensor, call.site)]
    assert steps == ["torch.tensor(loss.item(), requires_grad=True)", "loss.item()"]


def test_a_binding_in_another_branch_does_not_hide_an_earlier_one():
    flow = _flow(
        """
        def f(model, x, flag):
            out = model(x)
            if flag:
                out = out.detach()
            return out
        """
    )
    assert _name_at_end(flow, "out")


def test_list_feeds():
    flow = _flow(
        """
        import torch

        def f(model, xs):
            a = []
            for x in xs:
                a.append(model(x))
            a.extend([model(xs[0])])
            a += [model(xs[1])]
            a.insert(0, model(xs[2]))
            b = [model(x).sum() for x in xs]
            c = []
            with torch.no_grad():
                c.append(model(xs[0]))
            d = []
            d.append(model(xs[0]).item())
            return a, b, c, d
        """
    )
    assert len(flow.list_elements("a")) == 4
    assert all(flow.carries_grad(e, at=s) for e, s in flow.list_elements("a"))
    assert [flow.context.code(e) for e, _ in flow.list_elements("b")] == ["model(x).sum()"]
    assert all(site.no_grad for _, site in flow.list_elements("c"))
    assert not any(flow.carries_grad(e, at=s) for e, s in flow.list_elements("d"))
    # a list that holds grad tensors carries them into subscripts and loops
    assert flow.carries_grad(cst.parse_expression("a[0]"), at=flow.returns[0][1])


@pytest.mark.parametrize(
    "element, shape",
    [("model(x).sum()", "scalar"), ("model(x).squeeze()", "scalar"), ("torch.mean(model(x))", "scalar"),
     ("F.mse_loss(model(x), y)", "scalar"), ("F.mse_loss(model(x), y, reduction='none')", None),
     ("model(x).view(-1)", "one"), ("model(x).flatten()", "one"), ("model(x).sum().unsqueeze(0)", "one"),
     ("model(x).sum() * 2", "scalar"), ("model(x)", None), ("model(x).view(2, 3)", None)],
)
def test_element_shapes(element, shape):
    flow = _flow(
        f"""
        import torch
        import torch.nn.functional as F

        def f(model, x, y):
            parts = []
            parts.append({element})
            return parts
        """
    )
    ((value, _),) = flow.list_elements("parts")
    assert flow.element_shape(value) == shape


BACKWARDS = """
def f(model, x, y, criterion, scaler, optimizer, use_amp):
    out = model(x)
    a = criterion(out, y)
    b = criterion(out.detach(), y)
    a.backward(retain_graph=True)
    if use_amp:
        scaler.scale(a).backward()
    else:
        a.backward()
    b.backward()
    optimizer.step()
"""


def test_backward_calls_and_their_forward_passes():
    flow = _flow(BACKWARDS)
    calls = flow.backward_calls
    assert [flow.context.code(c.tensor) for c in calls] == ["a", "a", "a", "b"]
    assert [c.frees_graph for c in calls] == [False, True, True, True]
    assert calls[1].site.exclusive_with(calls[2].site)
    assert not calls[0].site.exclusive_with(calls[1].site)
    roots_a = flow.graph_roots(calls[1].tensor, calls[1].site)
    assert [flow.context.code(call) for call, _ in roots_a] == ["model(x)"]
    assert flow.graph_roots(calls[3].tensor, calls[3].site) == []  # detached: no forward pass behind it
    assert len(flow.step_sites) == 1


def test_regions_of_the_visited_node():
    source = """
    import os
    import torch

    def train(args):
        torch.autograd.set_detect_anomaly(True)
        if args.debug:
            torch.autograd.set_detect_anomaly(False)
        if __name__ == "__main__":
            torch.autograd.set_grad_enabled(True)
        with torch.no_grad():
            torch.zeros(1)

    def debug_step():
        torch.ones(1)
    """
    assert not module_evidence.in_debug_condition(_context_at(source, "torch.autograd.set_detect_anomaly"))
    context = _context(source)
    assert module_evidence.in_no_grad_region(_context_at(source, "torch.zeros"))
    assert not module_evidence.in_no_grad_region(_context_at(source, "torch.autograd.set_grad_enabled"))
    assert not module_evidence.in_debug_condition(_context_at(source, "torch.autograd.set_grad_enabled"))
    assert module_evidence.in_debug_condition(_context_at(source, "torch.ones"))
    assert context.module is not None


@pytest.mark.parametrize(
    "path, is_test",
    [("tests/test_model.py", True), ("pkg/test_model.py", True), ("pkg/model_test.py", True),
     ("conftest.py", True), ("src/testing/helpers.py", True), ("src/model.py", False),
     ("src/contest.py", False), ("src/latest_model.py", False)],
)
def test_test_paths(path, is_test):
    assert module_evidence.is_test_path(path) is is_test


@pytest.mark.parametrize(
    "name, model",
    [("model", True), ("student_model", True), ("netG", True), ("encoder", True), ("fc", True), ("head2", True),
     ("G", True), ("D_A", True), ("rnn", True), ("teacher_model", False), ("ema_model", False), ("len", False),
     ("tokenizer", False), ("modelling", False), ("unwrap_model", False), ("get_model", False), ("Dx", False)],
)
def test_callee_names_that_say_model(name, model):
    assert module_evidence.looks_like_model(name) is model


def test_top_level_script_is_one_more_function():
    source = """
    import torch

    out = model(x)
    loss = out.mean()
    loss.backward()

    class Config:
        steps = torch.zeros(1)
    """
    context = _context_at(source, "loss.backward")
    flow = gradflow.current_flow(context)
    assert flow is not None and flow.name == "" and flow.function is context.module
    (call,) = flow.backward_calls
    assert flow.carries_grad(call.tensor, at=call.site)
    assert gradflow.current_flow(_context_at(source, "torch.zeros")) is None  # class bodies are not scripts


def test_both_arms_of_an_if_else_bind_the_name():
    flow = _flow(
        """
        def f(model, x, loader, optimizer, wide):
            hidden = None
            for x in loader:
                out = model(x)
                if wide:
                    logits = out.sum(-1)
                else:
                    logits = out.mean(-1)
                logits.sum().backward()
                optimizer.step()
                logits = logits.detach()
        """
    )
    call = flow.backward_calls[0]
    reaching = flow.reaching("logits", call.site)
    # the two arms, not the previous iteration's ``logits.detach()``
    assert sorted(flow.context.code(b.value) for b in reaching) == ["out.mean(-1)", "out.sum(-1)"]
    assert not flow.carries_from_previous_iteration(call.tensor, call.site, call.site.loops[-1])


CARRIED = """
import torch


def f(rnn, chunks, optimizer, k):
    state = None
    for step, x in enumerate(chunks):
        out, state = rnn(x, state)
        loss = out.pow(2).mean()
        if step % k == 0:
            loss.backward()
            optimizer.step()
            CUT
"""


@pytest.mark.parametrize(
    "cut, carried",
    [("pass", True), ("state = state.detach()", False), ("state = state.data", False), ("state.detach_()", False)],
)
def test_a_state_handed_to_the_next_iteration(cut, carried):
    flow = _flow(CARRIED.replace("CUT", cut))
    call = flow.backward_calls[0]
    loop = call.site.loops[-1]
    assert flow.carries_from_previous_iteration(call.tensor, call.site, loop) is carried
    assert flow.carries_grad(call.tensor, at=call.site)


def test_what_a_parameter_passes_on_through_helpers():
    flow = _flow(
        """
        import torch

        def gram(phi):
            return phi @ phi.t()

        def cut(phi):
            return phi.detach()

        def f(features, labels, weight):
            kept = gram(features).mean()
            dropped = cut(labels).mean()
            return kept, dropped
        """
    )
    site = flow.returns[-1][1]
    assert flow.carries_from_parameters(cst.Name("kept"), site, frozenset({"features"}))
    assert not flow.carries_from_parameters(cst.Name("dropped"), site, frozenset({"labels"}))
    assert not flow.carries_from_parameters(cst.Name("kept"), site, frozenset({"weight"}))


def test_leaves_asked_gradients_for():
    flow = _flow(
        """
        import torch

        def f():
            a = torch.tensor(0.0)
            b = torch.tensor(1.0, requires_grad=True)
            c = torch.zeros(3).requires_grad_()
            before = a.cos()
            a.requires_grad = True
            after = a.cos()
            rewrapped = torch.tensor(b.item(), requires_grad=True)
            return before, after, b, c, rewrapped
        """
    )
    site = flow.returns[-1][1]
    carrying = {n for n in ("before", "after", "b", "c", "rewrapped") if flow.carries_grad(cst.Name(n), at=site)}
    assert carrying == {"after", "b", "c"}  # a re-wrap of a value with history is a cut, not a new leaf


def test_jumps_between_two_statements():
    flow = _flow(
        """
        def f(model, loader, aux, main):
            for step, x in enumerate(loader):
                out = model(x)
                if step % 2:
                    aux(out).backward()
                    continue
                main(out).backward()
                for p in model.parameters():
                    if p.grad is None:
                        break
                main(out).backward()
        """
    )
    first, second, third = flow.backward_calls
    assert flow.leaves_after(first.site, second.site)  # the continue of the loop around both
    assert not flow.leaves_after(second.site, third.site)  # the break leaves only the inner loop


OPTIMIZERS = """
import torch


class Trainer:
    def __init__(self, netG, netD):
        self.netG = netG
        self.netD = netD
        self.opt_d = torch.optim.Adam(self.netD.parameters())

    def step(self, z, optimizer_G, optimizer, d_optimizer):
        fake = self.netG(z)
        score = self.netD(fake)
        self.opt_d.step()
        optimizer_G.step()
        optimizer.step()
        d_optimizer.step()
        scheduler.step()
        return fake, score
"""


def test_which_module_an_optimizer_step_updates():
    flow = _flow(OPTIMIZERS, "step", "Trainer")
    steps = {flow.context.code(s.optimizer): s for s in flow.step_calls}
    assert set(steps) == {"self.opt_d", "optimizer_G", "optimizer", "d_optimizer"}  # not the scheduler
    assert flow.step_updates(steps["self.opt_d"], "self.netD") == "built"
    assert flow.step_updates(steps["self.opt_d"], "self.netG") is None
    assert flow.step_updates(steps["optimizer_G"], "self.netG") == "named"
    assert flow.step_updates(steps["optimizer_G"], "self.netD") is None
    assert flow.step_updates(steps["optimizer"], "self.netD") == "named"
    assert flow.step_updates(steps["d_optimizer"], "self.netD") == "named"


ZERO_GRADS = """
import torch

shared = torch.optim.SGD(encoder.parameters(), lr=0.1)


class Trainer:
    def __init__(self, netG, netD):
        self.netG = netG
        self.netD = netD
        self.opt_d = torch.optim.Adam(self.netD.parameters())

    def step(self, model, optimizer_G):
        self.opt_d.zero_grad()
        optimizer_G.zero_grad()
        self.netD.zero_grad()
        model.zero_grad()
        self.zero_grad()
        shared.zero_grad()
"""


def test_which_module_a_zero_grad_clears():
    flow = _flow(ZERO_GRADS, "step", "Trainer")
    calls = {flow.context.code(c.func.value): (c.func.value, flow.sites[id(c)]) for c in flow.calls}
    answers = {
        receiver: (flow.zeroes(node, site, "self.netD"), flow.zeroes(node, site, "self.netG"))
        for receiver, (node, site) in calls.items()
    }
    assert answers == {
        "self.opt_d": ("built", None),  # its construction names netD's parameters
        "optimizer_G": (None, "named"),
        "self.netD": ("built", None),  # the module itself
        "model": ("named", "named"),  # a name that tells nothing
        "self": ("built", "built"),  # the module holding both
        "shared": (None, None),  # built over another module, at module level
    }
    node, site = calls["shared"]
    assert [flow.context.code(v) for v in flow.bound_values(node, site)] == ["torch.optim.SGD(encoder.parameters(), lr=0.1)"]
    assert flow.optimizer_modules(node, site) == {"encoder"}


def test_modules_the_file_shows_and_values_that_are_not_modules():
    source = """
    import torch
    import torch.nn as nn


    class Pipeline:
        def __init__(self, encoder, cfg):
            self.encoder = encoder
            self.watermark = WatermarkEncoder()
            self.backbone = build_backbone(cfg)
            self.size = 3

    def train(D, x):
        opt = torch.optim.Adam(D.parameters())
        return D(x), D.compute_loss(x), D.init_hidden(2)
    """
    context = _context(source)
    assert "D" in module_evidence.evidenced_modules(context)
    pipeline = next(s for s in context.module.body if isinstance(s, cst.ClassDef))
    assert module_evidence.module_attributes(context, pipeline).other == {"watermark", "size"}
    flow = _flow(source, "train")
    value = flow.returns[-1][0]
    calls = [element.value for element in value.elements]
    assert [flow.is_forward_pass(call) for call in calls] == [True, True, False]


def test_module_classes_by_their_framework_base_and_layers_without_parameters():
    source = """
    import torch.nn as nn
    from ...modeling_utils import PreTrainedModel


    class DinoPreTrainedModel(PreTrainedModel):
        pass


    class DinoDecoder(DinoPreTrainedModel):
        pass


    class Holder:
        def __init__(self, config):
            self.decoder = DinoDecoder(config)

        def f(self, x, y):
            out = self.decoder(x)
            similarity = nn.CosineSimilarity(dim=-1)(x, y)
            activated = nn.ReLU()(out)
            return out, similarity, activated
    """
    context = _context(source)
    assert {"DinoPreTrainedModel", "DinoDecoder"} <= module_evidence.module_classes(context)
    flow = _flow(source, "f", "Holder")
    site = flow.returns[-1][1]
    assert flow.carries_grad(cst.Name("out"), at=site)
    assert not flow.carries_grad(cst.Name("similarity"), at=site)  # a layer without parameters on data
    assert flow.carries_grad(cst.Name("activated"), at=site)
