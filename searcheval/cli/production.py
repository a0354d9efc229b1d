"""`searcheval queries sample`, `searcheval judgments implicit`, `searcheval live`: production
traces as golden queries, implicit judgments and a live monitor (issue 25, docs/production.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, EXIT_TRIPPED, Parser, add_database_url, print_json
from searcheval.errors import InputError


def add_trace_source(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("traces (one source)")
    src.add_argument("--traces", type=Path, help="a JSONL file of traces")
    src.add_argument("--ubi-queries", type=Path,
                     help="OpenSearch UBI queries (ubi_queries exported as JSONL)")
    src.add_argument("--ubi-events", type=Path,
                     help="OpenSearch UBI events (ubi_events as JSONL): clicks")
    src.add_argument("--from-db", action="store_true", help="the search_traces table")
    p.add_argument("--since", help="only traces with ts at or after this time (ISO 8601, UTC)")
    p.add_argument("--until", help="only traces with ts before this time")
    p.add_argument("--max-grade", type=int, default=defaults.MAX_GRADE,
                   help=f"the grade scale is 0..max-grade (default {defaults.MAX_GRADE})")
    p.add_argument("--max-bad-share", type=float, default=defaults.MAX_BAD_SHARE,
                   help="bad trace lines skipped up to this share, refused above "
                        f"(default {defaults.MAX_BAD_SHARE})")


def load_trace_source(args: argparse.Namespace):
    """(TraceTable of the window, window dict) from the arguments of `add_trace_source`."""
    from searcheval.io.traces import parse_time_bound, read_traces, select_traces

    since = parse_time_bound(args.since, "since")
    until = parse_time_bound(args.until, "until")
    given = [n for n, v in (("--traces", args.traces), ("--ubi-queries", args.ubi_queries),
                            ("--from-db", args.from_db)) if v]
    if len(given) != 1:
        raise InputError("expected one source of traces: --traces, --ubi-queries or --from-db",
                         field="traces")
    scale = (0, args.max_grade)
    if args.traces:
        table = select_traces(read_traces(args.traces, grade_scale=scale,
                                          max_bad_share=args.max_bad_share),
                              since=since, until=until)
    elif args.ubi_queries:
        from searcheval.io.ubi import read_ubi

        table = select_traces(read_ubi(args.ubi_queries, args.ubi_events, grade_scale=scale),
                              since=since, until=until)
    else:
        from searcheval.store.database import open_database
        from searcheval.store.traces import load_trace_table

        with open_database(args.database_url) as conn:
            table = load_trace_table(conn, since=since, until=until, grade_scale=scale,
                                     max_bad_share=args.max_bad_share)
    window = {"since": since.isoformat() if since else None,
              "until": until.isoformat() if until else None}
    return table, window


def _write(text: str, target: Path | None) -> None:
    if target is None:
        sys.stdout.write(text)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(text.encode("utf-8"))
    print(f"wrote {target}", file=sys.stderr)


# --------------------------------------------------------------------------- queries sample


def _patterns(value: str) -> list[str]:
    """`email,phone` is two built-in names; anything else is one regular expression (which may
    hold commas, `\\d{2,4}`)."""
    from searcheval.production.sampling import PII_PATTERNS

    parts = [p.strip() for p in value.split(",") if p.strip()]
    return parts if parts and all(p in PII_PATTERNS for p in parts) else [value]


def cmd_queries_sample(args: argparse.Namespace) -> int:
    from searcheval.production.sampling import DEFAULT_EXCLUDE, sample_queries

    table, window = load_trace_source(args)
    exclude = list(DEFAULT_EXCLUDE) if args.exclude is None else \
        [p for value in args.exclude for p in _patterns(value)]
    sample = sample_queries(table, n=args.n, method=args.method, seed=args.seed,
                            stratify=args.stratify, exclude=exclude, window=window,
                            category=args.category)
    _write(sample.to_json(), args.output)
    counts = sample.provenance["counts"]
    print(f"sampled {counts['sampled']} of {counts['candidates']} queries ({args.method}, seed "
          f"{args.seed}); {counts['excluded_queries']} excluded as personal data",
          file=sys.stderr)
    return EXIT_OK


def add_queries(sub) -> None:
    p = sub.add_parser("queries", help="golden queries from production traces")
    group = p.add_subparsers(dest="queries_command", required=True, parser_class=Parser)
    s = group.add_parser("sample", help="sample golden queries from traces (random, pps, top)")
    add_trace_source(s)
    add_database_url(s)
    s.add_argument("--method", choices=["random", "pps", "top"], default="pps",
                   help="random, pps (probability proportional to traffic, default) or top")
    s.add_argument("--n", type=int, required=True, help="queries to sample")
    s.add_argument("--seed", type=int, default=0, help="seed (default 0): same seed, same file")
    s.add_argument("--stratify", help="share n by a trace field: segment, configuration, "
                                      "configuration_version")
    s.add_argument("--exclude", action="append",
                   help="personal data to leave out, repeatable: built-in names (email, "
                        "phone, number, url; comma-separated) or a regular expression "
                        "(default email,phone,number)")
    s.add_argument("--category", default="paraphrase",
                   help="the category the sampled queries get (default paraphrase)")
    s.add_argument("--output", type=Path, help="golden query file to write (default stdout)")
    s.set_defaults(handler=cmd_queries_sample)


# --------------------------------------------------------------------------- judgments implicit


def cmd_judgments_implicit(args: argparse.Namespace) -> int:
    from searcheval.production.implicit import curve_text, implicit_judgments

    table, window = load_trace_source(args)
    thresholds = None if args.thresholds is None else \
        [t for t in args.thresholds.split(",") if t.strip()]
    from searcheval.io.traces import parse_time_bound

    result = implicit_judgments(
        table, model=args.model, min_impressions=args.min_impressions, thresholds=thresholds,
        grade_scale=(0, args.max_grade), max_rank=args.max_rank,
        since=parse_time_bound(args.since, "since"), until=parse_time_bound(args.until, "until"))
    summary = dict(result.summary)
    if args.output:
        lines = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in result.rows)
        _write(lines, args.output)
    if args.judgment_set:
        summary.update(_save_and_measure(args, result))
    if args.format == "json":
        print_json(summary)
        return EXIT_OK
    print(f"{summary['model']}: {summary['graded']} pair(s) graded of {summary['pairs']} "
          f"({summary['below_min_impressions']} below {args.min_impressions} impressions) from "
          f"{summary['traces']} traces; grades {summary['grades']}")
    print(curve_text(summary))
    if "agreement" in summary:
        a = summary["agreement"]
        kappa = "-" if a["kappa"] is None else f"{a['kappa']:.3f}"
        print(f"saved {summary['saved']} new row(s) into {args.judgment_set}; agreement with "
              f"human grades: kappa {kappa} over {a['pairs']} shared pair(s), floor "
              f"{a['floor']:g}: implicit grades {'count' if a['counts'] else 'do NOT count'}")
    return EXIT_OK


def _save_and_measure(args, result) -> dict:
    from searcheval.judging.judgments import Rule, latest_by_judge
    from searcheval.judging.trust import agreement_with_humans
    from searcheval.store import judgments as store
    from searcheval.store.database import open_database

    with open_database(args.database_url) as conn:
        saved = store.add_implicit_judgments(conn, args.judgment_set, result.rows)
        rows = store.load_judgment_rows(conn, args.judgment_set)
    human_rows = [r for r in rows if r.source == "human"]
    human = {pair: Rule("median").combine({j: r.grade for j, r in by.items()})
             for pair, by in latest_by_judge(human_rows).items()}
    grades = {(r.query_id, r.doc_id): r.grade for r in result.rows}
    agreement = agreement_with_humans(grades, human, list(range(0, args.max_grade + 1)),
                                      floor=args.agreement_floor)
    return {"saved": saved, "judgment_set": args.judgment_set, "agreement": agreement}


def add_implicit(group) -> None:
    """`searcheval judgments implicit` (registered by cli/judgments.py's group)."""
    i = group.add_parser("implicit", help="grades from clicks through a click model (PBM, COEC)")
    add_trace_source(i)
    add_database_url(i)
    i.add_argument("--model", choices=["pbm", "coec"], default="pbm",
                   help="pbm: position-based model by EM (default); coec: clicks over expected "
                        "clicks")
    i.add_argument("--min-impressions", type=int, default=10,
                   help="a pair shown fewer times gets no grade (default 10)")
    i.add_argument("--thresholds", help="estimate -> grade: max-grade ascending numbers, e.g. "
                                        "0.1,0.3,0.6 (pbm default) or 0.5,1,2 (coec default)")
    i.add_argument("--max-rank", type=int, default=10,
                   help="impressions below this rank are not used (default 10)")
    i.add_argument("--judgment-set", help="save the rows into this judgment set (Postgres) and "
                                          "measure their agreement with its human grades")
    i.add_argument("--agreement-floor", type=float, default=defaults.AGREEMENT_FLOOR,
                   help="implicit grades count at or above this kappa with humans (default "
                        f"{defaults.AGREEMENT_FLOOR})")
    i.add_argument("--output", type=Path, help="write the rows as JSONL here")
    i.add_argument("--format", choices=["table", "json"], default="table",
                   help="the summary and position bias curve as text (default) or JSON")
    i.set_defaults(handler=cmd_judgments_implicit)


# --------------------------------------------------------------------------- benchmark traces


def cmd_benchmark_traces(args: argparse.Namespace) -> int:
    from searcheval.bench.traces import benchmark_traces

    figures = benchmark_traces(traces=args.traces, window=args.window, seed=args.seed,
                               workdir=args.workdir, database_url=args.database_url)
    return EXIT_OK if figures["goals_met"] else EXIT_TRIPPED


def add_benchmark_traces(bsub) -> None:
    b = bsub.add_parser("traces", help="ingest, sampling and PBM on simulated traces; one live "
                                       "window")
    b.add_argument("--traces", type=int, default=1_000_000, help="trace events (default 1e6)")
    b.add_argument("--window", type=int, default=10_000,
                   help="traces of the timed live-monitor window (default 10000)")
    b.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    b.add_argument("--workdir", type=Path, help="where the JSONL is written (default a temp dir)")
    add_database_url(b, "server to create the live window's throwaway database on")
    b.set_defaults(handler=cmd_benchmark_traces)


# --------------------------------------------------------------------------- live


def cmd_live_run(args: argparse.Namespace) -> int:
    """One pass of the live monitor without Prefect: the due windows scored and stored; exit 1
    when the change detector fired in one of them."""
    from searcheval.io.traces import parse_time_bound
    from searcheval.production.monitor import (MonitorSettings, counted_judgments, live_alert,
                                               run_monitor)
    from searcheval.store.database import open_database

    settings = MonitorSettings(
        name=args.monitor, interval_minutes=args.interval_minutes,
        metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()),
        relevance_level=args.relevance_level, cusum_k=args.cusum_k, cusum_h=args.cusum_h,
        warmup=args.warmup, target=args.target, min_labelled=args.min_labelled,
        start=parse_time_bound(args.start, "start"))
    from searcheval.metrics.engine import parse_metrics

    parse_metrics(list(settings.metrics))  # a bad metric name is refused before any work
    now = parse_time_bound(args.now, "now")
    with open_database(args.database_url) as conn:
        judgments = counted_judgments(conn, args.judgment_set, grade_scale=(0, args.max_grade)) \
            if args.judgment_set else None
        windows = run_monitor(conn, settings, now=now, judgments=judgments,
                              grade_scale=(0, args.max_grade))
    if args.format == "json":
        print_json([{"window_start": w.start.isoformat(), "window_end": w.end.isoformat(),
                     "traces": w.traces, "labelled": w.labelled, "metrics": w.metrics,
                     "cusum_s": w.detector["state"]["s"], "alerted": w.alerted}
                    for w in windows])
    else:
        if not windows:
            print("no complete window since the last run")
        for w in windows:
            values = ", ".join(f"{m} {'-' if v is None else f'{v:.4f}'}"
                               for m, v in w.metrics.items())
            print(f"{w.start.isoformat()}  {w.traces:>6} traces  {w.labelled:>6} labelled  "
                  f"{values}{'  ALERT' if w.alerted else ''}")
    alert = live_alert(windows, settings)
    if alert is not None:
        print(alert.body(), file=sys.stderr)
        return EXIT_TRIPPED
    return EXIT_OK


def add_live(sub) -> None:
    p = sub.add_parser("live", help="the live monitor over search_traces (flow searcheval-live)")
    group = p.add_subparsers(dest="live_command", required=True, parser_class=Parser)
    r = group.add_parser("run", help="score the complete windows since the last run, once "
                                     "(exit 1 when the change detector fires)")
    r.add_argument("--monitor", default=defaults.LIVE_MONITOR,
                   help=f"the monitor's name in the history (default {defaults.LIVE_MONITOR})")
    r.add_argument("--interval-minutes", type=int, default=defaults.LIVE_INTERVAL_MINUTES,
                   help=f"window length (default {defaults.LIVE_INTERVAL_MINUTES})")
    r.add_argument("--metrics", default=",".join(defaults.LIVE_METRICS),
                   help="comma-separated metrics; the first is watched (default "
                        f"{','.join(defaults.LIVE_METRICS)})")
    r.add_argument("--relevance-level", type=int, default=defaults.RELEVANCE_LEVEL,
                   help="lowest grade that counts as relevant (default "
                        f"{defaults.RELEVANCE_LEVEL})")
    r.add_argument("--cusum-k", type=float, default=defaults.LIVE_CUSUM_K,
                   help=f"CUSUM slack (default {defaults.LIVE_CUSUM_K})")
    r.add_argument("--cusum-h", type=float, default=defaults.LIVE_CUSUM_H,
                   help=f"CUSUM threshold (default {defaults.LIVE_CUSUM_H})")
    r.add_argument("--warmup", type=int, default=defaults.LIVE_WARMUP,
                   help=f"windows whose mean is the target (default {defaults.LIVE_WARMUP})")
    r.add_argument("--target", type=float, help="a fixed target instead of the warm-up mean")
    r.add_argument("--min-labelled", type=int, default=defaults.LIVE_MIN_LABELLED,
                   help="windows with fewer labelled traces do not move the detector (default "
                        f"{defaults.LIVE_MIN_LABELLED})")
    r.add_argument("--start", help="first window's start when the monitor has no history")
    r.add_argument("--now", help="score as if it were this time (a backfill of a past period; "
                                 "default: now)")
    r.add_argument("--judgment-set", help="label traces without labels of their own from this "
                                          "judgment set")
    r.add_argument("--max-grade", type=int, default=defaults.MAX_GRADE,
                   help=f"the grade scale is 0..max-grade (default {defaults.MAX_GRADE})")
    r.add_argument("--format", choices=["table", "json"], default="table",
                   help="one line per window (default) or JSON")
    add_database_url(r)
    r.set_defaults(handler=cmd_live_run)
