"""The checks of bench/reliability.py can fail: each catches the corruption it is named after."""
from __future__ import annotations

import codecs
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def reliability():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("reliability_bench", BENCH / "reliability.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


ORIGINAL = b"import torch\r\nm.load_state_dict(torch.load(f))\r\n"


def test_a_faithful_change_keeps_the_format(reliability):
    assert reliability.kept_format(ORIGINAL, b'import torch\r\nm.load_state_dict(torch.load(f, map_location="cpu"))\r\n') == []


@pytest.mark.parametrize(
    "after, problem",
    [
        (b"import torch\r\nm.load_state_dict(torch.load(f))\n", "introduced lf"),
        (b"import torch\nm.load_state_dict(torch.load(f))\n", "introduced lf"),
        (codecs.BOM_UTF8 + ORIGINAL, "BOM added or lost"),
        (b"import torch\r\nm.load_state_dict(torch.load(f))", "final newline"),
        (b"# -*- coding: latin-1 -*-\r\n" + ORIGINAL, "encoding"),
    ],
)
def test_each_format_change_is_caught(reliability, after, problem):
    problems = reliability.kept_format(ORIGINAL, after)
    assert any(problem in p for p in problems), problems


def test_compile_check_reports_a_broken_file(reliability):
    assert reliability.compiles(b"x = (1,\n", "m.py") is not None
    assert reliability.compiles("# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n".encode("latin-1"), "m.py") is None


@pytest.mark.parametrize("variant", ["crlf", "bom", "no-final-newline", "latin-1"])
def test_variants_still_compile_and_have_their_property(reliability, variant):
    data = b"#!/usr/bin/env python\nimport torch\n\n\ndef f(x):\n    return torch.log(x)\n"
    new = reliability.make_variant(data, variant)
    assert new is not None and new != data
    assert reliability.compiles(new, "m.py") is None
    if variant == "crlf":
        assert b"\r\n" in new and b"\n" not in new.replace(b"\r\n", b"")
    elif variant == "bom":
        assert new.startswith(codecs.BOM_UTF8)
    elif variant == "no-final-newline":
        assert not new.endswith(b"\n")
    else:
        assert reliability.encoding_of(new) == "iso-8859-1"
        assert new.startswith(b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n")


def test_the_expected_diff_is_the_clis_own_for_a_crlf_file(reliability, tmp_path, capsys):
    """The --diff output is compared byte for byte; a CRLF file keeps its \\r in both."""
    from torchlint import cli

    path = tmp_path / "m.py"
    path.write_bytes(ORIGINAL)
    cli.main(["check", "--select", "TL401", "--diff", "--unsafe-fixes", "--no-cache", str(path)])
    printed = capsys.readouterr().out
    cli.main(["check", "--select", "TL401", "--fix", "--unsafe-fixes", "--no-cache", str(path)])
    capsys.readouterr()
    after = path.read_bytes()
    assert after != ORIGINAL and b"\r\n" in after
    assert printed == reliability.expected_diff(str(path), ORIGINAL, after)


def test_split_diff_cuts_per_file(reliability):
    text = "--- work/a.py\n+++ work/a.py\n@@ -1 +1 @@\n-x\n+y\n--- work/b.py\n+++ work/b.py\n@@ -1 +1 @@\n--- z\n+++ z\n"
    parts = reliability.split_diff(text)
    assert sorted(parts) == ["work/a.py", "work/b.py"]
    assert parts["work/b.py"].endswith("--- z\n+++ z\n")
