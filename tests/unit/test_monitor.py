"""The live monitor's pure parts: windows due, labels per trace, and the CUSUM detector driven
by a simulated series."""

from datetime import datetime, timedelta, timezone

import pytest

from searcheval.errors import InputError
from searcheval.io.traces import TraceTable, parse_trace
from searcheval.production.monitor import (MonitorSettings, due_windows, run_detector,
                                           score_window)

UTC = timezone.utc
S = MonitorSettings(cusum_k=0.02, cusum_h=0.15, warmup=4, min_labelled=10)


def series(values):
    return [(v, 100) for v in values]


def test_a_single_bad_window_does_not_alert():
    # target = mean of 4 warm-up windows = 0.6; the drop to 0.45 adds 0.6 - 0.45 - 0.02 = 0.13
    # <= h = 0.15; the recovery then drains S: 0.13 - 0.02 = 0.11, 0.09, ...
    fired = run_detector(series([0.6] * 4 + [0.45] + [0.6] * 10), S)
    assert not any(fired)


def test_a_sustained_drop_alerts_in_the_third_window():
    # drop to 0.52 from window 9 (index 8): S = 0.06, 0.12, 0.18 > 0.15 -> fires at index 10,
    # then restarts: 0.06, 0.12, 0.18 -> again at index 13
    values = [0.6] * 4 + [0.61, 0.59, 0.6, 0.6] + [0.52] * 6
    fired = run_detector(series(values), S)
    assert [i for i, f in enumerate(fired) if f] == [10, 13]


def test_windows_with_too_few_labels_do_not_move_the_detector():
    values = [(0.6, 100)] * 4 + [(0.0, 9)] * 5 + [(None, 0)] * 3
    assert not any(run_detector(values, S))


def test_due_windows_are_complete_contiguous_and_never_repeat():
    s = MonitorSettings(interval_minutes=15)
    now = datetime(2026, 3, 1, 10, 7, tzinfo=UTC)
    # no history: the last complete window only
    assert due_windows(None, now, s) == [(datetime(2026, 3, 1, 9, 45, tzinfo=UTC),
                                         datetime(2026, 3, 1, 10, 0, tzinfo=UTC))]
    # an hour down: four windows, from where it stopped
    last = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    got = due_windows(last, now, s)
    assert [w[0].strftime("%H:%M") for w in got] == ["09:00", "09:15", "09:30", "09:45"]
    assert all(b[0] == a[1] for a, b in zip(got, got[1:]))
    assert due_windows(datetime(2026, 3, 1, 10, 0, tzinfo=UTC), now, s) == []


def test_labels_come_from_own_labels_then_feedback_then_judgments():
    base = {"ts": "2026-03-01T00:00:00Z", "segment": "s", "retrieved_ids": ["a", "b", "c"]}
    table = TraceTable.from_traces([
        parse_trace({**base, "trace_id": "1", "query": "x", "relevant_ids": ["b"]}),
        parse_trace({**base, "trace_id": "2", "query": "x",
                     "feedback": [{"doc_id": "c", "thumbs": "up"}]}),
        parse_trace({**base, "trace_id": "3", "query": "y", "query_id": "q7"}),
        parse_trace({**base, "trace_id": "4", "query": "z"}),
    ])
    out = score_window(table, MonitorSettings(metrics=("mrr", "precision@5")),
                       judgments={"q7": {"a": 2}})
    assert out["labels"] == {"own": 1, "feedback": 1, "judgments": 1, "none": 1}
    # MRR: b at rank 2, c at rank 3, a at rank 1 -> (1/2 + 1/3 + 1) / 3
    assert out["metrics"]["mrr"] == pytest.approx((1 / 2 + 1 / 3 + 1) / 3)
    assert out["metrics"]["precision@5"] == pytest.approx((1 / 5 + 1 / 5 + 1 / 5) / 3)
    assert (out["traces"], out["labelled"]) == (4, 3)


def test_an_empty_window_scores_nothing():
    assert score_window(None, S) == {"traces": 0, "labelled": 0,
                                     "labels": {"own": 0, "feedback": 0, "judgments": 0,
                                                "none": 0},
                                     "metrics": {"mrr": None, "precision@5": None}}


def test_settings_are_checked():
    with pytest.raises(InputError, match="field 'cusum_h'"):
        MonitorSettings(cusum_h=0)
    with pytest.raises(InputError, match="field 'interval_minutes'"):
        MonitorSettings(interval_minutes=0)
