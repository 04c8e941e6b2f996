"""The pieces the language server is made of, without a client: positions, edits, noqa, settings, hover text."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("lsprotocol")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lsprotocol import types  # noqa: E402

from torchlint import config, engine, notebook, registry  # noqa: E402
from torchlint.docs import help_uri, summary  # noqa: E402
from torchlint.noqa import NoqaIndex, code_at, noqa_edit  # noqa: E402
from torchlint.rule import Applicability, Edit, Fix, NotebookCell  # noqa: E402
from torchlint.server.documents import CellDocument, NotebookView, TextView, changed_cells  # noqa: E402
from torchlint.server.positions import UTF8, UTF16, UTF32, LineIndex  # noqa: E402
from torchlint.server.projects import Projects  # noqa: E402

# -- positions -----------------------------------------------------------------------------

TEXT = 'a = "😋"\r\nb = "π"\rc\n\x0cd = 1\u2028 # one line for LSP\n'


def test_lines_break_where_lsp_breaks_them():
    index = LineIndex(TEXT)
    # \r\n, \r and \n break lines; the form feed and U+2028 do not (str.splitlines would split there).
    assert [TEXT[s : index.line_end(n)] for n, s in enumerate(index.starts)] == [
        'a = "😋"', 'b = "π"', "c", "\x0cd = 1\u2028 # one line for LSP", ""
    ]


@pytest.mark.parametrize("encoding, character", [(UTF16, 7), (UTF8, 9), (UTF32, 6)])
def test_a_character_after_an_astral_one_counts_in_the_clients_units(encoding, character):
    index = LineIndex(TEXT, encoding)
    quote = TEXT.index('"', 5)
    assert index.position(quote) == (0, character)
    assert index.offset(0, character) == quote


def test_positions_past_a_line_or_the_text_clamp_to_their_ends():
    index = LineIndex(TEXT)
    assert index.offset(1, 99) == TEXT.index("\r", 9)
    assert index.offset(99, 0) == len(TEXT)
    assert index.offset(-1, 3) == 0


@given(st.text(alphabet=st.sampled_from("ab π😋\r\n\t\x0c"), max_size=40), st.sampled_from([UTF8, UTF16, UTF32]))
@settings(max_examples=200, deadline=None)
def test_offsets_survive_the_round_trip(text, encoding):
    index = LineIndex(text, encoding)
    for offset in range(len(text) + 1):
        if offset and text[offset - 1] == "\r" and text[offset : offset + 1] == "\n":
            continue  # between \r and \n: not a position LSP can name
        assert index.offset(*index.position(offset)) == offset


# -- edits -----------------------------------------------------------------------------------


def _apply(text: str, edits) -> str:
    index = LineIndex(text)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        start = index.offset(edit.range.start.line, edit.range.start.character)
        end = index.offset(edit.range.end.line, edit.range.end.character)
        text = text[:start] + edit.new_text + text[end:]
    return text


@given(
    st.lists(st.sampled_from(["x = 1\n", "y = 2\r\n", "import torch\n", "z", "\n"]), max_size=8),
    st.lists(st.sampled_from(["x = 1\n", "w = 3\n", "import torch\n", "z", "\r\n"]), max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_line_diff_edits_turn_the_text_into_the_new_one(old, new):
    view = TextView("file:///m.py", "/m.py", "".join(old))
    (edits,) = view.edits_to("".join(new)).values()
    assert _apply("".join(old), edits) == "".join(new)


def test_line_diff_edits_leave_unchanged_lines_alone():
    old = "import torch\n\n\ny = torch.log(torch.softmax(x, -1))\nkeep = 1\n"
    new = "import torch\n\n\ny = torch.log_softmax(x, -1)\nkeep = 1\n"
    (edits,) = TextView("file:///m.py", "/m.py", old).edits_to(new).values()
    assert [(e.range.start.line, e.range.end.line, e.new_text) for e in edits] == [(3, 4, "y = torch.log_softmax(x, -1)\n")]


def test_engine_edits_become_text_edits_of_the_document():
    view = TextView("file:///m.py", "/m.py", "a😋b\nc\n")
    (edits,) = view.text_edits([Edit(2, 3, "B"), Edit(4, 4, "# x\n")]).values()
    assert [(e.range.start.line, e.range.start.character, e.new_text) for e in edits] == [(0, 3, "B"), (1, 0, "# x\n")]


# -- notebooks -------------------------------------------------------------------------------


def _cells(*sources):
    return [CellDocument(f"cell:{number}", "code", "python", source, version=10 + number) for number, source in enumerate(sources)]


def test_a_notebook_view_sends_each_offset_to_its_cell_and_back():
    cells = _cells("a = 1\nb😋 = 2", "", "c = 3\n")
    view = NotebookView("file:///n.ipynb", "/n.ipynb", cells)
    for cell in cells:
        lines = LineIndex(cell.text)
        for offset in range(len(cell.text) + 1):
            position = types.Position(*lines.position(offset))
            assert view.locate(view.offset(cell.uri, position)) == (cell.uri, position)
    assert view.uris() == ("cell:0", "cell:1", "cell:2") and view.version_of("cell:1") == 11
    assert view.offset("cell:9", types.Position(0, 0)) is None
    # The end of a cell and the start of the next are two offsets apart: no range of one touches the other.
    end_of_first, start_of_last = view.offset("cell:0", types.Position(1, 99)), view.offset("cell:2", types.Position(0, 0))
    assert view.range(end_of_first, view.offset("cell:1", types.Position(0, 0))) is None
    assert view.location_offset(1, 1, NotebookCell(3)) == start_of_last
    assert view.text[slice(*view.line_span(view.offset("cell:0", types.Position(1, 3))))] == "b😋 = 2"


def test_a_notebook_views_fixes_make_the_cells_that_fix_makes():
    # The fix needs an import, which goes to the end of the first cell.
    sources = ("import torch", "x = torch.randn(3)\n!nvidia-smi", "%%time\ny = torch.log(torch.softmax(x, -1))")
    view = NotebookView("file:///n.ipynb", "/n.ipynb", _cells(*sources))
    settings = config.resolve(None, config.Overrides(select=["TL201"]))
    (finding,) = view.lint(settings).findings
    expected = list(sources)
    for change in notebook.fix(view.notebook, view.path, settings).cells:
        expected[change.index - 1] = change.after
    assert expected[0] != sources[0] and expected[2] != sources[2]
    for edits in (view.text_edits(view.fix_edits(finding)), view.fix_all(settings)):
        assert [_apply(cell.text, edits.get(cell.uri, [])) for cell in view.cells] == expected
    noqa = view.text_edits([view.noqa_edit(finding)])
    assert _apply(sources[2], noqa["cell:2"]) == sources[2] + "  # noqa: TL201"


def test_changed_cells_follow_the_structure_then_the_kinds_then_the_texts():
    first, second, third = _cells("import torch", "x = 1", "y = 2")

    def cell(uri, kind=types.NotebookCellKind.Code):
        return types.NotebookCell(kind, uri)

    change = types.NotebookDocumentCellChanges(
        structure=types.NotebookDocumentCellChangeStructure(
            array=types.NotebookCellArrayChange(start=0, delete_count=3, cells=[cell("cell:2"), cell("cell:0"), cell("new")]),
            did_open=[types.TextDocumentItem("new", "python", 1, "z = 3")],
            did_close=[types.TextDocumentIdentifier("cell:1")],
        ),
        data=[cell("cell:0", types.NotebookCellKind.Markup)],
        text_content=[
            types.NotebookDocumentCellContentChanges(
                types.VersionedTextDocumentIdentifier(version=5, uri="cell:2"),
                [types.TextDocumentContentChangePartial(range=types.Range(types.Position(0, 4), types.Position(0, 5)), text="20")],
            )
        ],
    )
    after = changed_cells([first, second, third], change, UTF16)
    assert [(c.uri, c.kind, c.text, c.version) for c in after] == [
        ("cell:2", "code", "y = 20", 5),
        ("cell:0", "markdown", "import torch", 10),
        ("new", "code", "z = 3", 1),
    ]


# -- noqa ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, line, expected",
    [
        ("x = 1\ny = f(2)\n", 2, "x = 1\ny = f(2)  # noqa: TL201\n"),
        ('s = """a\nb""" + g(1)\n', 1, 's = """a\nb""" + g(1)  # noqa: TL201\n'),
        ("x = a + \\\n  b\n", 1, "x = a + \\\n  b  # noqa: TL201\n"),
        ("x = 1  # noqa: TL101\n", 1, "x = 1  # noqa: TL101, TL201\n"),
        ("x = 1  # noqa:TL101,E501   # why\r\n", 1, "x = 1  # noqa:TL101,E501, TL201   # why\r\n"),
        ("x = 1  # a comment\n", 1, "x = 1  # a comment  # noqa: TL201\n"),
        ("x = 1", 1, "x = 1  # noqa: TL201"),
        ("f(a,\n  b)\n", 1, "f(a,  # noqa: TL201\n  b)\n"),
    ],
)
def test_the_noqa_edit_suppresses_the_code_on_that_line(source, line, expected):
    edit = noqa_edit(source, line, "TL201")
    fixed = engine.apply_edits(source, [edit])
    assert fixed == expected
    assert NoqaIndex(fixed).suppresses("TL201", line)


def test_a_bare_noqa_needs_no_edit():
    assert noqa_edit("x = 1  # noqa\n", 1, "TL201") is None


def test_the_code_under_the_cursor_in_a_noqa_comment():
    line = "x = 1  # noqa: TL101, tl201"
    assert [code_at(line, column) for column in (14, 15, 19, 22, 26, 27, 3)] == [None, "TL101", "TL101", "TL201", "TL201", None, None]
    assert code_at("x  # noqa", 5) is None


# -- the engine's single fix, and the hover text -------------------------------------------------------


def test_a_fix_whose_result_does_not_parse_is_not_applied():
    source = "y = f(x)\n"
    good = Fix(Applicability.SAFE, "rename", (Edit(4, 5, "g"),))
    broken = Fix(Applicability.SAFE, "break", (Edit(5, 6, "(("),))
    assert engine.apply_fix(source, "m.py", good) == "y = g(x)\n"
    assert engine.apply_fix(source, "m.py", broken) is None


def test_the_hover_summary_names_the_rule_and_links_its_page():
    rule = registry.all_rules()["TL201"]
    text = summary(rule)
    assert text.startswith("**TL201** `log-of-softmax` (fix: safe)")
    assert rule.message in text and "Flags the logarithm of a softmax" in text and help_uri(rule) in text
    assert "## Why is this bad?" not in text


# -- settings ---------------------------------------------------------------------------------------


def test_settings_are_the_clis_and_are_read_again_when_a_pyproject_changes(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL401"]\n', encoding="utf-8")
    deep = tmp_path / "pkg" / "sub"
    deep.mkdir(parents=True)
    path = str(deep / "m.py")  # need not exist: an unsaved new file
    projects = Projects()
    first = projects.settings_for(path)
    assert first.settings == config.resolve(str(tmp_path / "pyproject.toml"), config.Overrides()) and first.error is None
    assert projects.settings_for(path) is first  # nothing changed: the cached settings
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL2"]\n', encoding="utf-8")
    nearer = projects.settings_for(path)
    assert nearer.settings.enabled == registry.expand_selectors(["TL2"])
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL9"]\n', encoding="utf-8")
    broken = projects.settings_for(path)
    assert "TL9" in broken.error and broken.settings.enabled == registry.default_codes()
    os.remove(tmp_path / "pkg" / "pyproject.toml")
    assert projects.settings_for(path).settings == first.settings


def test_without_a_configuration_the_workspace_folder_is_the_root(tmp_path):
    folder = tmp_path / "ws"
    (folder / "src").mkdir(parents=True)
    found = Projects().settings_for(str(folder / "src" / "m.py"), folders=[str(tmp_path / "other"), str(folder)])
    assert found.settings.config_path is None and found.settings.root == str(folder)


def test_saving_a_module_drops_the_index_that_holds_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    projects = Projects()
    settings = projects.settings_for(str(tmp_path / "train.py")).settings
    index = projects.index_for(settings)
    assert projects.index_for(settings) is index
    assert projects.file_changed(str(tmp_path / "data" / "text.py")) == "text"
    assert projects.index_for(settings) is not index


def test_an_engine_error_on_a_document_becomes_a_logged_problem(tmp_path, monkeypatch):
    from torchlint.server import linting

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine, "lint_text", broken)
    path = tmp_path / "m.py"
    outcome = linting.lint(TextView(path.as_uri(), str(path), "import torch\n"), Projects())
    assert outcome.findings == [] and outcome.syntax_errors == []
    (problem,) = outcome.internal_errors
    assert problem.message == "internal error: RecursionError: maximum recursion depth exceeded" and problem.path == str(path)
