"""The TL6xx rules' plumbing: target-torch-version from the command line and the config, the verdict a
change gets on a target, how the recorded facts and the generated table combine, and the torchvision table."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from torchlint import cli
from torchlint.analysis.api import api_drift
from torchlint.analysis.api.api_drift import ApiChange, Status
from torchlint.analysis.api.torchvision_builders import legacy_keywords

SYMEIG = "import torch\n\ndef spectrum(A):\n    return torch.symeig(A)[0]\n"


def codes_for(tmp_path, capsys, *options, config: str = ""):
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint]\n{config}", encoding="utf-8")
    path = tmp_path / "spectrum.py"
    path.write_text(SYMEIG, encoding="utf-8")
    status = cli.main(["check", "--select", "TL6", "--no-cache", "--exit-zero", "--output-format", "json", *options, str(path)])
    assert status == 0
    return [finding["code"] for finding in json.loads(capsys.readouterr().out)]


def test_target_torch_version_decides_removed_or_deprecated(tmp_path, capsys):
    # torch.symeig warned from 1.9 and raises from 2.0 on.
    assert codes_for(tmp_path, capsys) == ["TL601"]  # no target: the newest torch
    assert codes_for(tmp_path, capsys, "--target-torch-version", "1.13") == ["TL602"]
    assert codes_for(tmp_path, capsys, "--target-torch-version", "1.8") == []
    assert codes_for(tmp_path, capsys, config='target-torch-version = "1.13"\n') == ["TL602"]
    # The command line refines the configuration.
    assert codes_for(tmp_path, capsys, "--target-torch-version", "2.1", config='target-torch-version = "1.13"\n') == ["TL601"]


def test_a_bad_target_on_the_command_line_is_a_usage_error(tmp_path, capsys):
    path = tmp_path / "spectrum.py"
    path.write_text(SYMEIG, encoding="utf-8")
    assert cli.main(["check", "--no-cache", "--target-torch-version", "two", str(path)]) == 2
    assert "--target-torch-version must be a version such as 2.4, got 'two'" in capsys.readouterr().err


def test_status_at_a_target():
    change = ApiChange("torch.symeig", deprecated=(1, 9), removed=(2, 0))
    assert change.status_at((1, 8)) is None
    assert change.status_at((1, 13)) is Status.DEPRECATED
    assert change.status_at((2, 0)) is Status.REMOVED
    assert ApiChange("torch._six", removed=(2, 0)).status_at((1, 13)) is None


def test_a_name_inherits_the_change_of_its_module():
    change = api_drift.change_of("torch._six.string_classes")
    assert change is not None and change.name == "torch._six" and change.removed == (2, 0)
    assert api_drift.change_of("torch.linalg.solve") is None


@pytest.fixture
def table(monkeypatch):
    """A stand-in for the generated table: torch.qr deprecated in every dumped release, torch.symeig
    gone after 1.13, torch.gone_helper removed in 2.3, torch.gone_stub removed in 2.3 but kept as a
    function that raises, torch.new_thing deprecated from 2.5."""
    entries = {
        "torch.qr": SimpleNamespace(deprecated=(1, 13), removed=None, replacement="torch.linalg.qr", keywords={}),
        "torch.symeig": SimpleNamespace(deprecated=(1, 13), removed=(2, 0), replacement="torch.linalg.eigh", keywords={}),
        "torch.gone_helper": SimpleNamespace(deprecated=None, removed=(2, 3), replacement=None, keywords={}),
        "torch.gone_stub": SimpleNamespace(deprecated=None, removed=(2, 3), replacement=None, keywords={}, raising_stub=((2, 13),)),
        "torch.new_thing": SimpleNamespace(deprecated=(2, 5), removed=None, replacement=None, keywords={}),
    }
    fake = SimpleNamespace(
        VERSIONS=((1, 13), (2, 0), (2, 13)),
        api_entry=lambda name: entries.get(name),
        removed_in=lambda name: entries[name].removed if name in entries else None,
        deprecated_in=lambda name: entries[name].deprecated if name in entries else None,
        raises_when_called=lambda name: bool(getattr(entries.get(name), "raising_stub", ())),
    )
    monkeypatch.setattr(api_drift, "api_table", fake)
    api_drift.change_of.cache_clear()
    yield fake
    api_drift.change_of.cache_clear()


def test_recorded_facts_and_the_table_combine(table):
    # Deprecated in the oldest release dumped: the recorded, earlier release stands.
    assert api_drift.change_of("torch.qr").deprecated == (1, 9)
    symeig = api_drift.change_of("torch.symeig")
    assert symeig.removed == (2, 0) and symeig.raises_when_called and symeig.deprecated == (1, 9)
    # Only the table knows these: not known to warn, so a deprecation is reported at low confidence.
    gone = api_drift.change_of("torch.gone_helper")
    assert gone.removed == (2, 3) and gone.status_at((2, 2)) is None and gone.status_at((2, 4)) is Status.REMOVED
    assert not gone.raises_when_called
    # A release that keeps the removed name as a function that raises: imports of it still work.
    assert api_drift.change_of("torch.gone_stub").raises_when_called
    assert api_drift.change_of("torch.new_thing").deprecated == (2, 5) and not api_drift.change_of("torch.new_thing").warns
    assert api_drift.newest_version() == (2, 13)


def test_torchvision_legacy_weights_are_what_pretrained_loaded():
    resnet = legacy_keywords("torchvision.models.resnet50")["pretrained"]
    assert resnet.new_keyword == "weights" and resnet.member == "torchvision.models.ResNet50_Weights.IMAGENET1K_V1"
    # The builder is public under its package and its module.
    assert legacy_keywords("torchvision.models.resnet.resnet50") == legacy_keywords("torchvision.models.resnet50")
    detector = legacy_keywords("torchvision.models.detection.fasterrcnn_resnet50_fpn")
    assert detector["pretrained_backbone"].member == "torchvision.models.ResNet50_Weights.IMAGENET1K_V1"
    assert detector["pretrained"].member == "torchvision.models.detection.FasterRCNN_ResNet50_FPN_Weights.COCO_V1"
    quantized = legacy_keywords("torchvision.models.quantization.resnet50")["pretrained"]
    assert quantized.chosen_by == "quantize" and quantized.if_false == resnet.member
    assert legacy_keywords("torchvision.models.vit_h_14")["pretrained"].no_weights
    assert legacy_keywords("timm.create_model") == {} and legacy_keywords(None) == {}


def test_every_builder_of_a_model_namespace_takes_pretrained():
    """What TL604 rests on for a builder picked by name (``getattr(torchvision.models, name)(pretrained=...)``):
    in the table generated from torchvision's sources, every builder of those namespaces takes the flag."""
    from torchlint.analysis.api.torchvision_builders import MODEL_NAMESPACES, _table, builder_chosen_by_name

    builders = {name: keywords for name, keywords in _table().items() if name.rpartition(".")[0] in MODEL_NAMESPACES}
    assert len(builders) > 100 and all("pretrained" in keywords for keywords in builders.values())
    assert builder_chosen_by_name("torchvision.models", None)["pretrained"].dynamic
    assert builder_chosen_by_name("torchvision.models", "resnet50") == legacy_keywords("torchvision.models.resnet50")
    assert builder_chosen_by_name("timm.models", None) == {} and builder_chosen_by_name(None, None) == {}


KEYWORDS_BY_RELEASE = """\
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader


def setup(optimizer, data):
    scheduler = StepLR(optimizer, step_size=10, verbose=True)
    loader = DataLoader(data, batch_size=8, in_order=False)
    return scheduler, loader
"""


def tl405_messages(tmp_path, capsys, *options):
    path = tmp_path / "setup.py"
    path.write_text(KEYWORDS_BY_RELEASE, encoding="utf-8")
    status = cli.main(["check", "--select", "TL405", "--no-cache", "--exit-zero", "--output-format", "json", *options, str(path)])
    assert status == 0
    return {finding["line"]: finding["message"] for finding in json.loads(capsys.readouterr().out)}


def test_tl405_judges_keywords_by_the_target_release(tmp_path, capsys):
    # The newest torch dropped verbose= (gone in 2.7) and takes in_order= (new in 2.6).
    newest = tl405_messages(tmp_path, capsys)
    assert list(newest) == [6]
    assert "`verbose` was removed from torch.optim.lr_scheduler.StepLR in torch 2.7" in newest[6]
    assert "use get_last_lr()" in newest[6]
    # torch 2.6 takes both.
    assert tl405_messages(tmp_path, capsys, "--target-torch-version", "2.6") == {}
    # torch 2.5 takes verbose= but not in_order=.
    older = tl405_messages(tmp_path, capsys, "--target-torch-version", "2.5")
    assert list(older) == [7]
    assert "`in_order` is new in torch 2.6" in older[7] and "target torch 2.5" in older[7]


def test_recorded_deprecations_the_table_can_see_agree_with_it():
    """A record that says "deprecated in the documentation only" (warns=False) must be one the generated
    table also marks deprecated: F.sigmoid and F.tanh, deprecated in 0.4 and un-deprecated since, were
    once recorded so and were false alarms on users' code."""
    from torchlint.analysis.api import api_table

    disagreeing = [
        change.name
        for change in api_drift.recorded_changes()
        if change.deprecated is not None
        and change.removed is None
        and not change.warns
        and api_table.api_entry(change.name) is not None
        and api_table.api_entry(change.name).deprecated is None
    ]
    assert disagreeing == []


def test_tl604_message_matches_what_the_flag_loaded(tmp_path, capsys):
    path = tmp_path / "backbone.py"
    path.write_text(
        "import torchvision\n\n"
        "trained = torchvision.models.resnet18(pretrained=True)\n"
        "untrained = torchvision.models.resnet18(pretrained=False)\n",
        encoding="utf-8",
    )
    assert cli.main(["check", "--select", "TL604", "--no-cache", "--exit-zero", "--output-format", "json", str(path)]) == 0
    messages = {finding["line"]: finding["message"] for finding in json.loads(capsys.readouterr().out)}
    assert "IMAGENET1K_V1` loads the same weights" in messages[3]
    assert "`weights=None` builds the same untrained model" in messages[4] and "IMAGENET1K_V1" not in messages[4]


def test_tl616_leaves_numpys_range_indexers_alone():
    # d32: ``np.mgrid[a : b : (b - a) / 400]`` reads a float step as a range; ``//`` would make the step 0
    from fixture_support import all_rules_settings, checker_target
    from torchlint import engine

    text = (
        "import numpy as np\nimport torch\n\n\ndef grid(x, n):\n"
        "    xx, yy = np.mgrid[0 : 1 + 1 / 10 : 1 / 400, -1 : 1 : 2 / 400]\n"
        "    return xx, yy, x[:, : n / 2]\n"
    )
    found = engine.lint_text(text, "plots.py", all_rules_settings(checker_target(text))).findings
    assert sorted((f.location.line, f.code) for f in found if f.code == "TL616") == [(7, "TL616")]
