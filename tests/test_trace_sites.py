"""The parts of ``torchlint trace`` that need no torch: which expression a finding is about
(``trace/operands.py``), and how a module is instrumented in memory (``trace/rewrite.py``)."""
from __future__ import annotations

import builtins
import subprocess
import sys
import traceback
from typing import Any, List, Tuple

import pytest

from torchlint import config, engine
from torchlint.trace import rewrite
from torchlint.trace.operands import site_plans
from torchlint.trace.plan import SitePlan

# -- which expression ------------------------------------------------------------------------------

SOURCE = '''\
import torch
import torch.nn.functional as F


def losses(h, mask, logits, y, rate):
    d = torch.sqrt(((h - h.mean()) ** 2).sum(-1))
    n = (h * mask).sum() / mask.sum()
    g = (h ** 2).mean(0) ** (1 / 3)
    e = h.half() + 1e-10
    p = torch.log(F.softmax(logits, dim=-1))
    r = torch.log(1 + rate)
    c = F.cross_entropy(F.softmax(logits, -1), y)
    w = torch.where(h > 0, torch.sqrt(h), torch.zeros_like(h))
    z = torch.nan_to_num(torch.log(h.abs()))
    h[h <= 1e-4] = 1e-4
    return d, n, g, e, p, r, c, w, z
'''

# code -> (edge, operand, partner, op whose gradient is watched), as text of the file
EXPECTED = {
    "TL101": ("nonpositive", "((h - h.mean()) ** 2).sum(-1)", None, "torch.sqrt(((h - h.mean()) ** 2).sum(-1))"),
    "TL104": ("zero", "mask.sum()", "(h * mask).sum()", "(h * mask).sum() / mask.sum()"),
    "TL103": ("power", "(h ** 2).mean(0)", "1 / 3", "(h ** 2).mean(0) ** (1 / 3)"),
    "TL105": ("eps", "h.half()", "1e-10", None),
    "TL201": ("nonpositive", "F.softmax(logits, dim=-1)", None, "torch.log(F.softmax(logits, dim=-1))"),
    "TL205": ("absorbed", "rate", None, None),
    "TL206": ("probabilities", "F.softmax(logits, -1)", None, "F.cross_entropy(F.softmax(logits, -1), y)"),
    "TL106": ("nonpositive", "h", None, "torch.sqrt(h)"),
}


def _text(source: str, span) -> str:
    if span is None:
        return None
    line, column, end_line, end_column = span
    lines = source.splitlines()
    assert line == end_line
    return lines[line - 1][column - 1 : end_column - 1]


def test_each_finding_names_the_expression_its_rule_is_about(tmp_path):
    path = tmp_path / "losses.py"
    path.write_text(SOURCE, encoding="utf-8")
    settings = config.resolve(None, config.Overrides(select=["TL1", "TL2"], confidence_level="low"), cwd=str(tmp_path))
    findings = engine.lint_text(SOURCE, str(path), settings).findings
    plans, missing = site_plans(findings, settings)
    assert missing == {}
    found = {}
    for index, finding in enumerate(findings):
        plan = plans[index]
        found.setdefault(finding.code, []).append((plan.edge, _text(SOURCE, plan.operand), _text(SOURCE, plan.partner), _text(SOURCE, plan.gradient)))
    for code, expected in EXPECTED.items():
        assert expected in found.get(code, []), (code, found.get(code))
    # TL107 twice: the log under nan_to_num (its own operand and edge), and the masked assignment's mask.
    assert ("nonpositive", "h.abs()", None, "torch.log(h.abs())") in found["TL107"]
    assert ("mask", "h <= 1e-4", None, None) in found["TL107"]


# -- instrumenting -----------------------------------------------------------------------------------


class Recording:
    """Probes that note each call and return the value, as the real ones do."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, int, Any]] = []

    def __getattr__(self, method: str):
        def probe(site: int, value: Any) -> Any:
            self.calls.append((method, site, value))
            return value

        return probe


@pytest.fixture
def probes(monkeypatch):
    recording = Recording()
    monkeypatch.setattr(builtins, rewrite.PROBES_NAME, recording, raising=False)
    return recording


def _run(source: str, sites, filename: str = "/project/module.py"):
    code, problems = rewrite.instrument(source.encode("utf-8"), filename, sites)
    namespace: dict = {}
    exec(code, namespace)
    return namespace, problems


def test_probes_see_the_operands_in_evaluation_order_and_change_nothing(probes):
    source = "def ratio(a, d):\n    return a / d\n\nresult = ratio(6.0, 3.0)\n"
    site = SitePlan(0, "TL104", "zero", operand=(2, 16, 2, 17), partner=(2, 12, 2, 13), gradient=(2, 12, 2, 17))
    namespace, problems = _run(source, [site])
    assert problems == [] and namespace["result"] == 2.0
    assert probes.calls == [("numerator", 0, 6.0), ("operand", 0, 3.0), ("output", 0, 2.0)]


def test_the_traceback_of_an_instrumented_line_is_the_files_own(probes):
    source = "def ratio(a, d):\n    return a / d\n"
    site = SitePlan(0, "TL104", "zero", operand=(2, 16, 2, 17), partner=(2, 12, 2, 13), gradient=(2, 12, 2, 17))

    def failure(sites):
        namespace, _ = _run(source, sites)
        with pytest.raises(ZeroDivisionError) as raised:
            namespace["ratio"](1.0, 0.0)
        frame = traceback.extract_tb(raised.value.__traceback__)[-1]
        return frame.lineno, frame.colno, frame.end_colno

    assert failure([site]) == failure([]) == (2, 11, 16)


def test_an_augmented_assignment_target_is_read_just_before_it(probes):
    source = "x = 4.0\nx **= 0.5\n"
    site = SitePlan(0, "TL103", "power", operand=(2, 1, 2, 2), partner=(2, 7, 2, 10), operand_before=True)
    namespace, problems = _run(source, [site])
    assert problems == [] and namespace["x"] == 2.0
    assert probes.calls == [("operand", 0, 4.0), ("exponent", 0, 0.5)]


def test_columns_count_characters_not_bytes(probes):
    source = "label = 'é→'; value = 1.0 / 4.0\n"
    column = source.index("4.0") + 1
    site = SitePlan(0, "TL104", "zero", operand=(1, column, 1, column + 3))
    namespace, problems = _run(source, [site])
    assert problems == [] and probes.calls == [("operand", 0, 4.0)] and namespace["value"] == 0.25


def test_a_span_that_is_no_expression_is_reported_not_guessed(probes):
    source = "y = 1.0 / 2.0\n"
    namespace, problems = _run(source, [SitePlan(7, "TL104", "zero", operand=(1, 2, 1, 6))])
    assert problems == [(7, "the operand's position is not an expression of the file as imported")]
    assert probes.calls == [] and namespace["y"] == 0.5


def test_checking_imports_neither_the_trace_package_nor_torch(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nx = torch.log(torch.softmax(torch.zeros(3), 0))\n", encoding="utf-8")
    script = (
        "import sys\n"
        "from torchlint import cli\n"
        "code = cli.main(['check', '--no-cache', '--select', 'TL2', 'train.py'])\n"
        "print(code, sorted(m for m in sys.modules if m == 'torch' or m.startswith('torchlint.trace')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines()[-1] == "1 []", proc.stdout + proc.stderr
