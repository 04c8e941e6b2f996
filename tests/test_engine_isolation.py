"""The engine's contract for a rule that crashes.

An internal error in one rule on one file is reported as a diagnostic that
names the file, the rule and the exception; it never stops the other rules
on that file, nor any rule on the other files; and the CLI exits 2.

The crashing rules live in this module and are added to the registry with
monkeypatch (never as a file under torchlint/rules, which every run would load).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Type

import libcst as cst
import pytest

from torchlint import cli, config, engine, registry
from torchlint.rule import Applicability, FixSpec, Replacement, Rule

BAD_LOG = "import torch\n\n\ndef f(x):\n    return torch.log(torch.softmax(x, dim=-1))\n"
LOG_LINE = 5


class _Base(Rule):
    """
    ## What it does
    Nothing useful: a test double.

    ## Why is this bad?
    It is not.

    ## Example
    ```python
    torch.log(x)
    ```

    ## Use instead
    ```python
    torch.log(x)
    ```

    ## Fix safety
    None.
    """

    message = "test double"
    triggers = ("torch",)


class CrashOnVisit(_Base):
    code = "TL990"
    name = "crash-on-visit"

    def visit_Call(self, node: cst.Call) -> None:
        self.report(node)  # reported before the crash: must be dropped, not half-kept
        raise ZeroDivisionError("boom in visit")


class CrashOnLeave(_Base):
    code = "TL991"
    name = "crash-on-leave"

    def leave_Call(self, original_node: cst.Call) -> None:
        raise KeyError("boom in leave")


class CrashInInit(_Base):
    code = "TL992"
    name = "crash-in-init"

    def __init__(self, context) -> None:
        raise RuntimeError("boom in init")


class ReportsForeignNode(_Base):
    """Reports a node that is not part of the parsed tree (a rule bug: it has no position)."""

    code = "TL993"
    name = "reports-foreign-node"

    def visit_Call(self, node: cst.Call) -> None:
        self.report(cst.Name("made_up"))


class FixOfForeignNode(_Base):
    """Proposes a fix whose replaced node is not in the tree: the finding stays, the fix goes."""

    code = "TL994"
    name = "fix-of-foreign-node"
    fix_applicability = Applicability.SAFE

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "log":
            spec = FixSpec(Applicability.SAFE, "nonsense", (Replacement(cst.Name("made_up"), "x"),))
            self.report(node, fix=spec)


class CrashOnlyOnSecondFile(_Base):
    code = "TL995"
    name = "crash-only-on-marked-file"

    def visit_Module(self, node: cst.Module) -> None:
        if "CRASH_HERE" in self.context.source:
            raise ValueError("boom on the marked file")

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "softmax":
            self.report(node, "softmax seen")


def _with(monkeypatch: pytest.MonkeyPatch, *extra: Type[Rule]) -> Dict[str, Type[Rule]]:
    rules = dict(registry.all_rules())
    for rule in extra:
        rules[rule.code] = rule
    rules = dict(sorted(rules.items()))
    monkeypatch.setattr(registry, "all_rules", lambda: rules)
    return rules


def _settings(codes) -> config.Settings:
    return config.Settings(enabled=frozenset(codes))


def _internal(result: engine.LintResult):
    return [d for d in result.diagnostics if d.kind == "internal"]


@pytest.mark.parametrize(
    "crasher, exception",
    [
        (CrashOnVisit, "ZeroDivisionError: boom in visit"),
        (CrashOnLeave, "KeyError: 'boom in leave'"),
        (CrashInInit, "RuntimeError: boom in init"),
    ],
)
def test_a_crashing_rule_leaves_the_other_rules_findings(monkeypatch, crasher, exception):
    _with(monkeypatch, crasher)
    result = engine.lint_text(BAD_LOG, "pkg/model.py", _settings({"TL201", crasher.code}))

    assert [(f.code, f.location.line) for f in result.findings] == [("TL201", LOG_LINE)]
    (diagnostic,) = _internal(result)
    assert diagnostic.path == "pkg/model.py"
    assert crasher.code in diagnostic.message and crasher.name in diagnostic.message
    assert exception in diagnostic.message


def test_without_the_crashing_rule_the_findings_are_the_same(monkeypatch):
    _with(monkeypatch, CrashOnVisit)
    alone = engine.lint_text(BAD_LOG, "m.py", _settings({"TL201"}))
    together = engine.lint_text(BAD_LOG, "m.py", _settings({"TL201", "TL990"}))
    assert together.findings == alone.findings
    assert alone.findings and not alone.diagnostics


def test_a_report_of_a_node_outside_the_tree_is_an_internal_error_of_that_rule(monkeypatch):
    _with(monkeypatch, ReportsForeignNode)
    result = engine.lint_text(BAD_LOG, "m.py", _settings({"TL201", "TL993"}))
    assert [f.code for f in result.findings] == ["TL201"]
    (diagnostic,) = _internal(result)
    assert diagnostic.path == "m.py" and "TL993" in diagnostic.message


def test_a_fix_that_cannot_be_built_keeps_the_finding_and_the_other_fixes(monkeypatch):
    _with(monkeypatch, FixOfForeignNode)
    text = "import torch\n\ny = torch.softmax(x, -1).log()\n"
    settings = _settings({"TL201", "TL994"})
    result = engine.lint_text(text, "m.py", settings)
    codes = sorted(f.code for f in result.findings)
    assert codes == ["TL201", "TL994"]
    assert next(f for f in result.findings if f.code == "TL994").fix is None
    (diagnostic,) = _internal(result)
    assert "TL994" in diagnostic.message and "m.py" == diagnostic.path

    fixed = engine.fix_text(text, "m.py", settings, unsafe=True)
    assert fixed.applied == 1
    assert "log_softmax" in fixed.text


def test_fix_text_still_applies_the_other_rules_fixes(monkeypatch):
    _with(monkeypatch, CrashOnVisit)
    fixed = engine.fix_text(BAD_LOG, "m.py", _settings({"TL201", "TL990"}), unsafe=True)
    assert fixed.applied == 1
    assert "log_softmax" in fixed.text and "torch.log(" not in fixed.text
    assert any("TL990" in d.message for d in _internal(fixed.result))


def test_a_crash_on_one_file_does_not_stop_that_rule_on_other_files(monkeypatch):
    _with(monkeypatch, CrashOnlyOnSecondFile)
    settings = _settings({"TL995"})
    crashed = engine.lint_text("import torch\n# CRASH_HERE\ny = x.softmax(-1)\n", "a.py", settings)
    fine = engine.lint_text("import torch\ny = x.softmax(-1)\n", "b.py", settings)
    assert crashed.findings == [] and len(_internal(crashed)) == 1
    assert [f.message for f in fine.findings] == ["softmax seen"] and not fine.diagnostics


def _write(tmp_path: Path) -> Dict[str, Path]:
    files = {
        "a_crash.py": "import torch\n# CRASH_HERE\ny = x.softmax(-1)\nz = torch.log(torch.softmax(x, -1))\n",
        "b_fine.py": "import torch\ny = x.softmax(-1)\n",
        "c_fine.py": BAD_LOG,
    }
    paths = {}
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths[name] = path
    return paths


def test_cli_reports_the_crash_goes_on_and_exits_2(monkeypatch, tmp_path, capsys):
    _with(monkeypatch, CrashOnlyOnSecondFile)
    paths = _write(tmp_path)

    code = cli.main(["check", "--select", "TL201,TL995", "--no-cache", str(tmp_path)])
    out, err = capsys.readouterr()

    assert code == cli.EXIT_ERROR
    # The crash names the file, the rule and the exception.
    crash_lines = [line for line in err.splitlines() if "internal error" in line]
    assert len(crash_lines) == 1
    assert str(paths["a_crash.py"]) in crash_lines[0]
    assert "TL995" in crash_lines[0] and "ValueError: boom on the marked file" in crash_lines[0]
    # Every other finding of every file is still reported, the crashed rule's too on the other file.
    reported = sorted((Path(line.split(":")[0]).name, line.split(": ")[1].split()[0]) for line in out.splitlines() if ": TL" in line)
    assert reported == [("a_crash.py", "TL201"), ("b_fine.py", "TL995"), ("c_fine.py", "TL201"), ("c_fine.py", "TL995")]


def test_cli_fix_with_a_crashing_rule_fixes_the_rest_and_exits_2(monkeypatch, tmp_path, capsys):
    _with(monkeypatch, CrashOnVisit)
    paths = _write(tmp_path)

    code = cli.main(["check", "--select", "TL201,TL990", "--fix", "--unsafe-fixes", "--no-cache", str(tmp_path)])
    _, err = capsys.readouterr()

    assert code == cli.EXIT_ERROR
    assert "log_softmax" in paths["c_fine.py"].read_text(encoding="utf-8")
    assert "log_softmax" in paths["a_crash.py"].read_text(encoding="utf-8")
    assert paths["b_fine.py"].read_text(encoding="utf-8") == "import torch\ny = x.softmax(-1)\n"
    crash_files = {line[len("error: "):].split(":")[0] for line in err.splitlines() if "TL990" in line}
    assert crash_files == {str(p) for p in paths.values()}


def test_cli_exit_code_without_a_crash_is_not_2(monkeypatch, tmp_path, capsys):
    """The control: the same files and rule selection minus the crasher exit 1 (findings), not 2."""
    _with(monkeypatch, CrashOnlyOnSecondFile)
    _write(tmp_path)
    assert cli.main(["check", "--select", "TL201", "--no-cache", str(tmp_path)]) == cli.EXIT_FINDINGS
    capsys.readouterr()
