"""bench/precision_user.py scores findings per level against verdicts read blind; a malformed row stops it."""
from __future__ import annotations


import pytest

from bench_support import bench_module

HEADER = "repo\tpath\tcode\tline\tverdict\tfix\treason\n"


@pytest.fixture(scope="module")
def bench():
    with bench_module("precision_user.py", "precision_user_bench") as module:
        yield module


def finding(bench, code, level, text, fix=None):
    return bench.Finding("o/r", "m.py", 3, 5, code, level, "msg", text, fix)


def test_precision_per_level_and_wrong_fixes(bench, tmp_path):
    verdicts_path = tmp_path / "v.tsv"
    verdicts_path.write_text(
        HEADER
        + "o/r\tm.py\tTL104\tx / x.norm()\treal*\tok\ta zero vector\n"
        + "o/r\tm.py\tTL401\ttorch.load(p)\tfalse\twrong\tCPU data\n"
        + "o/r\tm.py\tTL102\ttorch.log(p)\tfalse\tnone\tp > 0\n",
        encoding="utf-8",
    )
    verdicts = bench.read_verdicts(verdicts_path)
    fix = {"applicability": "safe", "message": "m", "edits": []}
    findings = [
        finding(bench, "TL104", "high", "x / x.norm()"),
        finding(bench, "TL401", "high", "torch.load(p)", fix),
        finding(bench, "TL102", "medium", "torch.log(p)"),
        finding(bench, "TL103", "low", "x ** 0.5"),
    ]
    text = bench.report(findings, verdicts, 20_000, 1, "high")
    assert "| high | 2 | 1.0 | 0 | 1 | 1 | 0 | 0.50 |" in text
    assert "| medium | 1 | 0.5 | 0 | 0 | 1 | 0 | 0.00 |" in text
    assert "| low | 1 | 0.5 | 0 | 0 | 0 | 1 | n/a |" in text
    assert "still offer one: 1, of which `--fix` applies 1" in text
    measured = bench.measured(findings, verdicts, 20_000, 1)
    assert measured["levels"]["high"] == {"read": 2, "real": 1}
    assert measured["rules"]["TL103"]["low"] == {"read": 0, "real": 0}


def test_a_malformed_verdict_row_stops_the_run(bench, tmp_path):
    path = tmp_path / "v.tsv"
    path.write_text(HEADER + "o/r\tm.py\tTL104\tx / n\tmaybe\tok\t?\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="v.tsv:2"):
        bench.read_verdicts(path)
