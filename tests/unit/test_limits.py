"""The limits of an http configuration across its shards (searcheval.rankers.limits): how the
lanes and the queries are cut among shards, and the points of the rate's grid each shard takes."""

from __future__ import annotations

import math

import pytest

from searcheval.rankers.limits import LaneLimits, Lanes, SharedLimits, lane_shards, limits_for


def test_the_lanes_and_the_queries_are_cut_in_proportion():
    # concurrency 3 in 2 shards: 2 lanes and 1; 15 queries in ceil(15 / 3) = 5 rounds each
    assert lane_shards(15, 2, 3) == [(Lanes(0, 2, 3), 2 * 5), (Lanes(2, 3, 3), 1 * 5)]
    # 4 lanes in 3 shards: 2, 1, 1; ceil(15 / 4) = 4 rounds: 8, 4 and the 3 left
    assert lane_shards(15, 3, 4) == [(Lanes(0, 2, 4), 8), (Lanes(2, 3, 4), 4),
                                     (Lanes(3, 4, 4), 3)]
    # never more shards than lanes (each owns at least one) nor than queries (each has one)
    assert lane_shards(15, 8, 3) == [(Lanes(i, i + 1, 3), 5) for i in range(3)]
    assert lane_shards(2, 5, 4) == [(Lanes(0, 2, 4), 1), (Lanes(2, 4, 4), 1)]
    assert lane_shards(0, 3, 4) == [(Lanes(0, 4, 4), 0)]


def test_every_cut_partitions_the_lanes_and_needs_no_more_rounds_than_one_shard():
    for count in range(1, 13):
        for shards in range(1, 13):
            for queries in range(1, 40):
                plan = lane_shards(queries, shards, count)
                assert len(plan) == min(shards, count, queries)
                assert [lanes.first for lanes, _ in plan] == \
                    [0] + [lanes.stop for lanes, _ in plan[:-1]]
                assert plan[-1][0].stop == count
                assert sum(n for _, n in plan) == queries and min(n for _, n in plan) >= 1
                assert max(math.ceil(n / lanes.size) for lanes, n in plan) == \
                    math.ceil(queries / count), (queries, shards, count, plan)


def test_lanes_out_of_range_are_refused():
    with pytest.raises(ValueError, match="lanes 2..2 of 3"):
        Lanes(2, 2, 3)
    with pytest.raises(ValueError, match="expected lanes of 4"):
        limits_for(("web", "x"), 4, None, Lanes(0, 1, 3))


class Clock:
    def __init__(self, now: float):
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_shards_take_distinct_points_of_one_grid_as_one_limiter_would():
    clock = Clock(100.0)  # the grid of rate 10: index m at m / 10 s, so 1000 is now
    a = LaneLimits(Lanes(0, 2, 3), 10.0, clock=clock, sleep=clock.sleep)
    b = LaneLimits(Lanes(2, 3, 3), 10.0, clock=clock, sleep=clock.sleep)
    # lane = index % 3 (1000 % 3 = 1): a owns lanes 0 and 1, b lane 2
    assert [round(a.turn() * 10) for _ in range(4)] == [1000, 1002, 1003, 1005]
    assert [round(b.turn() * 10) for _ in range(2)] == [1001, 1004]
    assert (a.concurrency, b.concurrency) == (2, 1)


def test_a_turn_waits_for_its_point_and_a_clock_gone_back_starts_again_from_now():
    clock = Clock(100.0)
    limits = LaneLimits(Lanes(2, 3, 3), 10.0, clock=clock, sleep=clock.sleep)
    limits.wait_turn()  # index 1001: 0.1 s from now
    limits.wait_turn()  # index 1004
    assert clock.slept == pytest.approx([0.1, 0.3])
    clock.now = 50.0  # an hour of NTP correction would otherwise be an hour of waiting
    assert round(limits.turn() * 10) == 500  # 500 % 3 = 2: its own lane


def test_no_rate_limit_never_waits_and_shared_limits_are_one_per_configuration():
    clock = Clock(100.0)
    LaneLimits(Lanes(0, 1, 1), None, clock=clock, sleep=clock.sleep).wait_turn()
    assert clock.slept == []
    shared = limits_for(("web", "abc"), 4, None)
    assert isinstance(shared, SharedLimits) and shared.concurrency == 4
    assert limits_for(("web", "abc"), 4, None) is shared
    assert limits_for(("web", "abd"), 4, None) is not shared
