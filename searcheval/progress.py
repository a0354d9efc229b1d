"""Progress of long work (embedding, indexing, searching, storing), one module for all of it.

On a terminal (stderr is a tty) a stage draws one bar, redrawn in place; otherwise it logs a line
at least every `EVERY_S` seconds while work advances: done / total, rate and time left. Parallel
batches of one stage (embedding batches, query shards on threads) advance the same `Progress`, so
there is one report per stage, never interleaved bars. Work skipped because it was cached is
counted apart and said once, in the stage's last line.

The library calls `advance(stage, n)` / `skip(stage, n)`; whoever knows the total (the flow, a
command) calls `start(stage, total, unit)` first and `finish(stage)` at the end. A stage that was
never started ignores advances (a library call outside a flow reports nothing). Lines go to the
`searcheval.progress` logger at INFO (the flows route it to Prefect's console and API logs).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Callable, TextIO

EVERY_S = 10.0
BARS = True  # False: never draw a bar, even on a terminal (`searcheval run --quiet`)
BAR_WIDTH = 30
logger = logging.getLogger("searcheval.progress")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """done / total of one stage; thread-safe."""

    def __init__(self, stage: str, total: int, unit: str, *, every: float = EVERY_S,
                 stream: TextIO | None = None, bar: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] | None = None) -> None:
        self.stage, self.total, self.unit = stage, total, unit
        self.every, self.clock = every, clock
        self.stream = sys.stderr if stream is None else stream
        if bar is None:
            bar = BARS and bool(getattr(self.stream, "isatty", lambda: False)())
        self.bar = bar
        self.log = log or logger.info
        self.done = self.skipped = 0
        self.started = self._last = clock()
        self._lock = threading.Lock()
        self.lines: list[str] = []  # what was logged (for the tests and the final summary)

    def _emit(self, line: str) -> None:
        self.lines.append(line)
        self.log(line)

    def rate(self, now: float) -> float | None:
        worked = self.done - self.skipped
        elapsed = now - self.started
        return worked / elapsed if worked > 0 and elapsed > 0 else None

    def line(self, now: float) -> str:
        rate = self.rate(now)
        text = f"{self.stage}: {self.done}/{self.total} {self.unit}"
        if rate is not None:
            left = (self.total - self.done) / rate
            text += f", {rate:,.0f}/s, {_duration(left)} left"
        return text

    def advance(self, n: int = 1, *, skipped: bool = False) -> None:
        with self._lock:
            self.done += n
            if skipped:
                self.skipped += n
            now = self.clock()
            if self.bar:
                self._draw(now)
            elif now - self._last >= self.every and self.done < self.total:
                self._last = now
                self._emit(self.line(now))

    def _draw(self, now: float) -> None:
        filled = int(BAR_WIDTH * self.done / self.total) if self.total else BAR_WIDTH
        rate = self.rate(now)
        tail = "" if rate is None else \
            f" {rate:,.0f}/s, {_duration((self.total - self.done) / rate)} left"
        self.stream.write(f"\r{self.stage} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] "
                          f"{self.done}/{self.total} {self.unit}{tail}\033[K")
        self.stream.flush()

    def finish(self) -> str:
        """The stage's last line: how much, how long, and what was skipped as cached."""
        with self._lock:
            now = self.clock()
            if self.bar:
                self._draw(now)
                self.stream.write("\n")
                self.stream.flush()
            worked = self.done - self.skipped
            if worked == 0 and self.skipped:
                line = f"{self.stage}: all {self.skipped} {self.unit} already in the cache, skipped"
                self._emit(line)
                return line
            line = f"{self.stage}: {worked} {self.unit} in {_duration(now - self.started)}"
            rate = self.rate(now)
            if rate is not None:
                line += f" ({rate:,.0f}/s)"
            if self.skipped:
                line += f"; {self.skipped} of {self.done} skipped: already in the cache"
            self._emit(line)
            return line


_stages: dict[str, Progress] = {}
_registry_lock = threading.Lock()


def start(stage: str, total: int, unit: str, **options) -> Progress:
    """Open `stage` (replacing an unfinished one of the same name)."""
    with _registry_lock:
        _stages[stage] = progress = Progress(stage, total, unit, **options)
    return progress


def advance(stage: str, n: int = 1) -> None:
    progress = _stages.get(stage)
    if progress is not None:
        progress.advance(n)


def skip(stage: str, n: int) -> None:
    """`n` items of `stage` needed no work: they were cached."""
    progress = _stages.get(stage)
    if progress is not None and n:
        progress.advance(n, skipped=True)


def finish(stage: str) -> str | None:
    with _registry_lock:
        progress = _stages.pop(stage, None)
    return None if progress is None else progress.finish()
