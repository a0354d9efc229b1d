"""What the benchmarks share: timing, printing, a throwaway database, BEIR texts."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


def best_of(repeat: int, fns: dict[str, Callable[[], object]]) -> dict[str, tuple[float, object]]:
    """Best wall time of each function over `repeat` rounds; every round runs each function once,
    in turn, so a burst of load elsewhere falls on all of them alike."""
    best: dict[str, tuple[float, object]] = {name: (float("inf"), None) for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            if elapsed < best[name][0]:
                best[name] = (elapsed, result)
    return best


def say(line: str = "") -> None:
    print(line, flush=True)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def nominal_capacity(concurrency: int, delay_ms: float) -> float:
    """Requests per second of a server that takes `delay_ms` per answer, `concurrency` at once,
    if answering took no CPU (the capacity the benchmarks of a client quote beside the measured
    one: `judge`, `backend`)."""
    return concurrency / (delay_ms / 1000.0) if delay_ms > 0 else float("inf")


def verdict(met: bool) -> str:
    """How a benchmark's goals line says a goal went."""
    return "met" if met else "MISSED"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, to print beside figures measured on a shared
    machine."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def beir_texts(dataset: str | Path, n: int) -> list[str]:
    """The first `n` distinct document texts (title + abstract, `Resource.text`) of the BEIR
    corpus in `dataset`, in corpus order."""
    from searcheval.errors import InputError
    from searcheval.io.files import read_jsonl

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected a number of texts >= 1, got {n!r}", field="texts")
    corpus = Path(dataset) / "corpus.jsonl"
    if not corpus.exists():
        raise InputError("file not found (expected a BEIR corpus.jsonl)", file=corpus)
    texts: dict[str, None] = {}
    for _, obj in read_jsonl(corpus):
        text = "\n".join(p for p in (str(obj.get("title") or ""), str(obj.get("text") or "")) if p)
        texts.setdefault(text, None)
        if len(texts) == n:
            break
    if len(texts) < n:
        raise InputError(f"expected at least {n} distinct document texts, the corpus has "
                         f"{len(texts)}", file=corpus)
    return list(texts)


@contextmanager
def throwaway_database(url: str, label: str = "bench") -> Iterator[str]:
    """A new, empty database on the server of `url` (migrated), dropped on exit; yields its URL.
    The user of `url` needs CREATEDB."""
    from psycopg import sql as pgsql
    from psycopg.conninfo import make_conninfo

    from searcheval.store import database, sql

    name = f"se_{label}_{secrets.token_hex(4)}"
    admin = database.connect(url)
    try:
        try:
            admin.execute(sql.CREATE_DATABASE.format(name=pgsql.Identifier(name)))
        except psycopg.Error as exc:
            raise database.DatabaseError(
                f"cannot create a throwaway database on {database.describe(url)} "
                f"({type(exc).__name__}); the benchmark needs a user with CREATEDB") from None
        try:
            new_url = make_conninfo(url, dbname=name)
            with database.connect(new_url) as conn:
                database.migrate(conn)
            yield new_url
        finally:
            admin.execute(sql.DROP_DATABASE.format(name=pgsql.Identifier(name)))
    finally:
        admin.close()


