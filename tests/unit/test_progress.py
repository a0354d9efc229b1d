"""Progress of long work: a log line at least every 10 s off a terminal (done / total, rate, time
left), a bar on one, one report for parallel batches, and the cached share said once."""

import io
import threading

from searcheval import progress
from searcheval.progress import Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_off_a_terminal_a_line_every_ten_seconds_with_rate_and_time_left():
    clock, logged = Clock(), []
    p = Progress("embedding", 1000, "texts", stream=io.StringIO(), clock=clock,
                 log=logged.append)
    assert p.bar is False  # a StringIO is no terminal
    clock.now += 4
    p.advance(100)  # 4 s: too soon for a line
    assert logged == []
    clock.now += 6
    p.advance(150)  # 10 s after the start: 250 done at 25/s, 750 left = 30 s
    assert logged == ["embedding: 250/1000 texts, 25/s, 30 s left"]
    clock.now += 5
    p.advance(50)
    assert len(logged) == 1  # 5 s after the last line
    clock.now += 5
    p.advance(100)  # 20 s: 400 done at 20/s, 600 left = 30 s
    assert logged[-1] == "embedding: 400/1000 texts, 20/s, 30 s left"
    clock.now += 30
    p.advance(600)
    assert p.finish() == "embedding: 1000 texts in 50 s (20/s)"
    assert logged[-1] == p.lines[-1]


def test_cached_items_are_skipped_and_said_once_in_the_last_line():
    clock, logged = Clock(), []
    p = Progress("embedding", 40, "texts", stream=io.StringIO(), clock=clock, log=logged.append)
    p.advance(30, skipped=True)
    clock.now += 2
    p.advance(10)
    assert p.finish() == "embedding: 10 texts in 2 s (5/s); 30 of 40 skipped: already in the cache"
    assert logged == [p.lines[-1]]
    warm = Progress("embedding", 33, "texts", stream=io.StringIO(), clock=clock, log=logged.append)
    warm.advance(33, skipped=True)
    assert warm.finish() == "embedding: all 33 texts already in the cache, skipped"


def test_on_a_terminal_one_bar_redrawn_in_place(monkeypatch):
    from searcheval import progress

    monkeypatch.setattr(progress, "BARS", True)  # an in-process `run --quiet` turns bars off

    class Tty(io.StringIO):
        def isatty(self):
            return True

    clock, stream, logged = Clock(), Tty(), []
    p = Progress("searching", 4, "queries", stream=stream, clock=clock, log=logged.append)
    assert p.bar is True
    clock.now += 1
    p.advance(2)
    assert stream.getvalue().startswith("\rsearching [" + "#" * 15 + "." * 15 + "] 2/4 queries")
    assert "2/s, 1 s left" in stream.getvalue()
    clock.now += 1
    p.advance(2)
    p.finish()
    assert stream.getvalue().count("\r") == 3 and stream.getvalue().endswith("\n")
    assert logged == ["searching: 4 queries in 2 s (2/s)"]  # the last line is logged too


def test_parallel_batches_advance_one_stage_and_an_unstarted_stage_ignores_them():
    progress.advance("nothing-started", 5)  # a library call outside a flow: no error, no report
    logged = []
    progress.start("embedding", 8 * 250, "texts", stream=io.StringIO(), log=logged.append)
    threads = [threading.Thread(target=lambda: [progress.advance("embedding", 1)
                                                for _ in range(250)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    line = progress.finish("embedding")
    assert line.startswith("embedding: 2000 texts in ")
    assert logged == [line]
    assert progress.finish("embedding") is None  # finished once


def test_the_embedding_stage_takes_the_wall_time_of_its_batches_side_by_side():
    """Batches run side by side: the stage lasts from the first start to the last end
    (100 s .. 102 + 6 = 108 s), not the sum of their times (5 + 6 + 1 = 12 s)."""
    import numpy as np

    from searcheval.evaluation.pipeline import EmbeddedTexts, embedding_seconds

    def batch(started, seconds):
        return EmbeddedTexts("m", "f", np.zeros((1, 2), np.float32), 1, 0, seconds, started)

    assert embedding_seconds([batch(100.0, 5.0), batch(102.0, 6.0), batch(101.0, 1.0)]) == \
        (102.0 + 6.0) - 100.0
    assert embedding_seconds([]) == 0.0
