"""Prefect tasks of the model judges (issue 24): the nightly labels its own pool."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from searcheval.defaults import COVERAGE_K
from searcheval.errors import InputError
from searcheval.judging.labelling import label_run_pool
from searcheval.store.database import open_database
from searcheval.types import Collection, RankedRun
from tasks.secrets import secret_value


@task(cache_policy=NO_CACHE)
def label_pool(collection: Collection, runs: dict[str, RankedRun], qrels: dict, judge: str,
               configurations_file: str, model_path: str | None, limit: int | None = None,
               depth: int = COVERAGE_K) -> dict:
    """Grade this run's unjudged top `depth` with `judge` (`NAME` of judges.yaml, or
    `FILE:NAME`); its grades count from the next run on, while its audit holds. A refused judge
    (bad file, missing credential, the model of a configuration) is logged as an error and
    labels nothing: the evaluation it follows is already published and keeps its verdict."""
    logger = get_run_logger()
    try:
        with open_database() as conn:
            result = label_run_pool(conn, collection, runs, qrels, judge, configurations_file,
                                    model_path, limit=limit, depth=depth, secret=secret_value)
    except InputError as exc:
        logger.error("judge %s refused, nothing labelled: %s", judge, exc)
        return {"refused": str(exc)}
    logger.info("%s", result.describe())
    return result.to_dict()
