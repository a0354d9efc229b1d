"""The tuning flow: wiring only. Check everything and split the golden queries (before the first
trial) -> the effective grades (the dataset's and the stored ones that count) -> embed through the
cache -> trials, each a task (`tasks/tuning.py`), `parallel` at a time on the flow's task runner
-> with a judge, its labels of the pool the choice and the verdict lack (a task) -> the chosen
configuration once on the held-out queries against the served one -> outputs and the study's
row.

Parallel trials run on the task runner the settings name (flows/runners.py): Prefect's thread
pool, where they share the cached result lists of this process, or a Dask cluster, where each
trial task receives the objective with the cached lists (never the database connection: a
worker opens its own from SEARCHEVAL_DATABASE_URL if a trial must search again).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.utilities.annotations import opaque

from flows import boundary
from flows.console import route_library_logs
from flows.runners import task_runner_from_settings, whole
from searcheval import defaults
from searcheval.store.database import open_database
from searcheval.tuning import study
from tasks.tuning import label_before_verdict, run_trial

boundary.install()
route_library_logs()


@flow(name="searcheval-tune", log_prints=True, task_runner=task_runner_from_settings())
def tune(
    fixtures: str | None = None,
    dataset: str | None = None,
    split: str = defaults.SPLIT,
    max_queries: int | None = None,
    configurations_file: str = defaults.CONFIGURATIONS_FILE,
    overrides: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    space_file: str | None = None,
    target: str | None = None,
    name: str | None = None,
    trials: int = study.DEFAULT_TRIALS,
    sampler: str = "tpe",
    seed: int = 0,
    held_out: float = study.DEFAULT_HELD_OUT,
    metric: str = "ndcg@10",
    unjudged_threshold: float = study.DEFAULT_UNJUDGED,
    min_effect: float = study.DEFAULT_MIN_EFFECT,
    parallel: int = 1,
    top: int = 3,
    depth: int = defaults.DEPTH,
    output: str | None = "tune-out",
    model_path: str | None = None,
    judgment_rule: str | None = None,
    judgment_sources: str | list[str] | None = None,
    max_age_days: int | None = defaults.MAX_AGE_DAYS,
    judge: str | None = None,
    judge_limit: int | None = None,
    guideline: str | None = None,
) -> dict:
    """Search a configuration's parameters on the tuning queries; the verdict is the chosen
    configuration against the served one on the held-out queries.

    Args:
        params: NAME.PARAM -> LOW..HIGH[:STEP] or a list of choices (merged over space_file).
        space_file: A YAML file `space: {NAME.PARAM: SPEC}`.
        target: The configuration tuned (default: the one that runs every parameter).
        trials: Trials in all (a resumed study counts its stored ones).
        sampler: tpe (default) or grid (every parameter stepped or a list of choices).
        held_out: Share of the golden queries held out (per category, seeded).
        unjudged_threshold: A trial with more of its top 10 unjudged is flagged.
        min_effect: The smallest difference worth finding: the split is warned about when
            the held-out part is too small to detect it.
        parallel: Trials run at a time (each asks the sampler before the others are told).
        top: The tuning's top N, each compared with the served one on the held-out part
            (Holm's correction), reported beside the verdict.
        judgment_rule: How the grades of several judges of a pair combine (median, majority,
            judge:NAME; default median).
        judgment_sources: Which stored judgments count beside the dataset's own: dataset, all,
            or sources such as human,model (default: the dataset's setting).
        judge: A model judge (NAME of judges.yaml, or FILE:NAME) that labels the flagged
            trials' unjudged pool before the held-out verdict; its grades count only while its
            human audit holds.
        judge_limit: At most this many pairs labelled by the judge.
        guideline: The grading guideline's text shown to the judge (default: the built-in one).
    """
    logger = get_run_logger()
    request = study.TuneRequest(
        fixtures=fixtures, dataset=dataset, split=split, max_queries=max_queries,
        configurations_file=configurations_file, overrides=overrides, params=params,
        space_file=space_file, target=target, name=name, trials=trials, sampler=sampler,
        seed=seed, held_out=held_out, metric=metric, unjudged_threshold=unjudged_threshold,
        min_effect=min_effect, parallel=parallel, top=top, depth=depth,
        judgment_rule=judgment_rule, judgment_sources=judgment_sources,
        max_age_days=max_age_days, judge=judge, judge_limit=judge_limit, guideline=guideline)
    prepared = study.check(request)  # refused before the first trial: nothing is written
    logger.info("study %s: %s on %d tuning queries, %d held out", prepared.study_id[:12],
                prepared.target, len(prepared.split.tuning), len(prepared.split.held_out))
    with open_database() as conn:
        study.prepare(prepared, conn, model_path, say=logger.info)

        def evaluate_batch(batch):
            futures = [run_trial.submit(whole(prepared.objective), number, overrides)
                       for number, overrides in batch]
            return [f.result() for f in futures]

        results = study.run_trials(prepared, evaluate_batch, say=logger.info)
        judging = None
        if judge:  # before the verdict: the verdict is scored with what the judge adds
            results, judging = label_before_verdict(opaque(prepared), opaque(results))
        document = study.conclude(prepared, results, output, say=logger.info, judging=judging)
    return document
