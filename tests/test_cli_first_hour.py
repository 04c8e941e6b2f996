"""Small surprises a ruff user meets in the first hour (issue 35, point 5): a closed pipe, a repeated --select,
a typo in a key or a rule code, a target torch newer than torchlint knows."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from cli_support import BAD, CLEAN, ONLY, isolate
from torchlint import cli, config, registry
from torchlint.analysis.api import api_table


@pytest.fixture
def project(tmp_path, monkeypatch):
    isolate(tmp_path)
    (tmp_path / "bad.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check_codes(capsys, *options: str) -> set:
    """The codes ``torchlint check --output-format json OPTIONS bad.py`` reports, run in-process."""
    status = cli.main(["check", "--no-cache", "--exit-zero", "--output-format", "json", *options, "bad.py"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return {finding["code"] for finding in json.loads(captured.out)}


def error_of(capsys, argv) -> str:
    """The error line of a run that must be refused as a usage or configuration error (exit 2, nothing on stdout)."""
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    return captured.err


# -- a reader that goes away: `torchlint rules | head -1` ------------------------------


def run_into_closed_pipe(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m torchlint ARGS`` with its standard output a pipe whose reading end is closed before it writes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchlint", *args], cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # `head -1` has read its line and gone: every write is EPIPE
    err = proc.stderr.read().decode("utf-8", "replace")
    proc.stderr.close()
    proc.wait(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)


def test_rules_into_a_closed_pipe_exits_0_without_a_traceback(project):
    proc = run_into_closed_pipe("rules", cwd=project)
    assert proc.returncode == 0
    assert proc.stderr == ""


@pytest.mark.parametrize("path, expected", [("bad.py", 1), ("clean.py", 0)])
def test_check_into_a_closed_pipe_keeps_the_exit_code_of_its_findings(project, path, expected):
    proc = run_into_closed_pipe("check", *ONLY, "--no-cache", path, cwd=project)
    assert proc.returncode == expected
    assert proc.stderr == ""


class ClosedPipe(io.StringIO):
    """A standard output whose reader has gone; it is no file, so nothing can be pointed at os.devnull."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["rules"], 0),
        (["rule", "TL201"], 0),
        (["check", *ONLY, "--no-cache", "bad.py"], 1),
        (["check", *ONLY, "--no-cache", "--output-format", "full", "bad.py"], 1),
        (["check", *ONLY, "--no-cache", "--diff", "bad.py"], 1),
        (["check", *ONLY, "--no-cache", "clean.py"], 0),
    ],
)
def test_a_closed_standard_output_is_not_an_error(project, monkeypatch, capsys, argv, expected):
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(argv) == expected
    assert isinstance(sys.stdout, ClosedPipe)  # the guard is gone once main returns
    assert "Traceback" not in capsys.readouterr().err


def test_a_closed_pipe_does_not_stop_the_run(project, monkeypatch, capsys):
    # The first file's diff breaks the pipe; the second file is still checked, and counted.
    (project / "second.py").write_text(BAD, encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["check", "--select", "TL201", "--no-cache", "-j", "1", "--diff", "bad.py", "second.py"]) == 1
    assert capsys.readouterr().err == "Would fix 2 errors.\n"
    # --fix writes every file before its summary meets the closed pipe; nothing remains, so 0.
    assert cli.main(["check", "--select", "TL201", "--no-cache", "-j", "1", "--fix", "bad.py", "second.py"]) == 0
    for name in ("bad.py", "second.py"):
        assert "F.log_softmax" in (project / name).read_text(encoding="utf-8")


# -- repeated selection options accumulate, as in ruff ---------------------------------


@pytest.mark.parametrize(
    "options, expected",
    [
        (["--select", "TL201", "--select", "TL401"], {"TL201", "TL401"}),
        (["--select", "TL201,TL401"], {"TL201", "TL401"}),
        (["--select", "TL201", "--select", "load-without-map-location"], {"TL201", "TL401"}),
        (["--select", "TL201,TL401", "--select", "TL4"], {"TL201", "TL401"}),
        (["--select", "TL201"], {"TL201"}),
        (["--select", "ALL", "--ignore", "TL201", "--ignore", "TL401"], set()),
        (["--select", "TL201,TL401", "--ignore", "TL201,TL401"], set()),
        (["--select", "TL101", "--extend-select", "TL201", "--extend-select", "TL401"], {"TL201", "TL401"}),
    ],
)
def test_repeated_selection_options_accumulate(project, capsys, options, expected):
    assert check_codes(capsys, *options) & {"TL201", "TL401"} == expected


def test_repeated_select_still_replaces_the_configured_selection(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nselect = ["TL101"]\n', encoding="utf-8")
    assert check_codes(capsys) == set()
    assert check_codes(capsys, "--select", "TL201", "--select", "TL401") == {"TL201", "TL401"}


# -- a typo gets a suggestion ----------------------------------------------------------


def test_unknown_key_suggests_the_close_one(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nconfidence_level = "low"\n', encoding="utf-8")
    err = error_of(capsys, ["check", "--no-cache", "clean.py"])
    assert "unknown key 'confidence_level' in [tool.torchlint]; did you mean `confidence-level`?" in err
    assert "known keys: select, ignore" in err
    assert str(project / "pyproject.toml") in err


def test_unknown_key_with_nothing_close_names_the_known_keys_only(project, capsys):
    (project / "pyproject.toml").write_text("[tool.torchlint]\nbogus = 1\n", encoding="utf-8")
    err = error_of(capsys, ["check", "--no-cache", "clean.py"])
    assert "unknown key 'bogus'" in err and "known keys:" in err
    assert "did you mean" not in err


@pytest.mark.parametrize(
    "option, selector, suggestion",
    [
        ("--select", "TL2011", "TL201"),
        ("--select", "tl4011", "TL401"),
        ("--ignore", "log-of-softmx", "log-of-softmax"),
        ("--extend-select", "unguarded_sqrt", "unguarded-sqrt"),
    ],
)
def test_unknown_selector_suggests_the_close_one(project, capsys, option, selector, suggestion):
    err = error_of(capsys, ["check", "--no-cache", option, selector, "bad.py"])
    assert f"{option}: unknown rule selector {selector!r}; did you mean `{suggestion}`?" in err


@pytest.mark.parametrize("selector", ["TL999", "TL9", "XYZ", "no-such-rule", "TL1O1"])
def test_unknown_selector_without_one_close_code_suggests_nothing(project, capsys, selector):
    # TL1O1 is one character from TL101 and from TL611 alike: a guess, so no suggestion.
    err = error_of(capsys, ["check", "--no-cache", "--select", selector, "bad.py"])
    assert f"unknown rule selector {selector!r} (expected a code" in err
    assert "did you mean" not in err


def test_unknown_selector_in_the_configuration_suggests_the_close_one(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL2011"]\n', encoding="utf-8")
    assert "did you mean `TL201`?" in error_of(capsys, ["check", "--no-cache", "clean.py"])


def test_unknown_rule_page_suggests_the_close_one(project, capsys):
    assert cli.main(["rule", "log-of-softmx"]) == 2
    assert "unknown rule 'log-of-softmx'; did you mean `log-of-softmax`?" in capsys.readouterr().err


def test_the_suggestion_is_kept_on_the_exception():
    with pytest.raises(registry.UnknownSelector) as raised:
        registry.expand_selector("TL2011")
    assert raised.value.selector == "TL2011" and raised.value.suggestion == "TL201"


# -- a target torch newer than the API tables, or no version at all --------------------

NEWEST = api_table.VERSIONS[-1]
NEWEST_TEXT = f"{NEWEST[0]}.{NEWEST[1]}"
NEXT_MINOR = f"{NEWEST[0]}.{NEWEST[1] + 1}"


def test_the_newest_known_torch_is_the_tables_newest():
    # Read from the start of torch_api.json alone; it must be what the loaded table says.
    assert config.newest_known_torch() == NEWEST


@pytest.mark.parametrize(
    "head, newest",
    [
        ('{"torch_versions":{"2.13":"2.13.0"},"versions":["1.11","2.13"],"apis":{', (2, 13)),
        ('{"versions":["1.11","2.10"],"read_statically":[],"apis":{"torch.x":{"versions":["9.9"]}}', (2, 10)),
        ('{"apis":{"torch.x":{"versions":["9.9"]}},"versions":["1.11","2.13"]}', None),  # after apis: load it all
        ('{"versions":["1.11","2.', None),  # cut off
        ('{"versions":[],"apis":{', None),
        ('{"versions":["two"],"apis":{', None),
        ('{"note":"no list","apis":{', None),
    ],
)
def test_the_newest_release_read_from_the_start_of_the_table(head, newest):
    assert config.newest_in_table_head(head) == newest


@pytest.mark.parametrize("version", ["9.9", NEXT_MINOR, f"{NEWEST[0] + 1}.0"])
def test_a_target_newer_than_the_tables_is_a_usage_error(project, capsys, version):
    err = error_of(capsys, ["check", "--no-cache", "--target-torch-version", version, "clean.py"])
    assert f"--target-torch-version {version} is newer than torch {NEWEST_TEXT}" in err
    assert f"give {NEWEST_TEXT} or older" in err


@pytest.mark.parametrize("version", ["abc", "2", "2.x", "v2.4", ""])
def test_a_target_that_is_no_version_is_a_usage_error_naming_the_newest(project, capsys, version):
    err = error_of(capsys, ["check", "--no-cache", "--target-torch-version", version, "clean.py"])
    assert f"--target-torch-version must be a version such as 2.4, got {version!r}" in err
    assert f"the newest torch release torchlint knows is {NEWEST_TEXT}" in err


@pytest.mark.parametrize("version", [NEWEST_TEXT, f"{NEWEST_TEXT}.1", "2.4", " 2.4 ", "1.13", "1.0", "0.4"])
def test_known_and_older_targets_still_work(project, capsys, version):
    # Older releases than the table's first (1.11) are fine: the drift rules' own records reach back further.
    assert cli.main(["check", "--no-cache", "--target-torch-version", version, "clean.py"]) == 0, capsys.readouterr().err


def test_a_configured_target_newer_than_the_tables_is_an_error_naming_the_file(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchlint]\ntarget-torch-version = "9.9"\n', encoding="utf-8")
    err = error_of(capsys, ["check", "--no-cache", "clean.py"])
    assert str(project / "pyproject.toml") in err
    assert f"target-torch-version '9.9' is newer than torch {NEWEST_TEXT}" in err
    # Every configured key is checked whatever the command line says, as a bad value of any other key is.
    assert cli.main(["check", "--no-cache", "--target-torch-version", "2.4", "clean.py"]) == 2


def test_a_configured_known_target_still_works(project, capsys):
    (project / "pyproject.toml").write_text(f'[tool.torchlint]\ntarget-torch-version = "{NEWEST_TEXT}"\n', encoding="utf-8")
    assert cli.main(["check", "--no-cache", "clean.py"]) == 0, capsys.readouterr().err
