"""`searcheval replay` and `searcheval traces load`.

`searcheval replay (--traces FILE [--traces-b FILE] | --from-db [--database-url URL])
[--since TS] [--until TS] [--segment S] [--configurations A[,B]] [--thresholds FILE]
[--catalog FILE] [--judgments FILE] [--queries FILE] [--metrics LIST] [--relevance-level N]
[--max-grade N] [--max-bad-share S] [--per-trace] [--output DIR] [--format table|json]`

Exit 0: every floor met and coverage at or above its minimum; 1: a floor missed or coverage under
its minimum; 2: refused input (one line on stderr); 3: the database failed.

`searcheval traces load FILE [--database-url URL]` upserts a JSONL file of traces into
`search_traces` (validated as replay reads it; all of the file or nothing) and prints the counts.

This is argparse glue: the work is in searcheval.replay.compose (the same composition the replay
flow's tasks call), searcheval.replay.report and searcheval.store.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (
    EXIT_FAILED,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_TRIPPED,
    Parser,
    add_conventions,
    add_database_url,
    epilog,
    print_json,
)
from searcheval.errors import InputError

DEFAULT_METRICS = ",".join(defaults.REPLAY_METRICS)


def add_replay(sub) -> None:
    """Register `searcheval replay`."""
    p = sub.add_parser("replay", help="score recorded production traces without re-running search",
                       **epilog(["searcheval replay --traces fixtures/traces.jsonl --thresholds "
                                 "fixtures/thresholds.json --catalog fixtures/catalog.json"],
                                {EXIT_OK: "every floor met and coverage at or above its minimum",
                                 EXIT_TRIPPED: "a floor missed or coverage under its minimum",
                                 EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED],
                                 EXIT_FAILED: "the database failed"}))
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--traces", type=Path, default=None,
                     help="JSONL, one trace per line: {trace_id, ts, query, query_id?, segment, "
                          "configuration?, retrieved_ids, relevant_ids?, relevance_scores?}")
    src.add_argument("--from-db", action="store_true",
                     help="read the traces from the search_traces table (see `traces load`)")
    add_database_url(p)
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
    add_conventions(p, "a labelled trace")
    p.add_argument("--max-grade", type=int, default=defaults.MAX_GRADE,
                   help=f"grade scale 0..N (default {defaults.MAX_GRADE})")
    p.add_argument("--max-bad-share", type=float, default=defaults.MAX_BAD_SHARE,
                   help="bad lines skipped up to this share of the file, refused above "
                        f"(default {defaults.MAX_BAD_SHARE})")
    p.add_argument("--permutations", type=int, default=defaults.PERMUTATIONS,
                   help=f"random sign flips of the A/B paired test (default {defaults.PERMUTATIONS})")
    p.add_argument("--seed", type=int, default=0, help="seed of the A/B paired test")
    p.add_argument("--max-losses", type=int, default=None, dest="ab_max_losses",
                   help="A/B: B loses (exit 1) with more losing queries than this on a gated "
                        "metric (default: more losing than winning queries), or with a "
                        "significant drop")
    p.add_argument("--per-trace", action="store_true", help="add per_trace values to the JSON")
    p.add_argument("--output", type=Path, default=None,
                   help="also write DIR/replay.json (the JSON) and DIR/report.md")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="a table per segment (default), or the JSON document")
    p.set_defaults(handler=cmd_replay)


# --------------------------------------------------------------------------- replay


def cmd_replay(args: argparse.Namespace) -> int:
    from searcheval.replay import compose
    from searcheval.replay.report import replay_document, replay_text, write_replay_outputs

    plan = compose.plan_replay(
        traces=args.traces, traces_b=args.traces_b, from_db=args.from_db, since=args.since,
        until=args.until, segment=args.segment, configurations=args.configurations,
        thresholds=args.thresholds, catalog=args.catalog, judgments=args.judgments,
        queries=args.queries, metrics=args.metrics, gain=args.gain,
        relevance_level=args.relevance_level, no_relevant=args.no_relevant,
        max_grade=args.max_grade, max_bad_share=args.max_bad_share,
        permutations=args.permutations, seed=args.seed, ab_max_losses=args.ab_max_losses)
    references = compose.load_references(plan)
    if plan.from_db:  # a DatabaseError exits 3 (searcheval.errors.EXIT_CODES)
        from searcheval.store.database import open_database

        with open_database(args.database_url) as conn:
            table, table_b = compose.read_db_traces(plan, conn), None
    else:
        table = compose.read_file_traces(plan, plan.traces)
        table_b = compose.read_file_traces(plan, plan.traces_b) if plan.traces_b else None
    report = compose.score(plan, table, table_b, references)
    if args.output is not None:
        write_replay_outputs(report, args.output, per_trace=args.per_trace)
    if args.format == "json":
        print_json(replay_document(report, per_trace=args.per_trace))
    else:
        print(replay_text(report))
    return EXIT_OK if report.passed else EXIT_TRIPPED


# --------------------------------------------------------------------------- traces load


def add_traces(sub) -> None:
    """Register `searcheval traces load`."""
    p = sub.add_parser("traces", help="recorded production traces in Postgres (search_traces)")
    tsub = p.add_subparsers(dest="traces_command", required=True, parser_class=Parser)
    load = tsub.add_parser("load", help="upsert a JSONL file of traces by trace_id (all of the "
                                        "file or nothing) and print the counts")
    load.add_argument("file", type=Path, help="JSONL, one trace per line (as replay --traces)")
    add_database_url(load)
    load.add_argument("--max-grade", type=int, default=defaults.MAX_GRADE,
                      help=f"grade scale 0..N (default {defaults.MAX_GRADE})")
    load.add_argument("--max-bad-share", type=float, default=defaults.MAX_BAD_SHARE,
                      help="bad lines skipped up to this share of the file, refused above "
                           f"(default {defaults.MAX_BAD_SHARE})")
    load.add_argument("--format", choices=["table", "json"], default="table",
                      help="two lines of counts (default), or the counts as JSON")
    load.add_argument("--ubi", action="store_true",
                      help="FILE is OpenSearch UBI queries (ubi_queries as JSONL; docs/production.md)")
    load.add_argument("--ubi-events", type=Path,
                      help="with --ubi: the UBI events (ubi_events as JSONL) whose clicks to keep")
    load.set_defaults(handler=cmd_traces_load)


def cmd_traces_load(args: argparse.Namespace) -> int:
    from searcheval.store import ingest_traces
    from searcheval.store.database import open_database

    if args.max_grade < 1:
        raise InputError(f"expected a top grade >= 1, got {args.max_grade}", field="max_grade")
    with open_database(args.database_url) as conn:  # a DatabaseError exits 3 (errors.EXIT_CODES)
        if args.ubi or args.ubi_events:
            from searcheval.store.traces import ingest_ubi

            counts = ingest_ubi(conn, args.file, args.ubi_events, grade_scale=(0, args.max_grade))
        else:
            counts = ingest_traces(conn, args.file, grade_scale=(0, args.max_grade),
                                   max_bad_share=args.max_bad_share)
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
