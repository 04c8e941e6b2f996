"""The tools for adopting torchlint on code that already has findings: --add-noqa, --statistics,
--output-format concise|full and --show-fixes, end to end through the console entry point."""
from __future__ import annotations

import json

import pytest

from cli_support import (
    BAD,
    CLEAN,
    HEADER,
    ONLY,
    TL201_LINE,
    TL401_LINE,
    age,
    check_json,
    isolate,
    snapshot,
    torchlint,
)

TL201_MESSAGE = "log(softmax(x)) gives -inf and NaN gradients once a probability underflows to 0; use log_softmax"
TL401_MESSAGE = "torch.load without map_location restores tensors to the device they were saved on; it fails on a machine without that GPU"
# BAD with a second TL201 line: two TL201 findings (both fixed by --fix) and one TL401 (an unsafe fix).
TWO_SOFTMAX = BAD + "w = torch.log(F.softmax(v, dim=-1))\n"


@pytest.fixture
def project(tmp_path):
    isolate(tmp_path)
    return tmp_path


# -- --add-noqa -----------------------------------------------------------------------------


def test_add_noqa_merges_codes_sorted_and_leaves_a_bare_noqa_alone(project):
    path = project / "m.py"
    path.write_text(
        HEADER
        + 'device = "cpu"\n'
        + TL201_LINE + "  # noqa: E501\n"
        + TL401_LINE + "  # noqa:W291,E501   # why\n"
        + TL201_LINE + "  # noqa\n"
        + "z = 1  # noqa: TL201\n",
        encoding="utf-8",
    )
    proc = torchlint("check", *ONLY, "--add-noqa", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "Added 2 noqa directives to 1 file.\n"
    assert path.read_text(encoding="utf-8") == (
        HEADER
        + 'device = "cpu"\n'
        + TL201_LINE + "  # noqa: E501, TL201\n"
        + TL401_LINE + "  # noqa:E501, TL401, W291   # why\n"
        + TL201_LINE + "  # noqa\n"
        + "z = 1  # noqa: TL201\n"
    )


def test_add_noqa_writes_one_sorted_list_per_line_and_silences_every_finding(project):
    path = project / "m.py"
    # another file than TL401_LINE's: a second load of the same path is a repeat, shown lower
    path.write_text(BAD + "y = torch.log(F.softmax(torch.load(p + \".bak\"), dim=-1))\n", encoding="utf-8")
    proc = torchlint("check", *ONLY, "--add-noqa", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8").splitlines()[3:] == [
        TL201_LINE + "  # noqa: TL201",
        TL401_LINE + "  # noqa: TL401",
        "y = torch.log(F.softmax(torch.load(p + \".bak\"), dim=-1))  # noqa: TL201, TL401",
    ]
    code, items, _ = check_json(*ONLY, "m.py", cwd=project)
    assert (code, items) == (0, [])


def test_add_noqa_is_idempotent_and_never_rewrites_untouched_files(project):
    files = {"bad.py": BAD, "clean.py": CLEAN, "suppressed.py": HEADER + TL201_LINE + "  # noqa: TL201\n"}
    for name, text in files.items():
        (project / name).write_text(text, encoding="utf-8")
        age(project / name)
    untouched = {name: snapshot(project / name) for name in ("clean.py", "suppressed.py")}
    first = torchlint("check", *ONLY, "--add-noqa", ".", cwd=project)
    assert first.stdout == "Added 2 noqa directives to 1 file.\n"
    assert {name: snapshot(project / name) for name in untouched} == untouched
    written = snapshot(project / "bad.py")
    assert written[2] != BAD.encode("utf-8")
    second = torchlint("check", *ONLY, "--add-noqa", ".", cwd=project)
    assert (second.returncode, second.stdout) == (0, "Added 0 noqa directives to 0 files.\n")
    assert snapshot(project / "bad.py") == written


def test_add_noqa_keeps_crlf_and_a_latin1_coding_cookie(project):
    crlf = (HEADER + 'device = "cpu"\n' + TL201_LINE + "\n" + TL401_LINE + "\n").replace("\n", "\r\n").encode("utf-8")
    latin1 = ("# -*- coding: latin-1 -*-\n" + HEADER + "name = 'caf\u00e9 \u00b5'\n" + TL201_LINE + "  # caf\u00e9\n").encode("latin-1")
    (project / "crlf.py").write_bytes(crlf)
    (project / "latin1.py").write_bytes(latin1)
    proc = torchlint("check", *ONLY, "--add-noqa", "crlf.py", "latin1.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "Added 3 noqa directives to 2 files.\n"
    assert (project / "crlf.py").read_bytes() == crlf.replace(
        TL201_LINE.encode() + b"\r\n", TL201_LINE.encode() + b"  # noqa: TL201\r\n"
    ).replace(TL401_LINE.encode() + b"\r\n", TL401_LINE.encode() + b"  # noqa: TL401\r\n")
    assert (project / "latin1.py").read_bytes() == latin1.replace(b"  # caf\xe9\n", b"  # caf\xe9  # noqa: TL201\n")
    code, items, _ = check_json(*ONLY, "crlf.py", "latin1.py", cwd=project)
    assert (code, items) == (0, [])


def test_add_noqa_puts_the_comment_after_a_multiline_string_and_a_continuation(project):
    path = project / "m.py"
    source = HEADER + 'y = torch.log(F.softmax(x + len("""a\nb"""), dim=-1))\nz = torch.log(F.softmax(\\\n    x, dim=-1))\n'
    path.write_text(source, encoding="utf-8")
    code, items, _ = check_json(*ONLY, "m.py", cwd=project)
    assert [(item["line"], item["code"]) for item in items] == [(3, "TL201"), (5, "TL201")]
    proc = torchlint("check", *ONLY, "--add-noqa", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8") == source.replace('b"""), dim=-1))\n', 'b"""), dim=-1))  # noqa: TL201\n').replace(
        "    x, dim=-1))\n", "    x, dim=-1))  # noqa: TL201\n"
    )
    code, items, _ = check_json(*ONLY, "m.py", cwd=project)
    assert (code, items) == (0, [])


def test_add_noqa_names_a_finding_no_comment_can_silence_and_leaves_its_line(project):
    # flake8 reads the line's first noqa directive: the one inside the string, which does not list TL201.
    source = HEADER + 'x = "# noqa: E501"; ' + TL201_LINE + "\n"
    path = project / "m.py"
    path.write_text(source, encoding="utf-8")
    age(path)
    before = snapshot(path)
    proc = torchlint("check", *ONLY, "--add-noqa", "m.py", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout == "Added 0 noqa directives to 0 files.\n"
    assert "warning: m.py:3:25: TL201 not silenced" in proc.stderr
    assert snapshot(path) == before


def test_add_noqa_follows_the_confidence_floor_and_the_selection(project):
    path = project / "m.py"
    path.write_text(BAD, encoding="utf-8")
    torchlint("check", "--select", "TL201", "--add-noqa", "m.py", cwd=project)
    assert path.read_text(encoding="utf-8") == BAD.replace(TL201_LINE, TL201_LINE + "  # noqa: TL201")


def test_add_noqa_in_a_notebook_writes_only_the_cells_lines(project):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Training \u00e9\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": [HEADER, "%matplotlib inline"]},
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}],
            "source": ["%%time\n", 'device = "cpu"\n', TL201_LINE + "\n", TL401_LINE + "  # noqa: E501"],
        },
    ]
    document = {"cells": cells, "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    path = project / "nb.ipynb"
    path.write_text(text, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--add-noqa", "nb.ipynb", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "Added 2 noqa directives to 1 file.\n"
    expected = text.replace(json.dumps(TL201_LINE + "\n"), json.dumps(TL201_LINE + "  # noqa: TL201\n")).replace(
        json.dumps(TL401_LINE + "  # noqa: E501"), json.dumps(TL401_LINE + "  # noqa: E501, TL401")
    )
    assert path.read_text(encoding="utf-8") == expected
    code, items, _ = check_json(*ONLY, "nb.ipynb", cwd=project)
    assert (code, items) == (0, [])


@pytest.mark.parametrize("extra", [("--fix",), ("--diff",), ("-",)])
def test_add_noqa_is_a_usage_error_with_fix_diff_or_standard_input(project, extra):
    (project / "m.py").write_text(BAD, encoding="utf-8")
    paths = () if extra == ("-",) else ("m.py",)
    proc = torchlint("check", *ONLY, "--add-noqa", *extra, *paths, cwd=project, stdin=BAD)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --add-noqa ")
    assert (project / "m.py").read_text(encoding="utf-8") == BAD


# -- --statistics ---------------------------------------------------------------------------


def test_statistics_counts_per_rule_most_first(project):
    (project / "a.py").write_text(BAD, encoding="utf-8")
    (project / "b.py").write_text(HEADER + 'device = "cpu"\n' + TL401_LINE + "\n", encoding="utf-8")
    proc = torchlint("check", *ONLY, "--statistics", ".", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout == "2  TL401  [ ] load-without-map-location\n1  TL201  [*] log-of-softmax\n"
    unsafe = torchlint("check", *ONLY, "--statistics", "--unsafe-fixes", ".", cwd=project)
    assert unsafe.stdout == "2  TL401  [*] load-without-map-location\n1  TL201  [*] log-of-softmax\n"
    as_json = torchlint("check", *ONLY, "--statistics", "--output-format", "json", ".", cwd=project)
    assert json.loads(as_json.stdout) == [
        {"code": "TL401", "name": "load-without-map-location", "count": 2, "fixable": 0},
        {"code": "TL201", "name": "log-of-softmax", "count": 1, "fixable": 1},
    ]


def test_statistics_of_a_clean_run_is_empty_and_sarif_is_refused(project):
    (project / "m.py").write_text(CLEAN, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--statistics", "m.py", cwd=project)
    assert (proc.returncode, proc.stdout) == (0, "")
    refused = torchlint("check", *ONLY, "--statistics", "--output-format", "sarif", "m.py", cwd=project)
    assert refused.returncode == 2 and refused.stderr.startswith("error: --statistics ")


# -- --output-format concise|full -----------------------------------------------------------


def test_text_is_the_concise_format_and_the_default(project):
    (project / "m.py").write_text(BAD, encoding="utf-8")
    default = torchlint("check", *ONLY, "m.py", cwd=project).stdout
    assert default == torchlint("check", *ONLY, "--output-format", "concise", "m.py", cwd=project).stdout
    assert default == torchlint("check", *ONLY, "--output-format", "text", "m.py", cwd=project).stdout
    assert default.splitlines() == [
        f"m.py:4:5: TL201 [*] {TL201_MESSAGE}",
        f"m.py:5:5: TL401 {TL401_MESSAGE}",
        "Found 2 errors.",
        "[*] 1 fixable with `torchlint check --fix`.",
        "(1 more fixable with the `--unsafe-fixes` option.)",
    ]


def test_full_format_quotes_the_line_with_carets_under_the_span_and_the_fix(project):
    (project / "m.py").write_text(BAD, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--output-format", "full", "m.py", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout == (
        f"m.py:4:5: TL201 [*] {TL201_MESSAGE}\n"
        "  |\n"
        "4 | y = torch.log(F.softmax(x, dim=-1))\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  |\n"
        "  = help: Replace with `log_softmax` (safe fix)\n"
        "\n"
        f"m.py:5:5: TL401 {TL401_MESSAGE}\n"
        "  |\n"
        "5 | s = torch.load(p).to(device)\n"
        "  |     ^^^^^^^^^^^^^\n"
        "  |\n"
        "  = help: Add `map_location=device` (unsafe fix, needs --unsafe-fixes)\n"
        "\n"
        "Found 2 errors.\n"
        "[*] 1 fixable with `torchlint check --fix`.\n"
        "(1 more fixable with the `--unsafe-fixes` option.)\n"
    )


def test_full_format_expands_tabs_and_underlines_each_line_of_a_longer_span(project):
    source = HEADER + "def f(x):\n\treturn torch.log(F.softmax(\n\t\tx, dim=-1))\n"
    (project / "m.py").write_text(source, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--output-format", "full", "m.py", cwd=project)
    block = proc.stdout.split("\n\n")[0].splitlines()
    assert block == [
        f"m.py:4:9: TL201 [*] {TL201_MESSAGE}",  # columns count characters: a tab is one
        "  |",
        "4 |     return torch.log(F.softmax(",
        "  |            ^^^^^^^^^^^^^^^^^^^^",
        "5 |         x, dim=-1))",
        "  |         ^^^^^^^^^^^",
        "  |",
        "  = help: Replace with `log_softmax` (safe fix)",
    ]


def test_full_format_quotes_a_notebook_cell_and_standard_input(project):
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": [HEADER, "\n", TL201_LINE + "\n"]},
    ]
    document = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "nb.ipynb").write_text(json.dumps(document, indent=1), encoding="utf-8")
    proc = torchlint("check", *ONLY, "--output-format", "full", "nb.ipynb", cwd=project)
    assert proc.stdout.split("\n\n")[0].splitlines()[:4] == [
        f"nb.ipynb:cell 2:4:5: TL201 [*] {TL201_MESSAGE}",
        "  |",
        "4 | " + TL201_LINE,
        "  |     " + "^" * 31,
    ]
    # Standard input is not on disk: its own text is quoted (a file of that name holds something else).
    (project / "m.py").write_text(CLEAN, encoding="utf-8")
    piped = torchlint("check", *ONLY, "--output-format", "full", "-", "--stdin-filename", "m.py", cwd=project, stdin=BAD)
    assert "4 | " + TL201_LINE + "\n  |     " + "^" * 31 + "\n" in piped.stdout


# -- --show-fixes ---------------------------------------------------------------------------


def test_show_fixes_enumerates_the_fixes_applied_per_file(project):
    (project / "a.py").write_text(TWO_SOFTMAX, encoding="utf-8")
    (project / "b.py").write_text(BAD, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--fix", "--show-fixes", "b.py", "a.py", cwd=project)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[2:] == [
        "Fixed 3 findings:",
        "- a.py:",
        "    2 × TL201 (log-of-softmax)",
        "- b.py:",
        "    1 × TL201 (log-of-softmax)",
        "",
        "Found 5 errors (3 fixed, 2 remaining).",
        "(2 more fixable with the `--unsafe-fixes` option.)",
    ]


def test_show_fixes_with_unsafe_fixes_and_with_a_machine_readable_format(project):
    (project / "a.py").write_text(TWO_SOFTMAX, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "--show-fixes", "--output-format", "json", "a.py", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert proc.stderr == "Fixed 3 findings:\n- a.py:\n    2 × TL201 (log-of-softmax)\n    1 × TL401 (load-without-map-location)\n"


def test_show_fixes_with_diff_lists_what_fix_would_apply(project):
    (project / "a.py").write_text(TWO_SOFTMAX, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--diff", "--show-fixes", "a.py", cwd=project)
    assert proc.returncode == 1
    assert proc.stderr == "Would fix 2 findings:\n- a.py:\n    2 × TL201 (log-of-softmax)\nWould fix 2 errors.\n"
    assert (project / "a.py").read_text(encoding="utf-8") == TWO_SOFTMAX


def test_without_fix_fixable_findings_are_marked_and_counted(project):
    (project / "a.py").write_text(TWO_SOFTMAX, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--show-fixes", "a.py", cwd=project)
    assert proc.stdout.splitlines() == [
        f"a.py:4:5: TL201 [*] {TL201_MESSAGE}",
        f"a.py:5:5: TL401 {TL401_MESSAGE}",
        f"a.py:6:5: TL201 [*] {TL201_MESSAGE}",
        "Found 3 errors.",
        "[*] 2 fixable with `torchlint check --fix`.",
        "(1 more fixable with the `--unsafe-fixes` option.)",
    ]
