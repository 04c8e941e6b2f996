"""The dataflow engine's strict query: the one assignment a value at a use comes from."""
from __future__ import annotations

import textwrap
from typing import List, Optional, Sequence

import libcst as cst
import libcst.matchers as m
import pytest

from torchlint.analysis.model.dataflow import Definition, attribute_assignment_reaches, reaching_definition


class _UseFinder(cst.CSTVisitor):
    """The ancestors (outermost first) of the argument of the first ``use(...)`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: List[cst.CSTNode] = []
        self.found: Optional[Sequence[cst.CSTNode]] = None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.found is None and isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "use":
            self.found = tuple(self.stack) + (node,)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _definition(source: str, name: str = "p") -> Optional[Definition]:
    module = cst.parse_module(textwrap.dedent(source))
    finder = _UseFinder()
    module.visit(finder)
    assert finder.found is not None, "the snippet holds no use(...)"
    return reaching_definition(finder.found, name)


def _value(definition: Optional[Definition]) -> Optional[str]:
    return None if definition is None else cst.Module([]).code_for_node(definition.value)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("p = f(x)\nuse(p)\n", "f(x)"),
        ("p = f(x); use(p)\n", "f(x)"),
        ("def g(x):\n    p = f(x)\n    if c:\n        use(p)\n", "f(x)"),
        # inside a loop, an assignment earlier in its body reaches every iteration's use
        ("for i in r:\n    p = f(i)\n    use(p)\n", "f(i)"),
        # a masked write is no rebinding: unchanged_at_use sees it
        ("p = f(x)\np[m] = 0\nuse(p)\n", "f(x)"),
    ],
)
def test_the_one_plain_assignment_reaches(source: str, expected: str) -> None:
    assert _value(_definition(source)) == expected


@pytest.mark.parametrize(
    "source",
    [
        "def g(p):\n    use(p)\n",  # a parameter
        "p = f(x)\nif c:\n    p = h(x)\nuse(p)\n",  # a binding on some paths
        "p = f(x)\np += 1\nuse(p)\n",  # an update
        "p = f(x)\np.clamp_(min=1e-6)\nuse(p)\n",  # changed in place
        "p, q = f(x)\nuse(p)\n",  # an element of the value
        "p = f(x)\nfor i in r:\n    use(p)\n    p = h(i)\n",  # the next iteration sees the later binding
        "p = f(x)\nif (p := h(x)) is None:\n    pass\nuse(p)\n",  # a walrus in a condition
        "p = f(x)\ndel p\nuse(p)\n",
        "with ctx():\n    p = f(x)\nuse(p)\n",  # inside a compound statement before the use
        "if c: p = f(x)\nuse(p)\n",
        "p = f(x)\nq = [use(p) for p in ps]\n",  # a comprehension variable of the same name
        "p = f(x)\nq = lambda p: use(p)\n",  # a lambda's parameter
        "P = f(x)\ndef g():\n    use(p)\n",  # nothing in the function
    ],
)
def test_anything_uncertain_gives_none(source: str) -> None:
    assert _definition(source) is None


def test_between_holds_what_runs_from_the_assignment_to_the_use() -> None:
    definition = _definition(
        """
        logits = model(x)
        probs = softmax(logits)
        logits[0] = 0
        use(probs)
        """,
        "probs",
    )
    assert definition is not None
    assert not definition.unchanged_at_use(cst.parse_expression("logits"))
    assert definition.unchanged_at_use(cst.parse_expression("x"))


def test_a_loop_around_the_use_counts_as_run_between() -> None:
    definition = _definition(
        """
        probs = softmax(logits)
        for i in r:
            use(probs)
            logits.div_(2)
        """,
        "probs",
    )
    assert definition is not None
    assert not definition.unchanged_at_use(cst.parse_expression("logits"))


def test_the_definition_names_its_own_ancestors() -> None:
    definition = _definition("a = 1; p = g(a)\nuse(p)\n")
    assert definition is not None
    assert isinstance(definition.ancestors[-1], cst.Assign)
    assert _value(definition) == "g(a)"
    # asked again from the assignment, the earlier statement of its line gives ``a``
    inner = reaching_definition(definition.ancestors, "a")
    assert _value(inner) == "1"


def _attribute_reaches(source: str) -> bool:
    module = cst.parse_module(textwrap.dedent(source))
    finder = _UseFinder()
    module.visit(finder)
    assert finder.found is not None, "the snippet holds no use(...)"
    (assignment,) = m.findall(module, m.Assign(value=m.Call(func=m.Name("load"))))
    return attribute_assignment_reaches(assignment, "m.net", finder.found)


@pytest.mark.parametrize(
    "source, reaches",
    [
        ("m.net = load()\nm.other = 1\nuse(m.net)\n", True),
        ("def f(m):\n    m.net = load()\n    if c:\n        use(m.net)\n", True),
        ("m.net = load()\nm.net = build()\nuse(m.net)\n", False),  # stored again
        ("m.net = load()\nm = Model()\nuse(m.net)\n", False),  # another object
        ("use(m.net)\nm.net = load()\n", False),  # read before the load
        ("if c:\n    m.net = load()\nuse(m.net)\n", False),  # only on one branch
        ("m.net = load()\ndel m.net\nuse(m.net)\n", False),
    ],
)
def test_an_attribute_assignment_reaches_a_later_read_of_its_block(source: str, reaches: bool) -> None:
    assert _attribute_reaches(source) is reaches
