"""Unit tests of analysis/project/module_outputs.py: which activation ends a value, a module's or a class's output.

Each snippet calls ``probe(expression)``; the test asks for the activation of ``expression`` as the rules
would while visiting that call.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import List, Optional

import libcst as cst
import pytest

from torchlint import config
from torchlint.analysis.project import module_outputs
from torchlint.analysis.model import project_index
from torchlint.analysis.project.module_outputs import Traced, class_output, output_activation, trace_output
from torchlint.analysis.model.project_index import file_context

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def _probes(source: str, path: str = "snippet.py", index: Optional[project_index.ProjectIndex] = None):
    """(context, [(ancestors, argument)]) for every ``probe(...)`` call of ``source``."""
    source = textwrap.dedent(source).lstrip("\n")
    with project_index.activated(index):
        context = file_context(path, source, cst.parse_module(source), config.Settings(enabled=frozenset()))
    found = []
    path_nodes: List[cst.CSTNode] = []

    class _Walk(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "probe":
                found.append((tuple(path_nodes), node.args[0].value))
            path_nodes.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            path_nodes.pop()

    context.module.visit(_Walk())
    return context, found


def activations(source: str, **kwargs) -> List[Optional[str]]:
    context, probes = _probes(HEADER + textwrap.dedent(source), **kwargs)
    answers = []
    for ancestors, argument in probes:
        context.ancestors = list(ancestors)
        answers.append(output_activation(context, argument))
    return answers


def test_activations_written_at_the_use_in_every_form():
    assert activations(
        """
        def f(z, m):
            probe(F.softmax(z, dim=1))
            probe(torch.sigmoid(z))
            probe(z.log_softmax(-1))
            probe(nn.Sigmoid()(z))
            probe(torch.exp(F.log_softmax(z, 1)))
            probe(torch.log(z.softmax(1)))
            probe(torch.squeeze(z.sigmoid()).view(-1).type(torch.float32))
            probe(F.relu(z))
            probe(np.exp(F.log_softmax(z, 1)))
            probe(z)
        """
    ) == ["softmax", "sigmoid", "log_softmax", "sigmoid", "softmax", "log_softmax", "sigmoid", None, None, None]


MODELS = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        out = self.fc(x)
        out = F.softmax(out, dim=1)
        return out


class Discriminator(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.adv_layer = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
        self.aux_layer = nn.Sequential(nn.Linear(8, classes), nn.Softmax(dim=1))

    def forward(self, img):
        features = img.view(img.size(0), -1)
        validity = self.adv_layer(features)
        label = self.aux_layer(features)
        return validity, label


class Logits(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 3))

    def forward(self, x):
        return self.head(x)


class InferenceSoftmax(nn.Module):
    def forward(self, x):
        logits = self.fc(x)
        if self.training:
            return logits
        return logits.softmax(-1)


class Switch(nn.Module):
    def forward(self, x):
        logits = self.fc(x)
        return logits if self.training else torch.sigmoid(logits)


class Scores(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_softmax = nn.LogSoftmax(dim=0)

    def forward(self, x):
        return torch.exp(self.log_softmax(self.fc(x)))


class Child(Net):
    pass


class Squashed(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        return self._squash(self.net(x))

    def _squash(self, y):
        return y.view(-1, 3)
"""


def test_class_outputs_read_from_forward():
    facts = project_index.facts_of_source(HEADER + MODELS, "models.py")
    assert class_output(facts, "Net") == Traced("softmax", "Net.forward")
    validity, label = class_output(facts, "Discriminator")
    assert (validity.kind, label.kind) == ("sigmoid", "softmax")
    assert class_output(facts, "Logits") is None
    assert class_output(facts, "InferenceSoftmax") is None  # the returns disagree
    assert class_output(facts, "Switch") is None
    assert class_output(facts, "Scores").kind == "softmax"  # exp(log_softmax)
    assert class_output(facts, "Child").kind == "softmax"  # inherited forward
    assert class_output(facts, "Missing") is None


def test_a_helper_method_that_reshapes_keeps_what_it_is_handed_unknown():
    facts = project_index.facts_of_source(HEADER + MODELS, "models.py")
    # _squash returns its parameter reshaped: what it is handed is not followed into it.
    assert class_output(facts, "Squashed") is None


def test_modules_called_through_names_attributes_moves_and_unpacking():
    assert activations(
        MODELS
        + """
head = nn.Sequential(nn.Linear(4, 2), nn.Sigmoid())


def step(x, y):
    model = Net().to("cpu")
    probe(model(x))
    probe(Child().eval()(x))
    validity, label = Discriminator(3)(x)
    probe(validity)
    probe(label)
    probe(Discriminator(3)(x)[1])
    probe(head(x))
    probe(Logits()(x))
    probe(nn.DataParallel(Net())(x))
    net = Net() if y else Logits()
    probe(net(x))


class Trainer:
    def __init__(self):
        self.model = Net()
        self.disc = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())

    def step(self, x):
        probe(self.model(x))
        probe(self.disc(x).squeeze(1))
"""
    ) == ["softmax", "softmax", "sigmoid", "softmax", "softmax", "sigmoid", None, "softmax", None, "softmax", "sigmoid"]


def test_a_parameter_is_judged_by_the_files_calls_and_marked_assumed():
    source = HEADER + MODELS + textwrap.dedent(
        """
        def train(model, loader):
            for x, y in loader:
                output = model(x)
                probe(output)

        if __name__ == "__main__":
            train(Net().cuda(), [])
        """
    )
    context, [(ancestors, argument)] = _probes(source)
    context.ancestors = list(ancestors)
    traced = trace_output(context, argument)
    assert traced is not None and traced.kind == "softmax" and traced.assumed
    assert traced.origin == "Net.forward"


def test_a_parameter_passed_different_modules_is_unknown():
    assert activations(
        MODELS
        + """
def train(model, x):
    probe(model(x))

train(Net(), 1)
train(Logits(), 2)
"""
    ) == [None]


def test_a_rebound_or_conditionally_bound_name_is_unknown():
    assert activations(
        MODELS
        + """
def f(x, flag):
    out = Net()(x)
    out = out * 2
    probe(out)
    probs = Logits()(x)
    if flag:
        probs = probs.softmax(-1)
    probe(probs)
"""
    ) == [None, None]


def test_same_file_helpers_that_return_an_activation_or_build_a_module():
    assert activations(
        MODELS
        + """
def predict(model, x):
    return torch.softmax(model(x), dim=-1)


def build():
    return nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())


def f(model, x):
    probe(predict(model, x))
    probe(build()(x))
"""
    ) == ["softmax", "sigmoid"]


def test_classes_of_other_modules_through_the_project_index(tmp_path: Path):
    package = tmp_path / "proj"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(HEADER + "class Head(nn.Module):\n    def forward(self, x):\n        return torch.sigmoid(x)\n")
    (package / "model.py").write_text(
        HEADER
        + "from .layers import Head\n\n\nclass Model(nn.Module):\n"
        + "    def __init__(self):\n        super().__init__()\n        self.head = Head()\n\n"
        + "    def forward(self, x):\n        return self.head(x)\n\n\ndetector = Model()\n"
    )
    train = package / "train.py"
    train.write_text("")
    index = project_index.ProjectIndex([str(p) for p in package.glob("*.py")])
    source = HEADER + textwrap.dedent(
        """
        from proj.model import Model, detector
        from .model import Model as Relative

        def step(x):
            probe(Model()(x))
            probe(Relative()(x))
            probe(detector(x))
        """
    )
    context, probes = _probes(source, path=str(train), index=index)
    answers = []
    for ancestors, argument in probes:
        context.ancestors = list(ancestors)
        answers.append(output_activation(context, argument))
    assert answers == ["sigmoid", "sigmoid", "sigmoid"]


def test_without_an_index_only_the_files_own_classes_are_seen():
    assert activations(
        """
from proj.model import Model

def step(x):
    probe(Model()(x))
"""
    ) == [None]


@pytest.mark.parametrize("kind", sorted(module_outputs.ACTIVATION_KINDS))
def test_every_kind_has_a_module_and_a_function(kind):
    assert kind in module_outputs.ACTIVATION_MODULES.values()
    assert kind in module_outputs.ACTIVATION_FUNCTIONS.values()


def _write(root: Path, files: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


_LOSSES = """
import torch.nn.functional as F


def reconstruction_loss(reconstructed, images):
    return F.binary_cross_entropy(reconstructed, images, reduction="sum")


def logits_loss(logits, images):
    return F.binary_cross_entropy_with_logits(logits, images)
"""

_MAIN = """
import torch.nn as nn

from utils.losses import logits_loss, reconstruction_loss


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid())
        self.head = nn.Linear(4, 8)

    def forward(self, z):
        return self.net(z)


def main(loader):
    decoder = Decoder()
    for z, images in loader:
        loss = reconstruction_loss(decoder(z), images) + logits_loss(decoder.head(z), images)
        loss.backward()
"""


def test_a_parameter_of_a_function_only_other_modules_call_is_what_they_pass(tmp_path: Path, capsys):
    from fixture_support import project_findings

    root = _write(tmp_path / "p", {"utils/__init__.py": "", "utils/losses.py": _LOSSES, "main.py": _MAIN})
    found = [(item["path"].removeprefix("./"), item["line"]) for item in project_findings(root, "TL206", capsys)]
    assert found == [("utils/losses.py", 5)]
    message = project_findings(root, "TL206", capsys)[0]["message"]
    assert "Decoder.forward" in message
    # the file calls it too: its own calls answer, and it passes nothing known
    own_call = _LOSSES + "\n\ndef debug(x, y):\n    return reconstruction_loss(x, y)\n"
    root = _write(tmp_path / "q", {"utils/__init__.py": "", "utils/losses.py": own_call, "main.py": _MAIN})
    assert project_findings(root, "TL206", capsys) == []
    # a notebook names it: its calls are not read
    root = _write(tmp_path / "r", {"utils/__init__.py": "", "utils/losses.py": _LOSSES, "main.py": _MAIN,
                                   "explore.ipynb": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'.replace("[]", '[{"cell_type": "code", "metadata": {}, "source": ["reconstruction_loss(a, b)"], "outputs": [], "execution_count": null}]')})
    assert project_findings(root, "TL206", capsys) == []
