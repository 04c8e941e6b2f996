"""Bad input (issue 8): each gets a clear message naming the file, and the run goes on with the other files."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from cli_support import BAD, HEADER, ONLY, TL201_LINE, check_json, isolate, torchlint

# Every bad file also mentions the rules' trigger words, so the engine really looks at it.
TRIGGERS = "\n" + TL201_LINE + "\n"


@pytest.fixture
def project(tmp_path):
    isolate(tmp_path)
    (tmp_path / "good.py").write_text(BAD, encoding="utf-8")
    return tmp_path


def run_with_good(project, *names, extra=()):
    """Lint good.py and the named files; the good file is always linted (and fixed, with --fix)."""
    proc = torchlint("check", *ONLY, "--output-format", "json", *extra, "good.py", *names, cwd=project)
    assert "Traceback" not in proc.stderr, proc.stderr
    items = __import__("json").loads(proc.stdout)
    good = {(i["path"], i["line"], i["code"]) for i in items if i["path"] == "good.py"}
    if "--fix" in extra:
        assert "F.log_softmax(x, dim=-1)" in (project / "good.py").read_text(encoding="utf-8")
    else:
        assert good == {("good.py", 4, "TL201"), ("good.py", 5, "TL401")}
    return proc, items


def error_lines(proc, name):
    return [line for line in proc.stderr.splitlines() if name in line]


SYNTAX_ERRORS = {
    "unclosed-def": HEADER + "\ndef f(x:\n    return " + TL201_LINE + "\n",
    "unclosed-call": HEADER + TL201_LINE + "\nz = F.softmax(x,\n\nw = 1\n",
    "missing-colon": HEADER + "if x\n    " + TL201_LINE + "\n",
    "unexpected-indent": HEADER + TL201_LINE + "\n    w = 1\n",
    "python2-print": HEADER + TL201_LINE + '\nprint "done"\n',
}


@pytest.mark.parametrize("name", sorted(SYNTAX_ERRORS))
def test_syntax_error_is_reported_where_python_reports_it(project, name):
    text = SYNTAX_ERRORS[name]
    (project / "syntax.py").write_text(text, encoding="utf-8")
    with pytest.raises(SyntaxError) as python:
        compile(text, "syntax.py", "exec")
    proc, items = run_with_good(project, "syntax.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "syntax.py")
    # The place and the reason CPython gives (LibCST alone points at the next token, often a line late).
    assert f"syntax.py:{python.value.lineno}:{python.value.offset}: syntax error: {python.value.msg}" in line
    assert not any(i["path"] == "syntax.py" for i in items)


def test_undecodable_bytes(project):
    (project / "latin_undeclared.py").write_bytes(HEADER.encode() + b'name = "caf\xe9"' + TRIGGERS.encode())
    proc, _ = run_with_good(project, "latin_undeclared.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "latin_undeclared.py")
    assert "latin_undeclared.py:3:12:" in line  # the offending byte's line and column
    assert "0xe9" in line and "utf-8" in line


def test_declared_latin1_is_linted_and_fixed(project):
    data = b"# -*- coding: latin-1 -*-\n" + HEADER.encode() + b'name = "caf\xe9"\n' + TL201_LINE.encode() + b"\n"
    (project / "latin.py").write_bytes(data)
    proc, items = run_with_good(project, "latin.py")
    assert proc.returncode == 1
    assert [(i["line"], i["code"]) for i in items if i["path"] == "latin.py"] == [(5, "TL201")]
    torchlint("check", "--select", "TL201", "--fix", "latin.py", cwd=project)
    assert (project / "latin.py").read_bytes() == data.replace(TL201_LINE.encode(), b"y = F.log_softmax(x, dim=-1)")


def test_nul_byte(project):
    (project / "nul.py").write_bytes(HEADER.encode() + b"x = 1\x00\n" + TRIGGERS.encode())
    proc, _ = run_with_good(project, "nul.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "nul.py")
    assert "nul.py:3:" in line and "NUL" in line


def test_binary_file_named_py(project):
    # Deterministic "random" bytes with no NUL, that are not UTF-8.
    data = bytes((i * 37 + 11) % 255 + 1 for i in range(4096))
    (project / "blob.py").write_bytes(data)
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    (project / "image.py").write_bytes(png)
    proc, _ = run_with_good(project, "blob.py", "image.py")
    assert proc.returncode == 2
    assert len(error_lines(proc, "blob.py")) == 1
    assert len(error_lines(proc, "image.py")) == 1
    with pytest.raises(UnicodeDecodeError) as decode_error:
        data.decode("utf-8")
    first_bad = decode_error.value.start
    column = first_bad - data.rfind(b"\n", 0, first_bad)
    line = data.count(b"\n", 0, first_bad) + 1
    assert f"blob.py:{line}:{column}: cannot decode byte 0x{data[first_bad]:02x} as utf-8" in error_lines(proc, "blob.py")[0]
    assert "image.py:3:1: source contains a NUL byte" in error_lines(proc, "image.py")[0]


def test_unknown_coding_cookie_and_bom_conflict(project):
    (project / "cookie.py").write_bytes(b"# coding: no-such-codec\n" + BAD.encode())
    (project / "conflict.py").write_bytes(b"\xef\xbb\xbf# coding: latin-1\n" + BAD.encode())
    proc, _ = run_with_good(project, "cookie.py", "conflict.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "cookie.py")
    assert "cookie.py:1:1: cannot determine encoding: unknown encoding: no-such-codec" in line
    (line,) = error_lines(proc, "conflict.py")
    assert "conflict.py:1:1:" in line and "byte order mark" in line


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n", b"\xef\xbb\xbf\n", b"   "], ids=["empty", "only-bom", "newline", "bom-newline", "spaces"])
def test_empty_files_are_clean(project, content):
    (project / "empty.py").write_bytes(content)
    proc, items = run_with_good(project, "empty.py", extra=("--fix", "--unsafe-fixes"))
    assert proc.returncode == 0, proc.stderr  # the good file's fixes applied; nothing remains anywhere
    assert items == []
    assert (project / "empty.py").read_bytes() == content
    assert not error_lines(proc, "empty.py")


def test_deeply_nested_parentheses(project):
    # CPython refuses more than 200 nested brackets; LibCST's native parser overflows the C stack.
    (project / "deep.py").write_text(HEADER + "x = " + "(" * 5000 + "1" + ")" * 5000 + TRIGGERS, encoding="utf-8")
    (project / "deep_calls.py").write_text(HEADER + "x = " + "torch.log(F.softmax(" * 400 + "x" + "))" * 400 + "\n", encoding="utf-8")
    proc, _ = run_with_good(project, "deep.py", "deep_calls.py", extra=("--fix",))
    assert proc.returncode == 2
    (line,) = error_lines(proc, "deep.py")
    assert "deep.py:3:205: syntax error: too many nested parentheses" in line
    (line,) = error_lines(proc, "deep_calls.py")
    assert "too many nested parentheses" in line


@pytest.mark.parametrize(
    "expression",
    ["-" * 50000 + "x", "not " * 50000 + "x", "lambda: " * 5000 + "x", "**".join(["x"] * 50000)],
    ids=["unary-minus", "not", "lambda", "power"],
)
def test_long_operator_chains(project, expression):
    # No brackets, yet as deep: LibCST's parser overflows the C stack on these.
    (project / "chain.py").write_text(HEADER + "z = " + expression + TRIGGERS, encoding="utf-8")
    proc, _ = run_with_good(project, "chain.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "chain.py")
    assert re.search(r"chain\.py:3:[56]: syntax error: expression nested too deeply", line), line


def test_operator_lookalikes_in_comments_are_fine(project):
    (project / "dashes.py").write_text(HEADER + "# " + "-" * 3000 + "\n" + 'RULE = "' + "~" * 3000 + '"' + TRIGGERS, encoding="utf-8")
    proc, items = run_with_good(project, "dashes.py")
    assert proc.returncode == 1, proc.stderr
    assert [(i["line"], i["code"]) for i in items if i["path"] == "dashes.py"] == [(5, "TL201")]


def test_brackets_inside_strings_do_not_count(project):
    (project / "strings.py").write_text(HEADER + 'PATTERN = "' + "(" * 500 + '"\n' + "# " + "[" * 500 + "\n" + TL201_LINE + "\n", encoding="utf-8")
    proc, items = run_with_good(project, "strings.py")
    assert proc.returncode == 1, proc.stderr
    assert [(i["line"], i["code"]) for i in items if i["path"] == "strings.py"] == [(5, "TL201")]


@pytest.mark.parametrize("depth", [200, 201])
def test_nesting_limit_is_pythons(project, depth):
    # The call itself opens two brackets.
    text = HEADER + "x = " + "(" * (depth - 2) + TL201_LINE.split(" = ")[1] + ")" * (depth - 2) + "\n"
    try:
        compile(text, "limit.py", "exec")
        python_accepts = True
    except SyntaxError as exc:
        assert "too many nested parentheses" in str(exc)
        python_accepts = False
    assert python_accepts == (depth == 200)
    (project / "limit.py").write_text(text, encoding="utf-8")
    proc, items = run_with_good(project, "limit.py")
    if python_accepts:
        assert proc.returncode == 1, proc.stderr
        assert [i["code"] for i in items if i["path"] == "limit.py"] == ["TL201"]
    else:
        assert proc.returncode == 2
        assert "limit.py:3:" in proc.stderr and "too many nested parentheses" in proc.stderr


def test_long_call_chain(project):
    # 1000 chained calls parse, but the tree is deeper than Python's recursion limit.
    (project / "chain.py").write_text(HEADER + "x = torch" + ".f()" * 1000 + TRIGGERS, encoding="utf-8")
    proc, _ = run_with_good(project, "chain.py")
    assert proc.returncode == 2
    (line,) = error_lines(proc, "chain.py")
    assert "chain.py:" in line and "deep" in line


def test_symlink_loops(project):
    loop = project / "pkg"
    loop.mkdir()
    (loop / "m.py").write_text(BAD, encoding="utf-8")
    os.symlink("..", loop / "parent")  # a directory cycle
    os.symlink("self.py", loop / "self.py")  # a link to itself
    os.symlink("b.py", loop / "a.py")
    os.symlink("a.py", loop / "b.py")  # two links in a ring
    proc = torchlint("check", *ONLY, "--output-format", "json", ".", cwd=project, timeout=120)
    assert "Traceback" not in proc.stderr
    items = __import__("json").loads(proc.stdout)
    # Each real file exactly once, however many ways lead to it.
    assert sorted((i["path"], i["code"]) for i in items) == [
        ("./good.py", "TL201"), ("./good.py", "TL401"), ("./pkg/m.py", "TL201"), ("./pkg/m.py", "TL401"),
    ]
    assert proc.returncode == 2
    for name in ("self.py", "a.py", "b.py"):
        (line,) = error_lines(proc, "pkg/" + name)
        assert "cannot read" in line and "symbolic links" in line


def test_unreadable_file_and_folder(project):
    secret = project / "secret.py"
    secret.write_text(BAD, encoding="utf-8")
    locked = project / "locked"
    locked.mkdir()
    (locked / "inner.py").write_text(BAD, encoding="utf-8")
    os.chmod(secret, 0)
    os.chmod(locked, 0)
    try:
        if os.access(secret, os.R_OK) or os.access(locked, os.R_OK | os.X_OK):
            pytest.skip("running with privileges that read any file (root)")
        proc = torchlint("check", *ONLY, "--output-format", "json", ".", cwd=project)
        items = __import__("json").loads(proc.stdout)
        assert {i["path"] for i in items} == {"./good.py"}
        assert proc.returncode == 2
        (line,) = error_lines(proc, "secret.py")
        assert "cannot read" in line and "ermission" in line
        assert error_lines(proc, "locked"), proc.stderr
    finally:
        os.chmod(secret, 0o644)
        os.chmod(locked, 0o755)


def test_invalid_pyproject_with_our_table_is_a_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint\nselect = ["TL201"]\n', encoding="utf-8")
    (tmp_path / "m.py").write_text(BAD, encoding="utf-8")
    proc = torchlint("check", "m.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert str(tmp_path / "pyproject.toml") in proc.stderr
    assert "invalid TOML" in proc.stderr and "line 1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_pyproject_of_another_tool_is_not_ours_to_judge(tmp_path):
    outer = tmp_path / "pyproject.toml"
    outer.write_text('[tool.torchlint]\nselect = ["TL401"]\n', encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.black\nline-length = "x"\n', encoding="utf-8")
    (tmp_path / "pkg" / "m.py").write_text(BAD, encoding="utf-8")
    code, items, proc = check_json("pkg/m.py", cwd=tmp_path)
    assert code == 1, proc.stderr
    assert {i["code"] for i in items} == {"TL401"}


# (``# noqa:,,`` has no codes at all: flake8 reads it as a blanket ``# noqa``, and so do we; see test_cli_config.)
@pytest.mark.parametrize("comment", ["# noqa: TL999", "# noqa: XYZ123", "# noqa: TL999,", "# noqa: TL2O1", "# noqa: TL2010"])
def test_unknown_codes_in_noqa_neither_crash_nor_suppress(project, comment):
    (project / "m.py").write_text(HEADER + TL201_LINE + "  " + comment + "\n", encoding="utf-8")
    proc, items = run_with_good(project, "m.py")
    assert proc.returncode == 1
    assert [(i["path"], i["code"]) for i in items if i["path"] == "m.py"] == [("m.py", "TL201")]


def test_unknown_code_in_select_names_it(project):
    proc = torchlint("check", "--select", "TL201,TL777", "good.py", cwd=project)
    assert proc.returncode == 2
    assert "'TL777'" in proc.stderr and "--select" in proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr


def test_a_large_generated_file(project):
    # ~1 MB of ordinary code with one finding at the end: linted, not choked on.
    body = "".join(f"def f{i}(x):\n    return torch.relu(x) * {i}\n\n" for i in range(20000))
    (project / "big.py").write_text(HEADER + body + TL201_LINE + "\n", encoding="utf-8")
    proc, items = run_with_good(project, "big.py")
    assert proc.returncode == 1, proc.stderr
    lines = (HEADER + body).count("\n") + 1
    assert [(i["line"], i["code"]) for i in items if i["path"] == "big.py"] == [(lines, "TL201")]


def test_engine_entry_points_refuse_code_nested_deeper_than_python_allows():
    # The flake8 plugin and library callers reach engine.lint_text/fix_text without the CLI;
    # LibCST's native parser would crash the process, so the check runs in a child process.
    script = (
        "from torchlint import config, engine, registry\n"
        "settings = config.Settings(enabled=frozenset(registry.all_rules()))\n"
        "text = 'import torch\\nx = ' + '(' * 5000 + 'torch.log(y)' + ')' * 5000 + '\\n'\n"
        "for result in (engine.lint_text(text, 'deep.py', settings), engine.fix_text(text, 'deep.py', settings).result):\n"
        "    [d] = result.diagnostics\n"
        "    print(d.kind, d.line, d.message)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["parse 2 syntax error: too many nested parentheses"] * 2


def test_unreadable_file_and_folder_whoever_runs_the_check(project, monkeypatch, capsys):
    """The refusal is the file system's to give, and root is never refused: the same code path, with the refusal
    simulated where the check reads (so it runs under root, as CI does)."""
    from torchlint import cli

    secret = project / "secret.py"
    secret.write_text(BAD, encoding="utf-8")
    locked = project / "locked"
    locked.mkdir()
    (locked / "inner.py").write_text(BAD, encoding="utf-8")
    real_open, real_scandir = open, os.scandir

    def refusing_open(file, *args, **kwargs):
        if os.path.basename(str(file)) == "secret.py":
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def refusing_scandir(path="."):
        if os.path.basename(os.path.normpath(str(path))) == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.chdir(project)
    monkeypatch.setattr("builtins.open", refusing_open)
    monkeypatch.setattr(os, "scandir", refusing_scandir)
    code = cli.main(["check", *ONLY, "--no-cache", "-j", "1", "--output-format", "json", "."])
    out, err = capsys.readouterr()
    items = __import__("json").loads(out)
    assert {i["path"] for i in items} == {"./good.py"}
    assert code == 2
    assert "secret.py" in err and "cannot read file" in err and "ermission" in err
    assert "locked" in err and "cannot read folder" in err
