"""Values built only from Python numbers carry no gradient (analysis/flow/grad_need.py): a root of one is no
TL101 hazard, whichever tensor constructor holds the numbers."""
from __future__ import annotations

import pytest

from fixture_support import FIXTURES, project_findings

SCRIPT = FIXTURES / "TL101" / "checker" / "good_legacy_constructor_constant.py"

@pytest.mark.parametrize("constructor", ["torch.Tensor", "torch.FloatTensor", "torch.tensor"])
def test_a_root_of_numbers_from_the_command_line_is_not_reported(tmp_path, capsys, constructor):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    text = SCRIPT.read_text(encoding="utf-8").replace("torch.Tensor(", f"{constructor}(")
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    assert project_findings(tmp_path, "TL101", capsys) == []

def test_a_root_of_a_trained_value_in_the_same_script_is_reported(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    text = SCRIPT.read_text(encoding="utf-8").replace(
        "torch.Tensor([args.noise_std])[0].to(device)", "model.weight.pow(2).sum() - args.noise_std"
    )
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    assert [item["code"] for item in project_findings(tmp_path, "TL101", capsys)] == ["TL101"]
