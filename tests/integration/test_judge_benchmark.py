"""`searcheval benchmark judge` on the session's Postgres: a small run checks its figures; the full
run (10,000 pairs at 50 ms, concurrency 8) is slow and checks the goals."""

from __future__ import annotations

import pytest

from searcheval.bench.judge import benchmark_judge


def test_small_benchmark_reports_its_figures(database_url, capsys):
    figures = benchmark_judge(database_url, pairs=200, delay_ms=20, concurrency=8)
    out = capsys.readouterr().out
    assert figures["capacity"] == 8 / 0.020  # concurrency / the server's time per answer
    assert figures["from_cache"] == 200  # the second run asked nothing
    assert 0 < figures["nominal_share"] <= 1.05 and 0 < figures["measured"] <= 8 / 0.020 * 1.05
    assert figures["overhead_ms_p50"] >= 0
    assert "second run" in out and "pairs/s" in out


@pytest.mark.slow
def test_full_benchmark_judges_its_goals_by_its_figures(database_url, capsys):
    """The goals are what the figures say (whether they are met on a loaded machine is the
    benchmark's output, not a timed assertion). The floor that holds at any load: 8 requests in
    flight keep the client above half the server's measured capacity, where a client that sent one
    at a time would get 1/8 of it."""
    figures = benchmark_judge(database_url, pairs=10_000, delay_ms=50, concurrency=8)
    with capsys.disabled():
        print(capsys.readouterr().out)
    assert figures["goals"]["capacity"] == (figures["share"] >= 0.90)
    assert figures["goals"]["overhead"] == (figures["overhead_ms_p50"] < 1.0)
    assert figures["share"] > 0.5
    assert figures["from_cache"] == 10_000  # the second run asked the server nothing
    assert figures["goal_met"] == all(figures["goals"].values())
