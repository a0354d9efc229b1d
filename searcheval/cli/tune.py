"""`searcheval tune`: a parameter search whose verdict is a held-out comparison (flows/tune.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (
    EXIT_FAILED,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_REFUSED,
    add_database_url,
    add_judgment_flags,
    database_env,
    epilog,
    import_project_module,
    print_results,
)


def tune_request(args: argparse.Namespace):
    """The study the flags ask for; the data and the configurations file default to the
    project's dataset (searcheval.project), never to the fixtures."""
    from searcheval.cli.common import current_project
    from searcheval.cli.judges import guideline_of
    from searcheval.errors import InputError
    from searcheval.project import which_dataset
    from searcheval.rankers.configs import parse_assignment
    from searcheval.tuning.space import parse_param
    from searcheval.tuning.study import TuneRequest

    kind, path, entry = which_dataset(current_project(), fixtures=args.fixtures,
                                      dataset=args.dataset)
    if kind == "mapping":
        raise InputError("tune reads a dataset folder or a fixtures folder, not a mapping: pass "
                         "--dataset or --fixtures", field="dataset")

    def setting(name: str, given, default):
        if given is not None:
            return given
        return entry.get(name) if entry is not None and entry.get(name) is not None else default

    return TuneRequest(
        fixtures=path if kind == "fixtures" else None,
        dataset=path if kind == "dataset" else None,
        split=setting("split", args.split, defaults.SPLIT),
        max_queries=setting("max_queries", args.max_queries, None),
        configurations_file=str(setting("configurations_file", args.configurations_file,
                                        defaults.CONFIGURATIONS_FILE)),
        overrides=dict(parse_assignment(t) for t in args.set or []) or None,
        params=dict(parse_param(t) for t in args.param or []) or None,
        space_file=str(args.space) if args.space else None, target=args.target,
        name=args.name, trials=args.trials, sampler=args.sampler, seed=args.seed,
        held_out=args.held_out, metric=args.metric, unjudged_threshold=args.unjudged_threshold,
        min_effect=args.min_effect, parallel=args.parallel, top=args.top,
        judgment_rule=setting("judgment_rule", args.judgment_rule, defaults.JUDGMENT_RULE),
        judgment_sources=args.judgment_sources,
        max_age_days=setting("max_age_days", None, defaults.MAX_AGE_DAYS),
        judge=args.judge, judge_limit=args.judge_limit,
        guideline=guideline_of(entry) if args.judge else None)


def summary_lines(document: dict, output: str) -> list[str]:
    from searcheval.tuning.verdict import verdict_line

    trials = sorted(document["trials"], key=lambda t: (-(t["value"] if t["value"] is not None
                                                         else -1e9), t["number"]))
    metric = document["metric"]
    lines = [f"study {document['study_id'][:12]}: {len(trials)} trials of {document['target']} "
             f"on {document['split']['tuning']} tuning queries ({document['flagged']} flagged)",
             f"{'trial':<7}{metric:<10}{'judged@10':<11}overrides"]
    for t in trials[:5]:
        value = "-" if t["value"] is None else f"{t['value']:.4f}"
        judged = "-" if t["judged"] is None else f"{t['judged']:.3f}"
        flag = "  (flagged)" if t["flagged"] else ""
        lines.append(f"{t['number']:<7}{value:<10}{judged:<11}{t['overrides']}{flag}")
    if document.get("judge"):
        from searcheval.tuning.study import judge_line

        lines.append(judge_line(document["judge"]))
    lines.append(verdict_line(document["verdict"]))
    if document.get("pool_id"):
        lines.append(f"pool {document['pool_id']}: what the choice and the verdict still lack "
                     f"grades of ({output}/pool.csv; searcheval rate --pool "
                     f"{document['pool_id']})")
    lines.append(f"the configurations entry to commit: {output}/configurations.tuned.yaml; "
                 f"report: {output}/report.md")
    return lines


def cmd_tune(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from searcheval.tuning.study import check

    request = tune_request(args)
    check(request)  # refused here, before Prefect starts: nothing is written
    if args.check:
        print("inputs OK: the search space, the target and the split are valid")
        return EXIT_OK
    tune = import_project_module("flows.tune").tune
    import_project_module("flows.console").configure_console(quiet=args.quiet)
    from searcheval.cli.run import quiet_server_stop

    params = {name: getattr(request, name) for name in (
        "fixtures", "dataset", "split", "max_queries", "configurations_file", "overrides",
        "params", "space_file", "target", "name", "trials", "sampler", "seed", "held_out",
        "metric", "unjudged_threshold", "min_effect", "parallel", "top", "judgment_rule",
        "judgment_sources", "max_age_days", "judge", "judge_limit", "guideline")}
    runners = import_project_module("flows.runners")
    runner = runners.task_runner_from_settings(args.task_runner, args.dask_address)
    with database_env(args.database_url), runners.api_for_workers(runner):
        state = tune.with_options(task_runner=runner)(**params, output=str(args.output),
                                                      return_state=True)
    quiet_server_stop()
    if state.is_completed():
        print_results("\n".join(summary_lines(state.result(), str(args.output))))
        return EXIT_OK
    exc = state.result(raise_on_failure=False)
    from searcheval.errors import InputError

    if isinstance(exc, InputError):
        raise exc
    print(f"searcheval: the study failed: {' '.join(f'{type(exc).__name__}: {exc}'.split())}",
          file=sys.stderr)
    return EXIT_FAILED


def add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="search a configuration's parameters; the verdict is held out",
        description="Search parameters of any configuration (Optuna, TPE or grid, seeded) on a "
                    "tuning part of the golden queries; the chosen configuration then runs once "
                    "on the held-out part against the served one: that comparison is the "
                    "verdict. Writes the configurations entry to commit and a report. A study "
                    "killed half-way resumes from its stored trials when run again.",
        **epilog(["searcheval tune --param bm25.k1=0.5..2:0.1 --param bm25.b=0..1 --trials 40",
                  "searcheval tune --space space.yaml --target hybrid --sampler grid",
                  "searcheval tune --dataset ../shared/datasets/scifact "
                  "--param hybrid.weights.dense=0..2 --held-out 0.3"],
                 {EXIT_OK: "the study ran; its verdict is in the output (better, worse or no "
                           "detectable difference)",
                  EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED],
                  EXIT_FAILED: EXIT_MEANINGS[EXIT_FAILED]}))
    source = p.add_mutually_exclusive_group()
    source.add_argument("--fixtures", type=Path,
                        help="a folder in the fixtures' layout (default: the project's dataset)")
    source.add_argument("--dataset",
                        help="a project dataset's name or a dataset folder (BEIR, WANDS, "
                             "fixtures; default: the project's dataset)")
    p.add_argument("--split", help=f"a BEIR dataset's qrels split (default: the project's "
                                   f"setting, else {defaults.SPLIT})")
    p.add_argument("--max-queries", type=int, help="only the first N judged queries")
    p.add_argument("--configurations-file", type=Path,
                   help=f"the configurations (default: the project's setting, else "
                        f"{defaults.CONFIGURATIONS_FILE})")
    p.add_argument("--set", action="append", metavar="NAME.PARAM=VALUE",
                   help="a fixed override every trial starts from (repeatable)")
    p.add_argument("--param", action="append", metavar="NAME.PARAM=SPEC",
                   help="a dimension: LOW..HIGH, LOW..HIGH:STEP or [A, B, ...] (repeatable; "
                        "NAME.PARAM.KEY for a key of a mapping parameter)")
    p.add_argument("--space", type=Path, help="a YAML file `space: {NAME.PARAM: SPEC}`")
    p.add_argument("--target", help="the configuration tuned (default: the one that runs "
                                    "every parameter of the space)")
    p.add_argument("--name", help="the proposed entry's name (default TARGET_tuned)")
    p.add_argument("--trials", type=int, default=50, help="trials in all (default 50)")
    p.add_argument("--sampler", choices=["tpe", "grid"], default="tpe",
                   help="tpe (default) or grid (every parameter stepped or listed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampler and the split")
    p.add_argument("--held-out", type=float, default=0.3,
                   help="share of the golden queries held out, per category (default 0.3)")
    p.add_argument("--metric", default="ndcg@10", help="the objective (default ndcg@10)")
    p.add_argument("--unjudged-threshold", type=float, default=0.3,
                   help="flag a trial with more of its top 10 unjudged (default 0.3)")
    p.add_argument("--min-effect", type=float, default=0.02,
                   help="smallest difference worth finding; a held-out part too small to "
                        "detect it is warned about (default 0.02)")
    p.add_argument("--parallel", type=int, default=1, help="trials at a time (default 1)")
    p.add_argument("--top", type=int, default=3,
                   help="the tuning's top N also compared on the held-out part, with Holm's "
                        "correction, beside the verdict (default 3)")
    add_judgment_flags(p)
    p.add_argument("--judge", metavar="NAME|FILE:NAME",
                   help="a model judge of judges.yaml (or FILE:NAME) that labels the flagged "
                        "trials' unjudged pool before the held-out verdict; its grades count "
                        "only while its human audit holds (docs/judges.md)")
    p.add_argument("--judge-limit", type=int, metavar="N",
                   help="with --judge: label at most N pairs (the tuning part first)")
    p.add_argument("--output", type=Path, default=Path("tune-out"),
                   help="folder of tune.json, report.md, configurations.tuned.yaml, pool.csv")
    add_database_url(p)
    p.add_argument("--task-runner", choices=["thread", "dask"],
                   help="where parallel trials run (default: SEARCHEVAL_TASK_RUNNER, else "
                        "thread)")
    p.add_argument("--dask-address", help="scheduler of an existing Dask cluster (default: "
                   "SEARCHEVAL_DASK_ADDRESS, else a LocalCluster)")
    p.add_argument("--check", action="store_true",
                   help="check the space, target and split, then stop")
    p.add_argument("-q", "--quiet", action="store_true", help="no log lines")
    p.set_defaults(handler=cmd_tune, parser=p)
