"""Star imports: names a file binds nowhere resolve through its `from m import *` (analysis/ast_names.StarImports),
in the LibCST import table, the pre-pass and the project index alike."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst

from torchlint import config
from torchlint.analysis.model import project_index
from torchlint.analysis.model.ast_names import StarImports
from torchlint.analysis.model.project_index import file_context
from torchlint.prepass import Scan


def test_a_library_star_import_binds_every_name_but_builtins_and_the_files_own():
    stars = StarImports(["torch"], {"model", "load_json"})
    assert stars.resolve("load") == "torch.load"
    assert stars.resolve("LongTensor") == "torch.LongTensor"
    assert stars.resolve("range") is None and stars.resolve("len") is None  # builtins
    assert stars.resolve("model") is None  # bound by the file itself
    assert stars.resolve("_private") is None


def test_the_later_star_import_wins_and_a_project_module_binds_only_what_it_exports():
    exported = {"torch": "torch", "F": "torch.nn.functional", "helper": "utils.helper"}

    def lookup(module, name):
        return (True, exported.get(name)) if module == "utils" else (False, None)

    stars = StarImports(["numpy", "utils"], set(), lookup)
    assert stars.resolve("torch") == "torch"
    assert stars.resolve("F") == "torch.nn.functional"
    assert stars.resolve("load") == "numpy.load"  # not exported by utils: the earlier star import's
    assert StarImports(["torch", "numpy"], set()).resolve("load") == "numpy.load"


def _write(root: Path, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return project_index.ProjectIndex([str(p) for p in root.rglob("*.py")])


def test_project_exports_follow_all_chains_and_relative_imports(tmp_path):
    index = _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .common import *\n",
            "pkg/common.py": """
                import torch
                from torch.nn import functional as F
                from .deep import *
                __all__ = ["torch", "F", "Net", "load"]
                class Net:
                    pass
            """,
            "pkg/deep.py": "from torch.serialization import *\n_hidden = 1\n",
        },
    )
    assert index.star_lookup("pkg", "torch") == (True, "torch")
    assert index.star_lookup("pkg", "F") == (True, "torch.nn.functional")
    assert index.star_lookup("pkg", "Net") == (True, "pkg.common.Net")
    assert index.star_lookup("pkg", "load") == (True, "torch.serialization.load")  # through deep.py's star import
    assert index.star_lookup("pkg", "os") == (True, None)  # not in __all__
    assert index.star_lookup("pkg.deep", "_hidden") == (True, None)
    assert index.star_lookup("torch", "load") == (False, None)  # not a module of the project


def test_a_name_is_looked_up_reading_only_the_modules_on_its_way(tmp_path):
    files = {f"pkg/m{n}.py": f"def f{n}():\n    pass\n" for n in range(20)}
    files["pkg/__init__.py"] = "".join(f"from .m{n} import *\n" for n in range(20))
    index = _write(tmp_path, files)
    assert index.star_lookup("pkg", "f19") == (True, "pkg.m19.f19")
    assert index.parsed_files == 2  # the package and the last module it star-imports
    assert index.star_lookup("pkg", "f0") == (True, "pkg.m0.f0")


def test_the_file_context_and_the_prepass_resolve_through_a_project_star_import(tmp_path):
    index = _write(tmp_path, {"utils.py": "import torch\nimport torch.nn as nn\n"})
    source = "from utils import *\n\ndef f(p):\n    return torch.load(p), nn.Linear(2, 2)\n"
    path = str(tmp_path / "main.py")
    with project_index.activated(index):
        context = file_context(path, source, cst.parse_module(source), config.Settings(enabled=frozenset()))
        scan = Scan(path, source, ast.parse(source))
    assert context.qualified_name(cst.parse_expression("torch.load")) == "torch.load"
    assert context.qualified_name(cst.parse_expression("nn.Linear")) == "torch.nn.Linear"
    assert context.qualified_name(cst.parse_expression("p")) is None
    assert "torch.load" in scan.regions[1].qualified_calls
    # Without an index the module's names are unknown: `utils` is taken as a library, so `torch` is `utils.torch`.
    alone = file_context("main.py", source, cst.parse_module(source), config.Settings(enabled=frozenset()))
    assert alone.qualified_name(cst.parse_expression("torch.load")) == "utils.torch.load"


def test_a_class_whose_base_comes_through_a_star_import():
    facts = project_index.facts_of_source("from torch.nn import *\n\n\nclass Net(Module):\n    pass\n", "m.py")
    assert facts.classes["Net"].bases == ("torch.nn.Module",)


def test_a_model_class_reached_through_a_star_import_reaches_its_activation(tmp_path, capsys):
    # d31: ``from dcgan import *`` brings the Discriminator whose Sequential ends in nn.Sigmoid; the pre-pass read
    # only the names a file imports one by one, so it skipped the file where nn.BCELoss takes that output
    from fixture_support import project_findings

    (tmp_path / "nets.py").write_text(
        "import torch.nn as nn\n\n\nclass Discriminator(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.main = nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())\n\n"
        "    def forward(self, x):\n        return self.main(x).view(-1)\n",
        encoding="utf-8",
    )
    train = (
        "import torch\nimport torch.nn as nn\n{imports}\n\nnet = Discriminator()\ncriterion = nn.BCELoss()\n"
        "loss = criterion(net(torch.randn(8, 4)), torch.ones(8))\nloss.backward()\n"
    )
    for imports in ("from nets import *", "from nets import Discriminator"):
        (tmp_path / "train.py").write_text(train.format(imports=imports), encoding="utf-8")
        found = [(item["path"].removeprefix("./"), item["line"]) for item in project_findings(tmp_path, "TL206", capsys)]
        assert found == [("train.py", 7)], imports
