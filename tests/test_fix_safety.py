"""A numerics fix calls a tensor method (``clamp_min``, ``F.normalize``) on the operand only where the code shows the
operand to be a tensor (analysis/values/fixes.py operand_is_tensor): NumPy arrays, pandas frames and Python numbers
have none, and a file that imports torch holds them too (on d17-d22 the fixes on operands of unknown kind read 19
wrong, 7 right)."""
from __future__ import annotations

from fixture_support import settings_for
from torchlint import engine

STANDARDIZE = "def standardize(values):\n    return (values - values.mean()) / values.std()\n"


def findings(text: str):
    return engine.lint_text(text, "prep.py", settings_for(["TL104"])).findings


def test_an_operand_of_unknown_kind_in_a_torch_file_is_reported_without_a_fix():
    (finding,) = findings("import torch\n\n\n" + STANDARDIZE)
    assert finding.fix is None


def test_an_operand_the_code_shows_to_be_a_tensor_gets_the_clamp():
    shown = STANDARDIZE.replace("def standardize(values):", "def standardize(values: torch.Tensor):")
    (finding,) = findings("import torch\n\n\n" + shown)
    assert [edit.content for edit in finding.fix.edits] == [".clamp_min(1e-6)"]


def test_the_same_operand_in_a_file_without_torch_is_reported_without_a_fix():
    (finding,) = findings("import numpy as np\n\n\n" + STANDARDIZE)
    assert finding.fix is None


def test_numpy_and_pandas_values_are_no_tensors():
    text = (
        "import numpy as np\nimport pandas as pd\nimport torch\n\n\n"
        "def load(path):\n"
        "    frame = pd.read_csv(path)\n"
        "    frame = (frame - frame.mean()) / frame.std()\n"
        "    points = np.asarray(frame.values)\n"
        "    return torch.tensor(points / points.std())\n"
    )
    assert findings(text) == []


def test_a_spelling_only_torch_has_shows_a_tensor():
    # ``dim=`` (NumPy and pandas say ``axis``) and ``.sqrt()`` (no NumPy or pandas method) are tensor spellings
    keyword = "import torch\n\n\ndef standardize(values):\n    return (values - values.mean()) / values.std(dim=0)\n"
    (finding,) = findings(keyword)
    assert [edit.content for edit in finding.fix.edits] == [".clamp_min(1e-6)"]
    axis = keyword.replace("values.std(dim=0)", "values.std(axis=0)")
    (finding,) = findings(axis)
    assert finding.fix is None
