"""`searcheval benchmark ...`: rerunnable speed benchmarks against the reference tools
(searcheval.bench, imported only when a benchmark runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searcheval.cli.common import EXIT_FAILED, EXIT_OK, EXIT_TRIPPED, Parser, add_database_url
from searcheval.errors import InputError


def cmd_benchmark_metrics(args: argparse.Namespace) -> int:
    from searcheval.bench.metrics import benchmark_metrics

    return benchmark_metrics(queries=args.queries, depth=args.depth, judged=args.judged,
                             seed=args.seed)


def cmd_benchmark_embed(args: argparse.Namespace) -> int:
    from searcheval.bench.common import beir_texts
    from searcheval.bench.embed import benchmark_embed
    from searcheval.errors import DatabaseError

    try:
        figures = benchmark_embed(beir_texts(args.dataset, args.texts), args.database_url,
                                  batch_size=args.batch_size)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def cmd_benchmark_search(args: argparse.Namespace) -> int:
    from searcheval.bench.search import benchmark_search
    from searcheval.errors import DatabaseError

    try:
        figures = benchmark_search(args.dataset, split=args.split, max_queries=args.queries,
                                   k=args.k, depth=args.depth, database_url=args.database_url)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark(sub) -> None:
    p = sub.add_parser("benchmark", help="rerunnable speed benchmarks against reference tools")
    bsub = p.add_subparsers(dest="benchmark", required=True, parser_class=Parser)
    m = bsub.add_parser("metrics", help="searcheval vs pytrec_eval vs ranx on one random run")
    m.add_argument("--queries", type=int, default=20000, help="queries of the random run")
    m.add_argument("--depth", type=int, default=100, help="results per query")
    m.add_argument("--judged", type=int, default=15, help="judged documents per query")
    m.add_argument("--seed", type=int, default=0, help="seed of the random run")
    m.set_defaults(handler=cmd_benchmark_metrics)
    scifact = Path("../shared/datasets/scifact")
    e = bsub.add_parser("embed", help="cached embedder (cold, then warm in a new process) vs raw "
                                      "SentenceTransformer.encode on the same texts")
    e.add_argument("--dataset", type=Path, default=scifact,
                   help="BEIR collection whose titles + abstracts are embedded")
    e.add_argument("--texts", type=int, default=1000, help="distinct texts to embed")
    e.add_argument("--batch-size", type=int, default=64, help="texts per encode batch")
    add_database_url(e, "server to create the throwaway database on")
    e.set_defaults(handler=cmd_benchmark_embed)
    s = bsub.add_parser("search", help="HNSW recall, per-query latency and nDCG@10 of the "
                                       "configurations on a BEIR collection")
    s.add_argument("--dataset", type=Path, default=scifact,
                   help=f"a BEIR dataset folder (default {scifact})")
    s.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    s.add_argument("--queries", type=int, help="only the first N judged queries")
    s.add_argument("--k", type=int, default=10, help="cut-off of the HNSW recall (default 10)")
    s.add_argument("--depth", type=int, default=100,
                   help="results per query of the timed runs (default 100, as the nightly)")
    add_database_url(s)
    s.set_defaults(handler=cmd_benchmark_search)
    add_benchmark_replay(bsub)
    add_benchmark_load(bsub)
    add_benchmark_backend(bsub)
    add_benchmark_score(bsub)
    from searcheval.cli.production import add_benchmark_traces

    add_benchmark_traces(bsub)
    add_benchmark_snapshots(bsub)
    add_benchmark_run(bsub)
    add_benchmark_wands(bsub)
    add_benchmark_judge(bsub)
    add_benchmark_tune(bsub)


def add_benchmark_tune(bsub) -> None:
    scifact = Path("../shared/datasets/scifact")
    b = bsub.add_parser("tune", help="trials per second of fuse weights over cached bm25 and "
                                     "dense lists, and the held-out verdict")
    b.add_argument("--dataset", type=Path, default=scifact,
                   help=f"a BEIR dataset folder (default {scifact}; its test queries)")
    b.add_argument("--trials", type=int, default=100, help="trials (default 100)")
    b.add_argument("--held-out", type=float, default=0.3, help="held-out share (default 0.3)")
    b.add_argument("--seed", type=int, default=0, help="seed of the split and the sampler")
    add_database_url(b)
    b.set_defaults(handler=cmd_benchmark_tune)


def cmd_benchmark_tune(args: argparse.Namespace) -> int:
    from searcheval.bench.tune import benchmark_tune
    from searcheval.errors import DatabaseError

    try:
        figures = benchmark_tune(args.dataset, trials=args.trials, held_out=args.held_out,
                                 seed=args.seed, database_url=args.database_url)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_run(bsub) -> None:
    scifact = Path("../shared/datasets/scifact")
    b = bsub.add_parser("run", help="whole `searcheval run` processes on a dataset, cold and "
                                    "warm, beside raw sentence-transformers on the same texts, "
                                    "and where their time goes, stage by stage")
    b.add_argument("--dataset", type=Path, default=scifact,
                   help=f"the dataset a run evaluates (default {scifact})")
    b.add_argument("--project", type=Path, default=Path("."),
                   help="the project folder whose flows/ run (default: this folder)")
    b.add_argument("--batch-size", type=int, default=64,
                   help="texts per encode batch of the raw reference (default 64, the run's "
                        "own up to 128 tokens a text; longer texts, fewer)")
    b.add_argument("--warm-runs", type=int, default=3,
                   help="warm runs after the cold one (default 3; the median is reported)")
    b.set_defaults(handler=cmd_benchmark_run)


def cmd_benchmark_run(args: argparse.Namespace) -> int:
    from searcheval.bench.run import benchmark_run

    if args.batch_size < 1:
        raise InputError("expected a batch size >= 1", field="batch_size")
    try:
        figures = benchmark_run(args.dataset, project=args.project, batch_size=args.batch_size,
                                warm_runs=args.warm_runs)
    except RuntimeError as exc:  # a timed process failed: its own last lines say why
        print(f"searcheval: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_wands(bsub) -> None:
    b = bsub.add_parser("wands", help="the whole nightly on a WANDS-shaped collection (43k "
                                      "products), cold and warm: stage times, peak memory, "
                                      "the validation step, embedding vs raw "
                                      "sentence-transformers")
    b.add_argument("--dataset", type=Path, default=None,
                   help="a real WANDS folder (product.csv, query.csv, label.csv); default: "
                        "generate one of its shape")
    b.add_argument("--products", type=int, default=42_994, help="products to generate")
    b.add_argument("--queries", type=int, default=480, help="queries to generate")
    b.add_argument("--labels", type=int, default=233_448, help="labels to generate")
    b.add_argument("--seed", type=int, default=0, help="seed of the generator")
    b.add_argument("--configurations", default=None, metavar="A,B,...",
                   help="configurations the nightly runs (default bm25,dense,fused; "
                        "bm25 with --no-model)")
    b.add_argument("--no-model", action="store_true",
                   help="run bm25 only: nothing embedded, no model loaded")
    b.add_argument("--no-raw", action="store_true",
                   help="skip raw sentence-transformers on the same texts (43k texts take "
                        "most of an hour on 2 cores); the embedding ratio is then not measured")
    b.add_argument("--warm-runs", type=int, default=2,
                   help="warm runs after the cold one (default 2; the median is reported)")
    b.add_argument("--batch-size", type=int, default=64,
                   help="texts per encode batch of the raw reference (default 64, the run's "
                        "own up to 128 tokens a text; longer texts, fewer)")
    b.add_argument("--project", type=Path, default=Path("."),
                   help="the project folder whose flows/ run (default: this folder)")
    b.add_argument("--directory", type=Path, default=None,
                   help="keep the collection, the working folder and the run's output here "
                        "(default: a temporary folder, removed)")
    b.set_defaults(handler=cmd_benchmark_wands)


def cmd_benchmark_wands(args: argparse.Namespace) -> int:
    from searcheval.bench.wands import MODEL_CONFIGURATIONS, NO_MODEL_CONFIGURATIONS, \
        benchmark_wands

    if min(args.products, args.queries, args.labels, args.warm_runs, args.batch_size) < 1:
        raise InputError("expected --products, --queries, --labels, --warm-runs and "
                         "--batch-size >= 1", field="products")
    if args.labels > args.products * args.queries:
        raise InputError("expected at most --products x --queries labels", field="labels")
    if args.configurations is not None:
        names = tuple(n.strip() for n in args.configurations.split(",") if n.strip())
        if not names:
            raise InputError("expected configuration names", field="configurations")
        if args.no_model and any(n != "bm25" for n in names):
            raise InputError("--no-model runs bm25 only", field="configurations")
    else:
        names = NO_MODEL_CONFIGURATIONS if args.no_model else MODEL_CONFIGURATIONS
    try:
        figures = benchmark_wands(dataset=args.dataset, products=args.products,
                                  queries=args.queries, labels=args.labels, seed=args.seed,
                                  configurations=names, warm_runs=args.warm_runs,
                                  raw=not args.no_raw, batch_size=args.batch_size,
                                  project=args.project, directory=args.directory)
    except RuntimeError as exc:  # a timed process failed: its own last lines say why
        print(f"searcheval: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_score(bsub) -> None:
    b = bsub.add_parser("score", help="searcheval score vs trec_eval (built from source), "
                                      "pytrec_eval and ranx as whole processes on the same "
                                      "generated TREC files, then in-process")
    b.add_argument("--queries", type=int, default=20_000, help="queries to generate")
    b.add_argument("--depth", type=int, default=100, help="results per query")
    b.add_argument("--judged", type=int, default=15, help="judged documents per query")
    b.add_argument("--seed", type=int, default=0, help="seed of the generator")
    b.add_argument("--repeat", type=int, default=3, help="rounds; the best time of each tool is shown")
    b.add_argument("--trec-eval-source", type=Path, default=Path("../shared/tools/trec_eval"),
                   help="trec_eval's C source, copied and built in a temporary folder")
    b.add_argument("--directory", type=Path, default=None,
                   help="where the files are written (default: a temporary folder, removed)")
    b.add_argument("--no-in-process", action="store_true",
                   help="only the whole processes (skip the in-process DataFrame / dicts timing)")
    b.add_argument("--id-spaces", default="2000000,100000,1000", metavar="N,N,...",
                   help="how many distinct document ids each run's ids are drawn from, one run "
                        "of --queries each (default 2000000,100000,1000: an id per row first)")
    b.add_argument("--large-queries", type=int, default=100_000,
                   help="queries of one more, large run with an id per row (searcheval and "
                        "trec_eval only; 0: none; default 100000)")
    b.add_argument("--ranx", action="store_true", help="also time ranx as a whole process")
    b.set_defaults(handler=cmd_benchmark_score)


def cmd_benchmark_score(args: argparse.Namespace) -> int:
    from searcheval.bench.score import benchmark_score

    if min(args.queries, args.depth, args.judged, args.repeat) < 1:
        raise InputError("expected --queries, --depth, --judged and --repeat >= 1", field="queries")
    try:
        spaces = tuple(int(x) for x in args.id_spaces.split(","))
    except ValueError:
        raise InputError(f"expected comma-separated numbers, got {args.id_spaces!r}",
                         field="id_spaces") from None
    if min(spaces) < args.depth + args.judged:
        raise InputError(f"expected id spaces of at least --depth + --judged "
                         f"({args.depth + args.judged}) ids", field="id_spaces")
    if args.large_queries < 0:
        raise InputError("expected --large-queries >= 0", field="large_queries")
    figures = benchmark_score(queries=args.queries, depth=args.depth, judged=args.judged,
                              seed=args.seed, repeat=args.repeat,
                              trec_eval_source=args.trec_eval_source, directory=args.directory,
                              in_process=not args.no_in_process, id_spaces=spaces,
                              large_queries=args.large_queries or None, ranx=args.ranx)
    return EXIT_OK if figures["agree"] else EXIT_TRIPPED

def add_benchmark_backend(bsub) -> None:
    b = bsub.add_parser("backend", help="the http kind against the example search service, "
                                        "beside the service's capacity (a bare httpx client's "
                                        "queries/s, and concurrency / delay)")
    b.add_argument("--queries", type=int, default=None, help="queries per client and round "
                   "(the fixtures' queries, repeated; default 10000, 160 with --compare)")
    b.add_argument("--concurrency", type=int, default=32,
                   help="requests in flight at once (default 32)")
    b.add_argument("--delay-ms", type=float, default=20.0,
                   help="how long the service sleeps before each answer (default 20)")
    b.add_argument("--rounds", type=int, default=3,
                   help="alternating rounds of the bare client and the http kind (default 3)")
    b.add_argument("--compare", default=None, metavar="LOW,HIGH",
                   help="instead: the http kind and the bare client at two concurrencies "
                        "(issue 11: 1,8; goal 4x the queries/s)")
    b.add_argument("--scale", action="store_true", help=argparse.SUPPRESS)  # now the default
    b.set_defaults(handler=cmd_benchmark_backend)


def cmd_benchmark_backend(args: argparse.Namespace) -> int:
    from searcheval.bench.backend import benchmark_backend, benchmark_backend_concurrency
    from searcheval.cli.common import project_root

    queries = args.queries if args.queries is not None else (160 if args.compare else 10_000)
    if queries < 1 or args.concurrency < 1 or args.rounds < 1:
        raise InputError("expected --queries, --concurrency and --rounds >= 1", field="queries")
    if args.delay_ms < 0:
        raise InputError(f"expected --delay-ms >= 0, got {args.delay_ms:g}", field="delay_ms")
    if args.compare is not None:
        try:
            low, high = (int(x) for x in args.compare.split(","))
        except ValueError:
            low = high = 0
        if low < 1 or high < 1:
            raise InputError(f"expected LOW,HIGH whole numbers >= 1, got {args.compare!r}",
                             field="compare")
        figures = benchmark_backend_concurrency(project_root(), queries=queries,
                                                delay_ms=args.delay_ms,
                                                concurrencies=(low, high))
    else:
        if args.delay_ms == 0:
            raise InputError("expected --delay-ms > 0 (the nominal capacity is concurrency / "
                             "delay)", field="delay_ms")
        figures = benchmark_backend(project_root(), queries=queries,
                                    concurrency=args.concurrency, delay_ms=args.delay_ms,
                                    rounds=args.rounds)
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_judge(bsub) -> None:
    b = bsub.add_parser("judge", help="the openai judge kind against a local chat-completions "
                                      "server: pairs/s vs its capacity, client overhead, cache")
    b.add_argument("--pairs", type=int, default=10_000, help="pairs labelled (default 10000)")
    b.add_argument("--delay-ms", type=float, default=50.0,
                   help="how long the server takes per answer (default 50)")
    b.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    add_database_url(b)
    b.set_defaults(handler=cmd_benchmark_judge)


def cmd_benchmark_judge(args: argparse.Namespace) -> int:
    from searcheval.bench.judge import benchmark_judge

    if args.pairs < 1 or args.concurrency < 1 or args.delay_ms <= 0:
        raise InputError("expected --pairs and --concurrency >= 1, --delay-ms > 0", field="pairs")
    figures = benchmark_judge(args.database_url, pairs=args.pairs, delay_ms=args.delay_ms,
                              concurrency=args.concurrency)
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_snapshots(bsub) -> None:
    b = bsub.add_parser("snapshots", help="storing a run's ranked lists (binary COPY vs INSERTs) "
                                          "and diffing two runs, at SciFact's size")
    b.add_argument("--queries", type=int, default=300, help="queries per run (default 300)")
    b.add_argument("--depth", type=int, default=100, help="ranks per list (default 100)")
    b.add_argument("--repeat", type=int, default=3, help="rounds; the best time is shown")
    b.add_argument("--seed", type=int, default=0, help="seed of the generator")
    add_database_url(b, "server to create the throwaway database on")
    b.set_defaults(handler=cmd_benchmark_snapshots)


def cmd_benchmark_snapshots(args: argparse.Namespace) -> int:
    from searcheval.bench.snapshots import benchmark_snapshots
    from searcheval.errors import DatabaseError

    if min(args.queries, args.depth, args.repeat) < 1:
        raise InputError("expected --queries, --depth and --repeat >= 1", field="queries")
    try:
        figures = benchmark_snapshots(args.database_url, queries=args.queries, depth=args.depth,
                                      repeat=args.repeat, seed=args.seed)
    except DatabaseError as exc:
        print(f"searcheval: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if figures["goal_met"] else EXIT_TRIPPED


def add_benchmark_load(bsub) -> None:
    b = bsub.add_parser("load", help="load time and peak memory of each loader on a generated "
                                     "WANDS-shaped dataset, against pandas.read_csv")
    b.add_argument("--products", type=int, default=42_994, help="products to generate")
    b.add_argument("--queries", type=int, default=480, help="queries to generate")
    b.add_argument("--labels", type=int, default=233_448, help="labels to generate")
    b.add_argument("--seed", type=int, default=0, help="seed of the generator")
    b.add_argument("--repeat", type=int, default=3,
                   help="rounds of fresh processes; the best time of each loader is shown")
    b.add_argument("--directory", type=Path, default=None,
                   help="where the tables are written (default: a temporary folder, removed)")
    b.set_defaults(handler=cmd_benchmark_load)


def cmd_benchmark_load(args: argparse.Namespace) -> int:
    from searcheval.bench.load import benchmark_load

    if min(args.products, args.queries, args.labels, args.repeat) < 1:
        raise InputError("expected --products, --queries, --labels and --repeat >= 1",
                         field="products")
    if args.labels > args.products * args.queries:
        raise InputError("expected at most --products x --queries labels", field="labels")
    return benchmark_load(products=args.products, queries=args.queries, labels=args.labels,
                          seed=args.seed, directory=args.directory, repeat=args.repeat)


def add_benchmark_replay(bsub) -> None:
    b = bsub.add_parser("replay", help="a million synthetic traces through the replay path")
    b.add_argument("--traces", type=int, default=1_000_000, help="traces to generate")
    b.add_argument("--depth", type=int, default=20, help="retrieved ids per trace")
    b.add_argument("--seed", type=int, default=0, help="seed of the generator")
    b.add_argument("--directory", type=Path, default=None,
                   help="where the JSONL is written (default: a temporary folder, removed)")
    b.set_defaults(handler=cmd_benchmark_replay)


def cmd_benchmark_replay(args: argparse.Namespace) -> int:
    from searcheval.bench.replay import benchmark_replay

    if args.traces < 1 or args.depth < 1:
        raise InputError("expected --traces and --depth >= 1", field="traces")
    return benchmark_replay(traces=args.traces, depth=args.depth, seed=args.seed,
                            directory=args.directory)
