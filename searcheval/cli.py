"""The `searcheval` command line. Bad input prints one line and exits 2.

Exit codes: 0 success / gate passed, 1 gate tripped or threshold missed, 2 refused input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Callable, Sequence

from searcheval.errors import InputError

EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED = 0, 1, 2


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


# --------------------------------------------------------------------------- benchmark


def cmd_benchmark_metrics(args: argparse.Namespace) -> int:
    from searcheval.benchmark import benchmark_metrics

    return benchmark_metrics(queries=args.queries, depth=args.depth, judged=args.judged,
                             seed=args.seed)


def add_benchmark(sub) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("benchmark", help="rerunnable speed benchmarks against reference tools")
    bsub = p.add_subparsers(dest="benchmark", required=True, parser_class=_Parser)
    m = bsub.add_parser("metrics", help="searcheval vs pytrec_eval vs ranx on one random run")
    m.add_argument("--queries", type=int, default=20000)
    m.add_argument("--depth", type=int, default=100)
    m.add_argument("--judged", type=int, default=15, help="judged documents per query")
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(handler=cmd_benchmark_metrics)
    return {"benchmark": bsub}


# --------------------------------------------------------------------------- main

COMMANDS: list[Callable] = [add_score, add_benchmark]


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
