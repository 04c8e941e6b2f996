"""torchlint.analysis.flow.grad_order: which calls act on ``.grad``, and which may run last before or first
after a statement in one pass (round loops and training-step functions)."""
from __future__ import annotations

import textwrap
from typing import List, Optional

import libcst as cst
import pytest

from torchlint import config
from torchlint.analysis.flow import flow_events, grad_order, gradflow
from torchlint.analysis.model.project_index import file_context


def _flow(source: str, function: Optional[str] = "f", class_name: Optional[str] = None) -> gradflow.FunctionFlow:
    source = textwrap.dedent(source).lstrip("\n")
    context = file_context("train.py", source, cst.parse_module(source), config.Settings(enabled=frozenset()))
    if function is None:
        return gradflow.FunctionFlow(context, context.module, None)
    body = context.module.body
    class_def = None
    if class_name is not None:
        class_def = next(s for s in body if isinstance(s, cst.ClassDef) and s.name.value == class_name)
        body = class_def.body.body
    node = next(s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == function)
    return gradflow.FunctionFlow(context, node, class_def)


def _event(flow: gradflow.FunctionFlow, text: str) -> grad_order.GradEvent:
    return next(e for e in grad_order.gradient_events(flow) if flow.context.code(e.call) == text)


def _texts(flow: gradflow.FunctionFlow, events: List[Optional[grad_order.GradEvent]]) -> List[Optional[str]]:
    return [flow.context.code(e.call) if e is not None else None for e in events]


def _clip(flow: gradflow.FunctionFlow) -> grad_order.Clip:
    return next(c for c in (grad_order.clip_of(flow, call) for call in flow.calls) if c is not None)


EVENTS = """
import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_value_ as clip_value
from accelerate import Accelerator

accelerator = Accelerator()


def f(model, loss, optimizer, scheduler, scaler, helper):
    optimizer.zero_grad(set_to_none=True)
    model.zero_grad()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    clip_value(model.parameters(), 0.5)
    accelerator.clip_grad_norm_(model.parameters(), 1.0)
    helper.clip_grad_norm_(model.parameters(), 1.0)
    helper.clip_gradients(model, optimizer)
    scaler.scale(loss).backward()
    torch.autograd.grad(loss, model.weight)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scheduler.step()
"""


def test_the_calls_that_act_on_gradients_in_order():
    flow = _flow(EVENTS)
    kinds = [(e.kind, flow.context.code(e.call)) for e in grad_order.gradient_events(flow)]
    assert kinds == [
        ("zero", "optimizer.zero_grad(set_to_none=True)"),
        ("zero", "model.zero_grad()"),
        ("clip", "nn.utils.clip_grad_norm_(model.parameters(), 1.0)"),
        ("clip", "clip_value(model.parameters(), 0.5)"),
        ("clip", "accelerator.clip_grad_norm_(model.parameters(), 1.0)"),
        ("clip", "helper.clip_grad_norm_(model.parameters(), 1.0)"),
        ("backward", "scaler.scale(loss).backward()"),  # torch.autograd.grad writes no .grad
        ("step", "scaler.step(optimizer)"),  # not the scheduler's
    ]
    clips = {flow.context.code(c.call): c for c in (grad_order.clip_of(flow, call) for call in flow.calls) if c is not None}
    # known from the imports or a construction the file shows, or only from the method's name
    assert clips["accelerator.clip_grad_norm_(model.parameters(), 1.0)"].resolved
    assert clips["clip_value(model.parameters(), 0.5)"].resolved
    assert not clips["helper.clip_grad_norm_(model.parameters(), 1.0)"].resolved
    assert "helper.clip_gradients(model, optimizer)" not in clips  # clip_gradients only on Lightning and Fabric
    assert [flow.context.code(call) for call, _ in grad_order.unscale_calls(flow)] == ["scaler.unscale_(optimizer)"]


LIGHTNING = """
import torch
import lightning as L
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


class Lit(L.LightningModule):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        self.clip_gradients(opt, gradient_clip_val=0.5)


class Plain:
    def training_step(self, batch, batch_idx):
        self.clip_gradients(batch, gradient_clip_val=0.5)


def sharded(module):
    model = FSDP(module)
    model.clip_grad_norm_(1.0)
"""


def test_lightning_and_fsdp_clips_are_known_from_the_code():
    lit = _clip(_flow(LIGHTNING, "training_step", "Lit"))
    assert lit.resolved and lit.via_optimizer
    plain = _flow(LIGHTNING, "training_step", "Plain")
    assert all(grad_order.clip_of(plain, call) is None for call in plain.calls)
    sharded = _flow(LIGHTNING, "sharded")
    clip = _clip(sharded)
    assert clip.resolved and grad_order.clipped_owners(sharded, clip) == {"model"}


OWNERS = """
import torch


def f(netG, netD, head, z):
    opt_g = torch.optim.Adam(netG.parameters())
    opt_d = torch.optim.Adam(netD.parameters())
    params = list(netG.parameters()) + list(head.parameters())
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt_d.zero_grad()
    netD.zero_grad()
    netG.zero_grad()
    opt_g.zero_grad()
    opt_d.step()
    opt_g.step()
"""


def test_the_zero_grad_and_step_calls_that_act_on_the_clipped_parameters():
    flow = _flow(OWNERS)
    clip = _clip(flow)
    owners = grad_order.clipped_owners(flow, clip)
    assert owners == {"netG", "head"}
    acting = [flow.context.code(e.call) for e in grad_order.gradient_events(flow) if grad_order.acts_on_clipped(flow, e, owners)]
    assert acting == ["torch.nn.utils.clip_grad_norm_(params, 1.0)", "netG.zero_grad()", "opt_g.zero_grad()", "opt_g.step()"]
    # unknown owners: every call may act on them
    assert all(grad_order.acts_on_clipped(flow, e, frozenset()) for e in grad_order.gradient_events(flow))


LOOPS = """
def f(model, loader, optimizer, k, clip):
    for i, batch in enumerate(loader):
        if batch is None:
            continue
        clip(model)
        loss = model(batch).sum()
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()


def g(model, loader, optimizer, clip):
    for batch in loader:
        clip(model)
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def h(model, batch, optimizer, clip):
    optimizer.zero_grad()
    loss = model(batch).sum()
    loss.backward()
    optimizer.step()
    clip(model)
"""


def _site(flow: gradflow.FunctionFlow, callee: str) -> flow_events.Place:
    return next(flow.sites[id(c)] for c in flow.calls if flow.context.code(c.func) == callee)


def test_the_last_events_before_a_statement_round_the_loop():
    flow = _flow(LOOPS, "f")
    # nothing before the clip in the iteration: a previous iteration ended after the backward (the step
    # skipped: accumulation), after the zero_grad, or at the continue, where its previous one ended
    assert _texts(flow, grad_order.last_before(flow, _site(flow, "clip"))) == [
        "optimizer.zero_grad()", "optimizer.step()", "loss.backward()",
    ]
    flow = _flow(LOOPS, "g")
    assert _texts(flow, grad_order.last_before(flow, _site(flow, "clip"))) == ["optimizer.zero_grad()"]
    step = _event(flow, "optimizer.step()")
    assert _texts(flow, grad_order.last_before(flow, step.site)) == ["loss.backward()"]


def test_the_first_events_after_a_statement_round_the_loop_and_the_function():
    flow = _flow(LOOPS, "g")
    assert _texts(flow, grad_order.first_after(flow, _site(flow, "clip"))) == ["loss.backward()"]
    zero = _event(flow, "optimizer.zero_grad()")
    assert _texts(flow, grad_order.first_after(flow, zero.site)) == ["loss.backward()"]  # the next iteration's
    flow = _flow(LOOPS, "h")
    # a training-step function runs once per step: its next call starts with zero_grad()
    assert _texts(flow, grad_order.first_after(flow, _site(flow, "clip"))) == ["optimizer.zero_grad()"]
    assert _texts(flow, grad_order.last_before(flow, _site(flow, "clip"))) == ["optimizer.step()"]


SCRIPT = """
optimizer.zero_grad()
clip(model)
loss.backward()
if ready:
    optimizer.step()
"""


def test_a_script_does_not_wrap():
    flow = _flow(SCRIPT, None)
    clip = _site(flow, "clip")
    assert _texts(flow, grad_order.last_before(flow, clip)) == ["optimizer.zero_grad()"]
    step = _event(flow, "optimizer.step()")
    assert _texts(flow, grad_order.first_after(flow, step.site)) == [None]  # nothing after it
    zero = _event(flow, "optimizer.zero_grad()")
    assert grad_order.last_before(flow, zero.site) == []  # the script starts with no gradients


@pytest.mark.parametrize(
    "first, then, follows, precedes",
    [
        ("clip", "loss.backward", True, True),
        ("loss.backward", "optimizer.step", False, True),  # the step may be skipped; when it runs, the backward ran
        ("clip", "optimizer.zero_grad", False, True),
        ("optimizer.step", "optimizer.zero_grad", True, True),
    ],
)
def test_what_always_follows_and_what_always_precedes(first, then, follows, precedes):
    flow = _flow(LOOPS, "f")
    sites = {flow.context.code(c.func): flow.sites[id(c)] for c in flow.calls}
    assert grad_order.must_follow(flow, sites[first], sites[then]) is follows
    assert grad_order.must_precede(sites[first], sites[then]) is precedes


SKIPPING = """
def f(model, loader, optimizer, clip):
    for batch in loader:
        optimizer.zero_grad()
        if batch is None:
            continue
        clip(model)
"""


def test_a_jump_between_keeps_the_later_statement_from_always_following():
    flow = _flow(SKIPPING)
    zero, clip = _site(flow, "optimizer.zero_grad"), _site(flow, "clip")
    assert not grad_order.must_follow(flow, zero, clip)
    assert grad_order.must_precede(zero, clip)


RESTARTS = """
def f(model, loader, optimizer, clip):
    for batch in loader:
        if batch is None:
            continue
        optimizer.zero_grad()
        loss = model(batch).sum()
        loss.backward()
        optimizer.step()
        clip(model)
        if loss.item() > 100:
            continue
        loss.detach()
"""


def test_a_continue_that_starts_the_next_pass_again_is_no_way_round_its_first_event():
    flow = _flow(RESTARTS)
    # the next pass that gets past the check starts with zero_grad(); one that does not starts again
    assert _texts(flow, grad_order.first_after(flow, _site(flow, "clip"))) == ["optimizer.zero_grad()"]
    # from the zero_grad(), the backward always follows in the same pass
    zero = _event(flow, "optimizer.zero_grad()")
    assert _texts(flow, grad_order.first_after(flow, zero.site)) == ["loss.backward()"]
