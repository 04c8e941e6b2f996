"""bench/validate.py's decision rule: a form is shown at the highest level whose promise its read findings kept
(down when even the upper bound misses it, up when even the lower bound keeps a higher one)."""
from __future__ import annotations

from collections import Counter

import pytest

from bench_support import bench_module


@pytest.fixture(scope="module")
def validate():
    with bench_module("validate.py", "validate_bench") as module:
        yield module


@pytest.mark.parametrize(
    "found, counts, shown",
    [
        ("high", Counter(real=9, false=1), "high"),  # 0.90 keeps high's promise
        ("high", Counter(real=16, **{"real*": 2}, false=6), "medium"),  # 18 of 24: even the upper bound misses 0.90
        ("high", Counter(real=1, false=9), "low"),  # and 0.50 too
        ("high", Counter(false=1), "medium"),  # one false reading cannot send a form to low
        ("high", Counter(real=8, false=2), "high"),  # 8 of 10 may still be a 0.90 form
        ("medium", Counter(real=1, false=1), "medium"),
        ("medium", Counter(real=1, false=9), "low"),
        ("medium", Counter(real=10), "medium"),  # 10 of 10 is not yet sure of 0.90 (lower bound 0.86)
        ("medium", Counter(real=25), "high"),  # 25 of 25 is (0.94): the analysis was too cautious
        ("low", Counter(real=10), "medium"),  # sure of 0.50
        ("low", Counter(real=170, false=43), "medium"),  # 0.80 of 213: sure of 0.50, not of 0.90
        ("low", Counter(real=2, false=1), "low"),  # 2 of 3 may be a 0.40 form
        ("medium", Counter(real=3, false=7), "medium"),  # 0.30 may still be 0.50
        ("high", Counter(unread=5), "high"),  # nothing read: no evidence to move it
    ],
)
def test_a_form_is_shown_where_its_findings_kept_the_promise(validate, found, counts, shown):
    assert validate.shown_level(found, counts) == shown


def test_the_upper_bound_is_wilsons(validate):
    assert validate.upper_bound(0, 0) == 1.0
    assert validate.upper_bound(10, 10) == pytest.approx(1.0)
    assert 0.5 < validate.upper_bound(0, 1) < 0.7  # one false reading: anything up to about 0.62 is likely
    assert validate.upper_bound(137, 192) == pytest.approx(0.75, abs=0.01)
    assert validate.lower_bound(0, 0) == 0.0
    assert validate.lower_bound(137, 192) == pytest.approx(0.67, abs=0.01)
    assert validate.lower_bound(25, 25) == pytest.approx(25 / (25 + validate.WILSON_Z ** 2))


def test_forms_are_counted_by_rule_and_found_level(validate):
    Finding = validate.Finding
    findings = [
        Finding("o/r", "a.py", 3, 1, "TL401", "high", "m", "torch.load(p)", None),
        Finding("o/r", "b.py", 4, 1, "TL401", "high", "m", "torch.load(q)", None),
        Finding("o/r", "b.py", 9, 1, "TL101", "medium", "m", "torch.sqrt(x)", None),
    ]
    read = {findings[0].key: validate.Verdict("real", "ok", "saved on a GPU")}
    counts = validate.level_counts(findings, read)
    assert counts[("TL401", "high")] == Counter(real=1, unread=1)
    assert counts[("TL101", "medium")] == Counter(unread=1)


def test_a_keyword_torch_removed_is_drift_to_a_hunter_and_tl405_to_torchlint(validate):
    assert validate.same_family("TL602", "TL405")
    assert validate.same_family("TL405", "TL611")
    assert not validate.same_family("TL405", "TL401")


def test_a_hunt_row_past_the_end_of_its_file_is_refused(validate, tmp_path):
    repo = tmp_path / "o+r"
    repo.mkdir()
    (repo / "train.py").write_text("import torch\nx = torch.load(p)\n", encoding="utf-8")
    Site = validate.HuntedSite
    sites = [Site("o/r", "train.py", 2, "TL401", "real", "load"), Site("o/r", "train.py", 129, "TL602", "real", "old"),
             Site("o/r", "gone.py", 1, "TL101", "real*", "sqrt")]
    problems = validate.misplaced_sites(sites, tmp_path)
    assert [p.split(":")[0] for p in problems] == ["o/r train.py", "o/r gone.py"]
    assert "2 lines" in problems[0]


def test_a_reading_packet_shows_each_edited_line_as_the_fix_leaves_it(validate):
    line = "    d = torch.norm(a - b, p='fro', dim=2)"
    edit = {"line": 1, "end_line": 1, "column": 15, "end_column": 34, "content": "linalg.vector_norm(a - b"}
    assert validate.edited_lines([line], [edit]) == {1: "    d = torch.linalg.vector_norm(a - b, dim=2)"}
    spanning = {"line": 1, "end_line": 2, "column": 1, "end_column": 1, "content": ""}
    assert validate.edited_lines([line, ""], [spanning]) == {}
