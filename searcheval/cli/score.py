"""`searcheval score`: TREC runs against qrels, as trec_eval would, with searcheval's conventions.

One run prints its means; several (`--run a --run b ...`) print side by side with a two-sided
paired sign-flip p-value of each against the first, on the queries both averaged. Which queries are
averaged is `--complete`'s choice alone (trec_eval's -c), independent of `--trec-compat`'s gain and
policy, and every output says how many queries were averaged and how many were left out.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
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


def run_names(paths: list[Path]) -> list[str]:
    """Each run's name: its file name without the suffix, or the whole path when two share one."""
    stems = [p.stem for p in paths]
    names = [s if stems.count(s) == 1 else str(p) for s, p in zip(stems, paths)]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"the run {dup} is named twice", field="run")
    return names


def _one_heap() -> None:
    """glibc's malloc, in this process, on one arena: a thread of pyarrow's (the judgments' file
    is read through one) would get an arena of its own and keep what it freed; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-8, 1)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc
        pass


def _one_blas_thread() -> None:
    """numpy's OpenBLAS on one thread in this process (set before numpy is first imported; a
    no-op after): scoring does no linear algebra, and starting a BLAS thread per core cost the
    command more start-up time than it ever gave back."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def cmd_score(args: argparse.Namespace) -> int:
    _one_blas_thread()
    import numpy as np

    _one_heap()

    from searcheval.io.trec import Fallback, read_qrels_columns
    from searcheval.metrics.columnar import evaluate_files
    from searcheval.metrics.engine import Settings, parse_metrics
    from searcheval.metrics.stats import sign_flip_pvalues

    metrics = parse_metrics(args.metrics)
    settings = Settings(gain=args.gain, relevance_level=args.relevance_level,
                        no_relevant=args.no_relevant, trec_compat=args.trec_compat)
    paths = list(args.run)
    names = run_names(paths)
    try:  # the columnar path; evaluate_files falls back to the exact loaders for odd files
        qrels = read_qrels_columns(args.qrels, max_grade=defaults.MAX_GRADE
                                   if args.max_grade is None else args.max_grade)
    except Fallback:
        qrels = None
    results = {name: evaluate_files(args.qrels, path, metrics, settings, complete=args.complete,
                                    max_grade=args.max_grade, qrels=qrels)
               for name, path in zip(names, paths)}
    label = {m.name: m.name_in(args.names, settings.relevance_level) for m in metrics}

    p_values: dict[str, dict[str, float | None]] = {}
    first = results[names[0]]
    for name in names[1:]:
        other = results[name]
        index = {q: i for i, q in enumerate(other.query_ids)}
        common = [(i, index[q]) for i, q in enumerate(first.query_ids) if q in index]
        a = np.asarray([i for i, _ in common], dtype=np.int64)
        b = np.asarray([j for _, j in common], dtype=np.int64)
        diffs = np.column_stack([other.values[m.name][b] - first.values[m.name][a]
                                 for m in metrics]) if common else np.zeros((0, len(metrics)))
        p = sign_flip_pvalues(diffs, seed=args.seed)
        p_values[name] = {m.name: (None if np.isnan(v) else float(v)) for m, v in zip(metrics, p)}

    if args.format == "json":
        print_json(_json(results, names, label, p_values, args.per_query))
    elif args.format == "csv":
        _csv(results, names, label, p_values, args.per_query)
    else:
        _table(results, names, label, p_values, args.per_query)
    return EXIT_OK


def _renamed(values: dict, label: dict[str, str]) -> dict:
    return {label[m]: v for m, v in values.items()}


def _json(results, names, label, p_values, per_query: bool) -> dict:
    def one(ev, full: bool) -> dict:
        out = {"queries": len(ev.query_ids), "counts": ev.counts,
               "means": _renamed(ev.means, label)}
        if full:
            out["per_query"] = {q: _renamed(v, label) for q, v in ev.per_query().items()}
        return out

    first = results[names[0]]
    payload = one(first, True)  # the contract: queries, means, per_query of the (first) run
    if len(names) > 1:
        payload["runs"] = {name: {**one(results[name], per_query),
                                  "p_values": _renamed(p_values.get(name) or
                                                       {m: None for m in label}, label)}
                           for name in names}
        payload["reference"] = names[0]
    return payload


def _csv(results, names, label, p_values, per_query: bool) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    if per_query:
        writer.writerow(["run", "query_id", *label.values()])
        for name in names:
            for qid, values in results[name].per_query().items():
                writer.writerow([name, qid, *("" if v is None else repr(v) for v in values.values())])
        return
    writer.writerow(["run", "metric", "value", "p_value", "queries", "judged_missing_from_run",
                     "run_not_judged"])
    for name in names:
        ev = results[name]
        counts = ev.counts
        for metric, value in ev.means.items():
            p = (p_values.get(name) or {}).get(metric)
            writer.writerow([name, label[metric], "" if value is None else repr(value),
                             "" if p is None else repr(p), counts["averaged"],
                             counts["judged_missing_from_run"], counts["run_not_judged"]])


def _counts_line(ev, prefix: str = "queries") -> str:
    c = ev.counts
    return (f"{prefix}: {c['averaged']} averaged, {c['judged_missing_from_run']} judged but not "
            f"in the run, {c['run_not_judged']} in the run but not judged")


def _table(results, names, label, p_values, per_query: bool) -> None:
    width = max(len(n) for n in [*label.values(), "metric"]) + 2
    if len(names) == 1:
        ev = results[names[0]]
        print(f"{'metric':<{width}}value")
        for metric, value in ev.means.items():
            print(f"{label[metric]:<{width}}{format_value(value)}")
        print(_counts_line(ev))
    else:
        cols = [names[0]] + [c for n in names[1:] for c in (n, "p")]
        col_width = max(10, *(len(c) + 2 for c in cols))
        print(f"{'metric':<{width}}" + "".join(f"{c:>{col_width}}" for c in cols))
        for metric in label:
            cells = [format_value(results[names[0]].means[metric])]
            for n in names[1:]:
                cells += [format_value(results[n].means[metric]),
                          format_value(p_values[n][metric])]
            print(f"{label[metric]:<{width}}" + "".join(f"{c:>{col_width}}" for c in cells))
        for n in names:
            print(_counts_line(results[n], f"{n} queries"))
        print(f"p: two-sided paired sign-flip test against {names[0]} on the queries both "
              "averaged")
    if per_query:
        print()
        qwidth = max([len("query")] + [len(q) for ev in results.values() for q in ev.query_ids]) + 2
        head = ("run".ljust(max(len(n) for n in names) + 2) if len(names) > 1 else "")
        print(head + f"{'query':<{qwidth}}" + "".join(f"{m:>{max(10, len(m) + 2)}}"
                                                      for m in label.values()))
        for n in names:
            for qid, values in results[n].per_query().items():
                lead = n.ljust(max(len(x) for x in names) + 2) if len(names) > 1 else ""
                print(lead + f"{qid:<{qwidth}}" + "".join(
                    f"{format_value(v):>{max(10, len(label[m]) + 2)}}" for m, v in values.items()))


def add_score(sub) -> None:
    p = sub.add_parser("score", help="score TREC runs against qrels",
                       **epilog(["searcheval score --qrels fixtures/example_qrels.trec --run "
                                 "fixtures/example_run.trec --metrics ndcg@10,mrr --format json"],
                                {EXIT_OK: "scored", EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED]}))
    p.add_argument("--qrels", required=True, type=Path,
                   help="TREC qrels (qid 0 docid grade) or BEIR qrels tsv")
    p.add_argument("--run", required=True, type=Path, action="append",
                   help="TREC run (qid Q0 docid rank score tag); repeat to compare runs side by "
                        "side, each tested against the first")
    p.add_argument("--metrics", default=",".join(defaults.SCORE_METRICS),
                   help="comma-separated, any case: ndcg@K, mrr, mrr@K, recall@K, precision@K, "
                        "map, map@K, judged@K, rprec, success@K, bpref, err@K, rbp, rbp(p=P), "
                        "rbp_residual, abstention, or their ir_measures / trec_eval names "
                        "(nDCG@10, RR, R@20, P@10, AP, ndcg_cut_10, recip_rank, P_10, recall_20)")
    p.add_argument("--names", choices=["searcheval", "ir_measures", "trec"], default="searcheval",
                   help="which tool's metric names to print (default searcheval's)")
    p.add_argument("--complete", action="store_true",
                   help="average over every judged query, one missing from the run scoring 0 "
                        "(trec_eval -c); default: the judged queries of the run, as trec_eval")
    p.add_argument("--trec-compat", action="store_true",
                   help="trec_eval's conventions: linear gain, policy zero")
    add_conventions(p)
    p.add_argument("--max-grade", type=int, default=None,
                   help=f"top of the grade scale (TREC qrels default {defaults.MAX_GRADE}; BEIR: largest in "
                        "the file)")
    p.add_argument("--per-query", action="store_true",
                   help="also print every query's values (table, csv; json always has them for "
                        "the first run)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the sampled sign-flip test beyond 16 differing queries")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table",
                   help="output format (default table)")
    p.set_defaults(handler=cmd_score)
