"""The `python` kind: a team's own retriever, called per query in this process.

    my_retriever:
      kind: python
      params:
        callable: my_package.search:retrieve   # package.module:function
        options: {index: products-v2}          # keyword arguments of every call
        python_path: src                        # optional: a folder put first on sys.path
        concurrency: 1                          # calls at once (threads)

The function is called as `function(query, k, **options)` with a `searcheval.Query` (`.id`,
`.text`, `.category`, `.filters`) and returns the ranked ids best first, `(id, score)` pairs, or a mapping {id: score}.
LangChain, LlamaIndex or an in-house library plug in through a few lines of such a function. An
exception or a malformed return is an error of that query (its cause: the exception's type and
message), never an empty result. A function that fails `fail_fast_after` calls in a row (default
3) before returning once is down: the other queries are not asked (`rankers.breaker`), and the
run ends incomplete (exit 3) naming the configuration and the first cause.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from searcheval.errors import InputError
from searcheval.rankers.breaker import Breaker
from searcheval.rankers.params import Param
from searcheval.rankers.registry import Kind, RunContext, register_kind
from searcheval.types import Query, RankedRun

_CALLABLE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_import_lock = threading.Lock()

PARAMS = {
    "callable": Param("string", help="package.module:function"),
    "options": Param("mapping", {}, "keyword arguments of every call"),
    "python_path": Param("string", None, "a folder put first on sys.path", nullable=True),
    "concurrency": Param("integer", 1, "calls at once", minimum=1, maximum=256),
}


def _validate(params: dict, entry: str, file: str | None) -> None:
    if not _CALLABLE.match(params["callable"]):
        raise InputError(f"expected package.module:function, got {params['callable']!r}",
                         file=file, field=f"{entry}.callable")


def load_callable(configuration):
    """The function the configuration names; InputError naming it when it does not import."""
    spec = configuration.params["callable"]
    module_name, _, attribute = spec.partition(":")
    with _import_lock:
        folder = configuration.params["python_path"]
        if folder:
            folder = str(Path(folder).resolve())
            if folder not in sys.path:
                sys.path.insert(0, folder)
        try:
            target = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise InputError(f"cannot import {spec}: {type(exc).__name__}: {exc}",
                             field=f"{configuration.name}.callable") from None
    if not callable(target):
        raise InputError(f"{spec} is not callable", field=f"{configuration.name}.callable")
    return target


class BadReturn(Exception):
    pass


def ranked(returned, k: int) -> list[tuple[str, float]]:
    """What a retriever returned as [(id, score)] best first, each id once; ids alone get their
    reverse rank as the score; a mapping is {id: score}."""
    if isinstance(returned, Mapping):
        returned = list(returned.items())
    if isinstance(returned, (str, bytes)) or not isinstance(returned, (list, tuple)):
        try:
            returned = list(returned)
        except TypeError:
            raise BadReturn(f"expected a list of ids or (id, score) pairs, got "
                            f"{type(returned).__name__}") from None
    out, seen = [], set()
    for i, item in enumerate(returned):
        if isinstance(item, (list, tuple)) and len(item) == 2:
            doc_id, score = item
        else:
            doc_id, score = item, float(len(returned) - i)
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise BadReturn(f"the id at [{i}] is {type(doc_id).__name__} {doc_id!r:.60}, "
                            "expected a string or a whole number")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score \
                or score in (float("inf"), float("-inf")):
            raise BadReturn(f"the score at [{i}] is {score!r:.60}, expected a finite number")
        if isinstance(doc_id, str) and (not doc_id or any(
                c.isspace() or ord(c) < 32 or ord(c) == 127 for c in doc_id)):
            raise BadReturn(f"the id at [{i}] {doc_id[:60]!r} is empty or holds whitespace or "
                            "a control character (ids are written to TREC run files)")
        if str(doc_id) not in seen:
            seen.add(str(doc_id))
            out.append((str(doc_id), float(score)))
    return out[:k]


def run_python(configuration, context: RunContext, queries: Sequence[Query], query_vectors,
               k: int) -> RankedRun:
    function = load_callable(configuration)
    options = configuration.params["options"]
    results, latency, errors = {}, {}, {}

    cpu = [0.0]
    lock = threading.Lock()
    # a retriever that fails every call (its index missing, its backend down) fails fast, as an
    # unreachable service does: after `fail_fast_after` failures in a row, none answered
    breaker = Breaker(configuration.fail_fast_after, what="the ranker")

    def one(query: Query):
        if breaker.open:
            return query.id, None, None, breaker.skipped()
        started, thread_cpu = time.perf_counter(), time.thread_time()
        try:
            answer = call(query, started)
        finally:
            with lock:
                cpu[0] += time.thread_time() - thread_cpu
        breaker.record(answer[3] is not None, (answer[3] or {}).get("cause"))
        return answer

    def call(query: Query, started: float):
        try:
            returned = function(query, k, **options)
            ms = (time.perf_counter() - started) * 1000.0
            return query.id, ranked(returned, k), ms, None
        except BadReturn as exc:
            return query.id, None, None, {"cause": f"bad return: {exc}", "attempts": 1}
        except Exception as exc:  # noqa: BLE001 - the retriever's failure is that query's error
            return query.id, None, None, {"cause": f"{type(exc).__name__}: {exc}"[:300],
                                          "attempts": 1}

    workers = min(configuration.params["concurrency"], max(1, len(queries)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for qid, hits, ms, error in pool.map(one, queries):
            if error is not None:
                errors[qid] = error
            else:
                results[qid], latency[qid] = hits, ms
    return RankedRun(configuration=configuration.name, results=results, latency_ms=latency,
                     errors=errors, usage={"cpu_s": cpu[0]})


KIND = register_kind(Kind(name="python", params=PARAMS, run=run_python, validate=_validate,
                          description="a Python function called per query"))
