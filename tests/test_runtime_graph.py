"""Runtime proofs for the forms of TL301-TL303 users write, and for TL305 (backward-after-optimizer-step).

Each bad snippet is what the rule reports (checked with the linter first) and is run under torch to
show the failure; where the rule offers a codemod, the codemod's own output is run and shown to work
(``fix_and_exec``); where it offers none (the reason is in the rule's docs), the corrected form the docs
give is run instead.
"""
from __future__ import annotations

import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")

from runtime_support import execute, fix_and_exec, settings_for  # noqa: E402

from torchlint import engine  # noqa: E402

SECOND_TIME = "Trying to backward through the graph a second time"
IN_PLACE = "modified by an inplace operation"


def reported(source: str, code: str) -> dict:
    """Check that ``code`` reports ``source``, then run it: its namespace."""
    source = textwrap.dedent(source).lstrip("\n")
    findings = engine.lint_text(source, "snippet.py", settings_for(code)).findings
    assert [f for f in findings if f.code == code], f"{code} does not report:\n{source}"
    return execute(source, "snippet")


def silent(source: str, code: str) -> dict:
    source = textwrap.dedent(source).lstrip("\n")
    findings = engine.lint_text(source, "snippet.py", settings_for(code)).findings
    assert not [f for f in findings if f.code == code], f"{code} reports the corrected form:\n{source}"
    return execute(source, "snippet")


def _mlp(inputs=4, outputs=1):
    return torch.nn.Sequential(torch.nn.Linear(inputs, 8), torch.nn.ReLU(), torch.nn.Linear(8, outputs))


# -- TL303 backward-twice: the forms users write ---------------------------------------------------

GAN_NOT_DETACHED = """
import torch.nn.functional as F


def gan_step(netG, netD, z, real, ones, zeros, opt_d, opt_g):
    fake = netG(z)
    d_loss = F.binary_cross_entropy_with_logits(netD(real), ones) + F.binary_cross_entropy_with_logits(netD(FAKE_IN_D), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = F.binary_cross_entropy_with_logits(netD(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
"""


def _gan_parts():
    torch.manual_seed(0)
    netG, netD = _mlp(4, 4), _mlp(4, 1)
    return netG, netD, torch.optim.SGD(netG.parameters(), lr=0.1), torch.optim.SGD(netD.parameters(), lr=0.1)


def test_tl303_gan_generator_output_reused_after_the_discriminator_backward():
    bad = reported(GAN_NOT_DETACHED.replace("FAKE_IN_D", "fake"), "TL303")["gan_step"]
    good = silent(GAN_NOT_DETACHED.replace("FAKE_IN_D", "fake.detach()"), "TL303")["gan_step"]
    z, real, ones, zeros = torch.randn(6, 4), torch.randn(6, 4), torch.ones(6, 1), torch.zeros(6, 1)
    netG, netD, opt_g, opt_d = _gan_parts()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        bad(netG, netD, z, real, ones, zeros, opt_d, opt_g)
    netG, netD, opt_g, opt_d = _gan_parts()
    good(netG, netD, z, real, ones, zeros, opt_d, opt_g)
    assert all(p.grad is not None for p in netG.parameters())


CRITIC_LOOP = """
import torch


def train(generator, critic, batches, n_critic, opt_c, opt_g):
    for real in batches:
        for _ in range(n_critic):
            fake = generator(torch.randn(real.size(0), 4))
            opt_c.zero_grad()
            (critic(fake).mean() - critic(real).mean()).backward()
            opt_c.step()
        opt_g.zero_grad()
        (-critic(FAKE).mean()).backward()
        opt_g.step()
"""


def test_tl303_generator_step_after_a_critic_loop_reuses_its_last_fake():
    bad = reported(CRITIC_LOOP.replace("FAKE", "fake"), "TL303")["train"]
    good = silent(CRITIC_LOOP.replace("FAKE", "generator(torch.randn(real.size(0), 4))"), "TL303")["train"]
    batches = [torch.randn(5, 4) for _ in range(2)]
    for function, fails in ((bad, True), (good, False)):
        netG, netD, opt_g, opt_d = _gan_parts()
        if fails:
            with pytest.raises(RuntimeError, match=SECOND_TIME):
                function(netG, netD, batches, 2, opt_d, opt_g)
        else:
            function(netG, netD, batches, 2, opt_d, opt_g)


TBPTT = """
import torch
import torch.nn.functional as F


def train(rnn, head, chunks, targets, optimizer):
    state = None
    for x, y in zip(chunks, targets):
        out, state = rnn(x, state)
        loss = F.mse_loss(head(out), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        CUT
    return loss.item()
"""


def test_tl303_recurrent_state_carried_across_iterations_without_detach():
    bad = reported(TBPTT.replace("CUT", "pass"), "TL303")["train"]
    good = silent(TBPTT.replace("CUT", "state = state.detach()"), "TL303")["train"]
    data = silent(TBPTT.replace("CUT", "state = state.data"), "TL303")["train"]
    torch.manual_seed(0)
    chunks = [torch.randn(2, 5, 3) for _ in range(3)]
    targets = [torch.randn(2, 5, 1) for _ in range(3)]
    losses = []
    for function, fails in ((bad, True), (good, False), (data, False)):
        torch.manual_seed(1)
        rnn, head = torch.nn.GRU(3, 8, batch_first=True), torch.nn.Linear(8, 1)
        optimizer = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.01)
        if fails:
            with pytest.raises(RuntimeError, match=SECOND_TIME):
                function(rnn, head, chunks, targets, optimizer)
        else:
            losses.append(function(rnn, head, chunks, targets, optimizer))
    assert losses[0] == pytest.approx(losses[1])  # .detach() and .data cut the same way


PASSED_IN_TWICE = """
def step_twice(loss, optimizer):
    loss.backward()
    optimizer.step()
    loss.backward()
"""


def test_tl303_the_same_value_passed_in_and_backwarded_twice():
    bad = reported(PASSED_IN_TWICE, "TL303")["step_twice"]
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(3, 4)).pow(2).mean()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        bad(loss, optimizer)


CALLER_FREES = """
import torch


def diversity_penalty(features, weight):
    gram = features @ features.t()
    penalty = weight * (gram - torch.eye(gram.size(0))).pow(2).mean()
    penalty.backward()
    return penalty.item()


def train_generator(netG, netD, z, optimizer):
    optimizer.zero_grad()
    hidden = netD[0](netG(z))
    score = netD[1:](hidden)
    score.mean().backward(RETAIN)
    diversity_penalty(hidden, 0.1)
    optimizer.step()
"""


def test_tl303_a_helper_backwards_what_its_caller_freed():
    bad = reported(CALLER_FREES.replace("RETAIN", ""), "TL303")["train_generator"]
    good = silent(CALLER_FREES.replace("RETAIN", "retain_graph=True"), "TL303")["train_generator"]
    for function, fails in ((bad, True), (good, False)):
        netG, netD, opt_g, _ = _gan_parts()
        if fails:
            with pytest.raises(RuntimeError, match=SECOND_TIME):
                function(netG, netD, torch.randn(5, 4), opt_g)
        else:
            function(netG, netD, torch.randn(5, 4), opt_g)


GRAD_THEN_BACKWARD = """
import torch
import torch.nn.functional as F


def clipped_step(model, x, y, optimizer):
    loss = F.mse_loss(model(x), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    norm = torch.stack([g.norm() for g in grads]).norm()
    loss.backward()
    optimizer.step()
    return norm.item()
"""


def test_tl303_autograd_grad_frees_the_graph_and_the_fix_retains_it():
    pair = fix_and_exec(GRAD_THEN_BACKWARD, "TL303", unsafe=True, applicability="unsafe")
    assert "retain_graph=True" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("clipped_step")
    x, y = torch.randn(6, 4), torch.randn(6, 1)
    torch.manual_seed(0)
    model = _mlp()
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        bad(model, x, y, torch.optim.SGD(model.parameters(), lr=0.1))
    torch.manual_seed(0)
    model = _mlp()
    expected = _grad_norm(model, x, y)
    assert good(model, x, y, torch.optim.SGD(model.parameters(), lr=0.0)) == pytest.approx(expected)


def _grad_norm(model, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return torch.stack([g.norm() for g in grads]).norm().item()


MULTITASK = """
import torch.nn.functional as F


def multitask(encoder, heads, x, targets, optimizer):
    shared = encoder(x)
    for name, head in heads.items():
        task_loss = F.mse_loss(head(shared), targets[name])
        task_loss.backward()
    optimizer.step()
"""


def test_tl303_one_trunk_many_heads_in_a_loop_and_the_fix():
    pair = fix_and_exec(MULTITASK, "TL303", unsafe=True, applicability="unsafe")
    bad, good = pair.functions("multitask")
    x = torch.randn(5, 4)
    targets = {"a": torch.randn(5, 1), "b": torch.randn(5, 1)}
    torch.manual_seed(0)
    encoder = _mlp(4, 6)
    heads = {"a": torch.nn.Linear(6, 1), "b": torch.nn.Linear(6, 1)}
    params = list(encoder.parameters()) + [p for h in heads.values() for p in h.parameters()]
    with pytest.raises(RuntimeError, match=SECOND_TIME):
        bad(encoder, heads, x, targets, torch.optim.SGD(params, lr=0.0))
    for p in params:
        p.grad = None
    good(encoder, heads, x, targets, torch.optim.SGD(params, lr=0.0))
    fixed = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    shared = encoder(x)
    sum(torch.nn.functional.mse_loss(heads[n](shared), targets[n]) for n in heads).backward()
    for got, summed in zip(fixed, [p.grad for p in params]):
        torch.testing.assert_close(got, summed)


# -- TL301 graph-break-tensor-from-list: leaves the user asked gradients for -----------------------

LEAVES = """
import torch


def angles(theta, phi):
    theta = theta.clone().requires_grad_(True)
    phi = phi.clone()
    phi.requires_grad = True
    components = torch.tensor([theta.cos(), phi.sin()])
    components.sum().backward()
    return components, theta.grad, phi.grad
"""


def test_tl301_list_display_of_grad_leaves_and_the_fix():
    pair = fix_and_exec(LEAVES, "TL301", unsafe=True)
    assert "torch.stack([theta.cos(), phi.sin()])" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("angles")
    theta, phi = torch.tensor(0.3), torch.tensor(0.7)
    with pytest.raises(RuntimeError, match="does not require grad"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bad(theta, phi)
    values, d_theta, d_phi = good(theta, phi)
    torch.testing.assert_close(values.detach(), torch.stack([theta.cos(), phi.sin()]))
    torch.testing.assert_close(d_theta, -theta.sin())
    torch.testing.assert_close(d_phi, phi.cos())


SEED_FORM = """
import torch
import torch.nn as nn


class SpanRanker(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc = nn.Linear(hidden, 1)

    def forward(self, hidden, spans):
        scores = []
        for row in range(hidden.size(0)):
            for start, stop in spans[row]:
                pooled = hidden[row, start:stop + 1, :].mean(0, keepdim=True)
                scores.append(self.fc(pooled))
        scores = torch.as_tensor(scores, device=hidden.device)
        return scores
"""


def test_tl301_seed_form_rebinds_the_list_and_the_fix_trains():
    pair = fix_and_exec(SEED_FORM, "TL301", unsafe=True)
    bad_cls, good_cls = pair.functions("SpanRanker")
    torch.manual_seed(0)
    bad, good = bad_cls(6), good_cls(6)
    good.load_state_dict(bad.state_dict())
    hidden = torch.randn(2, 9, 6)
    spans = [[(0, 2), (3, 8)], [(1, 4)]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        bad_out = bad(hidden, spans)
    good_out = good(hidden, spans)
    assert bad_out.requires_grad is False and good_out.requires_grad is True
    torch.testing.assert_close(good_out.detach(), bad_out)
    good_out.sum().backward()
    assert good.fc.weight.grad is not None


# -- TL302 graph-break-detach: cut loss terms, detached generator outputs, NumPy round trips ------

LOSS_TERM = """
import torch
import torch.nn.functional as F


def step(net, critic, x, target, optimizer):
    recon, code = net(x)
    adv = F.binary_cross_entropy_with_logits(critic(code), torch.ones(code.size(0), 1))
    adv = adv.detach().item()
    loss = F.l1_loss(recon, target) + 0.1 * adv
    optimizer.zero_grad()
    loss.backward()
    return loss.item()
"""


class _Coder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = torch.nn.Linear(4, 2)
        self.decode = torch.nn.Linear(2, 4)

    def forward(self, x):
        code = self.encode(x)
        return self.decode(code), code


def test_tl302_a_loss_term_made_a_number_trains_nothing_until_the_fix():
    pair = fix_and_exec(LOSS_TERM, "TL302", unsafe=True, applicability="unsafe")
    assert "adv.detach().item()" not in pair.fixed_source, pair.describe()
    bad, good = pair.functions("step")
    x, target = torch.randn(6, 4), torch.randn(6, 4)
    results = {}
    for label, function in (("bad", bad), ("good", good)):
        torch.manual_seed(0)
        net, critic = _Coder(), torch.nn.Linear(2, 1)
        results[label] = function(net, critic, x, target, torch.optim.SGD(net.parameters(), lr=0.1))
        # the encoder gets the reconstruction's gradient either way; the adversary's only after the fix
        results[label + "_critic"] = critic.weight.grad
        results[label + "_encoder"] = net.encode.weight.grad.clone()
    assert results["bad_critic"] is None and results["good_critic"] is not None
    assert not torch.allclose(results["bad_encoder"], results["good_encoder"])
    assert results["bad"] == pytest.approx(results["good"])  # same loss value


GENERATOR_STEP = """
import torch
import torch.nn.functional as F


def generator_step(netG, netD, z, real):
    fake = netG(z)
    d_real = netD(real)
    d_fake = netD(fake.detach())
    g_loss = F.mse_loss(d_fake, torch.ones_like(d_fake)) + 10 * F.l1_loss(fake, real)
    g_loss.backward()
    return g_loss.item(), d_real
"""


def test_tl302_generator_output_detached_in_its_own_loss_and_the_fix():
    pair = fix_and_exec(GENERATOR_STEP, "TL302", unsafe=True, applicability="unsafe")
    assert "netD(fake)" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("generator_step")
    z, real = torch.randn(6, 4), torch.randn(6, 4)
    grads = {}
    for label, function in (("bad", bad), ("good", good), ("l1_only", None)):
        torch.manual_seed(0)
        netG, netD = _mlp(4, 4), _mlp(4, 1)
        if function is None:
            (10 * torch.nn.functional.l1_loss(netG(z), real)).backward()
        else:
            grads[label + "_value"], _ = function(netG, netD, z, real)
        grads[label] = [p.grad.clone() for p in netG.parameters()]
    # before the fix the generator learns from the L1 term alone: the adversarial term sent nothing
    for got, l1 in zip(grads["bad"], grads["l1_only"]):
        torch.testing.assert_close(got, l1)
    assert any(not torch.allclose(g, l1) for g, l1 in zip(grads["good"], grads["l1_only"]))
    assert grads["bad_value"] == pytest.approx(grads["good_value"])


NUMPY_ROUND_TRIP = """
import numpy as np
import torch
import torch.nn.functional as F


def step(model, x, y):
    probs = model(x).sigmoid().detach().cpu().numpy()
    clipped = torch.from_numpy(np.clip(probs, 1e-4, 1 - 1e-4))
    loss = F.binary_cross_entropy(clipped, y)
    loss.backward()
"""


def test_tl302_values_through_numpy_lose_the_graph():
    pytest.importorskip("numpy")
    bad = reported(NUMPY_ROUND_TRIP, "TL302")["step"]
    with pytest.raises(RuntimeError, match="does not require grad"):
        bad(_mlp(), torch.randn(5, 4), torch.rand(5, 1))


FLAG_OVER_THE_CUT = """
import torch.nn.functional as F


def train_step(model, x, label, optimizer):
    output = model(x)
    loss = F.mse_loss(output.detach(), label)
    loss.requires_grad = True
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
"""


def test_tl302_requires_grad_set_over_a_cut_trains_nothing_until_the_fix():
    pair = fix_and_exec(FLAG_OVER_THE_CUT, "TL302", unsafe=True, applicability="unsafe")
    assert "requires_grad" not in pair.fixed_source, pair.describe()  # the flag would raise on a non-leaf
    bad, good = pair.functions("train_step")
    x, label = torch.randn(6, 4), torch.randn(6, 1)
    values = {}
    for name, function in (("bad", bad), ("good", good)):
        torch.manual_seed(0)
        model = _mlp()
        values[name] = function(model, x, label, torch.optim.SGD(model.parameters(), lr=0.1))
        grads = [p.grad for p in model.parameters()]
        if name == "bad":
            assert all(g is None for g in grads)  # backward() ran and trained nothing
        else:
            assert all(g is not None and g.abs().sum() > 0 for g in grads)
    assert values["bad"] == pytest.approx(values["good"])


# -- TL305 backward-after-optimizer-step ------------------------------------------------------------

SRGAN = """
import torch.nn.functional as F


def srgan_step(netG, netD, z, real, optimizerD, optimizerG):
    fake = netG(z)
    real_out = netD(real).mean()
    fake_out = netD(fake).mean()
    d_loss = 1 - real_out + fake_out
    optimizerD.zero_grad()
    d_loss.backward(retain_graph=True)
    optimizerD.step()
    g_loss = F.mse_loss(fake, real) - 1e-3 * fake_out
    optimizerG.zero_grad()
    g_loss.backward()
    optimizerG.step()
    return d_loss.item(), g_loss.item()
"""


def _srgan_parts(optimizer):
    torch.manual_seed(0)
    netG, netD = _mlp(4, 4), _mlp(4, 1)
    return netG, netD, optimizer(netD.parameters(), lr=0.01), optimizer(netG.parameters(), lr=0.01)


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam], ids=["sgd", "adam"])
def test_tl305_discriminator_step_then_generator_loss_through_its_old_output(optimizer):
    pair = fix_and_exec(SRGAN, "TL305", unsafe=True, applicability="unsafe")
    assert "optimizerD.step()\n    fake_out = netD(fake).mean()" in pair.fixed_source, pair.describe()
    bad, good = pair.functions("srgan_step")
    z, real = torch.randn(6, 4), torch.randn(6, 4)
    netG, netD, opt_d, opt_g = _srgan_parts(optimizer)
    with pytest.raises(RuntimeError, match=IN_PLACE):
        bad(netG, netD, z, real, opt_d, opt_g)
    netG, netD, opt_d, opt_g = _srgan_parts(optimizer)
    before = [p.detach().clone() for p in netG.parameters()]
    d_fixed, _ = good(netG, netD, z, real, opt_d, opt_g)
    assert all(not torch.equal(a, b) for a, b in zip(before, netG.parameters()))  # the generator stepped
    netG, netD, _, _ = _srgan_parts(optimizer)
    d_original = (1 - netD(real).mean() + netD(netG(z)).mean()).item()
    assert d_fixed == pytest.approx(d_original)  # the discriminator's loss is the one it always was


STEP_IN_LOOP = """
import torch


def refine(generator, critic, z, steps):
    optimizer = torch.optim.SGD(generator.parameters(), lr=0.01)
    fake = generator(z)
    for _ in range(steps):
        loss = -critic(FAKE).mean()
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
"""


def test_tl305_stepping_inside_a_loop_over_a_graph_built_before_it():
    bad = reported(STEP_IN_LOOP.replace("FAKE", "fake"), "TL305")["refine"]
    good = silent(STEP_IN_LOOP.replace("FAKE", "generator(z)"), "TL305")["refine"]
    torch.manual_seed(0)
    with pytest.raises(RuntimeError, match=IN_PLACE):
        bad(_mlp(4, 4), _mlp(4, 1), torch.randn(3, 4), 2)
    good(_mlp(4, 4), _mlp(4, 1), torch.randn(3, 4), 2)
