"""Code nothing in the project names (analysis/project/reached.py): its findings are shown at `low`, and every way
a project can still reach the code keeps them where the rule put them."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List

import pytest

from fixture_support import all_rules_settings, checker_target, project_findings
from torchlint import cli, engine

# TL602 finds ``init.kaiming_normal`` at ``high`` (the level table is off in the tests).
HELPER = (
    "import torch.nn as nn\n"
    "import torch.nn.init as init\n"
    "\n"
    "\n"
    "def init_params(net):\n"
    "    for m in net.modules():\n"
    "        init.kaiming_normal(m.weight)\n"
)
CALLER = "import torch.nn as nn\nfrom helpers import init_params\n\nnet = nn.Linear(2, 2)\ninit_params(net)\n"
# Imports the helpers' module (a program the project shows) and calls nothing of it.
IDLE = "import torch.nn as nn\n\nimport helpers\nimport layers\n\nnet = nn.Linear(2, 2)\n"


def levels(project: Path, capsys) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for item in project_findings(project, "TL602", capsys):
        found.setdefault(item["path"].removeprefix("./"), []).append(item["confidence"])
    return found


def project(tmp_path: Path, files: Dict[str, str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_a_helper_no_module_names_is_shown_at_low(tmp_path, capsys):
    assert levels(project(tmp_path, {"helpers.py": HELPER, "train.py": IDLE}), capsys) == {"helpers.py": ["low"]}


def test_the_measured_table_moves_the_level_found_and_unreached_code_is_shown_at_low(tmp_path, capsys, monkeypatch):
    # A table that shows TL602's medium findings at high must not lift a high finding that sits in unreached code
    # (lowered to medium) back to the default level.
    from torchlint import rule

    monkeypatch.setattr(rule, "measured_level_moves", lambda: {"TL602:medium": "high"})
    found = levels(project(tmp_path, {"helpers.py": HELPER, "train.py": IDLE, "layers.py": ""}), capsys)
    assert found == {"helpers.py": ["low"]}


def test_a_helper_another_module_calls_keeps_its_level(tmp_path, capsys):
    assert levels(project(tmp_path, {"helpers.py": HELPER, "train.py": CALLER}), capsys) == {"helpers.py": ["high"]}


def test_a_module_calling_its_own_helper_of_the_same_name_calls_no_other(tmp_path, capsys):
    # d16: three copies of one helper, each in its own folder; only a notebook's own copy is called
    own = "import torch.nn as nn\n\n\ndef init_params(net):\n    pass\n\n\nnet = nn.Linear(2, 2)\ninit_params(net)\n"
    files = {"helpers.py": HELPER, "train.py": IDLE, "other.py": own}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low"]}
    # a method of that name in a class is no copy: the call may be the helper's
    method = "from helpers import *\n\n\nclass Net:\n    def init_params(self):\n        pass\n\n\ninit_params(None)\n"
    files = {"helpers.py": HELPER, "train.py": IDLE, "other.py": method}
    assert levels(project(tmp_path / "method", files), capsys) == {"helpers.py": ["high"]}


def test_a_module_hidden_by_a_package_of_its_name_never_runs(tmp_path, capsys):
    # d17: ``pkg/helpers.py`` beside ``pkg/helpers/__init__.py``: ``import pkg.helpers`` loads the package.
    caller = CALLER.replace("from helpers import", "from pkg.helpers import")
    files = {"pkg/__init__.py": "", "pkg/helpers.py": HELPER, "pkg/helpers/__init__.py": HELPER, "train.py": caller}
    assert levels(project(tmp_path, files), capsys) == {"pkg/helpers.py": ["low"], "pkg/helpers/__init__.py": ["high"]}


def test_a_helper_named_only_by_a_helper_nothing_calls_is_shown_at_low(tmp_path, capsys):
    # d18: utils/weights_init.py (a folder without __init__.py, imported as ``from utils import weights_init``):
    # the init functions are named only by ``init_weights``, which nothing calls; ``init_model`` is used.
    helpers = HELPER + (
        "\n\ndef init_weights(net):\n    net.apply(init_params)\n"
        "\n\ndef init_model(net):\n    init.kaiming_normal(net.weight)\n"
    )
    train = "import torch.nn as nn\nfrom utils import helpers\n\nnet = nn.Linear(2, 2)\nhelpers.init_model(net)\n"
    found = levels(project(tmp_path / "uncalled", {"utils/helpers.py": helpers, "train.py": train}), capsys)
    assert found == {"utils/helpers.py": ["low", "high"]}
    called = train + "helpers.init_weights(net)\n"
    found = levels(project(tmp_path / "called", {"utils/helpers.py": helpers, "train.py": called}), capsys)
    assert found == {"utils/helpers.py": ["high", "high"]}


def test_a_self_test_of_a_library_module_nothing_imports_is_no_program(tmp_path, capsys):
    # d18: models/variant.py beside models/layers.py, which train.py imports; only its __main__ block runs it
    variant = OPTIMIZER_ZOO + "\n\nif __name__ == '__main__':\n    Zoo().build(None)\n"
    files = {
        "models/__init__.py": "", "models/layers.py": MODEL, "models/variant.py": variant,
        "train.py": "from models.layers import build\n\nnet = build()\n",
    }
    assert levels(project(tmp_path / "library", files), capsys) == {"models/variant.py": ["low"]}
    # a script beside the helper it imports (tools/run.py and tools/helpers.py) is a program of the project
    files = {"tools/helpers.py": MODEL, "tools/run.py": "from helpers import build\n" + variant, "train.py": "print(1)\n"}
    assert levels(project(tmp_path / "tools", files), capsys) == {"tools/run.py": ["high"]}


def test_the_top_level_of_a_module_that_never_runs_is_unreached(tmp_path, capsys):
    # d30: src/trainer/amp_trainer.py beside the trainers the package's __init__ imports; nothing imports it, and
    # its top level only imports and defines, so its deprecated import never runs either
    trainer = "from torch.cuda.amp import GradScaler\n\n\nclass AmpTrainer:\n    def __init__(self):\n        self.scaler = GradScaler()\n"
    files = {
        "trainers/__init__.py": "from trainers.plain import PlainTrainer\n",
        "trainers/plain.py": "class PlainTrainer:\n    pass\n",
        "trainers/amp.py": trainer,
        "train.py": "from trainers import PlainTrainer\n\nPlainTrainer()\n",
    }
    assert levels(project(tmp_path / "unused", files), capsys) == {"trainers/amp.py": ["low", "low"]}
    # imported, or run on its own (its ``__main__`` block), its top level runs
    imported = dict(files, **{"trainers/__init__.py": "from trainers.plain import PlainTrainer\nfrom trainers.amp import AmpTrainer\n"})
    # (the class it defines is imported and never built: its method stays unreached)
    assert levels(project(tmp_path / "imported", imported), capsys) == {"trainers/amp.py": ["high", "low"]}
    script = dict(files, **{"trainers/amp.py": trainer + "\n\nif __name__ == '__main__':\n    AmpTrainer()\n"})
    # (a self-test of a library module: what only it builds stays unreached, test_a_self_test_of_a_library_module...)
    assert levels(project(tmp_path / "script", script), capsys) == {"trainers/amp.py": ["high", "low"]}


def test_a_comment_naming_the_helper_is_no_call(tmp_path, capsys):
    files = {"helpers.py": HELPER, "train.py": IDLE + "# init_params(net) is not needed here\n"}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low"]}


def test_a_call_in_the_same_file_or_a_string_keeps_its_level(tmp_path, capsys):
    same_file = HELPER + "\n\nif __name__ == '__main__':\n    init_params(nn.Linear(2, 2))\n"
    assert levels(project(tmp_path / "same", {"helpers.py": same_file}), capsys) == {"helpers.py": ["high"]}
    registry = {"helpers.py": HELPER, "train.py": IDLE + "INITS = {'kaiming': 'init_params'}\n"}
    assert levels(project(tmp_path / "registry", registry), capsys) == {"helpers.py": ["high"]}


def test_a_decorated_function_is_called_by_its_decorator(tmp_path, capsys):
    decorated = HELPER.replace("def init_params", "@register\ndef init_params").replace(
        "import torch.nn.init as init\n", "import torch.nn.init as init\nfrom registry import register\n"
    )
    assert levels(project(tmp_path, {"helpers.py": decorated}), capsys) == {"helpers.py": ["high"]}


def test_a_lookup_by_a_computed_name_may_reach_any_definition(tmp_path, capsys):
    files = {"helpers.py": HELPER, "train.py": "import helpers\n\nchoice = input()\ngetattr(helpers, choice)(None)\n"}
    assert levels(project(tmp_path / "computed", files), capsys) == {"helpers.py": ["high"]}
    files = {"helpers.py": HELPER, "train.py": "import torch.nn as nn\nimport helpers\n\nwidth = getattr(nn, 'Linear')\n"}
    assert levels(project(tmp_path / "literal", files), capsys) == {"helpers.py": ["low"]}


def test_a_lookup_in_a_file_s_own_namespace_reaches_only_that_file(tmp_path, capsys):
    # d22: ``getattr(sys.modules[__name__], name)`` and ``globals()`` in the training script look up the script's
    # own names; ``eval`` and ``import_module(name)`` may reach any module
    own = IDLE + "import sys\n\n\ndef build(name):\n    return getattr(sys.modules[__name__], name)\n\n\nprint(globals())\n"
    assert levels(project(tmp_path / "own", {"helpers.py": HELPER, "train.py": own}), capsys) == {"helpers.py": ["low"]}
    anywhere = IDLE + "import importlib\n\nimportlib.import_module(input())\n"
    assert levels(project(tmp_path / "any", {"helpers.py": HELPER, "train.py": anywhere}), capsys) == {"helpers.py": ["high"]}


def test_an_import_by_a_computed_name_under_a_literal_package_reaches_only_that_package(tmp_path, capsys):
    # d24: ``import_module("datasets." + name)`` reaches the datasets package's modules, not the helpers
    loader = IDLE + "import importlib\n\nmod = importlib.import_module('datasets.' + input())\n"
    files = {"helpers.py": HELPER, "datasets/__init__.py": "", "datasets/cifar.py": HELPER, "train.py": loader}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low"], "datasets/cifar.py": ["high"]}


def test_a_package_that_imports_its_submodules_by_name_reaches_what_their_all_exports(tmp_path, capsys):
    # d22: ``import_module("." + name, package=__name__)`` then ``globals().update(... m.__all__)`` in the
    # package's __init__: a submodule's exported names are reached, the others only by their own uses
    init = (
        "import importlib\nimport pkgutil\n\nfor _, name, _ in pkgutil.walk_packages(__path__):\n"
        "    module = importlib.import_module('.' + name, package=__name__)\n"
        "    globals().update({k: getattr(module, k) for k in getattr(module, '__all__', [])})\n"
    )
    train = "import torch.nn as nn\nimport models\n\nnet = nn.Linear(2, 2)\n"
    exported = "__all__ = ['init_params']\n" + HELPER
    files = {"models/__init__.py": init, "models/helpers.py": exported, "models/other.py": HELPER, "train.py": train}
    assert levels(project(tmp_path, files), capsys) == {"models/helpers.py": ["high"], "models/other.py": ["low"]}


def test_a_name_imported_from_another_module_is_not_this_module_s(tmp_path, capsys):
    # d22: two modules define the same class; the model imports it from the other one
    caller = "import torch.nn as nn\nfrom helpers import build\nfrom other import init_params\n\ninit_params(nn.Linear(2, 2))\nbuild()\n"
    helpers = HELPER + "\n\ndef build():\n    pass\n"
    other = "def init_params(net):\n    pass\n"
    files = {"helpers.py": helpers, "other.py": other, "train.py": caller}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low"]}


def test_a_script_that_parses_its_command_line_is_a_program_in_a_library_folder(tmp_path, capsys):
    # d21: underwater_rl/policy_train.py beside modules that other folders import, run only from its __main__
    # block: it reads its arguments, so someone runs it
    script = HELPER + "\n\nif __name__ == '__main__':\n    import argparse\n    args = argparse.ArgumentParser().parse_args()\n    init_params(nn.Linear(2, 2))\n"
    files = {
        "rl/__init__.py": "", "rl/layers.py": MODEL, "rl/policy_train.py": script,
        "train.py": "from rl.layers import build\n\nnet = build()\n",
    }
    assert levels(project(tmp_path, files), capsys) == {"rl/policy_train.py": ["high"]}


def test_a_script_whose_main_parses_the_command_line_is_a_program_in_a_library_folder(tmp_path, capsys):
    # revive: bamos/densenet.pytorch's train.py, beside densenet.py that attic/ imports; its __main__ block calls
    # main(), and main() reads the arguments
    script = HELPER + (
        "\n\ndef main():\n    import argparse\n    args = argparse.ArgumentParser().parse_args()\n    run(args)\n"
        "\n\ndef run(args):\n    init_params(nn.Linear(2, 2))\n"
        "\n\nif __name__ == '__main__':\n    main()\n"
    )
    files = {"layers.py": MODEL, "train.py": script, "attic/check.py": "from layers import build\n\nnet = build()\n"}
    assert levels(project(tmp_path / "cli", files), capsys) == {"train.py": ["high"]}
    # a __main__ block that calls a function reading no arguments stays a self-test of the library module
    quiet = script.replace("    import argparse\n    args = argparse.ArgumentParser().parse_args()\n", "    args = None\n")
    files["train.py"] = quiet
    assert levels(project(tmp_path / "quiet", files), capsys) == {"train.py": ["low"]}


# A module class whose method TL602 finds ``init.kaiming_normal`` in.
LAYER = (
    "import torch.nn as nn\n"
    "import torch.nn.init as init\n"
    "\n"
    "\n"
    "class Masked(nn.Linear):\n"
    "    def reset_parameters(self):\n"
    "        init.kaiming_normal(self.weight)\n"
)


def test_a_method_lives_as_long_as_its_class(tmp_path, capsys):
    layer = LAYER
    used = {"layers.py": layer, "train.py": "from layers import Masked\n\nnet = Masked(2, 2)\n"}
    assert levels(project(tmp_path / "used", used), capsys) == {"layers.py": ["high"]}
    unused = {"layers.py": layer, "train.py": IDLE}
    assert levels(project(tmp_path / "unused", unused), capsys) == {"layers.py": ["low"]}


def test_a_call_from_a_notebook_of_the_project_keeps_its_level(tmp_path, capsys):
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": ["from helpers import init_params\n", "init_params(net)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    files = {"helpers.py": HELPER, "explore.ipynb": json.dumps(notebook)}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["high"]}


def test_a_module_only_notebooks_import_is_part_of_their_program(tmp_path, capsys):
    # d23: models.py is star-imported by the notebooks only; its helper no cell names is shown at low, the
    # one a cell calls keeps its level
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": ["from helpers import *\n", "build(net)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    helpers = HELPER + "\n\ndef build(net):\n    init.kaiming_normal(net.weight)\n"
    files = {"helpers.py": helpers, "data.py": "import torch\n", "explore.ipynb": json.dumps(notebook)}
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low", "high"]}


def test_a_package_looked_up_by_name_reaches_only_the_submodules_something_imports(tmp_path, capsys):
    # d23: ``models.__dict__[arch]`` reaches what models/__init__.py imports, not a models/unused.py nothing imports
    train = "import models\n\narch = input()\nnet = models.__dict__[arch]()\n"
    files = {"models/__init__.py": "from .used import *\n", "models/used.py": HELPER, "models/unused.py": HELPER, "train.py": train}
    assert levels(project(tmp_path, files), capsys) == {"models/used.py": ["high"], "models/unused.py": ["low"]}


def test_a_script_importing_a_module_its_package_lacks_never_runs(tmp_path, capsys):
    # d23: train_dual.py imports models.dual_norm, which the repository does not hold: ModuleNotFoundError
    script = "import torch.nn as nn\nfrom models.dual_norm import DualNorm\nimport torch.nn.init as init\n\n\ndef main():\n    init.kaiming_normal(nn.Linear(2, 2).weight)\n\n\nmain()\n"
    present = script.replace("models.dual_norm", "models.layers")
    files = {"models/__init__.py": "", "models/layers.py": "DualNorm = None\n", "train_dual.py": script, "train.py": present}
    assert levels(project(tmp_path, files), capsys) == {"train_dual.py": ["low"], "train.py": ["high"]}


def test_top_level_code_after_an_import_that_fails_never_runs(tmp_path, capsys):
    script = "import torch.nn as nn\nfrom models.dual_norm import DualNorm\nimport torch.nn.init as init\n\ninit.kaiming_normal(nn.Linear(2, 2).weight)\n"
    present = script.replace("models.dual_norm", "models.layers")
    files = {"models/__init__.py": "", "models/layers.py": "DualNorm = None\n", "train_dual.py": script, "train.py": present}
    assert levels(project(tmp_path, files), capsys) == {"train_dual.py": ["low"], "train.py": ["high"]}


# d25: three experiments side by side; the last commit moved ``dataset/`` out of one of them.
SIBLING_SCRIPT = "import torch.nn as nn\nimport torch.nn.init as init\nfrom dataset.cifar import loaders\n\n\ndef main():\n    init.kaiming_normal(nn.Linear(2, 2).weight)\n\n\nmain()\n"


def test_a_script_importing_a_package_only_a_sibling_folder_holds_never_runs(tmp_path, capsys):
    files = {"kd/dataset/cifar.py": "loaders = None\n", "kd/train.py": SIBLING_SCRIPT, "fewshot/train.py": SIBLING_SCRIPT}
    assert levels(project(tmp_path, files), capsys) == {"fewshot/train.py": ["low"], "kd/train.py": ["high"]}


@pytest.mark.parametrize("where", ["in the script", "in a launcher", "installed"])
def test_a_path_the_project_sets_may_reach_a_sibling_folder(tmp_path, capsys, where):
    files = {"kd/dataset/cifar.py": "loaders = None\n", "kd/train.py": SIBLING_SCRIPT, "fewshot/train.py": SIBLING_SCRIPT}
    if where == "in the script":
        files["fewshot/train.py"] = "import sys\nsys.path.append('../kd')\n" + SIBLING_SCRIPT
    elif where == "in a launcher":
        files["fewshot/run.sh"] = "PYTHONPATH=../kd python train.py\n"
    else:
        files["setup.py"] = "from setuptools import setup\nsetup(name='x')\n"
    assert levels(project(tmp_path, files), capsys) == {"fewshot/train.py": ["high"], "kd/train.py": ["high"]}


def test_a_package_above_the_script_is_found_when_it_runs_as_a_module(tmp_path, capsys):
    files = {"dataset/cifar.py": "loaders = None\n", "experiments/train.py": SIBLING_SCRIPT}
    assert levels(project(tmp_path, files), capsys) == {"experiments/train.py": ["high"]}


def test_a_module_in_a_folder_no_import_can_name_is_judged_as_its_own(tmp_path, capsys):
    # d25: ``CIFAT-100KD/losses.py`` beside ``CIFAR100-FewShot/losses.py``: the bare name went to one of them,
    # and a folder with a hyphen gives the other no importable name; each experiment's script finds its own.
    files = {"exp-a/helpers.py": HELPER, "exp-a/train.py": CALLER, "exp-b/helpers.py": HELPER, "exp-b/train.py": IDLE,
             "exp-b/layers.py": ""}
    assert levels(project(tmp_path, files), capsys) == {"exp-a/helpers.py": ["high"], "exp-b/helpers.py": ["low"]}


def test_a_module_only_failing_scripts_import_never_runs(tmp_path, capsys):
    script = "import torch.nn as nn\nfrom dataset.cifar import loaders\nfrom helpers import init_params\n\ninit_params(nn.Linear(2, 2))\n"
    files = {"kd/dataset/cifar.py": "loaders = None\n", "kd/helpers.py": HELPER, "kd/train.py": script,
             "fewshot/helpers.py": HELPER, "fewshot/train.py": script}
    assert levels(project(tmp_path, files), capsys) == {"fewshot/helpers.py": ["low"], "kd/helpers.py": ["high"]}


def test_a_main_block_the_pre_pass_leaves_out_still_makes_the_file_a_program(tmp_path, capsys):
    # No rule asks for the ``__main__`` block, so LibCST never parses it: the file is still a script that runs,
    # and the helper it never calls is unreached there (d40: a test module's findings moved a level with it).
    script = HELPER + '\n\nif __name__ == "__main__":\n    for step in range(3):\n        print(step)\n'
    assert levels(project(tmp_path, {"tool.py": script}), capsys) == {"tool.py": ["low"]}


def test_classes_a_test_runner_collects_are_reached(tmp_path, capsys):
    # unittest.main() and pytest find TestCase classes and a test file's Test* classes themselves, and call their
    # test methods by name; the same class in a file no runner collects is named by nothing.
    body = "    def test_init(self):\n        init.kaiming_normal(nn.Linear(2, 2).weight)\n"
    unit = "import unittest\n\nimport torch.nn as nn\nimport torch.nn.init as init\n\n\nclass Case(unittest.TestCase):\n" + body
    unit += '\n\nif __name__ == "__main__":\n    unittest.main()\n'
    plain = "import torch.nn as nn\nimport torch.nn.init as init\n\n\nclass TestInit:\n" + body
    files = {"check_init.py": unit, "test_init.py": plain, "tool.py": plain + '\n\nif __name__ == "__main__":\n    print(1)\n'}
    assert levels(project(tmp_path, files), capsys) == {"check_init.py": ["high"], "test_init.py": ["high"], "tool.py": ["low"]}


def test_modules_that_only_import_each_other_reach_no_program(tmp_path, capsys):
    # helpers.py is imported by a.py and b.py, which import each other and run nothing: no chain of importers
    # reaches code that runs, until a script imports one of them.
    user = "import b\nfrom helpers import init_params\n\n\ndef build(net):\n    init_params(net)\n"
    files = {"helpers.py": HELPER, "a.py": user, "b.py": "import a\n"}
    assert levels(project(tmp_path / "cycle", files), capsys) == {"helpers.py": ["low"]}
    files["train.py"] = "import torch.nn as nn\nimport b\n\nnet = nn.Linear(2, 2)\n"
    assert levels(project(tmp_path / "run", files), capsys) == {"helpers.py": ["high"]}


def test_a_name_the_module_beside_the_script_does_not_define_fails_to_import(tmp_path, capsys):
    # d25: ``from losses import CE_KL_PWCE_loss`` where losses.py defines no such name: ImportError at the top.
    script = "import torch.nn as nn\nimport torch.nn.init as init\nfrom losses import {name}\n\n\ndef main():\n    init.kaiming_normal(nn.Linear(2, 2).weight)\n\n\nmain()\n"
    losses = "import torch\n\nif torch.cuda.is_available():\n    FAST = True\n\n\nclass CE_loss:\n    pass\n\n\ndef setup():\n    global LATE\n    LATE = 1\n"
    files = {"losses.py": losses, "broken.py": script.format(name="CE_KL_loss"), "fine.py": script.format(name="CE_loss, FAST"),
             "late.py": script.format(name="LATE")}
    assert levels(project(tmp_path, files), capsys) == {"broken.py": ["low"], "fine.py": ["high"], "late.py": ["high"]}


def test_importing_a_module_whose_own_import_fails_fails_too(tmp_path, capsys):
    # d31: ``from model import CLIP`` runs model.py's ``from utils import set_requires_grad, l2_norm``, and utils.py
    # defines no l2_norm: the script dies at its own import of model, whatever it does after
    script = "import torch.nn as nn\nimport torch.nn.init as init\nfrom model import Net\n\ninit.kaiming_normal(nn.Linear(2, 2).weight)\n"
    model = "from utils import {names}\n\n\nclass Net:\n    pass\n"
    utils = "def set_requires_grad(m, flag):\n    pass\n"
    broken = {"utils.py": utils, "model.py": model.format(names="set_requires_grad, l2_norm"), "train.py": script}
    assert levels(project(tmp_path / "broken", broken), capsys) == {"train.py": ["low"]}
    fine = dict(broken, **{"model.py": model.format(names="set_requires_grad")})
    assert levels(project(tmp_path / "fine", fine), capsys) == {"train.py": ["high"]}
    # modules that import each other: the cycle itself fails nothing
    cycle = dict(fine, **{"utils.py": utils + "\nimport model\n"})
    assert levels(project(tmp_path / "cycle", cycle), capsys) == {"train.py": ["high"]}


def test_an_annotation_python_never_evaluates_runs_nothing(tmp_path, capsys):
    # d31: ``-> torch.cuda.amp.GradScaler`` under ``from __future__ import annotations``, read as a use of the API
    body = "import torch.nn.init as init\n\n\ndef init_params(net) -> init.kaiming_normal:\n    {local}\n    return net\n\n\ninit_params(None)\n"
    postponed = {"train.py": "from __future__ import annotations\n" + body.format(local="pass")}
    assert levels(project(tmp_path / "postponed", postponed), capsys) == {"train.py": ["low"]}
    evaluated = {"train.py": body.format(local="pass")}
    assert levels(project(tmp_path / "evaluated", evaluated), capsys) == {"train.py": ["high"]}
    local = {"train.py": "import torch.nn.init as init\n\n\ndef f():\n    x: init.kaiming_normal = None\n    return x\n\n\nf()\n"}
    assert levels(project(tmp_path / "local", local), capsys) == {"train.py": ["low"]}


@pytest.mark.parametrize("module", ["from helpers import *\n", "def __getattr__(name):\n    return name\n", "globals()['X'] = 1\n"])
def test_a_module_that_binds_names_no_statement_spells_may_define_any(tmp_path, capsys, module):
    script = "import torch.nn as nn\nimport torch.nn.init as init\nfrom losses import CE_KL_loss\n\ninit.kaiming_normal(nn.Linear(2, 2).weight)\n"
    files = {"helpers.py": "CE_KL_loss = None\n", "losses.py": module, "train.py": script}
    assert levels(project(tmp_path, files), capsys) == {"train.py": ["high"]}


def test_a_module_no_file_imports_may_be_an_excerpt(tmp_path, capsys):
    # Definitions only, imported by nothing: the code that calls them may not be in the project.
    alone = {"helpers.py": HELPER, "train.py": "import torch.nn as nn\n\nnet = nn.Linear(2, 2)\n"}
    assert levels(project(tmp_path, alone), capsys) == {"helpers.py": ["high"]}
    script = {"helpers.py": HELPER + "\n\nprint(nn.Linear(2, 2))\n"}  # runs code: a script
    assert levels(project(tmp_path / "script", script), capsys) == {"helpers.py": ["low"]}


def test_a_text_linted_alone_is_never_judged_unreached():
    settings = all_rules_settings(checker_target(HELPER))
    found = engine.lint_text(HELPER, "helpers.py", settings).findings
    assert [(f.code, f.confidence.value) for f in found] == [("TL602", "high")]


def test_the_cache_drops_the_fact_when_any_file_of_the_project_changes(tmp_path, capsys):
    root = project(tmp_path, {"helpers.py": HELPER, "train.py": IDLE})

    def cached_levels():
        here = os.getcwd()
        os.chdir(root)
        try:
            cli.main(["check", "--select", "TL602", "--confidence-level", "low", "--output-format", "json", "--exit-zero", "."])
        finally:
            os.chdir(here)
        return [item["confidence"] for item in json.loads(capsys.readouterr().out)]

    assert cached_levels() == ["low"]
    assert cached_levels() == ["low"]  # warm
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": ["from helpers import init_params\n", "init_params(net)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    (root / "explore.ipynb").write_text(json.dumps(notebook), encoding="utf-8")  # a new file calls it
    assert cached_levels() == ["high"]
    (root / "explore.ipynb").unlink()
    assert cached_levels() == ["low"]
    (root / "train.py").write_text(CALLER + "import layers\n", encoding="utf-8")  # an edited one does
    assert cached_levels() == ["high"]


# A module of definitions: the helper is called inside it, so only the module's own reach decides.
OPTIMIZER_ZOO = HELPER + "\n\nclass Zoo:\n    def build(self, net):\n        init_params(net)\n"
MODEL = "import torch.nn as nn\n\n\ndef build():\n    return nn.Linear(2, 2)\n"
TRAIN = "from model import build\n\nnet = build()\n"


def test_a_module_nothing_imports_in_a_program_of_modules_is_shown_at_low(tmp_path, capsys):
    files = {"zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["low"]}


def test_set_up_calls_at_the_top_level_make_no_script(tmp_path, capsys):
    # warnings.filterwarnings / torch.manual_seed configure the process: run alone, the module does nothing (d16)
    set_up = "import warnings\nimport torch\nwarnings.filterwarnings('ignore')\ntorch.manual_seed(0)\n"
    files = {"zoo.py": set_up + OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["low"]}
    # any other call at the top level runs something: the file is a script, its definitions judged by their names
    files["zoo.py"] = set_up + OPTIMIZER_ZOO + "\nZoo().build(None)\n"
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["high"]}


@pytest.mark.parametrize(
    "mention",
    [
        'SCRIPT = "zoo.py"\n',  # its file, run by a subprocess or a shell line
        'COMMAND = "python -m zoo --lr 1"\n',
        'ENTRY = "zoo-train=zoo:main"\n',  # an entry point
        'import importlib\nPLUGINS = [importlib.import_module(n) for n in ["zoo"]]\n',  # a computed import
    ],
)
def test_a_module_named_in_another_file_keeps_its_level(tmp_path, capsys, mention):
    # A mention that can load it without an import line naming it.
    files = {"zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN + mention}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["high"]}


def test_a_dotted_path_to_a_module_keeps_its_level(tmp_path, capsys):
    files = {"plugins/zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN + 'TARGET = "plugins.zoo.Zoo"\n'}
    assert levels(project(tmp_path, files), capsys) == {"plugins/zoo.py": ["high"]}


@pytest.mark.parametrize(
    "mention",
    [
        "zoo = build()\n",  # a variable of the same word
        'SPLIT = "zoo"\n',  # a string of it, with nothing in the project that imports by a computed name
        'def run():\n    """Trains on the zoo dataset."""\n',
    ],
)
def test_a_word_like_a_module_s_name_loads_nothing(tmp_path, capsys, mention):
    # d18: ``models/backbone.py`` kept 20 findings at `high` for the scripts' ``backbone = Backbone(...)``.
    files = {"zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN + mention}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["low"]}


def test_a_notebook_s_outputs_are_no_code(tmp_path, capsys):
    # A traceback printed in an output mentions ``exec(``; only the code cells can look a name up.
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ["import model\n"],
                   "outputs": [{"output_type": "error", "ename": "E", "evalue": "", "traceback": ["exec(code_obj)"]}]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }
    files = {"zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN, "explore.ipynb": json.dumps(notebook)}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["low"]}


def test_a_file_another_of_its_name_hides_is_known_by_its_folder(tmp_path, capsys):
    # d18: ``main.py`` imports the top-level ``train``; ``temp/attention/train.py`` is an old copy nothing imports.
    files = {
        "train.py": MODEL,
        "main.py": "from train import build\n\nnet = build()\n",
        "temp/attention/train.py": OPTIMIZER_ZOO,
    }
    assert levels(project(tmp_path, files), capsys) == {"temp/attention/train.py": ["low"]}


def test_a_folder_of_files_importing_none_of_each_other_judges_no_module(tmp_path, capsys):
    # Excerpts side by side (as in a folder of bug reports): no program shows which file runs.
    files = {"zoo.py": OPTIMIZER_ZOO, "other.py": MODEL}
    assert levels(project(tmp_path, files), capsys) == {"zoo.py": ["high"]}


def test_a_file_the_test_runner_collects_is_reached(tmp_path, capsys):
    files = {"test_zoo.py": OPTIMIZER_ZOO, "model.py": MODEL, "train.py": TRAIN}
    assert levels(project(tmp_path, files), capsys) == {"test_zoo.py": ["high"]}


def test_imports_and_all_name_a_helper_without_using_it(tmp_path, capsys):
    # ``from helpers import init_params`` and ``__all__`` only: nothing calls it (d12: an init_params only ``__all__``
    # named, a loss class only an import named).
    exported = HELPER.replace("import torch.nn.init as init\n", "import torch.nn.init as init\n\n__all__ = ['init_params']\n")
    imported = IDLE.replace("import helpers\n", "import helpers\nfrom helpers import init_params\n")
    assert levels(project(tmp_path / "plumbing", {"helpers.py": exported, "train.py": imported}), capsys) == {"helpers.py": ["low"]}
    # imported under another name and called by it: used
    aliased = IDLE.replace("import helpers\n", "import helpers\nfrom helpers import init_params as initialise\n") + "initialise(net)\n"
    assert levels(project(tmp_path / "aliased", {"helpers.py": exported, "train.py": aliased}), capsys) == {"helpers.py": ["high"]}


def test_a_class_naming_itself_is_not_used(tmp_path, capsys):
    layer = LAYER.replace("    def reset_parameters(self):\n", "    def __init__(self, n):\n        super(Masked, self).__init__(n, n)\n")
    files = {"layers.py": layer, "train.py": IDLE.replace("import layers\n", "import layers\nfrom layers import Masked\n")}
    assert levels(project(tmp_path, files), capsys) == {"layers.py": ["low"]}


def test_a_computed_name_looked_up_in_one_module_reaches_only_its_definitions(tmp_path, capsys):
    # ``models.__dict__[arch]`` can reach what ``models`` (and its submodules) define, not helpers.py's code.
    files = {
        "helpers.py": HELPER,
        "models/__init__.py": "from .resnet import *\n",
        "models/resnet.py": HELPER.replace("init_params", "resnet"),
        "train.py": "import sys\n\nimport helpers\nimport models\n\nnet = models.__dict__[sys.argv[1]]()\n",
    }
    assert levels(project(tmp_path, files), capsys) == {"helpers.py": ["low"], "models/resnet.py": ["high"]}


def test_a_same_named_word_in_a_file_that_cannot_see_the_module_uses_nothing(tmp_path, capsys):
    # A script that never names ``helpers`` binds a local ``init_params`` of its own: no call of the helper.
    local = "import torch.nn as nn\nimport helpers\n\ninit_params = nn.Linear(2, 2)\n"
    unrelated = "import torch.nn as nn\n\ninit_params = [nn.Linear(2, 2)]\nprint(init_params)\n"
    files = {"helpers.py": HELPER, "train.py": IDLE, "report.py": unrelated}
    assert levels(project(tmp_path / "unseen", files), capsys) == {"helpers.py": ["low"]}
    # The same word in a file that imports the module may be its helper.
    files = {"helpers.py": HELPER, "train.py": IDLE, "report.py": local.replace("init_params =", "x = helpers.init_params\ny =")}
    assert levels(project(tmp_path / "seen", files), capsys) == {"helpers.py": ["high"]}


def test_a_helper_re_exported_by_a_package_is_seen_by_its_importers(tmp_path, capsys):
    package = {"pkg/__init__.py": "from .helpers import init_params\n", "pkg/helpers.py": HELPER}
    caller = CALLER.replace("from helpers import", "from pkg import")
    assert levels(project(tmp_path / "named", {**package, "train.py": caller}), capsys) == {"pkg/helpers.py": ["high"]}
    star = {"pkg/__init__.py": "from .helpers import *\n", "pkg/helpers.py": HELPER}
    caller = "import torch.nn as nn\nfrom pkg import *\n\nnet = nn.Linear(2, 2)\ninit_params(net)\n"
    assert levels(project(tmp_path / "star", {**star, "train.py": caller}), capsys) == {"pkg/helpers.py": ["high"]}


def test_a_name_imported_from_its_own_package_is_seen(tmp_path, capsys):
    # ``from . import init_params`` names no module: the package's ``__init__`` is where it comes from.
    package = {
        "pkg/__init__.py": HELPER,
        "pkg/train.py": "import torch.nn as nn\nfrom . import init_params\n\nnet = nn.Linear(2, 2)\ninit_params(net)\n",
        "run.py": "import pkg.train\n",
    }
    assert levels(project(tmp_path, package), capsys) == {"pkg/__init__.py": ["high"]}


def test_a_form_no_draw_has_read_stays_where_the_rule_put_it(tmp_path, measured_levels):
    # TL206's medium findings are shown at high by the level table; a BCELoss an option picks among branches is a
    # form no validation draw has read yet, so it stays at medium.
    source = (Path(__file__).resolve().parent.parent / "fixtures/TL206/checker/bad_loss_chosen_by_option.py").read_text()
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    from cli_support import check_json

    _, items, _ = check_json("--select", "TL206", "--confidence-level", "low", "--no-cache", ".", cwd=tmp_path)
    assert [(item["line"], item["confidence"]) for item in items] == [(19, "medium"), (33, "medium")]


# A class with a helper method: ``Trainer().fit()`` runs; ``load`` is written nowhere else.
TRAINER = (
    "import torch.nn.init as init\n"
    "\n"
    "\n"
    "class Trainer{bases}:\n"
    "    def fit(self, net):\n"
    "        return net\n"
    "\n"
    "    def load(self, net):\n"
    "        init.kaiming_normal(net.weight)\n"
)
RUNNER = "import torch.nn as nn\nfrom trainer import Trainer\n\nTrainer().fit(nn.Linear(2, 2))\n"


def test_a_method_the_project_never_names_is_shown_at_low(tmp_path, capsys):
    # d19 and d25: a ``load_model`` method nothing calls, in a class the program uses
    files = {"trainer.py": TRAINER.format(bases=""), "train.py": RUNNER}
    assert levels(project(tmp_path / "plain", files), capsys) == {"trainer.py": ["low"]}
    files = {"trainer.py": TRAINER.format(bases="(object)"), "train.py": RUNNER + "Trainer().load(None)\n"}
    assert levels(project(tmp_path / "called", files), capsys) == {"trainer.py": ["high"]}


def test_a_method_a_framework_or_a_computed_name_may_call_keeps_its_level(tmp_path, capsys):
    # a base from outside the file may call its hooks by name (``training_step``, ``reset_parameters``)
    framework = "import torch.nn as nn\n" + TRAINER.format(bases="(nn.Module)")
    assert levels(project(tmp_path / "framework", {"trainer.py": framework, "train.py": RUNNER}), capsys) == {"trainer.py": ["high"]}
    # ``getattr(self, "on_" + event)`` may reach any method
    dispatch = RUNNER + "import sys\ngetattr(Trainer(), sys.argv[1])(None)\n"
    files = {"trainer.py": TRAINER.format(bases=""), "train.py": dispatch}
    assert levels(project(tmp_path / "dispatch", files), capsys) == {"trainer.py": ["high"]}
    # a base class of the same file that calls ``self.load`` keeps its override alive
    based = TRAINER.format(bases="(Base)").replace(
        "class Trainer", "class Base:\n    def run(self):\n        self.load(None)\n\n\nclass Trainer"
    )
    runner = RUNNER + "Trainer().run()\n"
    assert levels(project(tmp_path / "based", {"trainer.py": based, "train.py": runner}), capsys) == {"trainer.py": ["high"]}


def test_a_module_path_in_an_import_is_no_use_of_a_class_of_that_name(tmp_path, capsys):
    # d21: a notebook imports ``from student.Net import Net`` and never builds one (only commented out)
    model = "import torch.nn.init as init\n\n\nclass Net:\n    def __init__(self, net):\n        init.kaiming_normal(net.weight)\n"
    notebook = json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                   "source": ["from student.Net import Net\n", "# model = Net(layer)\n", "print(1)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    })
    files = {"student/__init__.py": "", "student/Net.py": model, "run.ipynb": notebook}
    assert levels(project(tmp_path / "idle", files), capsys) == {"student/Net.py": ["low"]}
    files["run.ipynb"] = notebook.replace("# model = Net(layer)", "model = Net(layer)")
    assert levels(project(tmp_path / "built", files), capsys) == {"student/Net.py": ["high"]}


def _all_levels(project: Path, capsys) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for code in ("TL601", "TL602"):
        for item in project_findings(project, code, capsys):
            found.setdefault(f"{item['path'].removeprefix('./')}:{item['line']}:{code}", []).append(item["confidence"])
    return found


def test_a_file_python_does_not_compile_runs_nothing_but_its_syntax_error_is_shown(tmp_path, capsys):
    # d27: train.py writes ``x.cuda(async=True)`` (a SyntaxError since Python 3.7) and is the only builder of a
    # model whose init calls ``init.kaiming_normal``; its own Variable lines never run either
    legacy = (
        "import torch\nfrom torch.autograd import Variable\nfrom helpers import init_params\n\n\n"
        "def step(x):\n    x = x.cuda(async=True)\n    return Variable(x)\n\n\n"
        "if __name__ == '__main__':\n    init_params(torch.nn.Linear(2, 2))\n    step(torch.ones(1))\n"
    )
    found = _all_levels(project(tmp_path / "legacy", {"helpers.py": HELPER, "train.py": legacy}), capsys)
    assert found == {"helpers.py:7:TL602": ["low"], "train.py:7:TL601": ["high"], "train.py:8:TL602": ["low"]}
    # a script that imports a module Python does not compile dies at that import; the module's syntax error
    # still breaks the run
    importer = "import torch.nn as nn\nfrom legacy import step\nfrom helpers import init_params\n\ninit_params(nn.Linear(2, 2))\n"
    files = {"helpers.py": HELPER, "legacy.py": legacy.split("\n\nif __name__")[0] + "\n", "train.py": importer}
    found = _all_levels(project(tmp_path / "imported", files), capsys)
    assert found == {"helpers.py:7:TL602": ["low"], "legacy.py:7:TL601": ["high"], "legacy.py:8:TL602": ["low"]}
    # the same program written for Python 3 keeps every level
    modern = {name: text.replace("async=True", "non_blocking=True") for name, text in files.items()}
    found = _all_levels(project(tmp_path / "modern", modern), capsys)
    assert found == {"helpers.py:7:TL602": ["high"], "legacy.py:8:TL602": ["low"]}  # Variable: low by the rule


def _notebook(*cells: str) -> str:
    return json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": [cell]} for cell in cells],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    })


def test_a_notebook_stops_at_an_import_its_package_cannot_satisfy(tmp_path, capsys):
    # d29: notebooks/experiments.ipynb imports FNO.fno_2d_time; FNO/ (a folder without __init__.py) never held it
    use = "import torch.nn as nn\nimport torch.nn.init as init\ninit.kaiming_normal(nn.Linear(2, 2).weight)\n"
    files = {
        "FNO/PyTorch/fno.py": "X = 1\n",
        "notebooks/run.ipynb": _notebook(use, "from FNO.fno_2d_time import FNO2DTime\n", use),
    }
    found = _all_levels(project(tmp_path / "missing", files), capsys)
    assert found == {"notebooks/run.ipynb:3:TL602": ["high", "low"]}  # the cell before the import runs, the one after does not
    # the module there: every cell runs
    files["FNO/fno_2d_time.py"] = "FNO2DTime = object\n"
    found = _all_levels(project(tmp_path / "present", files), capsys)
    assert found == {"notebooks/run.ipynb:3:TL602": ["high", "high"]}
    # a top-level module of that name may hold anything: nothing is said
    files = {"FNO.py": "fno_2d_time = None\n", "notebooks/run.ipynb": _notebook(use, "from FNO.fno_2d_time import FNO2DTime\n", use)}
    found = _all_levels(project(tmp_path / "module", files), capsys)
    assert found == {"notebooks/run.ipynb:3:TL602": ["high", "high"]}


def test_a_call_quoted_out_or_named_in_a_docstring_reaches_nothing(tmp_path, capsys):
    # The only call sits in a string statement (code an author turned off by quoting it), the only other mention in
    # a docstring: nothing that runs calls the helper.
    quoted = (
        "import torch.nn as nn\n"
        "from helpers import init_params\n"
        "\n"
        "\n"
        "def build():\n"
        '    """Builds the net; init_params is not applied any more."""\n'
        "    net = nn.Linear(2, 2)\n"
        "    '''\n"
        "    init_params(net)\n"
        "    '''\n"
        "    return net\n"
        "\n"
        "\n"
        "build()\n"
    )
    assert levels(project(tmp_path, {"helpers.py": HELPER, "train.py": quoted}), capsys) == {"helpers.py": ["low"]}


def test_a_string_that_is_a_value_still_names_what_it_holds(tmp_path, capsys):
    # A triple-quoted string assigned or passed is a value the program may run (``exec``): its words still count,
    # and a quote pairs with its own opening one (the string value before the quoted-out block is no block).
    valued = (
        "import torch.nn as nn\n"
        "from helpers import init_params\n"
        "\n"
        'SOURCE = """\n'
        "init_params(net)\n"
        '"""\n'
        "net = nn.Linear(2, 2)\n"
        "exec(SOURCE)\n"
    )
    assert levels(project(tmp_path, {"helpers.py": HELPER, "train.py": valued}), capsys) == {"helpers.py": ["high"]}


# A script whose branches literals or switches decide: TL602 finds each ``init.kaiming_normal`` at ``high``.
CONSTANT_BRANCHES = (
    "import torch.nn as nn\n"
    "import torch.nn.init as init\n"
    "\n"
    "USE_ORTHOGONAL = False\n"
    "\n"
    "\n"
    "def build(flag=False):\n"
    "    net = nn.Linear(2, 2)\n"
    "    if False:\n"
    "        init.kaiming_normal(net.weight)  # off\n"
    "    if flag and 0:\n"
    "        init.kaiming_normal(net.weight)  # off: ``and`` with a false literal\n"
    "    if True:\n"
    "        pass\n"
    "    else:\n"
    "        init.kaiming_normal(net.weight)  # off: the test before it always holds\n"
    "    if 'a' == 'b':\n"
    "        init.kaiming_normal(net.weight)  # off\n"
    "    if USE_ORTHOGONAL:\n"
    "        init.kaiming_normal(net.weight)  # a switch the user edits: kept\n"
    "    if flag or not True:\n"
    "        init.kaiming_normal(net.weight)  # a parameter decides: kept\n"
    "    while False:\n"
    "        init.kaiming_normal(net.weight)  # off\n"
    "    while net is None:\n"
    "        pass\n"
    "    else:\n"
    "        init.kaiming_normal(net.weight)  # a loop's else: kept\n"
    "    return net\n"
    "\n"
    "\n"
    "build()\n"
)


def _lines_by_level(project_path: Path, capsys) -> Dict[int, str]:
    return {item["line"]: item["confidence"] for item in project_findings(project_path, "TL602", capsys)}


def test_a_branch_literals_turn_off_is_unreached_and_a_switch_is_not(tmp_path, capsys):
    found = _lines_by_level(project(tmp_path, {"train.py": CONSTANT_BRANCHES}), capsys)
    assert found == {10: "low", 12: "low", 16: "low", 18: "low", 20: "high", 22: "high", 24: "low", 28: "high"}


_BLOCK = (
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(2, 2)\n"
    "        init.kaiming_normal(self.fc.weight)\n"
)
# The same class twice: the first is replaced before anything builds it.
REPLACED = "import torch.nn as nn\nimport torch.nn.init as init\n\n\n" + _BLOCK + "\n\n" + _BLOCK + "\n\nnet = Block()\n"


def test_a_definition_a_later_one_of_its_name_replaces_is_unreached(tmp_path, capsys):
    assert _lines_by_level(project(tmp_path, {"train.py": REPLACED}), capsys) == {9: "low", 16: "high"}


def test_a_definition_used_before_its_replacement_keeps_its_level(tmp_path, capsys):
    # a top-level statement between the two builds the first one
    text = REPLACED.replace("\n\n\nclass Block", "\nfirst = Block()\n\n\nclass Block", 2).replace("\nfirst = Block()", "", 1)
    assert "first = Block()" in text
    assert set(_lines_by_level(project(tmp_path, {"train.py": text}), capsys).values()) == {"high"}


@pytest.mark.parametrize(
    "test, expected",
    [
        ("False", False), ("0", False), ("None", False), ("''", False), ("()", False), ("1", True), ("'x'", True),
        ("not False", True), ("x and False", False), ("x or True", True), ("x and True", None), ("False or x", None),
        ("1 == 1.0", True), ("'a' != 'a'", False), ("None is None", True), ("'a' in ('a', 'b')", True),
        ("1 < 2", None), ("x", None), ("DEBUG", None), ("x == 1", None), ("1 is 1", None),
    ],
)
def test_the_truth_of_a_test_made_of_literals(test, expected):
    import libcst as cst

    from torchlint.analysis.model.constant_branches import truth

    assert truth(cst.parse_expression(test)) is expected


def test_a_name_written_only_under_if_false_is_no_use(tmp_path, capsys):
    # d55: an optimizer wrapper built only in a block an author turned off with ``if False:``
    helper = HELPER
    off = "import torch.nn as nn\nfrom helpers import init_params\n\nnet = nn.Linear(2, 2)\nif False:\n    init_params(net)\n"
    assert levels(project(tmp_path / "off", {"helpers.py": helper, "train.py": off}), capsys) == {"helpers.py": ["low"]}
    on = off.replace("if False:", "if True:")
    assert levels(project(tmp_path / "on", {"helpers.py": helper, "train.py": on}), capsys) == {"helpers.py": ["high"]}
