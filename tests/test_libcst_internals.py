"""LibCST's private code generator, used in one place (torchlint/analysis/model/codegen.py), behaves as the engine
needs on the installed release, and that release is inside the range pyproject.toml pins and codegen.py names."""
from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import libcst as cst

from torchlint.analysis.model.codegen import TESTED_LIBCST, render, statement_positions

ROOT = Path(__file__).resolve().parent.parent


def _release(text: str):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def test_the_installed_release_is_one_the_code_was_checked_against():
    low, high = TESTED_LIBCST
    assert low <= _release(version("libcst")) <= high
    pinned = re.search(r'"libcst>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pinned, "pyproject.toml pins libcst to a range"
    assert _release(pinned.group(1)) == low and _release(pinned.group(2)) == (high[0], high[1] + 1)


def test_render_keeps_the_indentation_of_continuation_lines():
    source = "def f(x):\n    if x:\n        y = g(\n            x,\n        )\n"
    module = cst.parse_module(source)
    call = module.body[0].body.body[0].body.body[0].body[0].value
    assert render(call, module, ("    ", "    ")) == "g(\n            x,\n        )"
    assert module.code_for_node(call) != render(call, module, ("    ", "    "))  # what the public API cannot do


def test_statement_positions_count_from_the_statement():
    source = "import torch\n\n\nclass A:\n    def f(self):\n        return torch.log(x)\n"
    module = cst.parse_module(source)
    method = module.body[1].body.body[0]
    text, positions = statement_positions(method, module, ("    ",))
    assert text.startswith("    def f(self):")
    call = method.body.body[0].body[0].value
    assert (positions[call].start.line, positions[call].start.column) == (2, 15)
