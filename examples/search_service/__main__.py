"""`python -m examples.search_service --fixtures fixtures --port 8900`: index and serve.

Run from the repository root (`examples/` is not installed). With `--port 0` the system picks a
free port; the line printed once the service listens names it:

    search_service: serving fixtures (18 documents) on http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import uvicorn

from searcheval import InputError, load_collection

from examples.search_service.app import create_app
from examples.search_service.engine import Engine
from examples.search_service.knobs import Knobs


def _pair(text: str) -> tuple[str, str]:
    """KEY=VALUE, split at the last '=' (a query text may hold one)."""
    key, sep, value = text.rpartition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.search_service",
                                description="A small real search service (tantivy) to evaluate "
                                            "with searcheval. Knobs: see README.md.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--fixtures", metavar="DIR", help="the seed fixtures folder")
    source.add_argument("--dataset", metavar="DIR", help="a BEIR folder (corpus.jsonl, ...)")
    p.add_argument("--split", default="test", help="BEIR qrels split (default: test)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8900, help="0 picks a free port (default: 8900)")
    p.add_argument("--watch-parent", action="store_true",
                   help="exit when the process that started this one goes away (for test harnesses)")
    k = p.add_argument_group("knobs (all default to a well-behaved service)")
    k.add_argument("--fail-first", type=int, default=0, metavar="N")
    k.add_argument("--fail-status", type=int, default=503, metavar="STATUS")
    k.add_argument("--fail-query", type=_pair, action="append", default=[], metavar="TEXT=STATUS")
    k.add_argument("--fail-document", type=_pair, action="append", default=[], metavar="ID=STATUS")
    k.add_argument("--delay-ms", type=float, default=0.0, metavar="MS")
    k.add_argument("--malformed", choices=["not_json", "no_hits", "object_id"])
    k.add_argument("--malformed-query", type=_pair, action="append", default=[], metavar="TEXT=MODE")
    k.add_argument("--require-header", type=_pair, action="append", default=[],
                   metavar="NAME=VALUE")
    k.add_argument("--gone-document", action="append", default=[], metavar="ID")
    k.add_argument("--edited-document", action="append", default=[], metavar="ID")
    return p


def knobs_from(args: argparse.Namespace) -> Knobs:
    return Knobs(fail_first=args.fail_first, fail_status=args.fail_status,
                 fail_queries=dict(args.fail_query), fail_documents=dict(args.fail_document),
                 delay_ms=args.delay_ms, malformed=args.malformed,
                 malformed_queries=dict(args.malformed_query),
                 require_headers=dict(args.require_header), gone_documents=args.gone_document,
                 edited_documents=args.edited_document)


async def _exit_with_parent(server: uvicorn.Server, parent: int) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(0.5)
    server.should_exit = True


# Spelled out, though they are uvicorn's defaults, because the benchmarks rely on them: nothing
# but the sleep and the CPU limits how many requests are served at once (no concurrency limit,
# a listen backlog far above any client's connections), and an idle keep-alive connection stays
# open long enough for a client's pool to reuse it between rounds.
SERVER_SETTINGS = {"limit_concurrency": None, "backlog": 2048, "timeout_keep_alive": 30,
                   "limit_max_requests": None}


async def serve(args: argparse.Namespace, engine: Engine, knobs: Knobs) -> None:
    config = uvicorn.Config(create_app(engine, knobs), host=args.host, port=args.port,
                            log_level="warning", access_log=False, **SERVER_SETTINGS)
    server = uvicorn.Server(config)
    watcher = (asyncio.create_task(_exit_with_parent(server, os.getppid()))
               if args.watch_parent else None)
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"search_service: serving {engine.name} ({len(engine.documents)} documents) "
              f"on http://{args.host}:{port}", flush=True)
        print(f"search_service: server {describe(config, knobs.delay_ms)}", flush=True)
    await serving
    if watcher is not None:
        watcher.cancel()


def describe(config: uvicorn.Config, delay_ms: float) -> str:
    """The settings that bound how many requests the server answers at once, in words."""
    if not config.loaded:
        config.load()
    protocol = config.http_protocol_class.__module__.rsplit(".", 1)[-1].removesuffix("_impl")
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    return (f"uvicorn {uvicorn.__version__}, one process, {protocol} protocol, {loop} event "
            f"loop, limit_concurrency {config.limit_concurrency or 'none'}, backlog "
            f"{config.backlog}, keep-alive {config.timeout_keep_alive} s; answers wait with "
            f"asyncio.sleep ({delay_ms:g} ms)")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        knobs = knobs_from(args)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        print(f"search_service: bad knob: {exc}", file=sys.stderr)
        return 2
    try:
        collection = load_collection(fixtures=args.fixtures, dataset=args.dataset,
                                     split=args.split)
    except InputError as exc:
        print(f"search_service: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(args, Engine(collection), knobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
