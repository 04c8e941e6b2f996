"""What a checkpoint holds that weights-only loading refuses (torchlint/analysis/model/saved_values.py),
asked of single files: the kind the analysis gives each saved value, and that no answer rests on a name.
(tests/test_runtime_data.py checks the same facts against torch itself.)"""
from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

from fixture_support import FIXTURES
from torchlint import config, engine
from torchlint.analysis.model.checkpoints import ast_file_name
from torchlint.analysis.model.project_index import definition, facts_of_source, refused_saves_in
from torchlint.analysis.model.saved_values import saved_layouts
from torchlint.analysis.project import lightning

sys.path.insert(0, str(Path(__file__).parent))
from renaming import rename_identifiers  # noqa: E402

HEADER = "import argparse, collections, copy, random\nimport numpy as np\nimport torch\nfrom torch import nn\n\n"


def kinds(body: str):
    """(path key, kind, inside a container) of each refused save in ``body``."""
    facts = facts_of_source(HEADER + textwrap.dedent(body), "module.py")
    return [(save.key, save.value.kind, save.value.inside) for save in refused_saves_in(facts, None)]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("torch.save(np.random.get_state(), 'a.pt')", [("'a.pt'", "numpy", False)]),
        ("torch.save({'m': 1, 'rng': np.random.get_state()}, 'a.pt')", [("'a.pt'", "numpy", True)]),
        ("x = np.zeros(3)\ntorch.save([x * 2], 'a.pt')", [("'a.pt'", "numpy", True)]),
        ("torch.save(np.random.rand(3), 'a.pt')", [("'a.pt'", "numpy", False)]),
        ("torch.save(np.random.rand(), 'a.pt')", []),
        ("torch.save(np.random.randint(5, size=None), 'a.pt')", []),
        ("torch.save(np.mean([1.0]).item(), 'a.pt')", []),
        ("torch.save(np.allclose(1, 1), 'a.pt')", []),
        ("torch.save({'t': torch.ones(2).numpy()}, 'a.pt')", [("'a.pt'", "numpy", True)]),
        ("torch.save({'t': torch.ones(2).numpy().tolist()}, 'a.pt')", []),
        ("torch.save(dict(options=argparse.Namespace(lr=1)), 'a.pt')", [("'a.pt'", "namespace", True)]),
        ("torch.save(collections.Counter('ab'), 'a.pt')", []),
        ("torch.save(collections.OrderedDict(a=1), 'a.pt')", []),
        ("torch.save(collections.defaultdict(list), 'a.pt')", [("'a.pt'", "container", False)]),
        ("torch.save(random.getstate(), 'a.pt')", []),
        ("torch.save(copy.deepcopy(nn.Linear(2, 2)), 'a.pt')", [("'a.pt'", "module", False)]),
        ("torch.save(nn.Parameter(torch.ones(1)), 'a.pt')", []),
        ("torch.save({'f': lambda x: x}, 'a.pt')", []),
        ("class Vocab:\n    pass\n\ntorch.save({'v': Vocab()}, 'a.pt')", [("'a.pt'", "object", True)]),
        ("class Net(nn.Module):\n    pass\n\ntorch.save(Net(), 'a.pt')", [("'a.pt'", "module", False)]),
        ("from typing import TypedDict\nclass Row(TypedDict):\n    a: int\n\ntorch.save(Row(a=1), 'a.pt')", []),
        ("def loss(x):\n    return x\n\ntorch.save({'loss': loss}, 'a.pt')", [("'a.pt'", "global", True)]),
        ("def f(state):\n    state['rng'] = np.random.get_state()\n    torch.save(state, 'a.pt')", [("'a.pt'", "numpy", True)]),
        ("def f(state):\n    torch.save(state, 'a.pt')\n    state['rng'] = np.random.get_state()", []),
        ("def f(x):\n    torch.save(x, 'a.pt')\n    x = np.zeros(1)", []),
        (
            "class C:\n    def __init__(self):\n        self.m = np.zeros(1)\n    def store(self, p):\n        torch.save(vars(self), p)",
            [("p", "numpy", True)],
        ),
        (
            "class C:\n    def __init__(self):\n        self.m = [1]\n    def store(self, p):\n        torch.save(self.__dict__, p)",
            [],
        ),
        ("def np_state():\n    return {'seed': 1}\n\ntorch.save({'s': np_state()}, 'a.pt')", []),
        # What a function of the module returns, the same kind on every return; an unpacked element of it.
        ("def options():\n    return argparse.ArgumentParser().parse_args()\n\ntorch.save({'a': options()}, 'a.pt')", [("'a.pt'", "namespace", True)]),
        ("def options(c):\n    if c:\n        return {}\n    return argparse.Namespace()\n\ntorch.save({'a': options(1)}, 'a.pt')", []),
        ("def score(xs):\n    return np.mean(xs), len(xs)\n\ndef f():\n    acc, n = score([1.0])\n    torch.save({'acc': acc, 'n': n}, 'a.pt')", [("'a.pt'", "numpy", True)]),
        ("def score(xs):\n    return np.mean(xs), len(xs)\n\ndef f():\n    acc, n = score([1.0])\n    torch.save({'n': n}, 'a.pt')", []),
        # A module rebound only to itself (moved, switched to training) is still the module it was built as.
        ("def f(d):\n    m = nn.Linear(2, 2)\n    m = m.to(d)\n    torch.save(m, 'a.pt')", [("'a.pt'", "module", False)]),
        ("def f(m, d):\n    m = m.to(d).train()\n    torch.save({'net': m, 'w': m.state_dict()}, 'a.pt')", [("'a.pt'", "module", True)]),
        ("def f(d, w):\n    m = nn.Linear(2, 2)\n    m = w\n    torch.save(m, 'a.pt')", []),
        ("def f(d, ms):\n    m = nn.Linear(2, 2)\n    for m in ms:\n        pass\n    torch.save(m, 'a.pt')", []),
    ],
)
def test_what_a_save_holds(body, expected):
    assert kinds(body) == expected


@pytest.mark.parametrize(
    "path, expected",
    [
        ("os.path.join(base, 'vae.pkl')", "vae.pkl"),
        ("os.path.join(base, 'runs/best.pth.tar')", "best.pth.tar"),
        ("f'{out}/vae.pkl'", "vae.pkl"),
        ("out + '/vae.pkl'", "vae.pkl"),
        ("pathlib.Path(out) / 'vae.pkl'", "vae.pkl"),
        ("str(pathlib.Path(out) / 'vae.pkl')", "vae.pkl"),
        ("'checkpoints/vae.pkl'", "vae.pkl"),
        ("f'{out}/epoch_{e}.pt'", None),
        ("out + 'vae.pkl'", None),
        ("os.path.join(out, name)", None),
        ("os.path.join(out, '.pt')", None),
        ("'/'.join([out, 'vae.pkl'])", None),
    ],
)
def test_the_file_name_a_checkpoint_path_ends_in(path, expected):
    facts = facts_of_source("import os, pathlib\n", "module.py")
    assert ast_file_name(ast.parse(path, mode="eval").body, facts.qualify) == expected


def test_a_class_found_in_the_project_through_the_definition_lookup():
    # The lookup the index passes: a class of another module, seen through ``definition``.
    facts = facts_of_source(HEADER + "class Corpus:\n    pass\n", "module.py")
    found = definition("module.Corpus", facts, None)
    assert found is not None and found[1] == "Corpus"


@pytest.mark.parametrize("path", sorted((FIXTURES / "TL406" / "checker").glob("*.py")), ids=lambda p: p.name)
def test_tl406_findings_do_not_rest_on_names(path):
    # Renaming every identifier a file binds keeps every TL406 finding and its level (DESIGN.md).
    settings = config.Settings(enabled=frozenset({"TL406"}))
    source = path.read_text(encoding="utf-8")

    def levels(text):
        return sorted(f.confidence.value for f in engine.lint_text(text, "module.py", settings).findings)

    assert levels(rename_identifiers(source)) == levels(source)


def layouts(body: str):
    """(keys, kind or None) of each saved dict with literal keys in ``body``."""
    facts = facts_of_source(HEADER + textwrap.dedent(body), "module.py")
    found = saved_layouts(facts, lambda qualified, local: definition(qualified, local, None))
    return [(sorted(layout.keys), layout.refused.kind if layout.refused else None) for layout in found]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("torch.save({'model': 1, 'args': argparse.Namespace()}, path)", [(["args", "model"], "namespace")]),
        ("state = {'model': 1}\nstate['rng'] = np.random.get_state()\ntorch.save(state, f(x))", [(["model", "rng"], "numpy")]),
        ("torch.save(dict(model=1, epoch=2), path)", [(["epoch", "model"], None)]),
        ("torch.save({'model': 1, **extra}, path)", []),  # a key the code does not spell
        ("torch.save({k: 1 for k in ks}, path)", []),
        # timm's helpers return state dicts; its model builders return modules
        ("from timm.utils import get_state_dict\ntorch.save({'ema': get_state_dict(ema)}, path)", [(["ema"], None)]),
        ("import timm\ntorch.save({'net': timm.create_model('resnet18')}, path)", [(["net"], "module")]),
        (
            "def save_checkpoint(state, folder):\n    torch.save(state, folder + '/last.pt')\n\n"
            "save_checkpoint({'epoch': 1, 'opt': argparse.Namespace()}, 'runs')",
            [(["epoch", "opt"], "namespace")],
        ),
        (
            "def save_checkpoint(state, folder):\n    state = {'wrapped': state}\n    torch.save(state, folder)\n\n"
            "save_checkpoint({'epoch': 1}, 'runs')",
            [(["wrapped"], None)],
        ),
    ],
)
def test_the_layout_of_a_saved_dict(body, expected):
    assert layouts(body) == expected


def test_a_load_read_by_the_keys_of_a_saved_layout_is_reported_at_medium(tmp_path, capsys):
    """fixtures/TL406/layouts_read_by_keys: loads matched to saves only by the keys they read (a path built by
    os.path.join, a helper's parameter), every annotation at its level; at the default floor none is shown."""
    expected, found = _annotated_and_found("layouts_read_by_keys", tmp_path, capsys)
    assert expected == {("train.py", 29, "TL406", "medium"), ("evaluate.py", 7, "TL406", "medium")}
    assert found == expected


def test_a_namespace_passed_to_main_and_saved_through_a_star_forwarding_helper(tmp_path, capsys):
    """fixtures/TL406/saved_through_star_forwarding: ``save_on_master(*args, **kwargs)`` saves its first
    argument, and ``args`` of ``main(args)`` is what every caller passes, ``parser.parse_args()``."""
    expected, found = _annotated_and_found("saved_through_star_forwarding", tmp_path, capsys)
    assert expected == {("main.py", 13, "TL406", "medium")}
    assert found == expected


def test_keys_read_after_a_load_or_a_hub_download_and_a_launcher_that_passes_an_unknown(tmp_path, capsys):
    """fixtures/TL406/resumed_from_hub_or_file: the keys read after ``ckpt = hub_load(url) if ... else torch.load(f)``
    are keys of the loaded file on its path; launcher.py's ``main.main(self.args)`` passes a value not known here,
    which leaves main.py's own ``main(parser.parse_args())`` saving a Namespace. The load of another layout
    (``{"model": ...}`` is saved too, without one) stays silent."""
    expected, found = _annotated_and_found("resumed_from_hub_or_file", tmp_path, capsys)
    assert expected == {("main.py", 15, "TL406", "medium")}
    assert found == expected


def test_a_yacs_config_handed_from_main_to_a_saving_helper_in_another_module(tmp_path, capsys):
    """fixtures/TL406/config_passed_to_the_saver: ``save_checkpoint(config, ...)`` in utils.py saves its ``config``
    parameter, which main.py's every call passes from ``main(config)``, itself given ``get_config(...)``,
    which returns ``_C.clone()`` of a yacs ``CfgNode``."""
    expected, found = _annotated_and_found("config_passed_to_the_saver", tmp_path, capsys)
    assert expected == {("utils.py", 10, "TL406", "medium")}
    assert found == expected


def test_a_hydra_config_handed_to_a_trainer_constructed_through_its_subclass_and_a_package_reexport(tmp_path, capsys):
    """fixtures/TL406/config_of_a_constructed_trainer: ``BaseTrainer.save_checkpoint`` saves ``self.config``, which
    ``__init__`` binds to its ``config`` parameter; train.py constructs ``Trainer`` (a subclass keeping that
    ``__init__``, imported through the package's re-export) with the config Hydra passes to ``main``. The other
    trainer is constructed with a plain-dict copy and its load stays silent."""
    expected, found = _annotated_and_found("config_of_a_constructed_trainer", tmp_path, capsys)
    assert expected == {("base.py", 20, "TL406", "medium")}
    assert found == expected


def test_a_cache_filled_in_one_arm_and_loaded_in_the_other_from_a_script_inside_a_package_root(tmp_path, capsys):
    # The repository's root has an __init__.py; its script imports ``processors.features`` by the name its own
    # folder gives it. A list built from the project's class is cached; a name rebound to a tensor is not.
    expected, found = _annotated_and_found("cache_in_a_package_root", tmp_path, capsys)
    assert expected == {("run.py", 13, "TL406", "high")}
    assert found == expected


def test_weights_only_refuses_a_dict_subclass_and_a_simple_namespace(tmp_path):
    """What the config kinds rest on: yacs' CfgNode and EasyDict are dict subclasses, and a SimpleNamespace is no
    allowed global; torch.load's weights_only default refuses each (torch 2.13)."""
    import types

    import torch

    for value in (ConfigLike(lr=0.1), types.SimpleNamespace(lr=0.1)):
        path = tmp_path / "ckpt.pt"
        torch.save({"model": {"w": torch.ones(2)}, "config": value}, path)
        with pytest.raises(Exception, match="Weights only load failed"):
            torch.load(path)
        assert torch.load(path, weights_only=False)["config"].__class__ is value.__class__


class ConfigLike(dict):
    """A configuration object the way yacs and EasyDict build theirs: a dict subclass."""


def _annotated_and_found(fixture: str, tmp_path, capsys):
    """The TL406 annotations of a project fixture, and what ``check`` reports there at every level."""
    import shutil

    from fixture_support import expected_findings, project_findings

    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "TL406" / fixture, root)
    expected = set()
    for path in sorted(root.rglob("*.py")):
        for (line, code, levels), _ in expected_findings(path.read_text(encoding="utf-8")).items():
            expected.add((path.name, line, code, "/".join(sorted(levels))))
    found = {(Path(item["path"]).name, item["line"], item["code"], item["confidence"]) for item in project_findings(root, "TL406", capsys)}
    return expected, found

def test_scripts_import_the_helpers_beside_them_before_a_package_of_the_same_name(tmp_path, capsys):
    """fixtures/TL406/scripts_beside_their_helpers: supcon/train.py imports ``util`` from its own folder (sys.path[0])
    though other/ holds a ``util`` package; its options, bound twice at the top level (the parser, then what it
    parses), reach save_model's dict. other/'s own layout holds weights only and its load stays silent."""
    expected, found = _annotated_and_found("scripts_beside_their_helpers", tmp_path, capsys)
    assert expected == {("linear.py", 8, "TL406", "medium")}
    assert found == expected


def test_lightning_hyperparameters_follow_what_save_hyperparameters_saves():
    # Lightning saves the named arguments, or every __init__ argument not ignored (by its name, as Lightning does).
    source = textwrap.dedent(
        """
        import pytorch_lightning as pl
        from omegaconf import DictConfig


        class Saved(pl.LightningModule):
            def __init__(self, cfg: DictConfig, width=4):
                super().__init__()
                self.save_hyperparameters()


        class Ignored(pl.LightningModule):
            def __init__(self, cfg: DictConfig, width=4):
                super().__init__()
                self.save_hyperparameters(ignore=["cfg"])


        class Named(pl.LightningModule):
            def __init__(self, cfg: DictConfig, width=4):
                super().__init__()
                self.save_hyperparameters("width")
        """
    )
    facts = facts_of_source(source, "module.py")
    found = {(c.qualified, c.parameter, c.evidence) for c in lightning.refused_hyperparameters(None, facts)}
    assert found == {("module.Saved", "cfg", "annotated `DictConfig`")}
    assert set(lightning.lightning_classes(None, facts)) == {"module.Saved", "module.Ignored"}
