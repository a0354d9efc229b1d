"""Prefect tasks of `searcheval tune`: one per trial (searcheval.tuning.search.Objective)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from searcheval.tuning.search import Objective, TrialResult


@task(cache_policy=NO_CACHE, task_run_name="trial-{number}")
def run_trial(objective: Objective, number: int, overrides: dict) -> TrialResult:
    """One trial on the tuning queries: resolve, run (reusing cached lists), score."""
    return objective(number, overrides)
