"""End-to-end --fix and --diff: what is written, what is not, and byte-exact encodings."""
from __future__ import annotations

import os
import re
import stat

import pytest

from cli_support import BAD, HEADER, ONLY, TL201_LINE, TL401_LINE, age, check_json, isolate, snapshot, torchlint

FIXED_TL201 = "y = F.log_softmax(x, dim=-1)"
FIXED_TL401 = "s = torch.load(p, map_location=device).to(device)"


@pytest.fixture
def project(tmp_path):
    isolate(tmp_path)
    return tmp_path


def test_fix_applies_safe_fixes_only(project):
    path = project / "m.py"
    path.write_text(BAD, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--fix", "m.py", cwd=project)
    assert proc.returncode == 1  # TL401's unsafe fix is not applied, so it remains
    assert path.read_text(encoding="utf-8") == BAD.replace(TL201_LINE, FIXED_TL201)
    assert "m.py:5:5: TL401" in proc.stdout
    assert "Found 2 errors (1 fixed, 1 remaining)." in proc.stdout


def test_unsafe_fixes(project):
    path = project / "m.py"
    path.write_text(BAD, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8") == BAD.replace(TL201_LINE, FIXED_TL201).replace(TL401_LINE, FIXED_TL401)
    assert "Found 2 errors (2 fixed, 0 remaining)." in proc.stdout


def test_nested_fixes_compose(project):
    path = project / "m.py"
    path.write_text(HEADER + 'device = "cpu"\ny = torch.log(F.softmax(torch.load(p).to(device), dim=-1))\n', encoding="utf-8")
    proc = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert path.read_text(encoding="utf-8") == HEADER + 'device = "cpu"\ny = F.log_softmax(torch.load(p, map_location=device).to(device), dim=-1)\n'
    # A second run finds nothing and writes nothing.
    before = snapshot(path)
    again = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    assert again.returncode == 0
    assert snapshot(path) == before


def test_fix_keeps_existing_keywords(project):
    path = project / "m.py"
    path.write_text(HEADER + "m.load_state_dict(torch.load(p, weights_only=True))\nt = torch.load(p, **options)\n", encoding="utf-8")
    torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    assert path.read_text(encoding="utf-8") == HEADER + 'm.load_state_dict(torch.load(p, weights_only=True, map_location="cpu"))\nt = torch.load(p, **options)\n'


def test_files_without_an_applied_fix_are_never_rewritten(project):
    files = {
        "clean.py": "import torch\nx = torch.zeros(3)\n",
        "unsafe_only.py": HEADER + TL401_LINE + "\n",  # a finding whose fix --fix does not apply
        "no_trigger.py": "print('hello')\n",
        "crlf_clean.py": "import torch\r\nx = 1\r\n",
        "suppressed.py": HEADER + TL201_LINE + "  # noqa\n",
        "broken.py": HEADER + "def f(:\n    " + TL201_LINE + "\n",
    }
    for name, text in files.items():
        (project / name).write_bytes(text.encode("utf-8"))
        age(project / name)
    os.chmod(project / "clean.py", 0o444)  # even a read-only file is left alone, not "fixed" to the same bytes
    before = {name: snapshot(project / name) for name in files}
    torchlint("check", *ONLY, "--fix", ".", cwd=project)
    torchlint("check", *ONLY, "--diff", ".", cwd=project)
    assert {name: snapshot(project / name) for name in files} == before
    assert sorted(p.name for p in project.iterdir()) == sorted([*files, "pyproject.toml"])


def test_diff_prints_a_unified_diff_and_writes_nothing(project):
    path = project / "m.py"
    path.write_text(BAD, encoding="utf-8")
    age(path)
    before = snapshot(path)
    proc = torchlint("check", *ONLY, "--diff", "m.py", cwd=project)
    assert proc.returncode == 1
    assert snapshot(path) == before
    assert proc.stdout.splitlines() == [
        "--- m.py",
        "+++ m.py",
        "@@ -1,5 +1,5 @@",
        " import torch",
        ' import torch.nn.functional as F; CPU = torch.device("cpu")',
        ' device = "cpu"',
        "-" + TL201_LINE,
        "+" + FIXED_TL201,
        " " + TL401_LINE,
    ]
    assert "Would fix 1 error." in proc.stderr
    # The diff applies: patching the original reproduces what --fix writes.
    torchlint("check", *ONLY, "--fix", "m.py", cwd=project)
    assert path.read_text(encoding="utf-8") == BAD.replace(TL201_LINE, FIXED_TL201)


def test_diff_with_nothing_to_fix_exits_0(project):
    (project / "m.py").write_text(HEADER + TL401_LINE + "\n", encoding="utf-8")
    proc = torchlint("check", *ONLY, "--diff", "m.py", cwd=project)
    assert proc.returncode == 0
    assert proc.stdout == ""


def test_diff_of_a_file_without_final_newline(project):
    (project / "m.py").write_text(HEADER + TL201_LINE, encoding="utf-8")
    proc = torchlint("check", *ONLY, "--diff", "m.py", cwd=project)
    assert proc.stdout.splitlines()[-4:] == ["-" + TL201_LINE, "\\ No newline at end of file", "+" + FIXED_TL201, "\\ No newline at end of file"]


# A load with a device in scope, so that TL401 offers its (unsafe) fix.
_LOAD = 'device = "cpu"; ' + TL401_LINE
ENCODING_CASES = {
    "crlf": (HEADER + "\n" + TL201_LINE + "\n" + _LOAD + "\n").replace("\n", "\r\n").encode("utf-8"),
    "cr": (HEADER + TL201_LINE + "\n").replace("\n", "\r").encode("utf-8"),
    "mixed-endings": (HEADER.replace("\n", "\r\n") + TL201_LINE + "\n" + _LOAD + "\r\n").encode("utf-8"),
    "no-final-newline": (HEADER + _LOAD + "\n" + TL201_LINE).encode("utf-8"),
    "bom": b"\xef\xbb\xbf" + (HEADER + "name = 'caf\u00e9'\n" + TL201_LINE + "\n").encode("utf-8"),
    "bom-crlf-no-final-newline": b"\xef\xbb\xbf" + (HEADER + TL201_LINE).replace("\n", "\r\n").encode("utf-8"),
    "latin-1-cookie": ("# -*- coding: latin-1 -*-\n" + HEADER + "name = 'caf\u00e9 \u00b5'\n" + TL201_LINE + "\n").encode("latin-1"),
    "cp1252-cookie-crlf": ("# coding: cp1252\r\n" + HEADER.replace("\n", "\r\n") + "q = '\u201cquoted\u201d'\r\n" + TL201_LINE + "\r\n").encode("cp1252"),
    "tabs-and-trailing-space": (HEADER + "if True:\n\t" + TL201_LINE + "   \n\tz = 1 \t\n").encode("utf-8"),
    "unicode-before-the-call": (HEADER + "y = ('\u00e9\u00e8\U0001f600', " + TL201_LINE.split(" = ")[1] + ")\n").encode("utf-8"),
}


@pytest.mark.parametrize("name", sorted(ENCODING_CASES))
def test_fix_keeps_encoding_bom_line_endings_and_final_newline(project, name):
    data = ENCODING_CASES[name]
    path = project / "m.py"
    path.write_bytes(data)
    os.chmod(path, 0o640)
    proc = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = path.read_bytes()
    # Exactly the calls changed: every other byte (BOM, cookie, endings, last line) is as it was.
    old_call = TL201_LINE.split(" = ")[1]
    new_call = FIXED_TL201.split(" = ")[1]
    expected = data.replace(old_call.encode("ascii"), new_call.encode("ascii")).replace(
        TL401_LINE.encode("ascii"), FIXED_TL401.encode("ascii")
    )
    assert written == expected
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    # The same bytes through standard input.
    proc = torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "-", cwd=project, stdin=data)
    assert proc.stdout_bytes == expected


def test_fix_output_agrees_with_diff_count(project):
    for i in range(3):
        (project / f"m{i}.py").write_text(BAD + TL201_LINE + "\n", encoding="utf-8")
    diff = torchlint("check", *ONLY, "--diff", ".", cwd=project)
    would = int(re.search(r"Would fix (\d+) error", diff.stderr).group(1))
    fix = torchlint("check", *ONLY, "--fix", ".", cwd=project)
    fixed = int(re.search(r"\((\d+) fixed, \d+ remaining\)", fix.stdout).group(1))
    assert would == fixed == 6


def test_fix_then_json_is_a_fixpoint(project):
    (project / "m.py").write_text(BAD, encoding="utf-8")
    torchlint("check", *ONLY, "--fix", "--unsafe-fixes", "m.py", cwd=project)
    code, items, _ = check_json(*ONLY, "m.py", cwd=project)
    assert (code, items) == (0, [])


def test_read_only_folder_reports_the_write_failure(project):
    folder = project / "ro"
    folder.mkdir()
    path = folder / "m.py"
    path.write_text(BAD, encoding="utf-8")
    (project / "ok.py").write_text(BAD, encoding="utf-8")
    os.chmod(folder, 0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running with privileges that write anywhere (root)")
        proc = torchlint("check", *ONLY, "--fix", "ro/m.py", "ok.py", cwd=project)
        assert proc.returncode == 2
        assert "ro/m.py" in proc.stderr and "cannot write" in proc.stderr
        assert path.read_text(encoding="utf-8") == BAD
        assert FIXED_TL201 in (project / "ok.py").read_text(encoding="utf-8")
    finally:
        os.chmod(folder, 0o755)


def test_insertions_at_one_point_keep_the_order_the_fixes_give_them():
    """A set would order them by the edits' hashes, which change from run to run (PYTHONHASHSEED)."""
    from torchlint.engine import Edit, apply_edits

    first, second = Edit(4, 4, "import functools\n"), Edit(4, 4, "\ndef helper(): ...\n")
    assert apply_edits("x=1\ny=2\n", [first, second, first]) == "x=1\nimport functools\n\ndef helper(): ...\ny=2\n"
    assert apply_edits("x=1\ny=2\n", [second, first]) == "x=1\n\ndef helper(): ...\nimport functools\ny=2\n"
