"""The generated table of torch's API per release (torchlint/analysis/api/api_table.py).

Two kinds of test: the committed table agrees with the torch installed here
(its newest release), and facts observed in the dumps of older releases hold
(which release removed torch.solve, what is deprecated in favour of what).
"""
from __future__ import annotations

import copy
import importlib
import inspect
import json
import sys
import warnings
from pathlib import Path

import pytest

from torchlint.analysis.api import api_table
from torchlint.analysis.api.api_drift import change_of
from torchlint.analysis.api.api_table import (
    VERSIONS,
    api_entry,
    deprecated_in,
    exists_in,
    keyword_deprecated_in,
    keyword_removed_in,
    raises_when_called,
    removed_in,
)

ROOT = Path(__file__).resolve().parent.parent


def _present_in(version):
    return [name for name in api_table._table()[1] if exists_in(name, version)]


def _resolve(torch, qualified: str):
    """The object a table name stands for in the installed torch (AttributeError if it has none)."""
    if qualified.startswith("torch.Tensor."):
        return getattr(torch.Tensor, qualified.rsplit(".", 1)[1])
    module_name, _, attr = qualified.rpartition(".")
    try:
        return importlib.import_module(qualified)
    except ImportError:
        return getattr(importlib.import_module(module_name), attr)


@pytest.fixture(scope="module")
def installed_torch():
    torch = pytest.importorskip("torch")
    release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    if release != VERSIONS[-1]:
        pytest.skip(f"the table's newest release is {VERSIONS[-1]}, installed torch {torch.__version__}")
    return torch


# -- the table agrees with the installed torch ------------------------------------------


def test_every_name_the_newest_release_has_exists_in_installed_torch(installed_torch):
    present = _present_in(VERSIONS[-1])
    assert len(present) > 2000
    missing = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.set_vital warns that it is deprecated
        for name in present:
            try:
                _resolve(installed_torch, name)
            except AttributeError:
                missing.append(name)
    assert missing == []


@pytest.mark.parametrize(
    "name",
    [
        "torch.nn.functional.cross_entropy",
        "torch.utils.data.DataLoader",
        "torch.optim.AdamW",
        "torch.nn.Conv2d",
        "torch.optim.lr_scheduler.StepLR",
        "torch.utils.checkpoint.checkpoint",
        "torch.load",
    ],
)
def test_keywords_of_python_level_apis_match_their_signature(installed_torch, name):
    signature = inspect.signature(_resolve(installed_torch, name))
    accepted = {
        p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    entry = api_entry(name)
    newest = {k for k, (first, last) in entry.keywords.items() if first <= VERSIONS[-1] <= last}
    assert newest - {api_table.ANY_KEYWORD} == accepted
    assert (api_table.ANY_KEYWORD in newest) == takes_any


def test_keywords_of_builtins_include_the_documented_ones(installed_torch):
    # torch.sum has no Python signature: its keywords come from the docstring and the ATen schema.
    with pytest.raises((TypeError, ValueError)):
        inspect.signature(installed_torch.sum)
    assert {"input", "dim", "keepdim", "dtype"} <= set(api_entry("torch.sum").keywords)


def test_generator_check_finds_the_table_up_to_date_and_a_changed_one_stale(installed_torch):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_api_table
    finally:
        sys.path.remove(str(ROOT / "tools"))
    table = json.loads((ROOT / "torchlint" / "data" / "torch_api.json").read_text(encoding="utf-8"))
    fresh = gen_api_table.dump(table["apis"])
    assert gen_api_table.check(table, fresh) == []
    stale = copy.deepcopy(table)
    stale["apis"]["torch.linalg.solve"]["last"] = "2.12"
    del stale["apis"]["torch.nn.functional.cross_entropy"]["keywords"]["label_smoothing"]
    stale["apis"]["torch.range"].pop("deprecated")
    assert gen_api_table.check(stale, fresh) == [
        "torch.linalg.solve: table says absent in 2.13",
        "torch.nn.functional.cross_entropy: keywords differ: ['label_smoothing']",
        "torch.range: table says not deprecated in 2.13",
    ]


def test_removed_linalg_functions_are_tombstones_in_installed_torch(installed_torch):
    # The names still resolve in 2.x, but only to raise: the table counts them as gone.
    for name in ("solve", "lstsq", "eig", "matrix_rank", "symeig"):
        with pytest.raises(RuntimeError, match="removed"):
            getattr(installed_torch, name)(installed_torch.eye(2), installed_torch.eye(2))
        assert not exists_in(f"torch.{name}", VERSIONS[-1])


def test_the_table_marks_the_stubs_that_raise_and_only_those(installed_torch):
    # torch.autograd.variable left in 1.12 yet is still a function: calling it raises RuntimeError.
    with pytest.raises(RuntimeError):
        installed_torch.autograd.variable(installed_torch.ones(1))
    for name in ("torch.autograd.variable", "torch.solve", "torch.Tensor.symeig"):
        assert raises_when_called(name), name
    # Removed outright: reading the name fails, no stub.
    assert not hasattr(installed_torch, "nested_tensor")
    assert removed_in("torch.nested_tensor") is not None and not raises_when_called("torch.nested_tensor")
    assert not raises_when_called("torch.linalg.solve")


# -- facts observed in the dumps of the real releases ------------------------------------


def test_the_table_covers_1_11_to_1_13_and_every_2_x_release():
    assert VERSIONS[:3] == ((1, 11), (1, 12), (1, 13))
    assert [(2, minor) for minor in range(14)] == [v for v in VERSIONS if v[0] == 2]


@pytest.mark.parametrize(
    "name, removal, replacement",
    [
        # Observed in the dumps: 1.12 already replaced torch.solve with a function raising "... is now
        # removed" (torch/_linalg_utils.py), 1.13 did the same to the other three.
        ("torch.solve", (1, 12), "torch.linalg.solve"),
        ("torch.lstsq", (1, 13), "torch.linalg.lstsq"),
        ("torch.eig", (1, 13), "torch.linalg.eig"),
        ("torch.matrix_rank", (1, 13), "torch.linalg.matrix_rank"),
    ],
)
def test_old_linalg_functions_removed(name, removal, replacement):
    before = VERSIONS[VERSIONS.index(removal) - 1]
    assert exists_in(name, before) is True
    assert exists_in(name, removal) is False
    assert removed_in(name) == removal
    assert deprecated_in(name) == VERSIONS[0]  # deprecated (since 1.9) before the oldest release dumped
    assert api_entry(name).replacement == replacement


def test_symeig_removed_in_2_0():
    assert exists_in("torch.symeig", (1, 13)) is True
    assert exists_in("torch.symeig", (2, 0)) is False
    assert removed_in("torch.symeig") == (2, 0)
    assert api_entry("torch.symeig").replacement == "torch.linalg.eigh"
    # The method forwards to the same tombstone from 2.0 on.
    assert removed_in("torch.Tensor.symeig") == (2, 0)


@pytest.mark.parametrize(
    "name, replacement",
    [
        ("torch.range", "torch.arange"),
        ("torch.cholesky", "torch.linalg.cholesky"),
        ("torch.chain_matmul", "torch.linalg.multi_dot"),
        ("torch.qr", "torch.linalg.qr"),
    ],
)
def test_deprecated_but_present(name, replacement):
    entry = api_entry(name)
    assert removed_in(name) is None
    assert deprecated_in(name) == VERSIONS[0]  # deprecated before the oldest release dumped
    assert entry.replacement == replacement


def test_an_announced_deprecation_is_no_deprecation():
    # spectral_norm's docs say it "will be deprecated in a future version": torch 2.13 gives no warning.
    assert deprecated_in("torch.nn.utils.spectral_norm") is None
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_api_table
    finally:
        sys.path.remove(str(ROOT / "tools"))
    future = "Summary.\n\n.. note::\n    Please use the newer version. This function will be deprecated in a future version.\n"
    done = "Summary.\n\n.. warning::\n    This function is deprecated in favor of :func:`torch.linalg.qr`.\n"
    assert gen_api_table._docstring_deprecations("torch.nn.utils.spectral_norm", future, ())[0] is None
    assert gen_api_table._docstring_deprecations("torch.qr", done, ())[0] is not None


def test_cuda_amp_autocast_deprecated_in_2_4():
    assert deprecated_in("torch.cuda.amp.autocast") == (2, 4)
    assert api_entry("torch.cuda.amp.autocast").replacement == "torch.amp.autocast('cuda', args...)"


def test_linalg_solve_exists_in_every_release():
    assert all(exists_in("torch.linalg.solve", version) for version in VERSIONS)
    assert removed_in("torch.linalg.solve") is None
    assert deprecated_in("torch.linalg.solve") is None


def test_loss_reduction_keywords_are_deprecated_not_removed():
    for name in ("torch.nn.MSELoss", "torch.nn.functional.cross_entropy"):
        for keyword in ("size_average", "reduce"):
            assert keyword_deprecated_in(name, keyword) == VERSIONS[0]
            assert keyword_removed_in(name, keyword) is None
    assert api_entry("torch.nn.MSELoss").deprecated_keywords["size_average"].replacement == "reduction"
    assert keyword_deprecated_in("torch.nn.MSELoss", "reduction") is None


def test_lr_scheduler_verbose_deprecated_in_2_2_removed_in_2_7():
    assert keyword_deprecated_in("torch.optim.lr_scheduler.StepLR", "verbose") == (2, 2)
    assert keyword_removed_in("torch.optim.lr_scheduler.StepLR", "verbose") == (2, 7)


def test_unknown_names_are_unknown():
    assert api_entry("torch.no_such_function") is None
    assert removed_in("torch.no_such_function") is None
    assert exists_in("torch.no_such_function", (2, 0)) is None
    assert keyword_removed_in("torch.linalg.solve", "no_such_keyword") is None


# -- the lookups' rules, on a table made up here ----------------------------------------


@pytest.fixture
def made_up_table(monkeypatch):
    apis = {
        "torch.gone": {"first": "1.0", "last": "1.1", "keywords": {"x": ["1.0", "1.1"]}},
        "torch.kept": {
            "first": "1.0",
            "last": "1.2",
            "deprecated": "1.1",
            "replacement": "torch.new",
            "keywords": {"old": ["1.0", "1.0"], "swallowed": ["1.0", "1.0"], "**": ["1.1", "1.2"], "new": ["1.1", "1.2"]},
        },
        "torch.narrow": {"first": "1.0", "last": "1.2", "keywords": {"old": ["1.0", "1.0"]}},
    }
    monkeypatch.setattr(api_table, "_table", lambda: (((1, 0), (1, 1), (1, 2)), apis))
    api_table.api_entry.cache_clear()
    yield
    api_table.api_entry.cache_clear()


@pytest.mark.usefixtures("made_up_table")
def test_lookups_follow_the_intervals():
    assert removed_in("torch.gone") == (1, 2)
    assert removed_in("torch.kept") is None
    assert deprecated_in("torch.kept") == (1, 1) and deprecated_in("torch.gone") is None
    assert exists_in("torch.gone", (1, 1)) is True and exists_in("torch.gone", (1, 2)) is False
    assert exists_in("torch.gone", (0, 4)) is None and exists_in("torch.gone", (1, 3)) is None
    assert keyword_removed_in("torch.narrow", "old") == (1, 1)
    assert keyword_removed_in("torch.kept", "new") is None
    # Where **kwargs would take it, a keyword that left the signature may still be accepted.
    assert keyword_removed_in("torch.kept", "swallowed") is None
    assert api_entry("torch.kept").keywords["new"] == ((1, 1), (1, 2))


# -- torchvision's table (tools/gen_package_api.py, read from its wheels 0.2.2-0.28) ----------------------


def test_torchvision_releases_pair_with_torch_releases():
    assert api_table.release_text("torchvision.transforms.Scale", (1, 11)) == "torchvision 0.12 (torch 1.11)"
    assert api_table.release_text("torchvision.utils.save_image", (2, 0)) == "torchvision 0.15 (torch 2.0)"
    assert api_table.release_text("torch.solve", (1, 12)) == "torch 1.12"


@pytest.mark.parametrize(
    "name, removal",
    [
        ("torchvision.transforms.Scale", (1, 11)),
        ("torchvision.transforms.RandomSizedCrop", (1, 11)),
        ("torchvision.transforms.functional.scale", (1, 11)),
        ("torchvision.transforms.Resize", None),
        ("torchvision.utils.save_image", None),
    ],
)
def test_torchvision_removals(name, removal):
    assert removed_in(name) == removal
    assert exists_in(name, (1, 4)) is True


@pytest.mark.parametrize(
    "name, keyword, replacement",
    [
        ("torchvision.transforms.RandomRotation", "resample", "interpolation"),
        ("torchvision.transforms.RandomAffine", "resample", "interpolation"),
        ("torchvision.transforms.RandomAffine", "fillcolor", "fill"),
        ("torchvision.transforms.functional.rotate", "resample", "interpolation"),
        ("torchvision.utils.make_grid", "range", "value_range"),
        ("torchvision.utils.save_image", "range", "value_range"),  # save_image hands **kwargs to make_grid
    ],
)
def test_torchvision_keywords_deprecated_then_removed(name, keyword, replacement):
    from torchlint.analysis.api.signatures import accepted_keywords, renamed_keyword

    assert keyword_deprecated_in(name, keyword) == (1, 8)  # torchvision 0.9
    # taken at 0.9 (make_grid took it through **kwargs there: the table cannot say more than "not refused")
    assert api_table.keyword_at(name, keyword, (1, 8)).accepted is not False
    assert api_table.keyword_at(name, keyword, (2, 13)).accepted is False
    assert keyword not in accepted_keywords(name) and replacement in accepted_keywords(name)
    assert renamed_keyword(name, keyword) == replacement


def test_torchvision_classes_take_the_keywords_of_their_init_or_their_package_base():
    from torchlint.analysis.api.signatures import accepted_keywords

    assert accepted_keywords("torchvision.datasets.MNIST") >= {"root", "train", "transform", "download"}
    assert "train" not in accepted_keywords("torchvision.datasets.CelebA")
    assert accepted_keywords("torchvision.transforms.ToTensor") == frozenset()
    assert accepted_keywords("torchvision.transforms.NotAName") is None


def test_torchvision_table_agrees_with_the_installed_torchvision():
    """Where torchvision imports (not a test dependency: PyPI's wheel needs the CUDA build of torch)."""
    try:
        import torchvision  # noqa: F401
    except Exception as error:
        pytest.skip(f"torchvision does not import here: {type(error).__name__}: {error}")
    from torchlint.analysis.api.signatures import accepted_keywords

    newest = api_table._package_table("torchvision")[0][-1]
    release = api_table._package_table("torchvision")[2][newest]
    if not torchvision.__version__.startswith(release.rsplit(".", 1)[0]):
        pytest.skip(f"the table's newest torchvision is {release}, {torchvision.__version__} is installed")
    checked = 0
    for name, record in api_table._package_table("torchvision")[1].items():
        module, _, attribute = name.rpartition(".")
        present = hasattr(importlib.import_module(module), attribute)
        assert present == (api_table._version(record["last"]) == newest), name
        taken = accepted_keywords(name)
        if present and taken is not None:
            target = getattr(importlib.import_module(module), attribute)
            parameters = inspect.signature(target.__init__ if inspect.isclass(target) else target).parameters
            if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
                assert taken == frozenset(parameters) - {"self"}, name
                checked += 1
    assert checked > 100


def test_torchtext_legacy_names_and_the_end_of_the_package():
    assert removed_in("torchtext.data.Field") == (1, 8)  # torchtext 0.9 moved it to torchtext.legacy
    assert removed_in("torchtext.legacy.data.Field") == (1, 11)  # torchtext 0.12 dropped legacy
    assert removed_in("torchtext.data.get_tokenizer") == (2, 4)  # the last torchtext, 0.18, pairs with torch 2.3
    assert exists_in("torchtext.data.get_tokenizer", (2, 3)) is True
    assert api_table.release_text("torchtext.data.Field", (1, 8)) == "torchtext 0.9 (torch 1.8)"
    assert api_table.release_text("torchtext.vocab", (2, 4)) == (
        "torch 2.4 (no torchtext release pairs with it: the last, 0.18, pairs with torch 2.3)"
    )


@pytest.mark.parametrize(
    "name, replacement",
    [("torch.set_deterministic", "torch.use_deterministic_algorithms"), ("torch.is_deterministic", "torch.are_deterministic_algorithms_enabled")],
)
def test_determinism_switches_removed_before_the_oldest_release_dumped(name, replacement):
    assert not exists_in(name, VERSIONS[0])  # not in any release the table dumps: the record dates the removal
    change = change_of(name)
    assert change is not None and change.removed == (1, 10) and change.rename_to == replacement
    assert exists_in(replacement, VERSIONS[-1]) is True
