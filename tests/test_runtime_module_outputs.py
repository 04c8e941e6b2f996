"""TL201/TL202 where the activation is the model's last layer: a GAN's discriminator ``nn.Sequential(...,
nn.Sigmoid())`` and a classifier ending in ``nn.Softmax``, logged at a script's top level.  Under torch the
bad code gives -inf and a NaN gradient once the model is confident; the codemod's own output (the log of the
activation taken from the logits of ``model[:-1]``, the same layers) stays finite and agrees elsewhere."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from runtime_support import fix_and_exec, forward_backward  # noqa: E402

GAN = """
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())


def critic_loss(real, fake):
    return -torch.mean(torch.log(critic(real)) + torch.log(1. - critic(fake)))


def generator_loss(fake):
    return -torch.mean(torch.log(critic(fake)))
"""

CLASSIFIER = """
import torch
import torch.nn as nn

torch.manual_seed(0)
classifier = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3), nn.Softmax(dim=1))


def nll(inputs, labels):
    return -torch.log(classifier(inputs)).gather(1, labels[:, None]).mean()
"""


def _ordinary(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def gan():
    return fix_and_exec(GAN, "TL202", applicability="safe")


def test_the_discriminator_is_the_same_object_under_the_fix(gan):
    assert "critic[:-1](" in gan.fixed_source and "torch.log(" not in gan.fixed_source


def test_gan_losses_agree_on_ordinary_inputs(gan):
    real, fake = _ordinary(16, 2), _ordinary(16, 2) * 0.5
    for name, args in (("critic_loss", (real, fake)), ("generator_loss", (fake,))):
        bad, good = gan.functions(name)
        assert torch.allclose(bad(*args), good(*args), atol=1e-5), name


def test_a_confident_discriminator_no_longer_gives_inf_and_nan_gradients(gan):
    # Inputs far out make the logits of either sign large: sigmoid rounds to exactly 0 or 1.
    far = _ordinary(16, 2) * 1e4
    bad, good = gan.functions("critic_loss")
    value, grads = forward_backward(bad, far, far)
    assert torch.isinf(value) and any(torch.isnan(g).any() for g in grads)
    value, grads = forward_backward(good, far, far)
    assert torch.isfinite(value) and all(torch.isfinite(g).all() for g in grads)
    bad, good = gan.functions("generator_loss")
    value, _ = forward_backward(bad, far)
    assert torch.isinf(value)
    value, (grad,) = forward_backward(good, far)
    assert torch.isfinite(value) and torch.isfinite(grad).all()


def test_a_classifier_ending_in_softmax(tmp_path):
    pair = fix_and_exec(CLASSIFIER, "TL201", applicability="safe")
    bad, good = pair.functions("nll")
    labels = torch.tensor([0, 1, 2, 0])
    ordinary = _ordinary(4, 4)
    assert torch.allclose(bad(ordinary, labels), good(ordinary, labels), atol=1e-5)
    far = ordinary * 1e4
    value, (grad,) = forward_backward(bad, far, labels)
    assert torch.isinf(value) or torch.isnan(grad).any()
    value, (grad,) = forward_backward(good, far, labels)
    assert torch.isfinite(value) and torch.isfinite(grad).all()
