"""`searcheval run`: one nightly evaluation through the Prefect flow (flows/nightly.py)."""

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
    EXIT_TRIPPED,
    add_collection,
    add_conventions,
    add_database_url,
    add_judgment_flags,
    collection_arguments,
    database_env,
    epilog,
    import_project_module,
    print_results,
)
from searcheval.errors import InputError, exit_code


#: the run's options (evaluation.preflight.RunRequest) the command line has no flag for, and why;
#: every other option is the flag of its name (`overrides`: --set). tests/unit/test_run_options.py
#: holds them together.
WITHOUT_FLAG = {
    "metrics": "the reported metrics: a flow parameter (the Run form's choices)",
    "max_age_days": "a flow parameter, set per deployment (the dataset's settings otherwise)",
    "model_path": "a flow parameter, set per deployment",
    "snapshot_retention": "a flow parameter; `searcheval history prune --older-than` by hand",
    "output_retention": "a flow parameter; `searcheval history prune --output-folder DIR` by hand",
    "kind": "told by how the run started (its schedule, by hand, a candidate)",
    "allow_dirty": "the scheduled deployment sets it false; a run by hand may be dirty",
    "dataset_name": "set by the command line from the project settings, never by hand",
    "sources": "set by the command line from the project settings, never by hand",
}


def run_request(args: argparse.Namespace):
    """The run the flags ask for, settled over the project settings (searcheval.project), as
    the preflight checks it (and the flow's parameters)."""
    from searcheval.cli.common import current_project
    from searcheval.project import resolve_request

    request = given_request(args)
    resolve_request(request, current_project(), output=True)
    args.output = Path(request.output)
    return request


def given_request(args: argparse.Namespace):
    """The run the flags ask for, before the project settings fill what they left empty: each
    option from the flag of its name (RunRequest is the one list of them)."""
    from searcheval.evaluation.preflight import OPTIONS, RunRequest
    from searcheval.io.settings import parse_grade_map
    from searcheval.rankers.configs import parse_assignment

    given = {name: getattr(args, name) for name in OPTIONS if hasattr(args, name)}
    if args.configurations is not None:
        given["configurations"] = [c.strip() for c in args.configurations.split(",")]
    given["overrides"] = dict(parse_assignment(text) for text in args.set or []) or None
    given["grade_map"] = dict(parse_grade_map(args.grade_map)) if args.grade_map else None
    for name in ("fixtures", "dataset", "mapping", "baseline", "configurations_file", "output"):
        given[name] = None if given.get(name) is None else str(given[name])
    if given.get("judgment_sources") is not None:  # refused before anything runs
        from searcheval.io.settings import check_judgment_sources

        check_judgment_sources(given["judgment_sources"])
    return RunRequest(**given)


def flow_parameters(request, args: argparse.Namespace) -> dict:
    """The flow's parameters of a settled `request`: the options the command line has a flag
    for, and where the project settings' values came from (`sources`, `dataset_name`). A
    library default is passed empty, so the flow settles it again as a default."""
    from searcheval.evaluation.preflight import OPTIONS
    from searcheval.project import RUN_DEFAULTS

    params = {name: getattr(request, name) for name in OPTIONS if name not in WITHOUT_FLAG}
    params.update(dataset_name=request.dataset_name, sources=request.sources)
    for name in RUN_DEFAULTS:
        if name in params and name not in (request.sources or {}) \
                and name not in ("max_age_days", "output"):
            params[name] = None
    return params


def check_run(args: argparse.Namespace):
    """The CLI's preflight, in this process and before Prefect starts: a refused run costs no
    server, no flow run, and writes nothing. Raises `preflight.Refused` with every problem."""
    from searcheval.evaluation.preflight import preflight

    request = run_request(args)
    found = preflight(request)
    found.raise_for_problems()
    if getattr(args, "judge", None):  # a model judge is refused before any work, too
        from searcheval.judging.labelling import check_judge_reference

        check_judge_reference(args.judge, str(request.configurations_file))
    return request, found


def print_refusal(exc: InputError, all_errors: bool) -> None:
    """With --all-errors, every problem but the first on stderr; the first one is the last
    line (main prints it)."""
    from searcheval.cli.common import refusal_line
    from searcheval.cli import build_parser
    from searcheval.cli.common import option_flags

    problems = getattr(exc, "problems", [exc])
    if all_errors and len(problems) > 1:
        flags = option_flags(build_parser())
        for problem in problems[1:]:
            print(refusal_line(problem, flags).replace("searcheval: ", "searcheval: also: ", 1),
                  file=sys.stderr)
    elif len(problems) > 1:
        print(f"searcheval: {len(problems) - 1} more problem(s): see them with --all-errors",
              file=sys.stderr)


#: every flag of `searcheval run` that `--deployment` does not send as the flow parameter of its
#: name (`--set`: `overrides`), and why (issue 29): what the deployment's worker decides is
#: refused, exit 2 naming the flag, never dropped; the rest shape this command only.
#: tests/unit/test_deployment_options.py holds this table to the parser, so a new flag must be
#: placed: a parameter (an option of RunRequest), refused, or local.
REFUSED_ON_DEPLOYMENT = {
    "database_url": "the deployment's worker decides the database (SEARCHEVAL_DATABASE_URL in "
                    "its environment; a password is never a flow parameter)",
    "task_runner": "the deployment's worker decides the task runner (SEARCHEVAL_TASK_RUNNER "
                   "in its environment)",
    "dask_address": "the deployment's worker decides the Dask cluster (SEARCHEVAL_DASK_ADDRESS "
                    "in its environment)",
}
LOCAL_ON_DEPLOYMENT = {
    "check": "checks the options here and stops: nothing is sent",
    "all_errors": "how this command prints a refusal",
    "debug": "tracebacks of this command (the worker's SEARCHEVAL_DEBUG for the flow run's)",
    "quiet": "this command's output",
    "deployment": "which deployment runs",
    "timeout": "how long this command waits",
    "help": "this command's help",
}


def deployment_flags(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Every flag's dest of the `run` parser -> `parameter NAME`, `refused` or `local`."""
    table = {}
    for action in parser._actions:  # argparse keeps no public list of its actions
        dest = action.dest
        if dest in REFUSED_ON_DEPLOYMENT:
            table[dest] = "refused"
        elif dest in LOCAL_ON_DEPLOYMENT:
            table[dest] = "local"
        else:
            table[dest] = "parameter " + ("overrides" if dest == "set" else dest)
    return table


def refuse_for_deployment(args: argparse.Namespace) -> None:
    """Every flag a deployment cannot take that was given, refused at once (the first is the
    line printed; --all-errors prints the rest)."""
    from searcheval.evaluation.preflight import Refused

    problems = [InputError(f"not taken by --deployment: {why}; drop it, or run locally "
                           "without --deployment", field=dest)
                for dest, why in REFUSED_ON_DEPLOYMENT.items()
                if getattr(args, dest, None) != args.parser.get_default(dest)]
    if problems:
        raise Refused(problems)


def check_parameters(params: dict) -> None:
    """What JSON cannot carry is refused rather than changed on the way (NaN and infinities
    would reach the flow as null): the preflight refuses them already; this is the last guard."""
    import math

    for name, value in params.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"expected a finite number, got {value!r}", field=name)


def deployment_wait(args: argparse.Namespace) -> float | None:
    """--timeout (0: no limit), else SEARCHEVAL_RUN_TIMEOUT plus a margin for queueing."""
    if args.timeout is not None:
        if args.timeout < 0:
            raise InputError(f"expected seconds >= 0 (0: wait without a limit), got "
                             f"{args.timeout:g}", field="timeout")
        return args.timeout or None
    run = defaults.run_timeout()
    return None if run is None else run + defaults.WAIT_MARGIN


def cmd_run_deployment(args: argparse.Namespace) -> int:
    """On a deployment: every option checked here by the same preflight as a local run (a
    refusal costs no flow run), then only what the command line changed overrides the
    deployment's parameters (the flow run checks them again where it runs). The exit code is a
    local run's: the flow run's verdict tag (flows/outcome.py); Crashed, Cancelled or still
    running at the timeout: 3."""
    wait = deployment_wait(args)
    remote = import_project_module("flows.remote")
    try:
        refuse_for_deployment(args)
        request, found = check_run(args)
    except InputError as exc:
        print_refusal(exc, args.all_errors)
        raise
    given = flow_parameters(request, args)
    if args.check:
        print(f"inputs OK: {len(found.collection.resources)} resources; the deployment "
              f"{args.deployment} was not started (--check)")
        return EXIT_OK
    defaults_args = args.parser.parse_args([])
    unchanged = flow_parameters(run_request(defaults_args), defaults_args)
    params = {k: v for k, v in given.items() if v != unchanged.get(k)}
    check_parameters(params)
    done = remote.run_on_deployment(args.deployment, params, timeout=wait)
    head = f"flow run {done.name} ({done.id}): {done.state.lower()}" + (
        f", {done.url}" if done.url else "")
    if not done.finished:
        print_results(head, "(no verdict yet)")
        print(f"searcheval: stopped waiting after {wait:g} s (--timeout): the flow run is still "
              f"{done.state} on the server; if its worker is gone, `searcheval runs crash "
              f"{done.id}` marks it Crashed", file=sys.stderr)
        return EXIT_FAILED
    verdict = done.message.removeprefix("Flow run encountered an exception: ")
    for prefix in ("REFUSED: ", "GATE TRIPPED: ", "FAILED: ", "GateTripped: "):
        verdict = verdict.removeprefix(prefix)
    print_results(head, verdict or "(no verdict)")
    code = done.exit_code
    if code == EXIT_REFUSED:
        print(f"searcheval: the flow run refused its input: {' '.join(verdict.split())}",
              file=sys.stderr)
    elif code == EXIT_FAILED:
        print(f"searcheval: the run ended {done.state}: {' '.join(verdict.split())}",
              file=sys.stderr)
    return code


def cmd_run(args: argparse.Namespace) -> int:
    from searcheval.timings import mark  # the stages `benchmark run` reports

    mark("command")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.deployment:
        return cmd_run_deployment(args)
    if args.timeout is not None:  # never dropped silently (issue 29)
        raise InputError("only with --deployment (a local run's limit is the flow's own "
                         f"timeout, {defaults.RUN_TIMEOUT_ENV})", field="timeout")
    if args.debug:
        os.environ["SEARCHEVAL_DEBUG"] = "1"
    try:
        request, found = check_run(args)
    except InputError as exc:
        print_refusal(exc, args.all_errors)
        raise
    if args.check:
        c = found.collection
        gate = (f"gated: {found.baseline.configuration} against {found.baseline.path}"
                if found.baseline is not None else f"NOT GATED ({found.not_gated_reason})")
        print(f"inputs OK: {len(c.resources)} resources, {len(c.queries)} queries, "
              f"{len(c.judgments)} judgments; {gate}")
        return EXIT_OK
    mark("preflight")
    if found.not_gated_reason:
        print(f"searcheval: gate: NOT GATED ({found.not_gated_reason})", file=sys.stderr)
    nightly = import_project_module("flows.nightly").nightly
    import_project_module("flows.console").configure_console(quiet=args.quiet)
    from searcheval.errors import GateTripped, RunIncomplete

    params = flow_parameters(request, args)
    runners = import_project_module("flows.runners")

    runner = runners.task_runner_from_settings(args.task_runner, args.dask_address)
    api = import_project_module("flows.prefect_api")  # which server: one line on stderr
    mark("imported")
    with api.run_api(quiet=args.quiet), database_env(args.database_url), \
            runners.api_for_workers(runner), runners.no_heartbeats():  # nothing watches them
        mark("server")
        state = nightly.with_options(task_runner=runner)(**params, return_state=True)
        api.settle_services()  # while a temporary server is still up
    mark("flow")
    quiet_server_stop()
    # the results on stdout, once: the table, then the verdict and where the report is
    if state.is_completed():
        done = state.result()
        print_results(done["table"], done["verdict"])
        return EXIT_OK
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, InputError):
        print_refusal(exc, args.all_errors)
        raise exc
    if isinstance(exc, GateTripped):
        print_results(exc.table, str(exc))
        print(f"searcheval: {exc}", file=sys.stderr)
    elif isinstance(exc, RunIncomplete):
        print(exc.table)
        print(f"searcheval: {exc}", file=sys.stderr)
    else:  # a failed database, model, backend (the flow run logged it), or a bug
        if debugging(args):
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        # one line, whatever the cause's message holds (psycopg's span two)
        cause = " ".join(f"{type(exc).__name__}: {exc}".split())
        print(f"searcheval: the run failed: {cause}", file=sys.stderr)
    return exit_code(exc) or EXIT_FAILED  # the one table (searcheval.errors.EXIT_CODES)


def debugging(args: argparse.Namespace) -> bool:
    return bool(args.debug or os.environ.get("SEARCHEVAL_DEBUG"))


class _ServerStop:
    """Drops Prefect's "Stopping temporary server" line, logged at exit after the verdict: the
    verdict or the refusal stays the last line on stderr."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith("Stopping temporary server")


def quiet_server_stop() -> None:
    import logging

    logger = logging.getLogger("prefect")
    if not any(isinstance(f, _ServerStop) for f in logger.filters):
        logger.addFilter(_ServerStop())


def add_run(sub) -> None:
    p = sub.add_parser("run", help="run the nightly evaluation once (the Prefect flow)",
                       description="Run the nightly evaluation once: load, validate, embed, run "
                                   "the configurations, score, gate against the baseline, "
                                   "publish. The results table and the verdict go to stdout, "
                                   "the logs to stderr.",
                       **epilog(["searcheval run --fixtures fixtures --baseline baseline.json "
                                 "--output out --label v2",
                                 "searcheval run --dataset ../shared/datasets/scifact "
                                 "--max-queries 50 --no-baseline --quiet",
                                 "searcheval run --deployment ranking-change --label v2"],
                                {EXIT_OK: "the gate passed (or no gate: --no-baseline)",
                                 EXIT_TRIPPED: "the gate tripped (the run is still published)",
                                 EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED],
                                 EXIT_FAILED: "the run failed: a backend down or failing "
                                              "more queries than it allows (published, marked "
                                              "incomplete, alerted), the database, a model"}))
    add_collection(p)
    p.add_argument("--max-queries", type=int,
                   help="BEIR, WANDS, mappings: evaluate only the first N (judged) queries")
    add_conventions(p, from_dataset=True)
    p.add_argument("--coverage-floor", type=float,
                   help="judged share of each configuration's top 10 below which the run alerts "
                        f"(default: the dataset's setting, else {defaults.COVERAGE_FLOOR})")
    p.add_argument("--coverage-k", type=int,
                   help="depth of the judged share (default: the project's setting, else "
                        f"{defaults.COVERAGE_K})")
    p.add_argument("--depth", type=int,
                   help="results per query (default: the project's setting, else "
                        f"{defaults.DEPTH})")
    add_judgment_flags(p)
    p.add_argument("--agreement-floor", type=float,
                   help="Krippendorff's alpha between judges below which the run alerts "
                        f"(default: the project's setting, else {defaults.AGREEMENT_FLOOR})")
    p.add_argument("--min-per-category", type=int,
                   help="fewest golden queries a category may have "
                        f"(default: the project's setting, else {defaults.MIN_PER_CATEGORY})")
    p.add_argument("--baseline", type=Path,
                   help="the reviewed baseline the gate compares with (default: the project's "
                        f"setting, else {defaults.BASELINE})")
    p.add_argument("--no-baseline", action="store_true",
                   help="score only, no gate, on purpose: the run says NOT GATED (otherwise a "
                        "missing baseline, or one whose configuration is not run, is refused)")
    p.add_argument("--tolerance", type=float,
                   help="override the baseline's tolerance: a finite absolute drop in "
                        f"0..{defaults.MAX_TOLERANCE:g}")
    p.add_argument("--configurations-file", type=Path,
                   help="the configurations that can run (default: the project's setting, else "
                        f"{defaults.CONFIGURATIONS_FILE})")
    p.add_argument("--configurations", help="comma-separated names from the configurations file "
                   "(default: its `run` list)")
    p.add_argument("--candidate", metavar="NAME[,NAME...]",
                   help="evaluate NAME beside the served configuration on the same queries, "
                        "list the queries it made better and worse, and gate it; several "
                        "names: each compared with the served one (95%% CI, paired test, "
                        "Holm's correction), the served one gated")
    p.add_argument("--set", action="append", metavar="NAME.PARAM=VALUE",
                   help="override a parameter for this run, e.g. --set fused.rrf_k=20 "
                        "(repeatable; the value is read as YAML)")
    p.add_argument("--output", type=Path,
                   help=f"folder of metrics.json, report.md, per_query.csv, runs/ "
                        f"(default: the project's setting, else {defaults.OUTPUT})")
    p.add_argument("--label", help="a label for this run, e.g. the ranking version")
    p.add_argument("--judge", metavar="[FILE:]NAME",
                   help="a model judge (of judges.yaml, or FILE:NAME) that grades this run's "
                        "unjudged top k after it is published (counted once audited)")
    p.add_argument("--snapshot-depth", type=int, default=defaults.SNAPSHOT_DEPTH,
                   help="ranks of each ranked list kept in Postgres for diffs "
                        f"(default {defaults.SNAPSHOT_DEPTH})")
    p.add_argument("--alert-block", help="Prefect notification block to alert through ('type/name')")
    add_database_url(p)
    p.add_argument("--task-runner", choices=["thread", "dask"],
                   help="where batches and shards run (default: SEARCHEVAL_TASK_RUNNER, else thread)")
    p.add_argument("--dask-address", help="scheduler of an existing Dask cluster (default: "
                   "SEARCHEVAL_DASK_ADDRESS, else a LocalCluster of SEARCHEVAL_DASK_WORKERS=2)")
    p.add_argument("--shards", type=int, default=defaults.SHARDS,
                   help=f"query shards per configuration (default {defaults.SHARDS})")
    p.add_argument("--embed-batch", type=int, default=defaults.EMBED_BATCH,
                   help=f"texts per embedding task (default {defaults.EMBED_BATCH})")
    p.add_argument("--check", action="store_true",
                   help="check every input and option, then stop: exit 0 if the run would "
                        "start, 2 with the refusal (nothing is started or written)")
    p.add_argument("--all-errors", action="store_true",
                   help="on a refusal, print every problem found (the first stays the last line)")
    p.add_argument("--debug", action="store_true",
                   help="tracebacks for every failure, refusals and a tripped gate too")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only the results table and the verdict: no log lines (the "
                        "flow run's logs still reach the Prefect API)")
    p.add_argument("--deployment", metavar="NAME",
                   help="run on this deployment of the Prefect server (PREFECT_API_URL), e.g. "
                        "ranking-change, and wait: only the options given here override its "
                        "parameters (the worker's --database-url, --task-runner and --dask-address "
                   "are refused); prints the verdict and the flow run's address, and exits as a "
                   "local run would (3 when the run crashed or --timeout passed)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="with --deployment: stop waiting after SECONDS and exit 3 (the run goes "
                        "on on the server); 0 waits without a limit (default: "
                        f"{defaults.RUN_TIMEOUT_ENV}, else {defaults.RUN_TIMEOUT} s, plus "
                        f"{defaults.WAIT_MARGIN} s)")
    p.set_defaults(handler=cmd_run, parser=p)
