"""Generated programs: the engine never crashes on them and its fixes never corrupt them.

Two sources of programs, both run through ``engine.lint_text`` and
``engine.fix_text`` with every registered rule enabled and unsafe fixes on:

- hypothesmith: arbitrary valid Python from the grammar (``from_grammar``)
  and from LibCST's node types (``from_node``), half the time with a torch
  module of the second kind appended, so that fixes happen next to it;
- ``torch_modules()``: whole modules composed from nested torch expressions
  (sqrt, log, pow, softmax, log_softmax, sigmoid, division, torch.load,
  torch.where, ...), spelt through import aliases (``import torch as T``,
  ``from torch.nn import functional as F``, ...), with comments inside
  calls, backslash continuations, parenthesised and multi-line calls,
  nested blocks, LF or CRLF line endings, with or without a final newline.

Properties: no internal-error diagnostic, with every rule walking the code
whatever its text (``use_triggers=False``); every fixed text parses and
compiles; a second fix pass changes nothing (fixpoint); a text with no
applied fix is returned unchanged; the line endings and the final newline
are kept; and the text prefilter never loses a finding: the findings with
and without it are the same (on generated code, on every fixture and on the
bundled examples, with nothing injected into the text).

The default profile (``torchlint-generated``) runs hundreds of examples,
derandomized so that CI sees the same examples every run.  For a longer, randomized search set
``TORCHLINT_HYPOTHESIS_EXAMPLES``, the number of examples per test
(profile ``torchlint-generated-large``), e.g.

    TORCHLINT_HYPOTHESIS_EXAMPLES=2000 python -m pytest tests/test_generated.py -q
"""
from __future__ import annotations

import os
import re
from pathlib import Path
import warnings
from typing import List

import hypothesmith
import libcst as cst
from hypothesis import HealthCheck, Phase, assume, find, given, settings
from hypothesis import strategies as st

from torchlint import config, engine, registry

EXAMPLES_VARIABLE = "TORCHLINT_HYPOTHESIS_EXAMPLES"

settings.register_profile(
    "torchlint-generated",
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
if os.environ.get(EXAMPLES_VARIABLE):
    settings.register_profile(
        "torchlint-generated-large",
        max_examples=int(os.environ[EXAMPLES_VARIABLE]),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    PROFILE = settings.get_profile("torchlint-generated-large")
    # hypothesmith's strategies cost 0.2-0.7 s an example; the large run gives them the same count.
    SLOW_FACTOR = 1
else:
    PROFILE = settings.get_profile("torchlint-generated")
    SLOW_FACTOR = 2  # the grammar-based tests run half the examples by default, from_node a quarter


def _settings() -> config.Settings:
    return config.Settings(enabled=frozenset(registry.all_rules()), unsafe_fixes=True)


def _compiles(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(text, "<generated>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


def _internal(diagnostics) -> List[str]:
    return [f"{d.line}:{d.column}: {d.message}" for d in diagnostics if d.kind == "internal"]


_NEWLINES = re.compile(r"\r\n|\r|\n")


def _newline_kinds(text: str) -> set:
    return set(_NEWLINES.findall(text))


def _final_newline(text: str) -> str:
    match = re.search(r"(\r\n|\r|\n)\Z", text)
    return match.group(1) if match else ""


def check_never_crashes_never_corrupts(text: str) -> engine.FixResult:
    """The properties every program must have; returns the fix result for further checks."""
    settings = _settings()
    linted = engine.lint_text(text, "generated.py", settings, use_triggers=False)
    assert _internal(linted.diagnostics) == []
    assert_prefilter_keeps_findings(text, "generated.py", settings, every_rule=linted)

    fixed = engine.fix_text(text, "generated.py", settings, unsafe=True, use_triggers=False)
    assert _internal(fixed.result.diagnostics) == []
    if fixed.applied == 0:
        assert fixed.text == text
        return fixed
    assert fixed.text != text
    cst.parse_module(fixed.text)  # raises if a fix broke the syntax
    assert _compiles(fixed.text), fixed.text
    # Fixes keep the file's line endings and its final newline (or lack of one).
    assert _newline_kinds(fixed.text) <= _newline_kinds(text) or not _newline_kinds(text)
    assert _final_newline(fixed.text) == _final_newline(text)

    again = engine.fix_text(fixed.text, "generated.py", settings, unsafe=True, use_triggers=False)
    assert again.applied == 0, f"not a fixpoint:\n{fixed.text}"
    assert again.text == fixed.text
    return fixed


def assert_prefilter_keeps_findings(text: str, path: str, settings: config.Settings, every_rule=None) -> None:
    """The text prefilter (each rule's trigger words) and the ast pre-pass only skip work: the findings are the
    ones every rule finds walking the whole file."""
    filtered = engine.lint_text(text, path, settings)
    every_rule = every_rule or engine.lint_text(text, path, settings, use_triggers=False)
    whole = engine.lint_text(text, path, settings, use_triggers=False, use_prepass=False)

    def keys(result):
        return sorted((f.location.line, f.location.column, f.code, f.confidence.value, f.message) for f in result.findings)

    assert keys(filtered) == keys(every_rule) == keys(whole), text


# -- torch expressions composed into modules -----------------------------------------------

# (import line, the name it binds for the module `torch`)
TORCH_IMPORTS = [
    ("import torch", "torch"),
    ("import torch as T", "T"),
    ("import torch as th", "th"),
]
# (import line, the expression that names torch.nn.functional)
FUNCTIONAL_IMPORTS = [
    ("import torch.nn.functional as F", "F"),
    ("from torch.nn import functional as F", "F"),
    ("from torch.nn import functional as fn", "fn"),
    ("from torch import nn", "nn.functional"),
    ("import torch.nn as nn", "nn.functional"),
]
LEAVES = ["x", "y", "logits", "self.scale", "x[..., 0]", "x.float()", "probs", "(x - y)", "target"]
CONSTANTS = ["2", "0.5", "1e-8", "1e-12", "eps", "3", "-1"]
DIMS = ["-1", "1", "dim", "0"]


@st.composite
def _layout(draw, callee: str, args: List[str]) -> str:
    """A call written on one line, on several lines, with a comment inside, or in extra parentheses."""
    style = draw(st.sampled_from(["flat", "flat", "multiline", "comment", "trailing-comma", "parenthesised"]))
    if style == "flat":
        return f"{callee}({', '.join(args)})"
    if style == "multiline":
        inner = ",\n        ".join(args)
        return f"{callee}(\n        {inner}\n    )"
    if style == "comment":
        first, rest = args[0], args[1:]
        tail = "".join(f", {a}" for a in rest)
        return f"{callee}(  # {draw(st.sampled_from(['why', 'TODO: stable?', 'noqa-like text', 'softmax here']))}\n        {first}{tail}\n    )"
    if style == "trailing-comma":
        return f"{callee}({', '.join(args)},)"
    return f"({callee}({', '.join(args)}))"


def _expressions(torch_name: str, functional: str):
    """Nested torch expressions; the catalogue's bad shapes are drawn as often as neutral ones."""
    leaf = st.sampled_from(LEAVES)
    constant = st.sampled_from(CONSTANTS)
    dim = st.sampled_from(DIMS)
    t, f = torch_name, functional

    def extend(inner):
        @st.composite
        def node(draw):
            kind = draw(st.sampled_from(KINDS))
            a = draw(inner)
            call = lambda callee, *args: draw(_layout(callee, list(args)))  # noqa: E731
            softmax = lambda operand: draw(  # noqa: E731
                st.sampled_from(
                    [
                        call(f"{t}.softmax", operand, f"dim={draw(dim)}"),
                        call(f"{f}.softmax", operand, draw(dim)),
                        f"({operand}).softmax({draw(dim)})",
                        f"{t}.nn.Softmax(dim={draw(dim)})({operand})",
                    ]
                )
            )
            if kind == "fn":
                name = draw(st.sampled_from(["sqrt", "log", "exp", "log1p", "rsqrt", "abs", "tanh", "acos", "log2", "log10"]))
                return call(f"{t}.{name}", a)
            if kind == "method":
                name = draw(st.sampled_from(["sqrt()", "log()", "exp()", "sigmoid()", "softmax(-1)", "norm()", "sum()", "detach()", "item()"]))
                return f"({a}).{name}"
            if kind == "pow":
                return call(f"{t}.pow", a, draw(st.sampled_from(CONSTANTS + ["1 / p", "0.5"])))
            if kind == "powop":
                return f"({a}) ** {draw(st.sampled_from(['0.5', '2', '-0.5', 'p', '(1 / p)']))}"
            if kind == "softmax":
                return softmax(a)
            if kind == "log_softmax":
                return call(f"{f}.log_softmax", a, f"dim={draw(dim)}")
            if kind == "sigmoid":
                return call(f"{draw(st.sampled_from([t, f]))}.sigmoid", a)
            if kind == "log_of_softmax":
                inside = softmax(a)
                if draw(st.booleans()):
                    inside = f"{inside} + {draw(constant)}"
                return draw(st.sampled_from([call(f"{t}.log", inside), f"({inside}).log()"]))
            if kind == "log_of_sigmoid":
                inside = call(f"{t}.sigmoid", a)
                return call(f"{t}.log", draw(st.sampled_from([inside, f"1 - {inside}"])))
            if kind == "log_sum_exp":
                return draw(st.sampled_from([call(f"{t}.log", call(f"{t}.sum", call(f"{t}.exp", a), draw(dim))), f"({a}).exp().sum({draw(dim)}).log()"]))
            if kind == "x_log_x":
                return f"{a} * {call(f'{t}.log', a)}"
            if kind == "expm1_log1p":
                return draw(st.sampled_from([f"{call(f'{t}.exp', a)} - 1", call(f"{t}.log", f"1 + {a}")]))
            if kind == "div":
                return f"{a} / {draw(inner)}"
            if kind == "div_reduction":
                return f"{a} / {draw(st.sampled_from([f'({a}).sum()', f'({a}).norm(dim=-1, keepdim=True)', call(f'{t}.norm', a), f'({a}).std()']))}"
            if kind == "div_eps":
                return f"{a} / ({draw(inner)} + {draw(constant)})"
            if kind == "continuation":
                return f"{a} \\\n        / {draw(inner)}"
            if kind == "where":
                branch = draw(st.sampled_from([call(f"{t}.sqrt", a), call(f"{t}.log", a), f"1 / {a}", a]))
                return call(f"{t}.where", f"{a} > 0", branch, draw(inner))
            if kind == "load":
                extra = draw(st.sampled_from([[], ['map_location="cpu"'], ["weights_only=True"], ["map_location=device"], ["weights_only=False"], ['map_locat="cpu"']]))
                return call(f"{t}.load", draw(st.sampled_from(["path", "'model.pt'", "f"])), *extra)
            if kind == "clamp":
                return draw(st.sampled_from([call(f"{t}.clamp", a, f"min={draw(constant)}"), f"({a}).clamp_min({draw(constant)})"]))
            if kind == "loss":
                loss = draw(st.sampled_from(["cross_entropy", "nll_loss", "kl_div", "binary_cross_entropy"]))
                activation = call(f"{t}.sigmoid", a) if loss == "binary_cross_entropy" else softmax(a)
                return call(f"{f}.{loss}", activation, "target")
            if kind == "nan_filter":
                return call(f"{t}.nan_to_num", draw(st.sampled_from([call(f"{t}.sqrt", a), call(f"{t}.log", a), f"{a} / {a}"])))
            if kind == "from_list":
                return draw(st.sampled_from([call(f"{t}.tensor", f"range({a})"), call(f"{t}.tensor", "outputs"), f"True in {t}.isnan({a})"]))
            return f"({a})"

        return node()

    return st.recursive(leaf, extend, max_leaves=6)


KINDS = [
    "fn", "fn", "method", "pow", "powop", "softmax", "log_softmax", "sigmoid", "div", "div_reduction",
    "div_eps", "continuation", "continuation", "where", "load", "clamp", "paren", "log_of_softmax",
    "log_of_softmax", "log_of_sigmoid", "log_sum_exp", "x_log_x", "expm1_log1p", "loss", "nan_filter", "from_list",
]


def _extra_statements(t: str) -> List[List[str]]:
    """Statement-level shapes of the catalogue (the lines of each, indented relative to the block)."""
    return [
        [f"{t}.autograd.set_detect_anomaly(True)"],
        ["loss = (x * y).sum()", "loss.backward()", "loss.backward()"],
        ["outputs = []", "for item in items:", "    outputs.append(model(item))", f"stacked = {t}.tensor(outputs)"],
        [f"with {t}.autocast('cuda', dtype={t}.float16):", "    ratio = x / (y.sum() + 1e-10)"],
        ["loss = model(x).item() + y.sum()", "loss.backward()"],
    ]


OPENINGS = [
    '"""A generated module."""',
    "from __future__ import annotations",
    "",
    "#!/usr/bin/env python\n# -*- coding: utf-8 -*-",
    "# Copyright notice\n# spanning two lines\n",
]


@st.composite
def torch_modules(draw) -> str:
    torch_import, torch_name = draw(st.sampled_from(TORCH_IMPORTS))
    functional_import, functional = draw(st.sampled_from(FUNCTIONAL_IMPORTS))
    expression = _expressions(torch_name, functional)
    opening = draw(st.sampled_from(OPENINGS))
    imports = [torch_import, functional_import]
    if functional.startswith("nn.") and torch_import != "import torch":
        imports.append("import torch")  # nn.Module below needs no torch, but keep `torch` for a `torch.load` fix
    container = draw(st.sampled_from(["module", "function", "method", "nested"]))
    # Imports only inside the function: a fix's new import then has no import to follow.
    local_imports = container == "function" and draw(st.booleans())
    header = [opening] + ([] if local_imports else imports)
    body: List[str] = ["", "", "eps = 1e-6", "dim = -1"]
    groups = [[f"out_{i} = {e}"] for i, e in enumerate(draw(st.lists(expression, min_size=1, max_size=4)))]
    for extra in draw(st.lists(st.sampled_from(_extra_statements(torch_name)), max_size=2)):
        groups.insert(draw(st.integers(0, len(groups))), extra)
    statements = [line for group in groups for line in group]
    if container == "module":
        body += statements
    elif container == "function":
        body.append("def compute(x, y, logits, probs, target, path, f, device, p, model, items):")
        body += ["    " + line for line in (imports if local_imports else []) + statements]
        body.append("    return out_0")
    elif container == "method":
        body.append("class Head(nn.Module):" if "nn" in functional else "class Head:")
        body.append("    def forward(self, x, y, logits, probs, target, path, f, device, p, model, items):")
        body += ["        " + line for line in statements]
        body.append("        return out_0")
    else:
        body.append("def step(x, y, logits, probs, target, path, f, device, p, model, items, batches):")
        body.append("    for batch in batches:")
        body.append("        with device:")
        body.append("            if batch is not None:")
        body += ["                " + line for line in statements]
        body.append("    return batch")
    if draw(st.booleans()):
        body.append("import os  # a late import: a fix's import must still come before the first use")
    text = "\n".join(header + body) + "\n"
    if draw(st.booleans()):
        text = text.rstrip("\n")
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


@given(torch_modules())
@settings(PROFILE)
def test_composed_torch_modules(text):
    assert _compiles(text), f"the strategy made invalid code:\n{text}"
    check_never_crashes_never_corrupts(text)


def test_the_composed_modules_reach_fixes_and_crlf():
    """The property test is not vacuous: its strategy produces modules that get fixes, in CRLF files too."""
    # Generation only: shrinking the example found would cost far more than finding it.
    search = settings(deadline=None, database=None, derandomize=True, max_examples=2000, phases=[Phase.generate])

    def fixed_crlf(text: str) -> bool:
        return "\r\n" in text and engine.fix_text(text, "g.py", _settings(), unsafe=True).applied > 0

    example = find(torch_modules(), fixed_crlf, settings=search)
    fixed = check_never_crashes_never_corrupts(example)
    assert fixed.applied > 0 and "\r\n" in fixed.text


# -- grammar-generated Python ----------------------------------------------------------------


def _joined(source: str, tail: str) -> str:
    if source and not source.endswith(("\n", "\r")):
        source += "\n"
    return source + tail


GRAMMAR_PROFILE = settings(PROFILE, max_examples=max(1, PROFILE.max_examples // SLOW_FACTOR))
NODE_PROFILE = settings(PROFILE, max_examples=max(1, PROFILE.max_examples // (2 * SLOW_FACTOR)))


@given(hypothesmith.from_grammar(), st.one_of(st.just(""), torch_modules()))
@settings(GRAMMAR_PROFILE)
def test_grammar_generated_python(source, tail):
    text = _joined(source, tail.replace("\r\n", "\n"))
    assume(_compiles(text))  # the appended module can clash with the generated code (e.g. a dangling decorator)
    check_never_crashes_never_corrupts(text)


@given(hypothesmith.from_node(), st.one_of(st.just(""), torch_modules()))
@settings(NODE_PROFILE)
def test_node_generated_python(source, tail):
    text = _joined(source, tail.replace("\r\n", "\n"))
    assume(_compiles(text))
    check_never_crashes_never_corrupts(text)


def test_the_prefilter_keeps_every_finding_of_the_fixtures_and_examples():
    """Every checker fixture and bundled example, as written: with and without the prefilter, the same findings."""
    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "fixtures").glob("*/checker/*.py")) + sorted((root / "examples").glob("*.py"))
    assert len(files) > 100
    for path in files:
        assert_prefilter_keeps_findings(path.read_text(encoding="utf-8"), str(path), _settings())


def test_a_rule_outside_its_triggers_is_caught():
    """The check can fail: a rule whose trigger a file lacks loses its finding there."""
    text = "import torch\n\ndef f(x):\n    return torch.log(torch.softmax(x, -1))\n"
    found = engine.lint_text(text, "g.py", _settings(), codes=["TL201"])
    assert [f.code for f in found.findings] == ["TL201"]
    assert engine.select_rules(text.replace("softmax", "SOFTMAX").replace("log", "LOG"), ["TL201"]) == []
