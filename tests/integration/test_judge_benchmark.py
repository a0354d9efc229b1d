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
def test_full_benchmark_meets_its_goals(database_url, capsys):
    figures = benchmark_judge(database_url, pairs=10_000, delay_ms=50, concurrency=8)
    with capsys.disabled():
        print(capsys.readouterr().out)
    assert figures["goals"] == {"capacity": True, "overhead": True, "cached": True}
