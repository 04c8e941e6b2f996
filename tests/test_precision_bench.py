"""bench/precision_tl1.py scores findings against recorded verdicts: matched rows count, new findings and
rows whose finding went away are reported, and a malformed row stops the run."""
from __future__ import annotations


import pytest

from bench_support import bench_module



LOSSES = '''import torch


def masked_mean_loss(x, mask):
    return (x * mask).sum() / torch.relu(mask).sum()


def distance_loss(a, b):
    return torch.sqrt((a - b).abs())
'''
HEADER = "code\tpath\tcolumn\tverdict\tline\treason\tneeds\n"


@pytest.fixture(scope="module")
def precision():
    with bench_module("precision_tl1.py", "precision_bench") as module:
        yield module


@pytest.fixture
def corpus(tmp_path):
    package = tmp_path / "corpus" / "pkg" / "pkg"
    package.mkdir(parents=True)
    (package / "losses.py").write_text(LOSSES, encoding="utf-8")
    return tmp_path / "corpus"


# Both findings of LOSSES are `high` as the analysis finds them (the level table is off in tests).
FLOOR = ["--floor", "high"]


def run(precision, capsys, corpus, verdicts):
    status = precision.main(["--corpus", str(corpus), "--packages", "pkg", "--verdicts", str(verdicts), *FLOOR])
    return status, capsys.readouterr().out


def test_findings_are_scored_against_the_recorded_verdicts(precision, capsys, corpus, tmp_path):
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(
        HEADER
        + "TL104\tpkg/pkg/losses.py\t12\treal\treturn (x * mask).sum() / torch.relu(mask).sum()\tan all-zero mask\t\n"
        + "TL102\tpkg/pkg/losses.py\t12\tfalse\treturn torch.log(p)\ta finding the analysis no longer makes\tdata\n",
        encoding="utf-8",
    )
    status, out = run(precision, capsys, corpus, verdicts)
    assert status == 0
    assert "# 2 findings" in out
    assert "1 judged: real 1, real* 0, false alarm 0; precision 1/1 = 100 %" in out
    assert "# no verdict yet: 1" in out
    assert "TL101 (high) pkg/pkg/losses.py:9:12 [no verdict]" in out
    assert "# recorded rows no finding matches: 1 (false 1)" in out


def test_false_alarms_are_counted_by_what_silence_needs_with_the_ceiling(precision, capsys, corpus, tmp_path):
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(
        HEADER
        + "TL104\tpkg/pkg/losses.py\t12\tfalse\treturn (x * mask).sum() / torch.relu(mask).sum()\ta mask of fixed ratio\tdata\n"
        + "TL101\tpkg/pkg/losses.py\t12\tfalse\treturn torch.sqrt((a - b).abs())\ta caller clamps\tsame-file\n",
        encoding="utf-8",
    )
    _, out = run(precision, capsys, corpus, verdicts)
    assert "2 judged: real 0, real* 0, false alarm 2; precision 0/2 = 0 %" in out
    # the same-file one could be taught away; the data one stays: 0 real of 1 left
    assert "same-file 1, other-file 0, underflow 0, data 1, no-gradient 0" in out
    assert "precision at most 0/1 = 0 %" in out
    verdicts.write_text(
        HEADER
        + "TL104\tpkg/pkg/losses.py\t12\treal\treturn (x * mask).sum() / torch.relu(mask).sum()\tan all-zero mask\t\n"
        + "TL101\tpkg/pkg/losses.py\t12\tfalse\treturn torch.sqrt((a - b).abs())\tsoftmax underflow\tunderflow\n",
        encoding="utf-8",
    )
    _, out = run(precision, capsys, corpus, verdicts)
    assert "precision 1/2 = 50 %" in out
    assert "precision at most 2/2 = 100 %" in out  # RULES.md counts an underflowing softmax as a hazard


def test_a_false_alarm_without_what_it_needs_stops_the_run(precision, capsys, corpus, tmp_path):
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(HEADER + "TL101\tpkg/pkg/losses.py\t12\tfalse\tx\twhy\t\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"verdicts.tsv:2: a false alarm's needs"):
        run(precision, capsys, corpus, verdicts)


def test_a_verdict_follows_its_line_when_lines_move(precision, capsys, corpus, tmp_path):
    losses = corpus / "pkg" / "pkg" / "losses.py"
    losses.write_text("# a comment that moves every line down\n\n" + LOSSES, encoding="utf-8")
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(
        HEADER + "TL101\tpkg/pkg/losses.py\t12\tfalse\treturn torch.sqrt((a - b).abs())\tread at line 9\tsame-file\n",
        encoding="utf-8",
    )
    _, out = run(precision, capsys, corpus, verdicts)
    assert "1 judged: real 0, real* 0, false alarm 1" in out
    assert "# recorded rows no finding matches: 0" in out


def test_a_malformed_row_stops_the_run_with_its_line(precision, capsys, corpus, tmp_path):
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(HEADER + "TL101\tpkg/pkg/losses.py\t12\tprobably\tx\twhy\t\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"verdicts.tsv:2:"):
        run(precision, capsys, corpus, verdicts)


def test_a_missing_package_is_an_error(precision, capsys, corpus, tmp_path):
    status = precision.main(["--corpus", str(corpus), "--packages", "pkg,absent"])
    assert status == 2
    assert "absent" in capsys.readouterr().err


def test_prune_drops_only_the_rows_no_finding_matches(precision, capsys, corpus, tmp_path):
    verdicts = tmp_path / "verdicts.tsv"
    kept_row = "TL104\tpkg/pkg/losses.py\t12\treal\treturn (x * mask).sum() / torch.relu(mask).sum()\tan all-zero mask\t\n"
    other_package = "TL101\tother/other/x.py\t5\treal\ty = x.sqrt()\tread elsewhere\t\n"
    verdicts.write_text(
        HEADER + kept_row + "TL102\tpkg/pkg/losses.py\t12\tfalse\treturn torch.log(p)\tgone\tdata\n" + other_package,
        encoding="utf-8",
    )
    status = precision.main(["--corpus", str(corpus), "--packages", "pkg", "--verdicts", str(verdicts), "--prune", *FLOOR])
    assert status == 0
    assert "# pruned 1 rows" in capsys.readouterr().out
    assert verdicts.read_text(encoding="utf-8") == HEADER + kept_row + other_package


def test_findings_are_scored_by_confidence_level(precision, corpus, capsys):
    verdicts = corpus.parent / "verdicts.tsv"
    verdicts.write_text(
        HEADER + "TL104\tpkg/pkg/losses.py\t12\treal\treturn (x * mask).sum() / torch.relu(mask).sum()\tan empty mask\t\n",
        encoding="utf-8",
    )
    status = precision.main(["--corpus", str(corpus), "--packages", "pkg", "--verdicts", str(verdicts), "--sample-per-level", "5", *FLOOR])
    out = capsys.readouterr().out
    assert status == 0
    assert "#   high: 2 findings; 1 judged: real 1" in out
    assert "sample of 2 high (seed 101): 1 judged: real 1, real* 0, false alarm 0; precision 1/1 = 100 %" in out
    assert "not read yet: 1" in out
    assert "high and medium together, estimated from the samples: 100 %" in out
    assert "TL101 (high) pkg/pkg/losses.py:9:12 [no verdict]" in out  # the unread one of the sample is listed to be read


def test_a_row_of_a_finding_below_the_floor_is_kept(precision, capsys, corpus, tmp_path, monkeypatch):
    # scored at `high`, a medium finding is not counted, but its verdict still matches a finding: not gone, not pruned
    from torchlint import rule as rule_module

    monkeypatch.setattr(rule_module, "measured_level_moves", lambda: {"TL104:high": "medium"})
    verdicts = tmp_path / "verdicts.tsv"
    row = "TL104\tpkg/pkg/losses.py\t12\treal\treturn (x * mask).sum() / torch.relu(mask).sum()\tan all-zero mask\t\n"
    verdicts.write_text(HEADER + row, encoding="utf-8")
    status = precision.main(["--corpus", str(corpus), "--packages", "pkg", "--verdicts", str(verdicts), "--prune", "--floor", "high"])
    out = capsys.readouterr().out
    assert status == 0
    assert "floor high: no finding has a recorded verdict" in out
    assert "# recorded rows no finding matches: 0" in out and "pruned" not in out
    assert verdicts.read_text(encoding="utf-8") == HEADER + row
