"""`searcheval replay` and `searcheval benchmark replay`.

`searcheval replay --traces FILE [--traces-b FILE | --configurations A[,B]] [--thresholds FILE]
[--catalog FILE] [--judgments FILE] [--queries FILE] [--metrics LIST] [--relevance-level N]
[--max-grade N] [--max-bad-share S] [--per-trace] [--format table|json]`

Exit 0: every floor met and coverage at or above its minimum; 1: a floor missed or coverage under
its minimum; 2: refused input (one line on stderr).

This module imports `searcheval.cli` only inside functions: cli imports it for its COMMANDS list.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval.errors import InputError

DEFAULT_METRICS = "ndcg@10,mrr,precision@10,recall@20,map"


def add_replay(sub) -> None:
    """Register `searcheval replay`, and `replay` under `searcheval benchmark` when it exists."""
    p = sub.add_parser("replay", help="score recorded production traces without re-running search")
    p.add_argument("--traces", required=True, type=Path,
                   help="JSONL, one trace per line: {trace_id, ts, query, query_id?, segment, "
                        "configuration?, retrieved_ids, relevant_ids?, relevance_scores?}")
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
    from searcheval.catalog import load_catalog, load_queries
    from searcheval.cli import EXIT_OK, EXIT_TRIPPED, print_json
    from searcheval.metrics import Settings, parse_metrics
    from searcheval.replay import load_thresholds, query_index, replay, split_configurations
    from searcheval.traces import read_traces

    if args.max_grade < 1:
        raise InputError(f"expected a top grade >= 1, got {args.max_grade}", field="max-grade")
    if not 1 <= args.relevance_level <= args.max_grade:
        raise InputError(f"expected a relevance level in 1..{args.max_grade}, got "
                         f"{args.relevance_level}", field="relevance-level")
    if not 0.0 <= args.max_bad_share <= 1.0:
        raise InputError(f"expected a share in [0, 1], got {args.max_bad_share}",
                         field="max-bad-share")
    if args.permutations < 1:
        raise InputError("expected at least 1 permutation", field="permutations")
    if args.traces_b is not None and args.configurations:
        raise InputError("--configurations splits one --traces file; with --traces-b each file "
                         "is one side", field="configurations")
    settings = Settings(gain=args.gain, relevance_level=args.relevance_level,
                        no_relevant=args.no_relevant)
    metrics = parse_metrics(args.metrics)
    scale = (0, args.max_grade)
    thresholds = load_thresholds(args.thresholds) if args.thresholds else None
    catalog = {r.id for r in load_catalog(args.catalog)} if args.catalog else None
    golden = load_queries(args.queries) if args.queries else None
    index = query_index(golden) if golden else None
    judgments = None
    if args.judgments:
        judgments = load_judgment_map(args.judgments, args.max_grade,
                                      {q.id for q in golden} if golden else None)

    table = read_traces(args.traces, grade_scale=scale, max_bad_share=args.max_bad_share)
    excluded = 0
    if args.traces_b is not None:
        table_b = read_traces(args.traces_b, grade_scale=scale, max_bad_share=args.max_bad_share)
        sides = [(side_name(table), table), (side_name(table_b), table_b)]
        if sides[0][0] == sides[1][0]:
            sides = [(str(args.traces), table), (str(args.traces_b), table_b)]
    else:
        names = [n.strip() for n in args.configurations.split(",") if n.strip()] \
            if args.configurations else None
        sides, excluded = split_configurations(table, names)
    report = replay(sides, metrics=metrics, settings=settings, thresholds=thresholds,
                    judgments=judgments, queries=index, catalog=catalog,
                    permutations=args.permutations, seed=args.seed, excluded=excluded)
    if args.format == "json":
        print_json(report.to_dict(per_trace=args.per_trace))
    else:
        print_report(report)
    return EXIT_OK if report.passed else EXIT_TRIPPED


def side_name(table) -> str:
    """A file's configuration when all its traces name the same one, else the file."""
    codes = set(table.configuration.tolist())
    if len(codes) == 1 and -1 not in codes:
        return table.configurations[codes.pop()]
    return table.source


def load_judgment_map(path: Path, max_grade: int,
                      query_ids: set[str] | None) -> dict[str, dict[str, int]]:
    """judgments.csv (the fixtures' format) by its .csv suffix, else TREC or BEIR qrels."""
    from searcheval.catalog import load_judgments
    from searcheval.judgments import load_qrels

    if path.suffix.lower() == ".csv":
        out: dict[str, dict[str, int]] = {}
        for j in load_judgments(path, grade_scale=(0, max_grade), query_ids=query_ids):
            out.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return out
    return load_qrels(path, max_grade=max_grade)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def print_report(report) -> None:
    from searcheval.cli import format_value
    from searcheval.replay import ALL

    m = report.main
    cov = m.coverage
    name = f" [{m.name}]" if m.name else ""
    floor = f", min {_pct(cov.min_coverage)}" if cov.min_coverage is not None else ""
    print(f"replay of {m.source}{name}: {m.traces} traces, {cov.labelled} labelled "
          f"(coverage {_pct(cov.share)}{floor})")
    print(f"labels: {m.labels['relevance_scores']} from relevance_scores, "
          f"{m.labels['relevant_ids']} from relevant_ids, {m.labels['judgments']} from judgments, "
          f"{m.labels['none']} unlabelled")
    if m.stale is not None:
        print(f"stale labels dropped: {m.stale.dropped} ({m.stale.traces} traces, "
              f"{m.stale.left_unlabelled} left unlabelled)")
    bad = m.bad
    print(f"bad lines skipped: {bad.count} of {bad.lines} lines"
          + ("" if not bad.first else " (" + "; ".join(f"line {b.line}: {b.reason}"
                                                       for b in bad.first) + ")"))
    if report.excluded:
        print(f"traces of other configurations left out: {report.excluded}")
    metrics = report.metrics
    seg_w = max([len(s) for s in m.segments] + [len(ALL), 7]) + 2
    head = f"{'segment':<{seg_w}}{'traces':>7}{'labelled':>10}{'coverage':>10}"
    w = max([len(n) for n in metrics] + [8]) + 2
    print(head + "".join(f"{n:>{w}}" for n in metrics))
    for seg, values in m.segments.items():
        t, lab = cov.segments[seg]
        print(f"{seg:<{seg_w}}{t:>7}{lab:>10}{_pct(cov.segment_share(seg)):>10}"
              + "".join(f"{format_value(values.get(n)):>{w}}" for n in metrics))
    print(f"{ALL:<{seg_w}}{cov.traces:>7}{cov.labelled:>10}{_pct(cov.share):>10}"
          + "".join(f"{format_value(m.overall.get(n)):>{w}}" for n in metrics))
    if report.segments_without_traces:
        print("thresholds name segments with no trace: "
              + ", ".join(report.segments_without_traces))
    if report.ab is not None:
        ab, other = report.ab, report.other
        print(f"\nA/B: {ab.a} (A, {m.traces} traces) vs {ab.b} (B, {other.traces} traces, "
              f"coverage {_pct(other.coverage.share)}); a win is B better than A on a query")
        print(f"{'segment':<{seg_w}}{'metric':<14}{'pairs':>6}{'wins':>6}{'losses':>7}"
              f"{'ties':>6}{'mean A':>9}{'mean B':>9}{'delta':>9}{'p':>8}")
        for seg, per in ab.segments.items():
            for metric, c in per.items():
                delta = "-" if c.delta is None else f"{c.delta:+.4f}"
                p = "-" if c.p_value is None else f"{c.p_value:.4f}"
                print(f"{seg:<{seg_w}}{metric:<14}{c.pairs:>6}{c.wins:>6}{c.losses:>7}"
                      f"{c.ties:>6}{format_value(c.mean_a):>9}{format_value(c.mean_b):>9}"
                      f"{delta:>9}{p:>8}")
    if report.passed:
        print("\nPASSED")
    else:
        print(f"\nFAILED: {len(report.failures)} miss(es)")
        for f in report.failures:
            print(f"  {f.describe()}")
