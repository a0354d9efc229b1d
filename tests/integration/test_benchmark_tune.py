"""`searcheval benchmark tune` on a small SciFact slice (never the full collection): trials that
search nothing, the held-out verdict, and a second run that embeds nothing."""

from __future__ import annotations

import pytest

from searcheval.bench.tune import benchmark_tune
from tests.integration.test_benchmarks import write_slice

pytestmark = pytest.mark.slow


def test_benchmark_tune_on_a_slice(tmp_path, new_database, embedding_model):
    dataset = write_slice(tmp_path / "slice", 40, 12)
    url = new_database("bench_tune")
    lines: list[str] = []
    figures = benchmark_tune(dataset, trials=20, held_out=0.5, database_url=url,
                             say=lines.append)
    assert figures["trials"] == 20 and figures["searched_during_trials"] == 0
    assert figures["held_out"] == 6 and figures["tuning"] == 6  # 12 queries, one category
    assert figures["verdict"]["queries"] == 6
    assert figures["verdict"]["outcome"] in ("better", "worse", "no detectable difference")
    assert figures["goal_met"] is False  # fewer than 100 trials never claims the goal
    assert any("held-out verdict:" in line for line in lines)
    again = benchmark_tune(dataset, trials=5, held_out=0.5, database_url=url,
                           say=lines.append)
    assert again["embeddings"]["embedded"] == 0  # the corpus came from the cache
