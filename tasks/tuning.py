"""Prefect tasks of `searcheval tune`: one per trial (searcheval.tuning.search.Objective)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from searcheval.tuning import study
from searcheval.tuning.search import Objective, TrialResult
from tasks.secrets import secret_value


@task(cache_policy=NO_CACHE, task_run_name="trial-{number}")
def run_trial(objective: Objective, number: int, overrides: dict) -> TrialResult:
    """One trial on the tuning queries: resolve, run (reusing cached lists), score."""
    return objective(number, overrides)


@task(cache_policy=NO_CACHE)
def label_before_verdict(prepared: study.Prepared, results: list[TrialResult]
                         ) -> tuple[list[TrialResult], dict]:
    """The study's judge labels the pool its choice and verdict lack (tuning part, trials
    rescored, then the held-out part); called, not submitted: it runs in the flow's process,
    on the study's connection."""
    logger = get_run_logger()
    return study.judge_before_verdict(prepared, results, secret=secret_value, say=logger.info)
