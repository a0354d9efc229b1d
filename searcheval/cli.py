"""The `searcheval` command line. Bad input prints one line and exits 2.

Exit codes: 0 success / gate passed, 1 gate tripped or threshold missed, 2 refused input,
3 the run failed for another reason (database, model: see the log).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

from searcheval.errors import InputError
from searcheval.replay_cli import add_replay, add_traces

EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED, EXIT_FAILED = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2, like any refused input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"searcheval: {message}", file=sys.stderr)
        raise SystemExit(EXIT_REFUSED)


def _json_default(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def print_json(payload) -> None:
    print(json.dumps(payload, indent=2, sort_keys=False, default=_json_default, allow_nan=False))


def format_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


# --------------------------------------------------------------------------- score


def cmd_score(args: argparse.Namespace) -> int:
    from searcheval.judgments import load_qrels
    from searcheval.metrics import Settings, evaluate, parse_metrics
    from searcheval.runs import load_trec_run

    metrics = parse_metrics(args.metrics)
    settings = Settings(gain=args.gain, relevance_level=args.relevance_level,
                        no_relevant=args.no_relevant, trec_compat=args.trec_compat)
    qrels = load_qrels(args.qrels, max_grade=args.max_grade)
    run = load_trec_run(args.run)
    unknown = [q for q in run if q not in qrels]
    if unknown and len(unknown) == len(run):
        raise InputError(f"no query of the run is judged in {args.qrels} (first: {unknown[0]!r})",
                         file=args.run)
    result = evaluate(qrels, run, metrics, settings)
    if args.format == "json":
        print_json(result.to_dict())
        return EXIT_OK
    width = max(len(m.name) for m in metrics) + 2
    print(f"{'metric':<{width}}value")
    for name, value in result.means.items():
        print(f"{name:<{width}}{format_value(value)}")
    print(f"queries: {len(result.query_ids)}"
          + (f" (run names {len(unknown)} unjudged queries, ignored)" if unknown else ""))
    return EXIT_OK


def add_score(sub) -> None:
    p = sub.add_parser("score", help="score a TREC run against qrels")
    p.add_argument("--qrels", required=True, type=Path,
                   help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv")
    p.add_argument("--run", required=True, type=Path, help="TREC run (qid Q0 docid rank score tag)")
    p.add_argument("--metrics", default="ndcg@10,mrr,recall@20",
                   help="comma-separated: ndcg@K, mrr, mrr@K, recall@K, precision@K, map, map@K, "
                        "judged@K, abstention")
    p.add_argument("--trec-compat", action="store_true",
                   help="trec_eval's conventions: linear gain, queries in both files, policy zero")
    p.add_argument("--gain", choices=["exponential", "linear"], default="exponential")
    p.add_argument("--relevance-level", type=int, default=1,
                   help="lowest grade that counts as relevant for MRR, P, R, MAP (default 1)")
    p.add_argument("--no-relevant", choices=["one", "zero", "skip"], default="one",
                   help="nDCG and Recall of a query with no relevant judgment (default one)")
    p.add_argument("--max-grade", type=int, default=None,
                   help="top of the grade scale (TREC qrels default 3; BEIR: largest in file)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(handler=cmd_score)


# --------------------------------------------------------------------------- run


@contextmanager
def _database_env(url: str | None):
    """--database-url reaches the flow's tasks through the environment, for this call only,
    never as a flow parameter (flow parameters are stored with the run and shown in the UI)."""
    previous = os.environ.get("SEARCHEVAL_DATABASE_URL")
    if url:
        os.environ["SEARCHEVAL_DATABASE_URL"] = url
    try:
        yield
    finally:
        if url:
            if previous is None:
                os.environ.pop("SEARCHEVAL_DATABASE_URL", None)
            else:
                os.environ["SEARCHEVAL_DATABASE_URL"] = previous


def cmd_run(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from flows.nightly import nightly
    from searcheval.pipeline import GateTripped

    params = dict(fixtures=None if args.dataset else str(args.fixtures),
                  dataset=str(args.dataset) if args.dataset else None, split=args.split,
                  max_queries=args.max_queries,
                  baseline=None if args.no_baseline else str(args.baseline),
                  output=str(args.output), label=args.label, tolerance=args.tolerance,
                  alert_block=args.alert_block)
    if args.configurations:
        params["configurations"] = [c.strip() for c in args.configurations.split(",")]
    if args.min_per_category is not None:
        params["min_per_category"] = args.min_per_category
    params.update(shards=args.shards, embed_batch=args.embed_batch)
    from flows.runners import api_for_workers, task_runner_from_settings

    runner = task_runner_from_settings(args.task_runner, args.dask_address)
    with _database_env(args.database_url), api_for_workers(runner):
        state = nightly.with_options(task_runner=runner)(**params, return_state=True)
    if state.is_completed():
        print(state.result()["table"])
        return EXIT_OK
    exc = state.result(raise_on_failure=False)
    if isinstance(exc, GateTripped):
        print(exc.table)
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_TRIPPED
    if isinstance(exc, InputError):
        raise exc
    print(f"searcheval: the run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_FAILED


def add_run(sub) -> None:
    p = sub.add_parser("run", help="run the nightly evaluation once (the Prefect flow)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--fixtures", type=Path, default=Path("fixtures"),
                     help="folder with catalog.json, golden_queries.json, judgments.csv")
    src.add_argument("--dataset", type=Path, help="a test collection in BEIR layout")
    p.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    p.add_argument("--max-queries", type=int, help="BEIR: evaluate only the first N judged queries")
    p.add_argument("--min-per-category", type=int,
                   help="fewest golden queries a category may have (default 3)")
    p.add_argument("--baseline", type=Path, default=Path("baseline.json"))
    p.add_argument("--no-baseline", action="store_true", help="score only, no gate")
    p.add_argument("--tolerance", type=float, help="override the baseline's tolerance")
    p.add_argument("--configurations", help="comma-separated subset of bm25,dense,fused")
    p.add_argument("--output", type=Path, default=Path("out"))
    p.add_argument("--label", help="a label for this run, e.g. the ranking version")
    p.add_argument("--alert-block", help="Prefect notification block to alert through ('type/name')")
    p.add_argument("--database-url", help="Postgres with pgvector (default: "
                   "SEARCHEVAL_DATABASE_URL, else the embedded server under .searcheval/)")
    p.add_argument("--task-runner", choices=["thread", "dask"],
                   help="where batches and shards run (default: SEARCHEVAL_TASK_RUNNER, else thread)")
    p.add_argument("--dask-address", help="scheduler of an existing Dask cluster (default: "
                   "SEARCHEVAL_DASK_ADDRESS, else a LocalCluster of SEARCHEVAL_DASK_WORKERS=2)")
    p.add_argument("--shards", type=int, default=1, help="query shards per configuration")
    p.add_argument("--embed-batch", type=int, default=2048, help="texts per embedding task")
    p.set_defaults(handler=cmd_run)


# --------------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace) -> int:
    from searcheval.catalog import load_collection
    from searcheval.validation import validate_collection

    collection = load_collection(fixtures=None if args.dataset else args.fixtures,
                                 dataset=args.dataset, split=args.split)
    report = validate_collection(collection, max_age_days=args.max_age_days)
    if args.format == "json":
        print_json(report.to_dict())
    else:
        print(f"{collection.name}: {len(collection.resources)} resources, "
              f"{len(collection.queries)} queries, {len(collection.judgments)} judgments")
        for f in report.findings:
            print(f"{f.severity}: {f.suite} / {f.expectation}: {f.message}")
        print(f"stale judgments: {len(report.stale)}")
        print("valid" if report.ok else "refused")
    report.raise_for_errors()
    return EXIT_OK


def add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check the inputs with the Great Expectations suites")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--fixtures", type=Path, default=Path("fixtures"))
    src.add_argument("--dataset", type=Path)
    p.add_argument("--split", default="test")
    p.add_argument("--max-age-days", type=int, default=365)
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(handler=cmd_validate)


# --------------------------------------------------------------------------- baseline


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from searcheval.gate import diff_baselines, load_baseline, write_baseline
    from searcheval.history import baseline_from_output, baseline_from_run

    previous = load_baseline(args.baseline) if args.baseline.exists() else None
    if args.from_output:
        new = baseline_from_output(args.from_output, previous)
    else:
        new = baseline_from_run(args.from_run, previous, args.database_url)
    for line in diff_baselines(previous, new):
        print(line)
    if args.dry_run:
        print(f"(dry run: {args.baseline} unchanged)")
        return EXIT_OK
    write_baseline(args.baseline, new)
    print(f"wrote {args.baseline}")
    return EXIT_OK


def add_baseline(sub) -> None:
    p = sub.add_parser("baseline", help="the reviewed baseline of the gate")
    bsub = p.add_subparsers(dest="baseline_command", required=True, parser_class=_Parser)
    u = bsub.add_parser("update", help="rewrite baseline.json from a run, on purpose; prints the diff")
    src = u.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-run", help="a run id of the history in Postgres")
    src.add_argument("--from-output", type=Path, help="an output folder of `searcheval run`")
    u.add_argument("--baseline", type=Path, default=Path("baseline.json"))
    u.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    u.add_argument("--database-url")
    u.set_defaults(handler=cmd_baseline_update)


# --------------------------------------------------------------------------- history


def cmd_history(args: argparse.Namespace) -> int:
    from searcheval.history import history_chart, history_table, recent_runs

    runs = recent_runs(args.last, args.configuration, args.database_url)
    print(history_table(runs, args.configuration))
    if runs:
        path = history_chart(runs, args.configuration, args.output / "history.png")
        print(f"chart: {path}")
    return EXIT_OK


def add_history(sub) -> None:
    p = sub.add_parser("history", help="the last runs' metrics, as a table and a PNG chart")
    p.add_argument("--last", type=int, default=20)
    p.add_argument("--configuration", default="fused")
    p.add_argument("--output", type=Path, default=Path("out"))
    p.add_argument("--database-url")
    p.set_defaults(handler=cmd_history)


# --------------------------------------------------------------------------- benchmark


def cmd_benchmark_metrics(args: argparse.Namespace) -> int:
    from searcheval.benchmark import benchmark_metrics

    return benchmark_metrics(queries=args.queries, depth=args.depth, judged=args.judged,
                             seed=args.seed)


def cmd_benchmark_embed(args: argparse.Namespace) -> int:
    from searcheval.benchmark import beir_texts, benchmark_embed
    from searcheval.database import DatabaseError

    try:
        figures = benchmark_embed(beir_texts(args.dataset, args.texts), args.database_url,
                                  batch_size=args.batch_size)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def cmd_benchmark_search(args: argparse.Namespace) -> int:
    from searcheval.benchmark import benchmark_search
    from searcheval.database import DatabaseError

    try:
        figures = benchmark_search(args.dataset, split=args.split, max_queries=args.queries,
                                   k=args.k, depth=args.depth, database_url=args.database_url)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark(sub) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("benchmark", help="rerunnable speed benchmarks against reference tools")
    bsub = p.add_subparsers(dest="benchmark", required=True, parser_class=_Parser)
    p.set_defaults(subcommands=bsub)  # lets other modules add benchmarks (replay_cli)
    m = bsub.add_parser("metrics", help="searcheval vs pytrec_eval vs ranx on one random run")
    m.add_argument("--queries", type=int, default=20000)
    m.add_argument("--depth", type=int, default=100)
    m.add_argument("--judged", type=int, default=15, help="judged documents per query")
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(handler=cmd_benchmark_metrics)
    scifact = Path("../shared/datasets/scifact")
    e = bsub.add_parser("embed", help="cached embedder (cold, then warm in a new process) vs raw "
                                      "SentenceTransformer.encode on the same texts")
    e.add_argument("--dataset", type=Path, default=scifact,
                   help="BEIR collection whose titles + abstracts are embedded")
    e.add_argument("--texts", type=int, default=1000, help="distinct texts to embed")
    e.add_argument("--batch-size", type=int, default=64)
    e.add_argument("--database-url", help="server to create the throwaway database on (default: "
                   "SEARCHEVAL_DATABASE_URL, else the embedded server under .searcheval/)")
    e.set_defaults(handler=cmd_benchmark_embed)
    s = bsub.add_parser("search", help="HNSW recall, per-query latency and nDCG@10 of the "
                                       "configurations on a BEIR collection")
    s.add_argument("--dataset", type=Path, default=scifact)
    s.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    s.add_argument("--queries", type=int, help="only the first N judged queries")
    s.add_argument("--k", type=int, default=10, help="cut-off of the HNSW recall (default 10)")
    s.add_argument("--depth", type=int, default=100,
                   help="results per query of the timed runs (default 100, as the nightly)")
    s.add_argument("--database-url", help="Postgres with pgvector (default: "
                   "SEARCHEVAL_DATABASE_URL, else the embedded server under .searcheval/)")
    s.set_defaults(handler=cmd_benchmark_search)
    return {"benchmark": bsub}


# --------------------------------------------------------------------------- serve


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve deploy/prefect.yaml's deployments with their schedules until interrupted."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from flows.serve import PREFECT_FILE, serve_deployments

    with _database_env(args.database_url):  # flow runs are subprocesses: they inherit it
        serve_deployments(args.prefect_file or PREFECT_FILE, limit=args.limit)
    return EXIT_OK


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="serve the deployments of deploy/prefect.yaml (schedules, "
                                     "manual runs) from this process, without a worker")
    p.add_argument("--prefect-file", type=Path, default=None,
                   help="the deployments file (default: deploy/prefect.yaml of the project)")
    p.add_argument("--limit", type=int, default=None, help="most flow runs at the same time")
    p.add_argument("--database-url", help="Postgres with pgvector for the flow runs (default: "
                   "SEARCHEVAL_DATABASE_URL, else the embedded server under .searcheval/)")
    p.set_defaults(handler=cmd_serve)


# --------------------------------------------------------------------------- main

COMMANDS: list[Callable] = [add_run, add_score, add_validate, add_baseline, add_history,
                             add_benchmark, add_replay, add_traces, add_serve]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="searcheval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except InputError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_REFUSED


if __name__ == "__main__":
    raise SystemExit(main())
