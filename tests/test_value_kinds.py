"""The one answer to "is this value a tensor?": value_kind, and is_tensor (value_kind's shown-only mode)."""
from __future__ import annotations

import textwrap
from typing import List, Tuple

import libcst as cst
import pytest

from torchlint.analysis.model.dataflow import site_of
from torchlint import config
from torchlint.analysis.model.file_context import FileContext
from torchlint.analysis.values.kinds import is_tensor, value_kind


def _at_use(source: str) -> Tuple[FileContext, cst.BaseExpression, List[cst.CSTNode]]:
    """The context, the argument of the first ``use(...)`` call, and the nodes enclosing that argument."""
    module = cst.parse_module(textwrap.dedent(source))
    context = FileContext("snippet.py", module.code, module, config.Settings(enabled=frozenset()))
    found: List[Tuple[cst.BaseExpression, List[cst.CSTNode]]] = []

    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.stack: List[cst.CSTNode] = []

        def on_visit(self, node: cst.CSTNode) -> bool:
            if not found and isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "use":
                found.append((node.args[0].value, self.stack + [node, node.args[0]]))
            self.stack.append(node)
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            self.stack.pop()

    module.visit(Finder())
    assert found, "the snippet holds no use(...)"
    expression, ancestors = found[0]
    context.ancestors = ancestors
    return context, expression, ancestors


def _answers(source: str) -> Tuple[str, bool]:
    context, expression, ancestors = _at_use(source)
    return value_kind(context, expression, site_of(ancestors)), is_tensor(context, expression)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nx = torch.zeros(3)\nuse(x.sum())\n",
        "import torch\nx = torch.zeros(3)\nx[0] = 1\nuse(x)\n",  # an element write keeps the container's kind
        "import torch.nn.functional as F\nuse(F.softmax(y, -1))\n",
        "import torch.nn as nn\ncriterion = nn.MSELoss()\ndef f(a, b):\n    use(criterion(a, b))\n",
        "import torch\nuse(torch.ones(2).data)\n",
        "import torch\nuse(torch.ones(2) > 0)\n",
    ],
)
def test_what_the_code_shows_is_a_tensor_in_both_answers(source: str) -> None:
    assert _answers(source) == ("tensor", True)


@pytest.mark.parametrize(
    "source",
    [
        # likely, not shown: a forward argument, a method name tensors have, a torch call of unknown result
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        use(x)\n",
        "import torch\nuse(model(x).float())\n",
        "import torch\nuse(torch.nn.Linear(2, 3))\n",
        # the one assignment is unknown when a branch may bind another value
        "import torch\nx = f()\nif c:\n    x = torch.zeros(3)\nuse(x)\n",
    ],
)
def test_a_likely_tensor_is_no_shown_one(source: str) -> None:
    kind, shown = _answers(source)
    assert kind == "tensor" and shown is False


@pytest.mark.parametrize(
    "source, kind",
    [
        ("import torch\nuse(torch.zeros(3).item())\n", "number"),
        ("import torch\nuse(torch.zeros(3).shape[0])\n", "number"),
        ("import torch\nimport numpy as np\nuse(np.log(a))\n", "array"),
        ("import torch\nuse(torch.zeros(3).tolist())\n", "number"),
        ("import torch\nuse(torch.zeros(3).split(1))\n", "tensor"),  # a tuple of tensors: not shown as one tensor
        ("import torch\ndef f(criterion, a, b):\n    use(criterion(a, b))\n", "unknown"),
    ],
)
def test_what_is_not_shown_to_be_a_tensor(source: str, kind: str) -> None:
    assert _answers(source) == (kind, False)


def test_a_function_parameter_shadows_a_module_loss() -> None:
    source = """
    import torch.nn as nn
    criterion = nn.MSELoss()
    def f(criterion, a, b):
        use(criterion(a, b))
    """
    assert _answers(source) == ("unknown", False)
