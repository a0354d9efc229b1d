"""`searcheval replay`, `searcheval traces load` and `searcheval benchmark replay`.

`searcheval replay (--traces FILE [--traces-b FILE] | --from-db [--database-url URL])
[--since TS] [--until TS] [--segment S] [--configurations A[,B]] [--thresholds FILE]
[--catalog FILE] [--judgments FILE] [--queries FILE] [--metrics LIST] [--relevance-level N]
[--max-grade N] [--max-bad-share S] [--per-trace] [--output DIR] [--format table|json]`

Exit 0: every floor met and coverage at or above its minimum; 1: a floor missed or coverage under
its minimum; 2: refused input (one line on stderr); 3: the database failed.

`searcheval traces load FILE [--database-url URL]` upserts a JSONL file of traces into
`search_traces` (validated as replay reads it; all of the file or nothing) and prints the counts.

This is argparse glue: the work is in searcheval.replay, searcheval.traces and searcheval.store.
It imports `searcheval.cli` only inside functions: cli imports it for its COMMANDS list.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searcheval.errors import InputError

DEFAULT_METRICS = "ndcg@10,mrr,precision@10,recall@20,map"


def add_replay(sub) -> None:
    """Register `searcheval replay`, and `replay` under `searcheval benchmark` when it exists."""
    p = sub.add_parser("replay", help="score recorded production traces without re-running search")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--traces", type=Path, default=None,
                     help="JSONL, one trace per line: {trace_id, ts, query, query_id?, segment, "
                          "configuration?, retrieved_ids, relevant_ids?, relevance_scores?}")
    src.add_argument("--from-db", action="store_true",
                     help="read the traces from the search_traces table (see `traces load`)")
    p.add_argument("--database-url", help="with --from-db: Postgres (default: "
                   "SEARCHEVAL_DATABASE_URL, else the embedded server under .searcheval/)")
    p.add_argument("--since", default=None, metavar="TS",
                   help="only traces with ts >= TS (ISO 8601; UTC when no zone is given)")
    p.add_argument("--until", default=None, metavar="TS", help="only traces with ts < TS")
    p.add_argument("--segment", default=None, help="only the traces of this segment")
    p.add_argument("--traces-b", type=Path, default=None,
                   help="a second configuration's traces: A/B against --traces (A)")
    p.add_argument("--configurations", default=None, metavar="A[,B]",
                   help="by the traces' configuration field: one to score, or two to compare "
                        "(default: the only one, or both when there are exactly two, sorted)")
    p.add_argument("--thresholds", type=Path, default=None,
                   help='JSON {"default": {metric: floor}, "segments": {segment: {...}}, '
                        '"min_coverage": share}')
    p.add_argument("--catalog", type=Path, default=None,
                   help="catalog.json: labels of resources absent from it are stale and dropped")
    p.add_argument("--judgments", type=Path, default=None,
                   help="labels for traces that carry none, by query: judgments.csv "
                        "(query_id,resource_id,grade,judged_at,judge), TREC or BEIR qrels")
    p.add_argument("--queries", type=Path, default=None,
                   help="golden_queries.json: matches traces without query_id by their text")
    p.add_argument("--metrics", default=DEFAULT_METRICS,
                   help=f"comma-separated (default {DEFAULT_METRICS}); threshold metrics are added")
    p.add_argument("--relevance-level", type=int, default=1,
                   help="lowest grade that counts as relevant for MRR, P, R, MAP (default 1)")
    p.add_argument("--gain", choices=["exponential", "linear"], default="exponential")
    p.add_argument("--no-relevant", choices=["one", "zero", "skip"], default="one",
                   help="nDCG and Recall of a labelled trace with no relevant label (default one)")
    p.add_argument("--max-grade", type=int, default=3, help="grade scale 0..N (default 3)")
    p.add_argument("--max-bad-share", type=float, default=0.01,
                   help="bad lines skipped up to this share of the file, refused above "
                        "(default 0.01)")
    p.add_argument("--permutations", type=int, default=10_000,
                   help="random sign flips of the A/B paired test (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the A/B paired test")
    p.add_argument("--per-trace", action="store_true", help="add per_trace values to the JSON")
    p.add_argument("--output", type=Path, default=None,
                   help="also write DIR/replay.json (the JSON) and DIR/report.md")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(handler=cmd_replay)

    bench = getattr(sub, "choices", {}).get("benchmark")
    group = bench.get_default("subcommands") if bench is not None else None
    if group is not None:
        add_benchmark_replay(group)


def add_benchmark_replay(bsub) -> None:
    b = bsub.add_parser("replay", help="a million synthetic traces through the replay path")
    b.add_argument("--traces", type=int, default=1_000_000)
    b.add_argument("--depth", type=int, default=20, help="retrieved ids per trace")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--directory", type=Path, default=None,
                   help="where the JSONL is written (default: a temporary folder, removed)")
    b.set_defaults(handler=cmd_benchmark_replay)


def cmd_benchmark_replay(args: argparse.Namespace) -> int:
    from searcheval.replay_benchmark import benchmark_replay

    if args.traces < 1 or args.depth < 1:
        raise InputError("expected --traces and --depth >= 1", field="traces")
    return benchmark_replay(traces=args.traces, depth=args.depth, seed=args.seed,
                            directory=args.directory)


# --------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from searcheval.cli import EXIT_FAILED, EXIT_OK, EXIT_TRIPPED, print_json
    from searcheval.database import DatabaseError
    from searcheval.metrics import parse_metrics
    from searcheval.replay import (choose_sides, load_references, replay, replay_settings,
                                   replay_source)
    from searcheval.replay_report import replay_document, replay_text, write_replay_outputs
    from searcheval.traces import parse_time_bound

    settings = replay_settings(gain=args.gain, relevance_level=args.relevance_level,
                               no_relevant=args.no_relevant, max_grade=args.max_grade,
                               max_bad_share=args.max_bad_share, permutations=args.permutations)
    configurations = args.configurations.split(",") if args.configurations else None
    replay_source(args.traces, args.traces_b, args.from_db, configurations)
    metrics = parse_metrics(args.metrics)
    since = parse_time_bound(args.since, "since")
    until = parse_time_bound(args.until, "until")
    refs = load_references(thresholds=args.thresholds, catalog=args.catalog,
                           judgments=args.judgments, queries=args.queries,
                           max_grade=args.max_grade)
    try:
        table, table_b = read_sides(args, since, until)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    sides, excluded = choose_sides(table, table_b, configurations)
    report = replay(sides, metrics=metrics, settings=settings, thresholds=refs.thresholds,
                    judgments=refs.judgments, queries=refs.queries, catalog=refs.catalog,
                    permutations=args.permutations, seed=args.seed, excluded=excluded)
    if args.output is not None:
        write_replay_outputs(report, args.output, per_trace=args.per_trace)
    if args.format == "json":
        print_json(replay_document(report, per_trace=args.per_trace))
    else:
        print(replay_text(report))
    return EXIT_OK if report.passed else EXIT_TRIPPED


def read_sides(args: argparse.Namespace, since, until):
    """The traces of `--traces` [and `--traces-b`], or of the database, selected."""
    from searcheval.traces import read_traces, select_traces

    scale = (0, args.max_grade)
    if args.from_db:
        from searcheval.database import open_database
        from searcheval.store import load_trace_table

        with open_database(args.database_url) as conn:
            return load_trace_table(conn, since=since, until=until, segment=args.segment,
                                    grade_scale=scale, max_bad_share=args.max_bad_share), None
    tables = []
    for path in (args.traces, args.traces_b):
        if path is not None:
            table = read_traces(path, grade_scale=scale, max_bad_share=args.max_bad_share)
            tables.append(select_traces(table, since=since, until=until, segment=args.segment))
    return tables[0], (tables[1] if len(tables) > 1 else None)


# --------------------------------------------------------------------------- traces load


def add_traces(sub) -> None:
    """Register `searcheval traces load`."""
    from searcheval.cli import _Parser

    p = sub.add_parser("traces", help="recorded production traces in Postgres (search_traces)")
    tsub = p.add_subparsers(dest="traces_command", required=True, parser_class=_Parser)
    load = tsub.add_parser("load", help="upsert a JSONL file of traces by trace_id (all of the "
                                        "file or nothing) and print the counts")
    load.add_argument("file", type=Path, help="JSONL, one trace per line (as replay --traces)")
    load.add_argument("--database-url", help="Postgres (default: SEARCHEVAL_DATABASE_URL, else "
                      "the embedded server under .searcheval/)")
    load.add_argument("--max-grade", type=int, default=3, help="grade scale 0..N (default 3)")
    load.add_argument("--max-bad-share", type=float, default=0.01,
                      help="bad lines skipped up to this share of the file, refused above "
                           "(default 0.01)")
    load.add_argument("--format", choices=["table", "json"], default="table")
    load.set_defaults(handler=cmd_traces_load)


def cmd_traces_load(args: argparse.Namespace) -> int:
    from searcheval.cli import EXIT_FAILED, EXIT_OK, print_json
    from searcheval.database import DatabaseError, open_database
    from searcheval.store import ingest_traces

    if args.max_grade < 1:
        raise InputError(f"expected a top grade >= 1, got {args.max_grade}", field="max-grade")
    try:
        with open_database(args.database_url) as conn:
            counts = ingest_traces(conn, args.file, grade_scale=(0, args.max_grade),
                                   max_bad_share=args.max_bad_share)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.format == "json":
        print_json(counts)
        return EXIT_OK
    bad = counts["bad_lines"]
    print(f"{counts['file']}: {counts['traces']} traces loaded, {bad['count']} bad line(s) of "
          f"{bad['lines']} skipped"
          + ("" if not bad["first"] else " (" + "; ".join(
              f"line {b['line']}: {b['reason']}" for b in bad["first"]) + ")"))
    print(f"inserted {counts['inserted']}, updated {counts['updated']}, unchanged "
          f"{counts['unchanged']}; search_traces holds {counts['stored']} traces")
    return EXIT_OK
