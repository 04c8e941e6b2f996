"""Notebooks as modules (torchlint/notebook.py): reading the JSON, masking IPython's escapes, locating
findings in cells, fixing only the cells that change and writing them in the file's own layout."""
from __future__ import annotations

import ast
import json
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from torchlint import config, engine, notebook
from torchlint.rule import Applicability, Edit, Fix

SETTINGS = config.resolve(None, config.Overrides(select=["ALL"]))
TL201 = "y = torch.log(F.softmax(x, dim=-1))"
FIXED_TL201 = "y = F.log_softmax(x, dim=-1)"
IMPORTS = "import torch\nimport torch.nn.functional as F"


def cells(*specs):
    """A notebook built from (kind, source) pairs, as a language server would pass its cells."""
    return notebook.Notebook([notebook.Cell(kind, source) for kind, source in specs])


def as_json(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def found(result, code=None):
    return [(f.cell.index, f.location.line, f.location.column, f.code) for f in result.findings if code in (None, f.code)]


# -- reading ------------------------------------------------------------------------------


def test_read_takes_list_and_string_sources_and_the_kernel_language():
    text = json.dumps(
        {
            "cells": [
                {"cell_type": "markdown", "metadata": {}, "source": ["# Titre\n", "été"]},
                {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": "import torch\nx = 1"},
            ],
            "metadata": {"language_info": {"name": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
        ensure_ascii=False,
    )
    nb = notebook.read(text)
    assert [(c.kind, c.source) for c in nb.cells] == [("markdown", "# Titre\nété"), ("code", "import torch\nx = 1")]
    assert nb.language == "python" and nb.is_python
    assert nb.cells[0].listed and not nb.cells[1].listed
    assert [value for _, _, value in nb.pieces(0)] == ["# Titre\n", "été"] and nb.pieces(1) == ()
    start, end = nb.span(1)
    assert json.loads(text[start:end]) == "import torch\nx = 1"


@pytest.mark.parametrize(
    "text, message, line",
    [
        ('{"cells": [}', "not valid JSON", 1),
        ("{\n \"nbformat\": 4,\n \"cells\": [\n", "not valid JSON", 4),
        ("[1, 2]", "JSON list, not an object", 1),
        ('{"nbformat": 3, "worksheets": []}', "nbformat 3 is not supported, only nbformat 4 (convert it with", 1),
        ('{"nbformat": 4, "cells": {}}', "'cells' is not a list", 1),
        ('{"nbformat": 4, "metadata": {}}', "'cells' is not a list", 1),
        ('{"nbformat": 4, "cells": [{"cell_type": "code"}]}', "cell 1 has no source", 1),
        ('{"nbformat": 4, "cells": [7]}', "cell 1 is not an object", 1),
        ('{"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}', "the source of cell 1 is not text", 1),
        ('{"metadata": {}}', "no 'nbformat' or 'cells' key", 1),
        ("", "not valid JSON", 1),
    ],
)
def test_read_names_what_is_wrong(text, message, line):
    with pytest.raises(notebook.NotebookError) as caught:
        notebook.read(text)
    assert message in caught.value.message
    assert caught.value.line == line


def test_a_notebook_of_another_language_is_not_checked():
    nb = new_notebook(metadata={"kernelspec": {"name": "ir", "display_name": "R", "language": "R"}})
    nb.cells = [new_code_cell("import torch\nimport torch.nn.functional as F\n" + TL201)]
    assert notebook.lint_text(as_json(nb), "r.ipynb", SETTINGS).findings == []
    nb.metadata = {"language_info": {"name": "python"}}
    assert found(notebook.lint_text(as_json(nb), "py.ipynb", SETTINGS)) == [(1, 3, 5, "TL201")]


# -- IPython's escapes ----------------------------------------------------------------------

MAGICS = """\
%matplotlib inline
!pip install -q torch
x?
?x
torch.log??
files = !ls -la
t = %timeit -o f()
!pip install a \\
    b
/print hello
,print a b
;print a b
for i in range(3):
    %time f(i)
"""


def test_escapes_are_masked_by_python_of_the_same_length():
    masked, lines = notebook._mask_escapes(MAGICS)
    assert lines == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]
    compile(masked, "<cell>", "exec")  # it parses
    before, after = MAGICS.splitlines(), masked.splitlines()
    assert [len(line) for line in before] == [len(line) for line in after]
    assert after[0] == "0#atplotlib inline"
    assert after[5] == "files = 0#s -la"
    assert after[8] == "#   b"  # a continuation line becomes a comment
    assert after[12] == before[12]  # code stays as it is
    assert after[13] == "    0#ime f(i)"


def test_lines_that_only_look_like_escapes_stay_code():
    code = '''\
values = [a
          , b]
ratio = (total
         / count)
label = ("%d items"
         % count)
doc = """
%matplotlib is not a magic here
!nor this
what?
"""
path = "C:\\\\temp" \\
    + "!x"
'''
    masked, lines = notebook._mask_escapes(code)
    assert lines == [] and masked == code


def test_automagics_are_masked_in_cells_that_do_not_parse_otherwise():
    # IPython runs ``pip install torch`` as %pip; a cell that parses keeps such names as Python.
    nb = cells(("code", "pip install -q torch\n" + IMPORTS), ("code", "ls = [1]\nls -la\n" + TL201), ("code", "retrun x"))
    result = notebook.check(nb, "n.ipynb", SETTINGS)
    assert found(result) == [(2, 3, 5, "TL201")]
    assert [(d.cell.index, d.message) for d in result.diagnostics] == [(3, "syntax error: invalid syntax")]
    (change,) = notebook.fix(nb, "n.ipynb", SETTINGS).cells
    assert change.index == 2 and change.after == "ls = [1]\nls -la\n" + FIXED_TL201


def test_a_python_cell_magic_is_masked_and_its_body_checked():
    nb = cells(("code", IMPORTS), ("code", "%%time\n" + TL201))
    assert found(notebook.check(nb, "n.ipynb", SETTINGS)) == [(2, 2, 5, "TL201")]


@pytest.mark.parametrize("magic", ["%%bash", "%%writefile train.py", "%%html", "%%sql"])
def test_a_cell_magic_of_another_language_is_left_alone(magic):
    nb = cells(("code", IMPORTS), ("code", f"{magic}\n{TL201}"))
    assert notebook.check(nb, "n.ipynb", SETTINGS).findings == []


def test_a_cell_of_another_language_in_vs_code_is_left_alone():
    nb = notebook.Notebook([notebook.Cell("code", IMPORTS), notebook.Cell("code", TL201, language="sql")])
    assert notebook.check(nb, "n.ipynb", SETTINGS).findings == []


# -- locations ------------------------------------------------------------------------------


def test_findings_name_their_cell_counting_every_cell_and_lines_within_it():
    nb = cells(
        ("markdown", "# Notes"),
        ("code", "%matplotlib inline\n" + IMPORTS),
        ("raw", "raw text"),
        ("code", "x = torch.randn(3)\n\n    \n" + TL201),
        ("code", "z = 1\n" + TL201.replace("y =", "w =")),
    )
    assert found(notebook.check(nb, "n.ipynb", SETTINGS)) == [(4, 4, 5, "TL201"), (5, 2, 5, "TL201")]


def test_the_cells_are_one_module_in_cell_order():
    # An alias imported in cell 1 resolves a call in cell 5.
    nb = cells(("code", "import torch.nn.functional as Fn\nimport torch as T"), ("markdown", "text"), ("code", "x = T.randn(3)"),
               ("code", "%load_ext autoreload"), ("code", "y = T.log(Fn.softmax(x, dim=-1))"))
    assert found(notebook.check(nb, "n.ipynb", SETTINGS)) == [(5, 1, 5, "TL201")]


def fixture_class(relative: str, name: str) -> str:
    """The source of class ``name`` in a checker fixture (a dataset TL403 knows to yield items of varying length)."""
    source = (Path(__file__).resolve().parent.parent / "fixtures" / relative).read_text(encoding="utf-8")
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
    return ast.get_source_segment(source, node)


WORD_DATASET = fixture_class("TL403/checker/bad_same_file.py", "WordDataset")


def test_a_dataset_class_of_an_earlier_cell_is_seen_by_a_dataloader_of_a_later_one():
    nb = cells(
        ("code", "import torch\nfrom torch.utils.data import DataLoader, Dataset\nfrom transformers import AutoTokenizer"),
        ("code", WORD_DATASET),
        ("markdown", "## Loading"),
        ("code", "%load_ext autoreload"),
        ("code", "sentences, vocab = ['a b', 'c'], {'a': 1}\ntokenizer = AutoTokenizer.from_pretrained('gpt2')"),
        ("code", "!ls"),
        ("code", "loader = DataLoader(WordDataset(sentences, vocab), batch_size=8)"),
    )
    assert found(notebook.check(nb, "n.ipynb", SETTINGS), "TL403") == [(7, 1, 10, "TL403")]
    fixed = notebook.fix(nb, "n.ipynb", SETTINGS, unsafe=True)
    assert [cell.index for cell in fixed.cells] == [1, 7]  # pad_collate goes to the imports' cell
    assert "def pad_collate(" in fixed.cells[0].after and "import functools" in fixed.cells[0].after
    assert fixed.cells[1].after.endswith("collate_fn=functools.partial(pad_collate, padding_value=tokenizer.pad_token_id))")


def test_a_cell_that_does_not_parse_is_reported_and_the_others_are_checked():
    nb = cells(("code", IMPORTS), ("markdown", "x"), ("code", "x = 1\ndef broken(:\n    pass"), ("code", TL201),
               ("code", "for i in range(3):"), ("code", "    " + TL201))
    result = notebook.check(nb, "n.ipynb", SETTINGS)
    assert found(result) == [(4, 1, 5, "TL201")]
    problems = [(d.cell.index, d.line, d.kind) for d in result.diagnostics]
    # Cell 6 is not Python on its own (Jupyter runs it alone: an unexpected indent), though the cells joined would parse.
    assert problems == [(3, 2, "parse"), (5, 1, "parse"), (6, 1, "parse")]
    assert result.diagnostics[0].column == 12  # CPython's place: the ':' of "def broken(:"
    assert all(d.message.startswith("syntax error: ") for d in result.diagnostics)


def test_noqa_in_a_cell_and_skip_file_in_the_first_cell():
    nb = cells(("code", IMPORTS), ("code", TL201 + "  # noqa: TL201\n" + TL201.replace("y", "w")))
    assert found(notebook.check(nb, "n.ipynb", SETTINGS)) == [(2, 2, 5, "TL201")]
    skipped = cells(("code", "# torchlint: skip-file\n" + IMPORTS), ("code", TL201))
    assert notebook.check(skipped, "n.ipynb", SETTINGS).findings == []
    assert notebook.fix(skipped, "n.ipynb", SETTINGS).cells == []


def test_per_file_ignores_apply_to_the_notebook_path(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nper-file-ignores = { "notebooks/*" = ["TL201"] }\n', encoding="utf-8")
    settings = config.resolve(str(tmp_path / "pyproject.toml"), config.Overrides())
    nb = cells(("code", IMPORTS), ("code", TL201))
    assert notebook.check(nb, str(tmp_path / "notebooks" / "a.ipynb"), settings).findings == []
    assert found(notebook.check(nb, str(tmp_path / "b.ipynb"), settings)) == [(2, 1, 5, "TL201")]


def test_file_lines_point_at_the_json_line_that_holds_the_code():
    nb = new_notebook()
    nb.cells = [new_markdown_cell("# a\nb"), new_code_cell(IMPORTS), new_code_cell("x = 1\n" + TL201)]
    text = as_json(nb)
    result = notebook.lint_text(text, "n.ipynb", SETTINGS)
    (finding,) = result.findings
    assert finding.cell.index == 3 and finding.location.line == 2
    assert TL201 in text.splitlines()[finding.cell.file_line - 1]


# -- fixing -----------------------------------------------------------------------------------


def test_a_fix_that_needs_an_import_puts_it_after_the_imports_of_an_earlier_cell():
    nb = cells(("code", "import torch"), ("markdown", "m"), ("code", "x = torch.randn(3)\ny = torch.log(torch.softmax(x, -1))"))
    result = notebook.check(nb, "n.ipynb", SETTINGS)
    (finding,) = result.findings
    # In the cells' terms: the import is inserted at the end of cell 1, the call replaced in cell 3.
    assert finding.fix_edit_cells == (1, 3)
    assert finding.fix_edit_locations[0] == (1, 13, 1, 13)
    assert finding.fix.edits[0] == Edit(12, 12, "\nimport torch.nn.functional as F")
    fixed = notebook.fix(nb, "n.ipynb", SETTINGS)
    assert [(c.index, c.after) for c in fixed.cells] == [
        (1, "import torch\nimport torch.nn.functional as F"),
        (3, "x = torch.randn(3)\ny = F.log_softmax(x, -1)"),
    ]
    # The edits reported for the cells give what --fix writes.
    for index, edit in zip(finding.fix_edit_cells, finding.fix.edits):
        before = nb.cells[index - 1].source
        assert engine.apply_edits(before, [edit]) == dict((c.index, c.after) for c in fixed.cells)[index]


def test_apply_fix_gives_the_cells_one_fix_changes_unless_one_would_no_longer_run():
    nb = cells(("code", "import torch"), ("markdown", "m"), ("code", "%%time\nx = torch.randn(3)\ny = torch.log(torch.softmax(x, -1))"))
    (finding,) = notebook.check(nb, "n.ipynb", SETTINGS).findings
    assert notebook.apply_fix(nb, finding) == {
        1: "import torch\nimport torch.nn.functional as F",
        3: "%%time\nx = torch.randn(3)\ny = F.log_softmax(x, -1)",
    }

    def fix_of(cell, edit):
        return replace(finding, fix=replace(finding.fix, edits=(edit,)), fix_edit_cells=(cell,))

    assert notebook.apply_fix(nb, fix_of(3, Edit(0, 0, "import os\n"))) is None  # %%time must stay first
    assert notebook.apply_fix(nb, fix_of(1, Edit(0, 0, "("))) is None  # the cell no longer parses
    assert notebook.apply_fix(nb, fix_of(3, Edit(0, 0, "%%bash\n"))) is None  # the cell runs another language
    assert notebook.apply_fix(nb, fix_of(3, Edit(7, 7, "w = 0\n"))) == {3: "%%time\nw = 0\nx = torch.randn(3)\ny = torch.log(torch.softmax(x, -1))"}


def test_a_masked_source_keeps_the_cells_lines_and_columns():
    source = "%%time\n!pip install torch\nx = 1\nx?"
    masked = notebook.masked_source(source)
    assert len(masked) == len(source) and masked.splitlines()[2] == "x = 1"
    ast.parse(masked)
    assert notebook.masked_source("%%bash\nls") == "%%bash\nls"


@pytest.mark.parametrize("lead", ["", "\n\n"])
def test_an_import_needed_by_a_cell_magic_cell_goes_after_the_magic(lead):
    nb = cells(("code", lead + "%%time\nimport torch as T\ny = T.log(T.softmax(x, -1))"))
    (change,) = notebook.fix(nb, "n.ipynb", SETTINGS).cells
    assert change.after == lead + "%%time\nimport torch as T\nimport torch.nn.functional as F\ny = F.log_softmax(x, -1)"


def test_magics_are_never_rewritten():
    source = "import torch\nfor i in range(3):\n    !echo hi\n    %time f(i)\n    y = torch.log(torch.softmax(x, -1))\nx?"
    (change,) = notebook.fix(cells(("code", source)), "n.ipynb", SETTINGS).cells
    assert change.after == source.replace("import torch\n", "import torch\nimport torch.nn.functional as F\n").replace(
        "torch.log(torch.softmax(x, -1))", "F.log_softmax(x, -1)"
    )


def test_a_fix_that_would_straddle_cells_or_touch_a_magic_is_not_applied():
    fix = Fix(Applicability.SAFE, "m", (Edit(5, 15, "x"),))
    assert engine.touches_frozen(fix, [(10, 10)])  # straddles a boundary
    assert not engine.touches_frozen(fix, [(15, 15)]) and not engine.touches_frozen(fix, [(5, 5)])
    assert engine.touches_frozen(fix, [(14, 20)])  # overlaps a masked line
    assert not engine.touches_frozen(fix, [(15, 20)])
    insertion = Fix(Applicability.SAFE, "m", (Edit(15, 15, "import x\n"),))
    assert not engine.touches_frozen(insertion, [(15, 20)])  # a whole line before the masked one
    assert engine.touches_frozen(Fix(Applicability.SAFE, "m", (Edit(15, 15, "x"),)), [(15, 20)])
    assert engine.touches_frozen(Fix(Applicability.SAFE, "m", (Edit(17, 17, "x\n"),)), [(15, 20)])


def test_frozen_spans_move_with_the_fixes_before_them():
    source = "import torch\nimport torch.nn.functional as F\n\n" + TL201 + "\n# end\n"
    boundary = source.index("# end")
    fixed = engine.fix_text(source, "m.py", SETTINGS, frozen=[(boundary, boundary), (boundary, boundary + 6)])
    moved = boundary + len(FIXED_TL201) - len(TL201)
    assert fixed.text[moved:] == "# end\n" and fixed.frozen == ((moved, moved), (moved, moved + 6))


def test_fix_of_notebook_json_changes_only_the_changed_cells_source():
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# Modèle — ünïcode ✓"),
        new_code_cell(IMPORTS, execution_count=1),
        new_code_cell("%%time\n# café\n" + TL201 + "  # ✓\nprint(y)", execution_count=2,
                      outputs=[new_output("stream", name="stdout", text="tensor([[-1.2, -0.3]])\nWall time: 1 ms\n")]),
        new_raw_cell("raw ✓"),
        new_code_cell("z = 1", execution_count=3),
    ]
    text = as_json(nb)
    fixed = notebook.fix_text(text, "n.ipynb", SETTINGS)
    assert fixed.applied == 1 and [c.index for c in fixed.cells] == [3]
    old_lines, new_lines = text.splitlines(keepends=True), fixed.text.splitlines(keepends=True)
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert len(old_lines) == len(new_lines)
    assert changed == [(f'    "{TL201}  # ✓\\n",\n', f'    "{FIXED_TL201}  # ✓\\n",\n')]
    nbformat.validate(nbformat.reads(fixed.text, as_version=4))
    assert notebook.fix_text(fixed.text, "n.ipynb", SETTINGS).cells == []


@pytest.mark.parametrize(
    "dump",
    [
        lambda d: json.dumps(d, indent=2),  # \u escapes, two spaces
        lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False),  # one line
        lambda d: json.dumps(d, indent=1, ensure_ascii=False).replace("\n", "\r\n") + "\r\n",  # Windows line ends
        lambda d: json.dumps(d, indent="\t", sort_keys=False, ensure_ascii=False),
    ],
)
def test_the_file_keeps_its_own_layout(dump):
    code = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    document = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"title": "séance ✓"},
        "cells": [
            dict(code, source=["import torch\n", "import torch.nn.functional as F  # é\n"]),
            dict(code, source=["x = torch.randn(2)  # ✓\n", TL201 + "\n", "print(y)"]),
            dict(code, source=TL201 + "\nz = 'ü'"),
        ],
    }
    text = dump(document)
    fixed = notebook.fix_text(text, "n.ipynb", SETTINGS)
    assert [c.index for c in fixed.cells] == [2, 3]
    after = json.loads(fixed.text)
    assert after["cells"][1]["source"] == ["x = torch.randn(2)  # ✓\n", FIXED_TL201 + "\n", "print(y)"]
    assert after["cells"][2]["source"] == FIXED_TL201 + "\nz = 'ü'"
    # Re-serialising the old document in the same style gives the new text: the layout is the file's own.
    document["cells"][1]["source"] = after["cells"][1]["source"]
    document["cells"][2]["source"] = after["cells"][2]["source"]
    assert fixed.text == dump(document)


def test_a_notebook_without_code_or_without_triggers_is_cheap_and_quiet():
    nb = cells(("markdown", "# torch.log(F.softmax(x))"), ("code", ""), ("code", "   \n"))
    assert notebook.check(nb, "n.ipynb", SETTINGS).findings == []
    quiet = cells(("code", "def broken(:"))  # no rule's trigger: nothing is parsed, as for a .py file
    assert notebook.check(quiet, "n.ipynb", SETTINGS).diagnostics == []


# -- facts read across cells --------------------------------------------------------------------------


TRAIN_AND_SAVE = """\
best = float("inf")
for epoch in range(3):
    loss = train(model)
    if loss < best:
        best = loss
        torch.save(model.state_dict(), "best.pt")"""
LOAD_BEST = 'model.load_state_dict(torch.load("best.pt"))'


def _load_levels(*sources):
    nb = new_notebook(cells=[new_code_cell(source) for source in sources])
    settings = config.resolve(None, config.Overrides(select=["TL401"], confidence_level="low"))
    return [f.confidence.value for f in notebook.lint_text(as_json(nb), "n.ipynb", settings).findings]


def test_a_notebook_that_saves_its_best_model_then_loads_it_loaded_what_the_session_wrote():
    # the cells run in order in one session: the file holds what this machine saved (low, not high)
    setup = "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\nmodel = build().to(device)"
    assert _load_levels(setup, TRAIN_AND_SAVE, LOAD_BEST) == ["low"]


def test_a_notebook_that_loads_before_any_save_keeps_its_finding():
    setup = "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\nmodel = build().to(device)"
    levels = _load_levels(setup, LOAD_BEST, TRAIN_AND_SAVE)
    assert levels == ["high"]
