"""Facts read across a project once per run (analysis/model/project_index.py ``ProjectIndex.fact``): a float16 run set up in
one module changes how sure TL105 is in another, and a cached result is dropped when that module changes."""
from __future__ import annotations

import json
import os

from torchlint import cli

LOSSES = "import torch\n\n\ndef contrastive_loss(pos, total):\n    return -torch.log(pos / (total + 1e-10)).mean()\n"
TRAIN_FP16 = 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--fp16", action="store_true")\n'
TRAIN_FP32 = 'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--epochs", type=int)\n'


def levels(project, capsys, *extra):
    here = os.getcwd()
    os.chdir(project)
    try:
        cli.main(["check", "--select", "TL105", "--confidence-level", "low", "--output-format", "json", "--exit-zero", *extra, "."])
    finally:
        os.chdir(here)
    return [(item["path"].removeprefix("./"), item["confidence"], item["fix"] is not None) for item in json.loads(capsys.readouterr().out)]


def test_a_float16_option_elsewhere_in_the_project_raises_the_eps_finding(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "losses.py").write_text(LOSSES, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN_FP32, encoding="utf-8")
    # No float16 anywhere: float32 keeps 1e-10, the finding is low and raising the eps is not offered.
    assert levels(tmp_path, capsys, "--no-cache") == [("losses.py", "low", False)]
    (tmp_path / "train.py").write_text(TRAIN_FP16, encoding="utf-8")
    assert levels(tmp_path, capsys, "--no-cache") == [("losses.py", "medium", True)]


def test_the_cache_drops_a_result_when_the_module_a_project_fact_read_changes(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (tmp_path / "losses.py").write_text(LOSSES, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN_FP16, encoding="utf-8")
    assert levels(tmp_path, capsys) == [("losses.py", "medium", True)]
    assert levels(tmp_path, capsys) == [("losses.py", "medium", True)]  # warm
    (tmp_path / "train.py").write_text(TRAIN_FP32 + "# no float16 any more\n", encoding="utf-8")
    assert levels(tmp_path, capsys) == [("losses.py", "low", False)]
