"""`searcheval benchmark traces` at a small size: every step runs and reports its figures; the
live window is read from, scored in and stored into a throwaway database."""

from __future__ import annotations

import pytest

from searcheval.bench.traces import benchmark_traces

pytestmark = pytest.mark.slow


def test_the_traces_benchmark_reports_every_step(database_url, tmp_path, capsys):
    figures = benchmark_traces(traces=3_000, window=200, workdir=tmp_path,
                               database_url=database_url)
    out = capsys.readouterr().out
    for step in ("ingest", "sample", "impressions", "PBM (EM)", "total", "live window of 200"):
        assert step in out
    assert figures["traces"] == 3_000 and figures["window_traces"] == 200
    assert figures["sampled"] == 100 and figures["pairs"] > 0
    assert figures["curve"][0] == 1.0  # examination relative to rank 1
    assert figures["goals_met"] == (figures["total_s"] < 60 and figures["window_s"] < 5
                                    and figures["peak_bytes"] < 2 * 1024 ** 3)
    assert list(tmp_path.iterdir()) == []  # the JSONL went with its temporary folder
