"""A notebook's fix under torch: the Jupyter-saved notebook (tests/data/softmax_nan.ipynb) computes an
infinite loss and a NaN gradient (its saved output shows them); after ``torchlint check --fix`` its code,
cells concatenated, computes a finite loss and gradient, and the same log-probabilities on ordinary inputs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cli_support import isolate, torchlint  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def code_of(path: Path) -> list:
    """The code cells' sources, with the lines IPython would take as escapes dropped (this notebook's
    magics all stand alone on their lines: %..., !..., name?); a plain filter, not torchlint's masking."""
    sources = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        sources.append("\n".join(line for line in lines if not line.lstrip().startswith(("%", "!")) and not line.endswith("?")))
    return sources


def run(sources: list) -> dict:
    namespace: dict = {"__name__": "notebook"}
    exec(compile("\n".join(sources), "notebook", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def fixed_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    isolate(folder)
    shutil.copy(DATA / "softmax_nan.ipynb", folder / "softmax_nan.ipynb")
    proc = torchlint("check", "--fix", "softmax_nan.ipynb", cwd=folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "softmax_nan.ipynb"


def test_the_saved_notebook_shows_the_bug():
    outputs = [
        "".join(output.get("text", ""))
        for cell in json.loads((DATA / "softmax_nan.ipynb").read_text(encoding="utf-8"))["cells"]
        for output in cell.get("outputs", ())
    ]
    assert any("perte : inf" in text and "nan" in text for text in outputs)


def test_the_notebook_code_gives_a_nan_gradient_and_the_fixed_code_does_not(fixed_notebook):
    bad = run(code_of(DATA / "softmax_nan.ipynb"))
    assert bad["nan_gradient"] and torch.isinf(bad["loss"])
    good = run(code_of(fixed_notebook))
    assert not good["nan_gradient"]
    assert torch.isfinite(good["loss"]) and torch.isfinite(good["logits"].grad).all()
    assert good["loss"].item() == pytest.approx(400.0)  # -log_softmax at -200 against a logit of 200


def test_the_fixed_cell_computes_the_same_log_probabilities_on_ordinary_inputs(fixed_notebook):
    bad_cells, good_cells = code_of(DATA / "softmax_nan.ipynb"), code_of(fixed_notebook)
    assert bad_cells[2] != good_cells[2] and bad_cells[:2] == good_cells[:2] and bad_cells[3:] == good_cells[3:]
    torch.manual_seed(0)
    logits = torch.randn(8, 5)
    results = []
    for cell in (bad_cells[2], good_cells[2]):
        namespace = run([bad_cells[0]])  # the imports
        namespace["logits"] = logits.clone().requires_grad_(True)
        exec(compile(cell, "cell", "exec"), namespace)
        results.append((namespace["log_probs"].detach(), namespace["logits"].grad))
    (bad_values, bad_grad), (good_values, good_grad) = results
    assert torch.allclose(bad_values, good_values, atol=1e-6)
    assert torch.allclose(bad_grad, good_grad, atol=1e-6)
