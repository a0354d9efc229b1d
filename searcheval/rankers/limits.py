"""The limits of a configuration's requests, held across all its shards: at most `concurrency`
in flight at once, and at most `rate_limit` started per second (the `http` kind's parameters).

Where the shards run decides how:

- **In one process** (Prefect's thread pool): the shards share the process's `SharedLimits` of
  the configuration (one semaphore, one clock), so a free slot goes to whichever shard needs it.
- **In several processes** (a Dask cluster): nothing is shared, the limits are partitioned. A
  configuration's limits are `concurrency` *lanes*: lane j may have one request in flight, and may
  start requests at the points m / rate_limit of the wall clock whose index m is j modulo the
  number of lanes. Each shard owns a contiguous range of lanes (`Lanes`, see `lane_shards`), so
  the shards together have at most `concurrency` requests in flight and start them at distinct
  points of one grid spaced 1 / rate_limit apart: never more in any window than one limiter would
  allow, with no coordination and no round trip to a scheduler. The grid is the wall clock of
  each worker, so on several machines it assumes their clocks agree (NTP) to well within
  1 / rate_limit. A shard whose queries run out leaves its lanes idle: the queries are cut in
  proportion to the lanes (`lane_shards`) so that the shards finish together.

In both, a request takes its slot first and then its turn of the rate, so it starts when its
turn comes, not later in a burst with others that waited for slots.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Lanes:
    """The lanes [first, stop) of a configuration's `count` lanes that one shard owns."""

    first: int
    stop: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.first < self.stop <= self.count:
            raise ValueError(f"expected 0 <= first < stop <= count, got lanes {self.first}.."
                             f"{self.stop} of {self.count}")

    @property
    def size(self) -> int:
        return self.stop - self.first


def lane_shards(queries: int, shards: int, count: int) -> list[tuple[Lanes, int]]:
    """How `queries` consecutive queries of a configuration with `count` lanes are cut into at most
    `shards` shards that partition its lanes: (lanes, number of queries) of each shard.

    There are min(shards, count, queries) shards (at least one), each with a near-equal share of
    the lanes and at least one query; the queries go in proportion to the lanes, as many as the
    shard's lanes answer in the fewest rounds the whole configuration needs (ceil(queries /
    count)), so no shard is left with more rounds than another."""
    parts = max(1, min(shards, count, queries))
    size, extra = divmod(count, parts)
    lanes, first = [], 0
    for i in range(parts):
        stop = first + size + (1 if i < extra else 0)
        lanes.append(Lanes(first, stop, count))
        first = stop
    rounds = math.ceil(queries / count)
    out, left = [], queries
    for i, own in enumerate(lanes):
        later = parts - i - 1  # each later shard keeps at least one query
        take = left if later == 0 else min(rounds * own.size, left - later)
        out.append((own, take))
        left -= take
    return out


class SharedLimits:
    """The limits of one configuration in this process, shared by its shards (threads)."""

    def __init__(self, concurrency: int, rate_limit: float | None):
        self.concurrency = concurrency
        self.slots = threading.BoundedSemaphore(concurrency)
        self.interval = 1.0 / rate_limit if rate_limit else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait_turn(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class LaneLimits:
    """The limits of one shard that owns `lanes` of its configuration's limits: one slot per lane,
    and the points of the rate's grid that belong to its lanes (see the module docstring)."""

    def __init__(self, lanes: Lanes, rate_limit: float | None, *,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.lanes = lanes
        self.concurrency = lanes.size
        self.slots = threading.BoundedSemaphore(lanes.size)
        self.rate = rate_limit
        self._clock, self._sleep = clock, sleep
        self._next = 0  # the first grid index not yet taken
        self._lock = threading.Lock()

    def turn(self) -> float:
        """Take the next point of this shard's lanes on the grid; returns its time."""
        lanes, rate = self.lanes, self.rate
        with self._lock:
            now = self._clock() * rate
            index = max(math.ceil(now), self._next)
            # at most `size` turns are taken ahead (one per slot), each within `count` points of
            # the one before: farther ahead, the clock went back, and the grid starts from now
            if index - now > (lanes.size + 1) * lanes.count:
                index = math.ceil(now)
            lane = index % lanes.count
            if lane < lanes.first:
                index += lanes.first - lane
            elif lane >= lanes.stop:
                index += lanes.count - lane + lanes.first
            self._next = index + 1
        return index / rate

    def wait_turn(self) -> None:
        if not self.rate:
            return
        wait = self.turn() - self._clock()
        if wait > 0:
            self._sleep(wait)


Limits = SharedLimits | LaneLimits

_shared: dict[tuple, SharedLimits] = {}
_shared_lock = threading.Lock()


def limits_for(key: tuple, concurrency: int, rate_limit: float | None,
               lanes: Lanes | None = None) -> Limits:
    """The limits a shard of a configuration (identified by `key`) runs under: the lanes it owns
    when it has some, else the limits its configuration shares in this process."""
    if lanes is not None:
        if lanes.count != concurrency:
            raise ValueError(f"expected lanes of {concurrency} (the concurrency), got "
                             f"{lanes.count}")
        return LaneLimits(lanes, rate_limit)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = SharedLimits(concurrency, rate_limit)
        return _shared[key]
