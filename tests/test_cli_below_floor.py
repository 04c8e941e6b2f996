"""A check that shows no finding at its floor says so, and how many it found below it, and how to see them."""
from __future__ import annotations

import pytest

import json

from cli_support import torchlint

# An unknown-sign root in a forward (low, where the measured levels put TL101's medium form) and nothing at the default level.
BELOW_ONLY = """import torch
import torch.nn as nn

# What users are shown: the measured level table on (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("measured_levels")


class Spread(nn.Module):
    def forward(self, x, w):
        return torch.sqrt(x * w)
"""


def test_findings_below_the_floor_are_counted_not_passed(tmp_path):
    (tmp_path / "model.py").write_text(BELOW_ONLY, encoding="utf-8")
    proc = torchlint("check", "--no-cache", "model.py", cwd=tmp_path, measured_levels=True)
    assert proc.returncode == 0, proc.stderr
    assert "All checks passed!" not in proc.stdout
    assert "No findings at the `high` level." in proc.stdout
    assert "1 more finding below the `high` level (1 low): `--confidence-level low` shows them" in proc.stdout
    shown = torchlint("check", "--no-cache", "--confidence-level", "low", "model.py", cwd=tmp_path, measured_levels=True)
    assert shown.returncode == 1 and "TL101" in shown.stdout and "more finding" not in shown.stdout


def test_a_clean_file_still_passes_and_json_lists_only_what_is_shown(tmp_path):
    (tmp_path / "clean.py").write_text("import torch\n\nx = torch.zeros(3)\n", encoding="utf-8")
    (tmp_path / "model.py").write_text(BELOW_ONLY, encoding="utf-8")
    clean = torchlint("check", "--no-cache", "clean.py", cwd=tmp_path, measured_levels=True)
    assert clean.stdout == "All checks passed!\n"
    listed = torchlint("check", "--no-cache", "--output-format", "json", "model.py", cwd=tmp_path, measured_levels=True)
    assert json.loads(listed.stdout) == []


def test_the_cache_keeps_every_level(tmp_path):
    (tmp_path / "model.py").write_text(BELOW_ONLY, encoding="utf-8")
    cold = torchlint("check", "model.py", cwd=tmp_path, measured_levels=True)
    warm = torchlint("check", "model.py", cwd=tmp_path, measured_levels=True)
    assert cold.stdout == warm.stdout and "1 more finding below" in warm.stdout
    lower = torchlint("check", "--confidence-level", "low", "model.py", cwd=tmp_path, measured_levels=True)
    assert "TL101" in lower.stdout
