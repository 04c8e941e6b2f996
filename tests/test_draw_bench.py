"""bench/draw.py: which candidates a draw takes."""
from __future__ import annotations

from bench_support import bench_module


def candidates(draw, rows, tmp_path):
    path = tmp_path / "candidates.tsv"
    draw.write_rows(path, [draw.Row(repo, topic, "training-scripts", "", "drawn") for repo, topic in rows])
    return path


def test_a_topic_draw_takes_only_that_topics_candidates_and_its_replacements_too(tmp_path, monkeypatch):
    with bench_module("draw.py", "draw_under_test") as draw:
        rows = [(f"owner/old{i}", "old-code") for i in range(4)] + [(f"owner/new{i}", topic) for i, topic in enumerate(("gan", "nlp", "rl", "gnn"))]
        monkeypatch.setattr(draw, "CANDIDATES", candidates(draw, rows, tmp_path))
        monkeypatch.setattr(draw, "DRAWS", tmp_path / "draws")
        monkeypatch.setattr(draw, "used_repositories", lambda excluding=None: {"owner/old3"})
        assert draw.new("dx", 2, seed=7, topic="old-code") == 0
        drawn = draw.read_rows(draw.draw_path("dx"))
        assert {row.topic for row in drawn} == {"old-code"} and "owner/old3" not in {row.repo for row in drawn}
        assert draw.topic_of("dx") == "old-code"
        # a replacement keeps to the topic, and to the candidates no draw took
        replacement = draw.next_candidates("dx", 7, 1, drawn, draw.topic_of("dx"))
        assert [row.topic for row in replacement] == ["old-code"]
        assert replacement[0].repo not in {row.repo for row in drawn} | {"owner/old3"}
        # without a topic the draw spreads over every topic
        assert draw.new("dy", 5, seed=7) == 0
        assert len({row.topic for row in draw.read_rows(draw.draw_path("dy"))}) == 5
