"""The project index (torchlint/analysis/model/project_index.py) and the rules that look across files.

Multi-file fixtures live in fixtures/TLxxx/project/<case>/: a small project
whose files carry `# expect:` annotations. Each case is copied to a fresh
folder (its own project root, no configuration above it) and checked through
the CLI's own entry point, `torchlint.cli.main`, as a user would run it; the
same files are checked through the flake8 plugin, which builds its index
lazily for the file's project root.
"""
from __future__ import annotations

import ast
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from fixture_support import FIXTURES, expected_findings
from torchlint.rule import DEFAULT_CONFIDENCE_FLOOR
from torchlint import cli, config, engine, registry
from torchlint.analysis.model import project_index
from torchlint.flake8_plugin import TorchlintChecker

CASES = sorted(p for p in FIXTURES.glob("TL*/project/*") if p.is_dir())


def _copy(case: Path, tmp_path: Path) -> Path:
    target = tmp_path / case.name
    shutil.copytree(case, target)
    return target


def _expected(root: Path) -> Counter:
    expected: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        for (line, code, levels), count in expected_findings(path.read_text(encoding="utf-8")).items():
            if DEFAULT_CONFIDENCE_FLOOR.value in levels:  # the run is at the default floor: `:low` lines stay silent
                expected[(path.relative_to(root).as_posix(), line, code)] += count
    return expected


def _cli_findings(root: Path, capsys) -> Counter:
    code = cli.main(["check", "--output-format", "json", "--exit-zero", "--no-cache", str(root)])
    out = capsys.readouterr()
    assert code == 0, out.err
    found = Counter()
    for item in json.loads(out.out):
        found[(Path(item["path"]).resolve().relative_to(root.resolve()).as_posix(), item["line"], item["code"])] += 1
    return found


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_project_fixture_through_the_cli(case, tmp_path, capsys):
    root = _copy(case, tmp_path)
    expected = _expected(root)
    if case.name.startswith("good_"):
        assert not expected, "good_ project fixtures carry no expectations"
    else:
        assert expected, "a bad project fixture needs at least one `# expect:`"
    assert _cli_findings(root, capsys) == expected


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_project_fixture_through_flake8_plugin(case, tmp_path, monkeypatch):
    root = _copy(case, tmp_path)
    monkeypatch.chdir(root)  # flake8 runs from the project's root, which it then indexes (no configuration here)
    expected = _expected(root)
    found = Counter()
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        checker = TorchlintChecker(ast.parse(text), str(path), text.splitlines(keepends=True))
        for line, _column, message, _ in checker.run():
            found[(path.relative_to(root).as_posix(), line, message.split(" ", 1)[0])] += 1
    assert found == expected


def test_a_lone_text_sees_only_its_own_classes(tmp_path):
    # Without an index (engine.lint_text on one string) the imported class is unknown: silence, not a guess.
    root = _copy(FIXTURES / "TL403" / "project" / "package_reexport", tmp_path)
    train = root / "train.py"
    settings = config.Settings(enabled=frozenset({"TL403"}))
    assert engine.lint_text(train.read_text(), str(train), settings).findings == []
    index = project_index.ProjectIndex(sorted(str(p) for p in root.rglob("*.py")))
    with project_index.activated(index):
        findings = engine.lint_text(train.read_text(), str(train), settings).findings
    assert [(f.code, f.location.line) for f in findings] == [("TL403", 10)]
    assert project_index.active_project() is None  # the index is the run's only while it lasts


def test_cross_file_fix_adds_the_collator_in_the_training_script(tmp_path):
    root = _copy(FIXTURES / "TL403" / "project" / "package_reexport", tmp_path)
    train = root / "train.py"
    settings = config.Settings(enabled=frozenset({"TL403"}))
    with project_index.activated(project_index.ProjectIndex([str(p) for p in root.rglob("*.py")])):
        result = engine.fix_text(train.read_text(), str(train), settings, unsafe=True)
    assert result.applied == 1 and not result.result.findings
    assert "collate_fn=transformers.DataCollatorWithPadding(tokenizer)" in result.text
    assert "import transformers\n" in result.text


def test_module_names_and_relative_imports(tmp_path):
    root = _copy(FIXTURES / "TL403" / "project" / "relative_and_base", tmp_path)
    assert project_index.module_name(str(root / "proj" / "datasets" / "base.py")) == "proj.datasets.base"
    assert project_index.module_name(str(root / "proj" / "__init__.py")) == "proj"
    assert project_index.resolve_relative("proj.train", False, 1, "datasets.lowercase") == "proj.datasets.lowercase"
    assert project_index.resolve_relative("proj.datasets.lowercase", False, 2, None) == "proj"
    assert project_index.resolve_relative("proj.datasets", True, 1, "base") == "proj.datasets.base"
    assert project_index.resolve_relative("top", False, 3, None) is None


def test_a_module_is_found_by_the_names_a_script_inside_its_package_imports_it_by(tmp_path):
    # A repository whose root holds an __init__.py: its scripts, run from the root, import ``processors.features``.
    root = tmp_path / "my-repo"
    (root / "processors").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "processors" / "__init__.py").write_text("")
    (root / "processors" / "features.py").write_text("class Features:\n    pass\n")
    (root / "utils.py").write_text("class Features:\n    pass\n")
    index = project_index.ProjectIndex([str(p) for p in root.rglob("*.py")])
    assert index.module_of(str(root / "processors" / "features.py")) == "my-repo.processors.features"
    assert index.find_class("processors.features.Features") is not None
    assert index.find_class("my-repo.processors.features.Features") is not None
    # The full name keeps its file; a short name never takes another module's place.
    assert index.is_module("utils") and index.is_module("processors")
    assert not index.is_module("repo.processors.features") and not index.is_module("features")


def test_index_follows_reexports_and_bases_and_parses_only_what_it_needs(tmp_path):
    root = _copy(FIXTURES / "TL403" / "project" / "relative_and_base", tmp_path)
    # Unrelated modules in the same tree must not be read.
    for n in range(50):
        (root / "proj" / f"unrelated_{n}.py").write_text("class Thing:\n    def __getitem__(self, i):\n        return i\n")
    index = project_index.ProjectIndex([str(p) for p in root.rglob("*.py")])
    assert index.parsed_files == 0  # nothing is read before the first question
    found = project_index.dataset_item("proj.datasets.lowercase.LowercaseSentences", None, index)
    assert found is not None
    cls, item = found
    assert cls.name == "LowercaseSentences" and item.kind == "tensor"
    assert "split or tokenized text" in item.reason
    assert index.parsed_files == 2  # lowercase.py and base.py
    assert index.find_class("proj.datasets.base.Missing") is None


@pytest.mark.parametrize(
    "body, varies",
    [
        ("return self.tokenizer(self.texts[i], truncation=True)", True),
        ("return self.tokenizer(self.texts[i], padding=True)", True),
        ("return self.tokenizer(self.texts[i], padding='longest')", True),
        ("return self.tokenizer(self.texts[i], padding='max_length', truncation=True)", False),
        ("return self.tokenizer(self.texts[i], pad_to_max_length=True)", False),
        ("return self.tokenizer(self.texts[i], padding=self.padding)", False),
        ("return self.tokenizer(self.texts[i], **self.kwargs)", False),
        ("return torch.tensor(self.tokenizer.encode(self.texts[i]))", True),
        ("return torch.tensor(self.ids[i])", False),
        ("return self.data[self.starts[i]:self.starts[i + 1]]", True),
        ("return self.data[i : i + self.block_size]", False),
        ("return [self.vocab[w] for w in self.texts[i].split()]", True),
        ("return self.images[i], self.labels[i]", False),
        ("return torch.zeros(3, 224, 224)", False),
        ("return self.tokenizer_fn(self.texts[i])", False),
        ("return self.source_tokenizer(self.texts[i])", True),
        ("x = self.texts[i].split()\n        return torch.tensor([self.vocab[w] for w in x]), self.labels[i]", True),
        # an element of a collection __init__ builds: varies when its elements do
        ("return torch.tensor(self.encoded[i])", True),
        ("return torch.tensor(self.padded[i])", False),
        ("return torch.tensor(self.appended[i])", True),
        ("return {k: torch.tensor(v[i]) for k, v in self.unpadded_corpus.items()}", True),
        ("return {k: torch.tensor(v[i]) for k, v in self.padded_corpus.items()}", False),
        # images: the file's own size, unless resized to a size that is not derived from it
        ("return torch.as_tensor(np.array(Image.open(self.paths[i])))", True),
        ("return torch.as_tensor(np.array(Image.open(self.paths[i]).resize((64, 64))))", False),
        ("img = Image.open(self.paths[i])\n        w, h = img.size\n        return torch.as_tensor(img.resize((w // 2, h // 2)))", True),
        ("img = Image.open(self.paths[i])\n        img = img.resize((224, 224))\n        return torch.as_tensor(img)", False),
        ("return self.transform(Image.open(self.paths[i]))", False),
        ("return self._encode(self.texts[i])", True),
    ],
)
def test_item_shape(body, varies):
    init = (
        "    def __init__(self, texts, tokenizer):\n"
        "        self.encoded = [tokenizer.encode(t) for t in texts]\n"
        "        self.padded = [tokenizer.encode(t, padding='max_length', max_length=8) for t in texts]\n"
        "        self.appended = []\n"
        "        for t in texts:\n"
        "            self.appended.append(t.split())\n"
        "        self.unpadded_corpus = tokenizer(texts, truncation=True)\n"
        "        self.padded_corpus = tokenizer(texts, truncation=True, padding=True)\n"
        "    def _encode(self, text):\n"
        "        return self.tokenizer(text, truncation=True)\n"
    )
    source = f"import numpy as np\nfrom PIL import Image\nclass D:\n{init}    def __getitem__(self, i):\n        {body}\n"
    facts = project_index.facts_of_source(source, "d.py")
    shown = facts.classes["D"].item
    # A low item shape is a suspect (a callable nothing identifies), not a finding at a level that promises.
    assert (shown is not None and shown.confidence != "low") is varies
    if "self" not in body:
        getitem = ast.parse(source).body[2].body[-1]
        alone = project_index.item_shape(getitem)
        assert (alone is not None and alone.confidence != "low") is varies  # without the module's facts, the same answer


def test_dataset_items_of_arguments_and_libraries():
    from torchlint.analysis.model import dataset_items

    def parsed(text):
        return ast.parse(text, mode="eval").body

    assert dataset_items.collection_varies(parsed("tokenizer(texts, truncation=True)"))
    assert dataset_items.collection_varies(parsed("tokenizer(texts, truncation=True, padding=True)")) is None
    assert dataset_items.collection_varies(parsed("[line.split() for line in lines]"))
    assert dataset_items.collection_varies(parsed("labels")) is None
    keywords = {"packed": ast.Constant(False)}
    assert dataset_items.library_items("torchtune.datasets.alpaca_dataset", keywords)
    assert dataset_items.library_items("torchtune.datasets.alpaca_dataset", {})
    assert dataset_items.library_items("torchtune.datasets.alpaca_dataset", {"packed": ast.Constant(True)}) is None
    assert dataset_items.library_items("torchtune.datasets.alpaca_dataset", {"packed": None}) is None  # decided at run time
    assert dataset_items.library_items("torchvision.datasets.MNIST", {}) is None
    tokenize = ast.parse("def tokenize(batch):\n    return tokenizer(batch['text'], padding=True)\n").body[0]
    assert dataset_items.mapped_tokenizer_varies(tokenize, batched=True)  # each map batch padded to its own longest
    assert dataset_items.mapped_tokenizer_varies(tokenize, batched=False)
    fixed = ast.parse("lambda b: tokenizer(b['text'], padding='max_length', truncation=True)", mode="eval").body
    assert dataset_items.mapped_tokenizer_varies(fixed, batched=True) is None


def test_rule_is_registered_with_its_docs():
    rule = registry.rule_by_code_or_name("dataloader-variable-length")
    assert rule.code == "TL403"
    assert "Not seen" in rule.documentation()


def test_real_flake8_finds_the_dataset_in_another_module(tmp_path):
    # flake8's worker processes each build the index lazily for the file's project root.
    import subprocess
    import sys

    root = _copy(FIXTURES / "TL403" / "project" / "relative_and_base", tmp_path)
    command = [sys.executable, "-m", "flake8", "--isolated", "--select", "TL403", "--format=%(path)s:%(row)d:%(code)s", "."]
    completed = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 1, completed.stderr
    assert completed.stdout.split() == ["./proj/train.py:8:TL403"]


def test_every_call_of_a_function_is_found_by_name_attribute_and_alias(tmp_path):
    # calls.arguments_passed asks modules_calling for the modules that write ``name(``, then each module's calls
    # of that callee (indexed once per module); a module that only mentions the name is not parsed for it
    from torchlint.analysis.model.calls import arguments_passed

    (tmp_path / "lib.py").write_text("def build(size=3):\n    return size\n")
    (tmp_path / "direct.py").write_text("from lib import build\nbuild(4)\nbuild (size=5)\n")
    (tmp_path / "attribute.py").write_text("import lib\nlib.build(6)\n")
    (tmp_path / "alias.py").write_text("from lib import build as make\nfrom lib import build\nmake(7)\nbuild()\n")
    (tmp_path / "mention.py").write_text("NAME = 'build'\nrebuild(1)\n")
    index = project_index.ProjectIndex([str(p) for p in tmp_path.glob("*.py")])
    # (a module is listed under each name it goes by: its file's and its folder-qualified one)
    assert {f.module.rpartition(".")[2] for f in index.modules_calling("build")} == {"alias", "attribute", "direct", "lib"}
    facts = index.module_facts("lib")
    passed = arguments_passed(facts, facts.functions["build"], "size")
    values = {ast.literal_eval(value) for _, _, value in passed}
    assert values == {3, 4, 5, 6, 7}  # build() leaves the default


def test_a_call_that_leaves_a_required_parameter_out_passes_nothing(tmp_path):
    # d28: a second script calls train_model(model, data, optimizer) without the ``args`` the saver stores; that
    # call raises TypeError before the body runs, so what the other callers pass is what the body can hold
    from torchlint.analysis.model.calls import arguments_passed

    (tmp_path / "lib.py").write_text("def train(model, args, epochs=3):\n    return args\n")
    (tmp_path / "run.py").write_text("from lib import train\nimport argparse\ntrain(None, argparse.Namespace())\n")
    (tmp_path / "broken.py").write_text("from lib import train\ntrain(None)\n")
    index = project_index.ProjectIndex([str(p) for p in tmp_path.glob("*.py")])
    facts = index.module_facts("lib")
    passed = arguments_passed(facts, facts.functions["train"], "args")
    assert {ast.unparse(value) for _, _, value in passed} == {"argparse.Namespace()"}
    # a call that passes it twice stays unknown
    (tmp_path / "twice.py").write_text("from lib import train\ntrain(None, 1, args=2)\n")
    index = project_index.ProjectIndex([str(p) for p in tmp_path.glob("*.py")])
    facts = index.module_facts("lib")
    assert arguments_passed(facts, facts.functions["train"], "args") is None


def test_a_file_is_parsed_once_for_the_linter_and_the_index(tmp_path):
    (tmp_path / "model.py").write_text("class Net:\n    pass\n", encoding="utf-8")
    (tmp_path / "train.py").write_text("from model import Net\n", encoding="utf-8")
    model, train = str(tmp_path / "model.py"), str(tmp_path / "train.py")
    index = project_index.ProjectIndex([model, train])
    assert index.parsed_text(model, "class Net:\n    pass\n") is None  # not parsed yet
    # The linter's tree of a file is the one the index takes when a fact parses that module next...
    tree = ast.parse("class Net:\n    pass\n")
    index.adopt(model, "class Net:\n    pass\n", tree)
    assert index.module_facts("model").tree is tree and index.parsed_files == 1
    # ...and the index's tree is the linter's when the text is the one the index read.
    assert index.parsed_text(model, "class Net:\n    pass\n") is tree
    assert index.parsed_text(model, "class Net:\n    pass  # edited\n") is None
    # A tree of another text (the file as edited in an editor) is never taken for the file on disk.
    index.adopt(train, "import os\n", ast.parse("import os\n"))
    assert index.module_facts("train").imports == {"Net": "model.Net"}


def test_a_loss_module_passed_by_callers_in_other_modules_is_reported_at_medium(tmp_path, capsys):
    """fixtures/TL611/criterion_passed_by_another_module: ``train(..., criterion)`` in utils/train.py, called only
    from main.py with reducing torch losses (a local, a moved one built in the call, a module-level name). A form no
    validation draw has read blind yet: every annotation at ``medium``, none at the default floor."""
    from fixture_support import project_findings

    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "TL611" / "criterion_passed_by_another_module", root)
    expected = set()
    for path in sorted(root.rglob("*.py")):
        for (line, code, levels), _ in expected_findings(path.read_text(encoding="utf-8")).items():
            expected.add((path.name, line, code, "/".join(sorted(levels))))
    found = {(Path(item["path"]).name, item["line"], item["code"], item["confidence"]) for item in project_findings(root, "TL611", capsys)}
    assert expected == {("train.py", 10, "TL611", "medium"), ("train.py", 16, "TL611", "medium"), ("train.py", 22, "TL611", "medium")}
    assert found == expected


def test_a_loss_module_other_modules_pass_per_element_or_hand_on_is_no_finding(tmp_path, capsys):
    """fixtures/TL611/good_criterion_passed_per_element: one caller passes ``reduction="none"``, another module hands
    ``evaluate`` on as a value (its other callers are not shown): nothing at any level."""
    from fixture_support import project_findings

    root = tmp_path / "project"
    shutil.copytree(FIXTURES / "TL611" / "good_criterion_passed_per_element", root)
    assert project_findings(root, "TL611", capsys) == []
