"""End-to-end: [tool.torchlint] configuration, --config, per-file-ignores, exclude, noqa and skip-file."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from cli_support import BAD, HEADER, ONLY, TL201_LINE, check_json, codes_by_line, isolate, torchlint


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# -- where the configuration comes from -----------------------------------------------


def test_nearest_pyproject_wins(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201"]\n')
    write(tmp_path / "inner" / "pyproject.toml", '[tool.torchlint]\nselect = ["TL401"]\n')
    write(tmp_path / "outer.py", BAD)
    write(tmp_path / "inner" / "pkg" / "m.py", BAD)
    code, items, _ = check_json("outer.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL201"}
    code, items, _ = check_json("inner/pkg/m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL401"}
    # Run from inside the inner project: same answer.
    code, items, _ = check_json("pkg/m.py", cwd=tmp_path / "inner")
    assert {i["code"] for i in items} == {"TL401"}


def test_pyproject_without_our_table_is_skipped(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL401"]\n')
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "x"\n[tool.black]\nline-length = 100\n')
    write(tmp_path / "inner" / "m.py", BAD)
    code, items, _ = check_json("inner/m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL401"}


def test_config_file_option(tmp_path):
    isolate(tmp_path)
    write(tmp_path / "m.py", BAD)
    write(tmp_path / "cfg" / "torchlint.toml", 'select = ["TL401"]\n')
    code, items, _ = check_json("--config", "cfg/torchlint.toml", "m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL401"}
    # A pyproject.toml given with --config is read from its [tool.torchlint] table.
    write(tmp_path / "other" / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201"]\n')
    code, items, _ = check_json("--config", "other/pyproject.toml", "m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL201"}


def test_missing_config_file_is_named(tmp_path):
    write(tmp_path / "m.py", BAD)
    proc = torchlint("check", "--config", "nope.toml", "m.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nope.toml" in proc.stderr


def test_command_line_refines_the_configuration(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201"]\n')
    write(tmp_path / "m.py", BAD)
    code, items, _ = check_json("--extend-select", "TL401", "m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL201", "TL401"}
    code, items, _ = check_json("--select", "TL401", "m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL401"}


def test_config_ignore_and_extend_select(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL4"]\nextend-select = ["log-of-softmax"]\nignore = ["TL401"]\n')
    write(tmp_path / "m.py", BAD)
    code, items, _ = check_json("m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL201"}


def test_config_unsafe_fixes(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nunsafe-fixes = true\n')
    write(tmp_path / "m.py", BAD)
    proc = torchlint("check", "--fix", "m.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (tmp_path / "m.py").read_text(encoding="utf-8")
    assert "map_location" in text and "log_softmax" in text
    # --no-unsafe-fixes on the command line overrides it.
    write(tmp_path / "n.py", BAD)
    proc = torchlint("check", "--fix", "--no-unsafe-fixes", "n.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "map_location" not in (tmp_path / "n.py").read_text(encoding="utf-8")


# -- configuration errors: exit 2, the key and the file named -------------------------


@pytest.mark.parametrize(
    "table, key",
    [
        ('bogus = 1', "bogus"),
        ('selct = ["TL201"]', "selct"),
        ('select = "TL201"', "select"),
        ('select = ["TL999"]', "select"),
        ('ignore = [1]', "ignore"),
        ('extend-select = ["nope"]', "extend-select"),
        ('eps = "small"', "eps"),
        ('eps = 0', "eps"),
        ('eps = true', "eps"),
        ('target-torch-version = 2.4', "target-torch-version"),
        ('target-torch-version = "two"', "target-torch-version"),
        ('unsafe-fixes = "yes"', "unsafe-fixes"),
        ('per-file-ignores = ["tests/*"]', "per-file-ignores"),
        ('per-file-ignores = {"tests/*" = "TL201"}', "per-file-ignores"),
        ('per-file-ignores = {"tests/*" = ["TL9"]}', "per-file-ignores"),
        ('exclude = "build"', "exclude"),
    ],
)
def test_bad_configuration_names_key_and_file(tmp_path, table, key):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\n" + table + "\n")
    write(tmp_path / "m.py", BAD)
    proc = torchlint("check", "m.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert str(tmp_path / "pyproject.toml") in proc.stderr
    assert key in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_bad_value_in_config_file_option_names_that_file(tmp_path):
    isolate(tmp_path)
    write(tmp_path / "m.py", BAD)
    write(tmp_path / "lint.toml", "eps = -1\n")
    proc = torchlint("check", "--config", "lint.toml", "m.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "lint.toml" in proc.stderr and "eps" in proc.stderr


def test_good_values_are_accepted(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchlint]\nselect = ["ALL"]\neps = 1e-8\ntarget-torch-version = "2.4"\nunsafe-fixes = false\n'
        'exclude = ["build"]\nextend-exclude = ["gen_*.py"]\n[tool.torchlint.per-file-ignores]\n"tests/*" = ["TL2"]\n',
    )
    write(tmp_path / "m.py", BAD)
    code, items, proc = check_json("m.py", cwd=tmp_path)
    assert code == 1, proc.stderr
    assert {"TL201", "TL401"} <= {i["code"] for i in items}


# -- per-file-ignores and exclude -----------------------------------------------------


def test_per_file_ignores(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchlint]\nselect = ["TL201", "TL401"]\n[tool.torchlint.per-file-ignores]\n'
        '"tests/*" = ["TL401"]\n"legacy.py" = ["log-of-softmax", "TL4"]\n',
    )
    for name in ("tests/test_a.py", "legacy.py", "src/model.py"):
        write(tmp_path / name, BAD)
    code, items, _ = check_json(".", cwd=tmp_path)
    assert codes_by_line(items) == [
        ("./src/model.py", 4, "TL201"),
        ("./src/model.py", 5, "TL401"),
        ("./tests/test_a.py", 4, "TL201"),
    ]
    # The patterns are relative to the configuration's folder, wherever the run starts.
    code, items, _ = check_json("test_a.py", cwd=tmp_path / "tests")
    assert {i["code"] for i in items} == {"TL201"}


def test_exclude(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nexclude = ["generated", "*_pb2.py"]\n')
    write(tmp_path / "generated" / "m.py", BAD)
    write(tmp_path / "pkg" / "model_pb2.py", BAD)
    write(tmp_path / "pkg" / "model.py", BAD)
    code, items, _ = check_json(".", cwd=tmp_path)
    assert {i["path"] for i in items} == {"./pkg/model.py"}
    # A file named on the command line is linted anyway, unless --force-exclude.
    code, items, _ = check_json("generated/m.py", cwd=tmp_path)
    assert {i["path"] for i in items} == {"generated/m.py"}
    code, items, _ = check_json("--force-exclude", "generated/m.py", "pkg/model_pb2.py", cwd=tmp_path)
    assert items == [] and code == 0


def test_default_excludes_skip_virtualenvs(tmp_path):
    isolate(tmp_path)
    write(tmp_path / ".venv" / "lib" / "m.py", BAD)
    write(tmp_path / "build" / "m.py", BAD)
    write(tmp_path / "src" / "m.py", BAD)
    code, items, _ = check_json(*ONLY, ".", cwd=tmp_path)
    assert {i["path"] for i in items} == {"./src/m.py"}


def test_non_python_files_are_not_linted(tmp_path):
    isolate(tmp_path)
    write(tmp_path / "notes.txt", BAD)
    write(tmp_path / "script.py.bak", BAD)
    write(tmp_path / "stub.pyi", BAD)
    code, items, _ = check_json(*ONLY, ".", cwd=tmp_path)
    assert {i["path"] for i in items} == {"./stub.pyi"}


# -- noqa ----------------------------------------------------------------------------

NOQA_CASES = [
    ("# noqa", set()),
    ("# NOQA", set()),
    ("#noqa", {"TL201", "TL401"}),  # flake8 wants "# noqa" with the space
    ("# noqa: TL201", {"TL401"}),
    ("# noqa:TL201", {"TL401"}),
    ("# NoQA: TL201", {"TL401"}),
    ("# noqa: TL201,TL401", set()),
    ("# noqa: TL201, TL401", set()),
    ("# noqa: TL201 TL401", set()),
    ("# noqa: TL4", {"TL201"}),
    ("# noqa: TL", set()),
    ("# noqa: TL999", {"TL201", "TL401"}),
    ("# noqa: E501", {"TL201", "TL401"}),
    ("# noqa: TL999,TL401", {"TL201"}),
    ("# noqa: tl201", {"TL201", "TL401"}),  # flake8 compares codes case-sensitively
    ("# type: ignore  # noqa: TL201", {"TL401"}),
    ("# not a noqa comment", {"TL201", "TL401"}),
    ("# noqa: TL201x", {"TL401"}),  # flake8 reads the code TL201 and stops at the x
    ("# noqa:,,", set()),  # no codes after the colon: a blanket noqa, as in flake8
    ("# noqa: \u00e9\u00e9", set()),
]


@pytest.mark.parametrize("comment, remaining", NOQA_CASES, ids=[c for c, _ in NOQA_CASES])
def test_noqa(tmp_path, comment, remaining):
    isolate(tmp_path)
    write(tmp_path / "m.py", HEADER + "y = torch.log(F.softmax(torch.load(p), dim=-1))  " + comment + "\n")
    code, items, proc = check_json(*ONLY, "m.py", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert {i["code"] for i in items} == remaining
    assert code == (1 if remaining else 0)


def test_noqa_on_a_multiline_statement(tmp_path):
    isolate(tmp_path)
    write(tmp_path / "m.py", HEADER + 'y = torch.log(F.softmax(x, dim=-1)) + len("""\ntext\n""")  # noqa: TL201\n' + TL201_LINE + "\n")
    code, items, _ = check_json(*ONLY, "m.py", cwd=tmp_path)
    assert [(i["line"], i["code"]) for i in items] == [(6, "TL201")]


def test_noqa_agrees_with_flake8(tmp_path):
    flake8 = shutil.which("flake8", path=str(__import__("pathlib").Path(sys.executable).parent))
    if flake8 is None:
        pytest.skip("flake8 is not installed next to this interpreter")
    isolate(tmp_path)
    body = HEADER + "".join(
        f"y{i} = torch.log(F.softmax(torch.load(p), dim=-1))  {comment}\n" for i, (comment, _) in enumerate(NOQA_CASES)
    )
    write(tmp_path / "m.py", body)
    code, items, _ = check_json(*ONLY, "m.py", cwd=tmp_path)
    ours = sorted((i["line"], i["column"], i["code"]) for i in items)
    proc = subprocess.run(
        [flake8, "--select", "TL201,TL401", "--format", "%(row)d:%(col)d:%(code)s", "m.py"], cwd=tmp_path, capture_output=True, text=True
    )
    theirs = sorted(tuple(int(p) if p.isdigit() else p for p in line.split(":")) for line in proc.stdout.splitlines())
    assert ours == theirs
    assert ours  # some lines are reported, so the comparison is not vacuous


def test_fix_leaves_noqa_lines_alone(tmp_path):
    isolate(tmp_path)
    text = HEADER + TL201_LINE + "  # noqa: TL201\n" + TL201_LINE + "\n"
    write(tmp_path / "m.py", text)
    proc = torchlint("check", *ONLY, "--fix", "m.py", cwd=tmp_path)
    assert proc.returncode == 0
    lines = (tmp_path / "m.py").read_text(encoding="utf-8").splitlines()
    assert lines[2] == TL201_LINE + "  # noqa: TL201"
    assert lines[3] == "y = F.log_softmax(x, dim=-1)"


# -- skip-file -------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["# torchlint: skip-file", "#torchlint:skip-file", "    # torchlint: skip-file  (generated)"])
def test_skip_file(tmp_path, marker):
    isolate(tmp_path)
    write(tmp_path / "skipped.py", marker + "\n" + BAD)
    write(tmp_path / "m.py", BAD)
    code, items, proc = check_json(*ONLY, ".", cwd=tmp_path)
    assert {i["path"] for i in items} == {"./m.py"}
    before = (tmp_path / "skipped.py").read_bytes()
    torchlint("check", *ONLY, "--fix", "--unsafe-fixes", ".", cwd=tmp_path)
    assert (tmp_path / "skipped.py").read_bytes() == before


def test_skip_file_in_a_string_does_not_skip(tmp_path):
    isolate(tmp_path)
    write(tmp_path / "m.py", 'NOTE = "# torchlint: skip-file"\n' + BAD)
    code, items, _ = check_json(*ONLY, "m.py", cwd=tmp_path)
    assert {i["code"] for i in items} == {"TL201", "TL401"}


# -- what ruff and flake8 users expect: --extend-ignore, --show-settings, --show-files ------------------


def _in_process(argv, cwd, monkeypatch, capsys):
    from torchlint import cli

    monkeypatch.chdir(cwd)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_extend_ignore_removes_on_top_of_the_configured_ignore(tmp_path, monkeypatch, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nignore = ["TL401"]\n')
    write(tmp_path / "m.py", BAD)
    code, out, _ = _in_process(["check", "--output-format", "json", "--no-cache", "m.py"], tmp_path, monkeypatch, capsys)
    assert '"TL201"' in out and '"TL401"' not in out
    code, out, _ = _in_process(["check", "--extend-ignore", "TL201", "--output-format", "json", "--no-cache", "m.py"], tmp_path, monkeypatch, capsys)
    assert code == 0 and out.strip() == "[]"


def test_show_settings_prints_what_applies_and_checks_nothing(tmp_path, monkeypatch, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL2"]\nconfidence-level = "medium"\ntarget-torch-version = "2.4"\n')
    write(tmp_path / "m.py", BAD)
    code, out, _ = _in_process(["check", "--show-settings", "--ignore", "TL205"], tmp_path, monkeypatch, capsys)
    assert code == 0
    settings = dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line and not line.startswith("per-file"))
    assert settings["config-file"].endswith("pyproject.toml")
    assert "TL201" in settings["select"] and "TL205" not in settings["select"] and "TL401" not in settings["select"]
    assert settings["confidence-level"] == "medium" and settings["target-torch-version"] == "2.4"
    assert "TL201" not in out.split("select = ")[0]  # no finding was printed before the settings


def test_show_files_lists_the_files_a_run_would_check(tmp_path, monkeypatch, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nextend-exclude = ["generated"]\n')
    write(tmp_path / "train.py", BAD)
    write(tmp_path / "generated" / "g.py", BAD)
    write(tmp_path / "notes.txt", "not python")
    code, out, _ = _in_process(["check", "--show-files", "."], tmp_path, monkeypatch, capsys)
    assert code == 0
    assert [line.replace("\\", "/") for line in out.splitlines()] == ["./train.py"]
    code, _, err = _in_process(["check", "--show-files", "missing.py"], tmp_path, monkeypatch, capsys)
    assert code == 2 and "missing.py" in err


def test_server_help_says_how_it_runs_where_settings_come_from_and_what_to_install(capsys):
    from torchlint import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(["server", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exited.value.code == 0
    assert "standard input and output" in out and "[tool.torchlint]" in out
    assert 'pip install "torchlint[server]"' in out and 'pip install ".[server]"' in out


def _fixes_by_code(out: str) -> dict:
    import json

    return {item["code"]: item["fix"] is not None for item in json.loads(out)}


def test_unfixable_in_the_config_reports_the_finding_without_its_fix(tmp_path, monkeypatch, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nunfixable = ["TL2"]\n')
    write(tmp_path / "m.py", BAD)
    code, out, _ = _in_process(["check", "--output-format", "json", "m.py"], tmp_path, monkeypatch, capsys)
    assert code == 1 and _fixes_by_code(out) == {"TL201": False, "TL401": True}
    code, _, _ = _in_process(["check", "--fix", "m.py"], tmp_path, monkeypatch, capsys)
    assert TL201_LINE in (tmp_path / "m.py").read_text()  # the unfixable rule's line is left as it was


def test_fixable_on_the_command_line_replaces_the_config_and_unfixable_adds(tmp_path, monkeypatch, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nunfixable = ["TL2"]\n')
    write(tmp_path / "m.py", BAD)
    code, out, _ = _in_process(["check", "--output-format", "json", "--fixable", "TL201", "m.py"], tmp_path, monkeypatch, capsys)
    assert _fixes_by_code(out) == {"TL201": False, "TL401": False}  # fixable narrows to TL201, unfixable removes it
    code, out, _ = _in_process(["check", "--output-format", "json", "--unfixable", "TL401", "m.py"], tmp_path, monkeypatch, capsys)
    assert _fixes_by_code(out) == {"TL201": False, "TL401": False}
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nselect = ["TL201", "TL401"]\nunfixable = ["TL9"]\n')
    code, _, err = _in_process(["check", "m.py"], tmp_path, monkeypatch, capsys)
    assert code == 2 and "unfixable" in err and "TL9" in err
