"""Runtime proofs for TL206 (activation-before-loss) where the activation is not written at the loss:
a sigmoid fed to ``binary_cross_entropy_with_logits`` (the codemod drops it), and models or layer stacks
that end in the activation the loss applies again (reported without a fix: the activation is part of
what the model returns to every caller)."""
from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from runtime_support import execute, fix_and_exec, forward_backward, settings_for  # noqa: E402
from torchlint import engine  # noqa: E402

WITH_LOGITS = """
import torch
import torch.nn.functional as F


def double_sigmoid(logits, targets):
    return F.binary_cross_entropy_with_logits(torch.sigmoid(logits), targets, reduction="sum")
"""

MODELS = """
import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Linear(4, 8)
        self.real_or_fake = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
        self.which_class = nn.Sequential(nn.Linear(8, 3), nn.Softmax(dim=1))

    def forward(self, x):
        hidden = self.trunk(x)
        return self.real_or_fake(hidden), self.which_class(hidden)


class Presence(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


def class_loss(critic, x, labels):
    _, predicted = critic(x)
    return nn.CrossEntropyLoss()(predicted, labels)


def presence_loss(model, x, targets):
    return nn.BCEWithLogitsLoss()(model(x).squeeze(1), targets)


def train_step(x, labels, targets):
    return class_loss(Critic(), x, labels) + presence_loss(Presence(), x, targets)
"""


def true_bce(logits, targets):
    """The binary cross-entropy of sigmoid(logits), by hand in float64."""
    z, t = logits.double(), targets.double()
    return (torch.clamp(z, min=0) - z * t + torch.log1p(torch.exp(-z.abs()))).sum()


def test_sigmoid_into_with_logits_squashes_twice_and_the_fix_restores_the_loss():
    pair = fix_and_exec(WITH_LOGITS, "TL206", applicability={"numerics"})
    bad, good = pair.functions("double_sigmoid")
    logits = torch.tensor([3.0, -2.0, 0.5, 8.0])
    targets = torch.tensor([1.0, 0.0, 1.0, 1.0])
    assert good(logits, targets).item() == pytest.approx(true_bce(logits, targets).item(), rel=1e-6)
    assert abs(bad(logits, targets).item() - true_bce(logits, targets).item()) > 0.5
    # Perfectly right and confident: the loss should be ~0; squashed twice it stays at log(1 + e^-1).
    perfect, one = torch.tensor([40.0]), torch.tensor([1.0])
    assert bad(perfect, one).item() == pytest.approx(torch.log1p(torch.exp(torch.tensor(-1.0))).item(), rel=1e-6)
    assert good(perfect, one).item() < 1e-12
    # Confidently wrong: the gradient that should push the logit back (sigmoid(z) - t = 1) vanishes.
    _, (grad, _) = forward_backward(bad, torch.tensor([40.0]), torch.tensor([0.0]))
    assert grad.abs().item() < 1e-12
    _, (grad, _) = forward_backward(good, torch.tensor([40.0]), torch.tensor([0.0]))
    assert grad.item() == pytest.approx(1.0)


def _module_findings():
    source = textwrap.dedent(MODELS).lstrip("\n")
    return engine.lint_text(source, "snippet.py", settings_for("TL206")).findings, execute(source, "models")


def test_the_rule_reports_both_model_outputs_without_a_fix():
    findings, _ = _module_findings()
    lines = textwrap.dedent(MODELS).lstrip("\n").splitlines()
    reported = {lines[f.location.line - 1].strip(): (f.fix, f.confidence.value) for f in findings}
    # The models reach the losses through parameters that the file's own call fills: medium.
    assert reported == {
        "return nn.CrossEntropyLoss()(predicted, labels)": (None, "medium"),
        "return nn.BCEWithLogitsLoss()(model(x).squeeze(1), targets)": (None, "medium"),
    }
    assert "Critic.forward" in findings[0].message and "Presence.forward" in findings[1].message


def test_a_classifier_head_ending_in_softmax_floors_cross_entropy():
    _, namespace = _module_findings()
    critic = namespace["Critic"]()
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1, 2, 1, 0])
    reported = namespace["class_loss"](critic, x, labels)
    hidden = critic.trunk(x)
    logits = critic.which_class[0](hidden)  # the head without its Softmax: what the loss wants
    true = torch.nn.functional.cross_entropy(logits, labels)
    assert abs(reported.item() - true.item()) > 1e-3  # a different quantity
    # However right the head is, the loss cannot fall below log(1 + (C - 1)/e) per sample.
    with torch.no_grad():
        critic.which_class[0].weight.zero_()
        critic.which_class[0].bias.copy_(torch.tensor([60.0, 0.0, 0.0]))
    floor = torch.log(torch.tensor(1 + 2 / torch.e)).item()
    assert namespace["class_loss"](critic, x, torch.zeros(5, dtype=torch.long)).item() == pytest.approx(floor, rel=1e-5)
    assert torch.nn.functional.cross_entropy(critic.which_class[0](hidden), torch.zeros(5, dtype=torch.long)).item() < 1e-6


def test_a_model_ending_in_sigmoid_under_bce_with_logits_loses_its_gradient():
    _, namespace = _module_findings()
    model = namespace["Presence"]()
    with torch.no_grad():
        model.fc.weight.zero_()
        model.fc.bias.fill_(30.0)  # confidently "present"
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(2))
    absent = torch.zeros(4)
    loss = namespace["presence_loss"](model, x, absent)
    loss.backward()
    # The logit sits at 30 for absent objects, yet the bias gets (almost) no gradient to lower it...
    assert model.fc.bias.grad.abs().item() < 1e-10
    # ...while the loss on the logits, as the with-logits loss expects them, pushes with full strength.
    model.zero_grad()
    torch.nn.BCEWithLogitsLoss()(model.fc(x).squeeze(1), absent).backward()
    assert model.fc.bias.grad.item() == pytest.approx(1.0, rel=1e-6)
