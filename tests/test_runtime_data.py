"""Runtime proofs for the TL4xx data rules: the bad snippet really fails under torch,
and the codemod's own output (engine.fix_text at test time) does not."""
from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from torchlint import config, engine, registry  # noqa: E402


def fixed(source: str, *codes: str, unsafe: bool = True) -> str:
    settings = config.Settings(enabled=registry.expand_selectors(codes))
    result = engine.fix_text(source, "snippet.py", settings, unsafe=unsafe)
    assert result.applied > 0, "the codemod changed nothing"
    assert not [f for f in result.result.findings if f.code in codes], "findings remain after the fix"
    return result.text


def run(source: str, **namespace):
    exec(compile(source, "snippet.py", "exec"), namespace)
    return namespace


# -- TL405 unknown-torch-keyword --------------------------------------------------------


SEED_LOAD = textwrap.dedent(
    """
    import torch

    def restore(model, path):
        model.load_state_dict(
            torch.load(
                path,
                map_locat='cpu'
            )
        )
        return model
    """
)


def test_tl405_misspelt_load_keyword_raises_and_the_rename_loads(tmp_path):
    source_model = torch.nn.Linear(3, 2)
    path = tmp_path / "ckpt.pt"
    torch.save(source_model.state_dict(), path)

    bad = run(SEED_LOAD)
    with pytest.raises(TypeError, match="unexpected keyword argument 'map_locat'"):
        bad["restore"](torch.nn.Linear(3, 2), str(path))

    after = fixed(SEED_LOAD, "TL405")
    assert "map_location='cpu'" in after
    restored = run(after)["restore"](torch.nn.Linear(3, 2), str(path))
    x = torch.randn(4, 3)
    assert torch.equal(restored(x), source_model(x))


LOADER = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    def first_batch(features):
        loader = DataLoader(TensorDataset(features), batchsize=4, shuffel=False)
        return next(iter(loader))[0]
    """
)


def test_tl405_misspelt_constructor_keywords_raise_and_the_renames_run():
    features = torch.arange(24.0).reshape(8, 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        run(LOADER)["first_batch"](features)
    batch = run(fixed(LOADER, "TL405"))["first_batch"](features)
    assert torch.equal(batch, features[:4])


FREEZE = textwrap.dedent(
    """
    import torch

    def train_head_only(model, x, y):
        for p in model[0].parameters():
            p.require_grad = False
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return model
    """
)


def _two_layers():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))


def test_tl405_require_grad_typo_freezes_nothing_and_the_fix_freezes():
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    bad_model = _two_layers()
    before = bad_model[0].weight.detach().clone()
    run(FREEZE)["train_head_only"](bad_model, x, y)
    assert not torch.equal(bad_model[0].weight, before), "the typo should leave the layer trainable"

    after = fixed(FREEZE, "TL405")
    assert "p.requires_grad = False" in after
    good_model = _two_layers()
    assert torch.equal(good_model(x), _two_layers()(x))  # same forward values before training
    run(after)["train_head_only"](good_model, x, y)
    assert torch.equal(good_model[0].weight, before), "the frozen layer must not move"
    assert not torch.equal(good_model[1].weight, _two_layers()[1].weight), "the head still trains"


TRAINABLE = textwrap.dedent(
    """
    import torch

    def make_scale():
        scale = torch.ones(1)
        scale.require_grad = True
        return scale
    """
)


def test_tl405_require_grad_true_typo_trains_nothing():
    scale = run(TRAINABLE)["make_scale"]()
    assert scale.requires_grad is False
    with pytest.raises(RuntimeError, match="does not require grad"):
        (scale * 2).sum().backward()
    scale = run(fixed(TRAINABLE, "TL405"))["make_scale"]()
    (scale * 2).sum().backward()
    assert torch.equal(scale.grad, torch.tensor([2.0]))


def test_tl405_signature_table_is_generated_from_this_torch():
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tools"))
    try:
        import gen_signatures
    finally:
        sys.path.remove(str(root / "tools"))
    stored = json.loads((root / "torchlint" / "data" / "torch_signatures.json").read_text(encoding="utf-8"))
    if stored["torch_version"] != torch.__version__.split("+")[0]:
        pytest.skip(f"table made from torch {stored['torch_version']}, installed {torch.__version__}")
    assert gen_signatures.build() == stored
    # The misspelling of the seed is not accepted; the real name is.
    assert "map_locat" not in stored["apis"]["torch.load"] and "map_location" in stored["apis"]["torch.load"]
