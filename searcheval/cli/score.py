"""`searcheval score`: a TREC run against qrels, as trec_eval would, with searcheval's conventions."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_REFUSED,
    add_conventions,
    epilog,
    format_value,
    print_json,
)
from searcheval.errors import InputError


def cmd_score(args: argparse.Namespace) -> int:
    from searcheval.io.trec import load_qrels, load_trec_run
    from searcheval.metrics.engine import Settings, evaluate, parse_metrics

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
    p = sub.add_parser("score", help="score a TREC run against qrels",
                       **epilog(["searcheval score --qrels fixtures/example_qrels.trec --run "
                                 "fixtures/example_run.trec --metrics ndcg@10,mrr --format json"],
                                {EXIT_OK: "scored", EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED]}))
    p.add_argument("--qrels", required=True, type=Path,
                   help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv")
    p.add_argument("--run", required=True, type=Path, help="TREC run (qid Q0 docid rank score tag)")
    p.add_argument("--metrics", default=",".join(defaults.SCORE_METRICS),
                   help="comma-separated: ndcg@K, mrr, mrr@K, recall@K, precision@K, map, map@K, "
                        "judged@K, abstention")
    p.add_argument("--trec-compat", action="store_true",
                   help="trec_eval's conventions: linear gain, queries in both files, policy zero")
    add_conventions(p)
    p.add_argument("--max-grade", type=int, default=None,
                   help=f"top of the grade scale (TREC qrels default {defaults.MAX_GRADE}; BEIR: largest in "
                        "the file)")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="a table of means (default), or JSON with the means and per query values")
    p.set_defaults(handler=cmd_score)
