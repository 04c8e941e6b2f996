"""The ``ast`` pre-pass: it never changes a finding, and it really leaves code out."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from fixture_support import FIXTURES, all_rules_settings, checker_target
from torchlint import engine, prepass, registry

ALL_FIXTURES = sorted(FIXTURES.glob("*/*/*.py"))


def _signature(result: engine.LintResult):
    findings = [(f.code, f.location, f.message, f.fix.edits if f.fix else None) for f in result.findings]
    return findings, [(d.kind, d.line, d.column, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_findings_and_fix_edits_are_the_same_with_and_without_the_prepass(path: Path):
    text = path.read_text(encoding="utf-8")
    settings = all_rules_settings(checker_target(text) if path.parent.name == "checker" else None)
    fast = engine.lint_text(text, str(path), settings)
    slow = engine.lint_text(text, str(path), settings, use_prepass=False)
    assert _signature(fast) == _signature(slow)


def _plan(source: str, path: str = "model.py") -> prepass.Plan:
    source = textwrap.dedent(source)
    rules = engine.select_rules(source, registry.all_rules())
    return prepass.plan(source, path, rules)


LOSS_HELPER = """\
import torch


def positive(x):
    return x.exp()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1))

    def describe(self):
        total = 0
        for name, p in self.named_parameters():
            total += p.numel()
        return f"{total} parameters"

    def forward(self, x):
        return torch.sqrt(x) * self.scale / positive(x)


def unrelated_report(rows):
    lines = []
    for row in rows:
        lines.append(str(row))
    return "\\n".join(lines)
"""


def test_regions_no_rule_needs_are_left_out_and_lines_map_back():
    plan = _plan(LOSS_HELPER)
    assert plan is not None and plan.rules
    # forward (the seed), __init__ (what self.scale holds) and positive() (a helper it calls) stay.
    assert "torch.sqrt(x) * self.scale / positive(x)" in plan.text
    assert "self.scale = torch.nn.Parameter" in plan.text
    assert "return x.exp()" in plan.text
    # describe() and unrelated_report() do not reach LibCST.
    assert "describe" not in plan.text and "unrelated_report" not in plan.text
    assert "named_parameters" not in plan.text and "lines.append" not in plan.text
    ast.parse(plan.text)
    original = LOSS_HELPER.splitlines()
    reduced = plan.text.splitlines()
    # One entry per line, and one for the empty line after a final newline (where the module ends).
    assert len(plan.lines) == len(reduced) + 1 and len(reduced) < len(original)
    for number, line in zip(plan.lines, reduced):
        if line.strip() != "0":
            assert original[number - 1] == line


def test_positions_of_findings_after_removed_code_are_the_file_positions():
    source = LOSS_HELPER.replace("def forward", "def unused(self):\n        return 1\n\n    def forward")
    settings = all_rules_settings()
    fast = engine.lint_text(source, "model.py", settings)
    slow = engine.lint_text(source, "model.py", settings, use_prepass=False)
    assert fast.findings and _signature(fast) == _signature(slow)
    fixed = engine.fix_text(source, "model.py", settings, unsafe=True)  # medium findings' clamps are unsafe
    assert fixed.applied and fixed.text == engine.fix_text(source, "model.py", settings, unsafe=True).text


def test_a_file_where_no_rule_can_report_is_not_parsed_by_libcst():
    plan = _plan(
        """\
        import torch

        def forward(x):
            # the text mentions sqrt and log, but nothing calls them
            return x.sum(dim=-1)
        """
    )
    assert plan is not None and plan.rules == []


def test_a_file_ast_cannot_read_goes_to_libcst_whole():
    assert prepass.plan("def f(:\n    torch.log(x)\n", "bad.py", list(registry.all_rules().values())) is None


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_reduction_keeps_line_endings_and_a_last_line_without_newline(newline: str):
    source = newline.join(
        [
            "import torch",
            "",
            "@decorator",
            "def helper(x):",
            "    '''docstring'''",
            "    return x + 1",
            "",
            "def one_line(x): return torch.log(x)",
            "",
            "def forward(x):",
            "    return torch.log(x)",
        ]
    )
    scan = prepass.Scan("m.py", source, ast.parse(source))
    forward = next(i for i, r in enumerate(scan.regions) if getattr(r.node, "name", "") == "forward")
    text, lines = prepass.reduce_source(source, scan, {forward})
    assert text.split(newline) == [
        "import torch",
        "",
        "0",  # helper and its decorator
        "",
        "0",
        "",
        "def forward(x):",
        "    return torch.log(x)",
    ]
    assert lines == [1, 2, 3, 7, 8, 9, 10, 11]  # no final newline: no line after the last
    compile(text, "m.py", "exec")


def test_a_statement_that_shares_its_line_is_kept():
    source = "import torch\nx = 1; y = 2\nif x: print(y)\ndef forward(a):\n    return torch.log(a)\n"
    scan = prepass.Scan("m.py", source, ast.parse(source))
    forward = next(i for i, r in enumerate(scan.regions) if getattr(r.node, "name", "") == "forward")
    text, lines = prepass.reduce_source(source, scan, {forward})
    assert text == "import torch\nx = 1; y = 2\n0\ndef forward(a):\n    return torch.log(a)\n"
    assert lines == [1, 2, 3, 4, 5, 6]


def test_the_flake8_tree_stands_in_for_the_prepass_parse():
    settings = all_rules_settings()
    given = engine.lint_text(LOSS_HELPER, "model.py", settings, tree=ast.parse(LOSS_HELPER))
    parsed = engine.lint_text(LOSS_HELPER, "model.py", settings)
    assert given.findings and _signature(given) == _signature(parsed)


def test_collecting_less_gives_the_host_its_threshold_back():
    import gc

    from torchlint import collection

    before = gc.get_threshold()
    with collection.collecting_less():
        assert gc.get_threshold()[0] == collection.GC_THRESHOLD
    assert gc.get_threshold() == before


# -- seed conditions that look at a call's arguments and its function -------------------------

LOSS_MODULE_IN_INIT = """\
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 1)
        self.criterion = nn.BCELoss()
        self.act = nn.Sigmoid()

    def describe(self):
        return "binary classifier"

    def training_step(self, x, y):
        return self.criterion(self.act(self.head(x)), y)
"""

SCRIPT_WITH_SOFTMAX_ABOVE_THE_LOOP = """\
import torch
import torch.nn.functional as F

logits = torch.randn(8, 3, requires_grad=True)
probs = F.softmax(logits, dim=1)
if True:
    loss = F.nll_loss(probs, torch.zeros(8, dtype=torch.long))
"""

CONVERSION_AT_TOP_LEVEL_TRAINED_BELOW = """\
import torch

model = torch.nn.Linear(2, 1)
preds = []
for batch in torch.randn(4, 3, 2):
    preds.append(model(batch).sum())
    scores = torch.tensor(preds)
for step in range(1):
    scores.sum().backward()
"""

CONVERSIONS_THAT_CANNOT_BREAK_A_GRAPH = """\
import numpy as np
import torch


def make_weights(values):
    table = torch.tensor([0.5, 1.0, -2.0])
    return torch.tensor(values) * table


def evaluate(model, batches):
    outputs = []
    for batch in batches:
        outputs.append(model(batch))
    return torch.tensor(outputs)
"""

RANGE_ONLY_NEARBY = """\
import torch


def shifted(x, n):
    idx = torch.tensor(x)
    for i in range(n):
        idx = idx + i
    return idx


def positions(n):
    return torch.tensor(list(range(n)))
"""


@pytest.mark.parametrize(
    "source",
    [LOSS_MODULE_IN_INIT, SCRIPT_WITH_SOFTMAX_ABOVE_THE_LOOP, CONVERSION_AT_TOP_LEVEL_TRAINED_BELOW, RANGE_ONLY_NEARBY],
    ids=["loss-and-activation-from-init", "script-activation-above", "top-level-conversion", "range-elsewhere"],
)
def test_findings_reached_through_other_regions_are_kept(source: str):
    settings = all_rules_settings()
    fast = engine.lint_text(source, "train.py", settings)
    slow = engine.lint_text(source, "train.py", settings, use_prepass=False)
    assert fast.findings and _signature(fast) == _signature(slow)


def test_a_loss_and_an_activation_built_in_init_keep_init_and_the_step_only():
    plan = _plan(LOSS_MODULE_IN_INIT)
    assert "ActivationBeforeLoss" in {rule.__name__ for rule in plan.rules}
    assert "self.criterion(self.act(self.head(x)), y)" in plan.text and "nn.BCELoss()" in plan.text
    assert "binary classifier" not in plan.text


def test_conversions_of_literals_or_of_untrained_lists_do_not_run_the_graph_break_rule():
    plan = _plan(CONVERSIONS_THAT_CANNOT_BREAK_A_GRAPH)
    assert "GraphBreakTensorFromList" not in {rule.__name__ for rule in plan.rules}
    trained = CONVERSIONS_THAT_CANNOT_BREAK_A_GRAPH.replace("def evaluate", "def compute_loss")
    assert "GraphBreakTensorFromList" in {rule.__name__ for rule in _plan(trained).rules}


def test_a_tensor_from_range_seeds_only_the_call_that_converts_the_range():
    plan = _plan(RANGE_ONLY_NEARBY)
    assert "torch.tensor(list(range(n)))" in plan.text
    assert "idx = idx + i" not in plan.text


EPS_IN_INIT_FLOAT16_RUN_ELSEWHERE = """\
import torch


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-10

    def describe(self):
        return "norm"

    def forward(self, x):
        return x / (x.norm(dim=-1, keepdim=True) + self.eps)


def report(rows):
    return [str(r) for r in rows]


def train(model, batches):
    scaler = torch.cuda.amp.GradScaler()
    for x in batches:
        scaler.scale(model(x).sum()).backward()
"""

FLOAT16_THROUGH_AN_ALIAS = """\
import torch
from torch import float16 as f16


def halve(x):
    return x.to(f16)


def normalise(x):
    y = x.to(f16)
    return y / (y.sum() + 1e-10)
"""


@pytest.mark.parametrize(
    "source", [EPS_IN_INIT_FLOAT16_RUN_ELSEWHERE, FLOAT16_THROUGH_AN_ALIAS], ids=["eps-in-init", "float16-alias"]
)
def test_vanishing_eps_findings_that_depend_on_other_regions_are_kept(source: str):
    settings = all_rules_settings()
    fast = engine.lint_text(source, "model.py", settings)
    slow = engine.lint_text(source, "model.py", settings, use_prepass=False)
    assert "TL105" in {f.code for f in fast.findings} and _signature(fast) == _signature(slow)


def test_vanishing_eps_keeps_its_class_and_the_float16_setup_and_drops_the_rest():
    text = _plan(EPS_IN_INIT_FLOAT16_RUN_ELSEWHERE).text
    assert "self.eps = 1e-10" in text and "+ self.eps" in text and "GradScaler()" in text
    assert "def report" not in text


def test_vocabulary_rule_runs_only_where_a_receiver_may_be_a_tokenizer():
    own_method = """\
        class MyTokenizer:
            def setup(self, model):
                self.add_special_tokens({"pad_token": "[PAD]"})
                return model
        """
    assert "VocabGrownWithoutResize" not in {rule.__name__ for rule in _plan(own_method).rules}
    bound = """\
        from transformers import AutoTokenizer, AutoModel

        def grow():
            tok = AutoTokenizer.from_pretrained("bert-base-uncased")
            model = AutoModel.from_pretrained("bert-base-uncased")
            tok.add_tokens(["<new>"])
            return model
        """
    assert "VocabGrownWithoutResize" in {rule.__name__ for rule in _plan(bound).rules}
    settings = all_rules_settings()
    text = textwrap.dedent(bound)
    fast = engine.lint_text(text, "grow.py", settings)
    assert "TL404" in {f.code for f in fast.findings}
    assert _signature(fast) == _signature(engine.lint_text(text, "grow.py", settings, use_prepass=False))
