"""The `trec` kind: a run file the team's engine produced in batch, through the whole pipeline
(validation, gate, baseline, history, report, alerts), which `searcheval score` does not.

    engine_v2:
      kind: trec
      params:
        path: runs/engine-v2.trec   # qid Q0 docid rank score tag; relative to the configurations file
        missing: empty              # a golden query the file lacks: empty (TREC cannot write an
                                    # empty result) or error (an error of that query)

Ranks come from the scores (ties by document id descending), as trec_eval ranks them. The file's
sha256 is part of the configuration, so another file is another configuration. A batch run has
no per-query latency: its latency is reported as none.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

from searcheval.errors import InputError
from searcheval.rankers.params import Param
from searcheval.rankers.registry import Kind, RunContext, register_kind
from searcheval.types import Query, RankedRun

PARAMS = {
    "path": Param("string", help="the TREC run file"),
    "missing": Param("string", "empty", "a golden query the file lacks",
                     choices=("empty", "error")),
    "file_sha256": Param("string", None, "filled in: the run file's sha256", nullable=True),
}
_cache: dict[tuple[str, str], dict] = {}
_lock = threading.Lock()


def _validate(params: dict, entry: str, file: str | None) -> dict:
    path = Path(params["path"])
    if not path.is_absolute() and file and not file.startswith("<"):
        path = Path(file).resolve().parent / path
    if not path.is_file():
        raise InputError(f"no such run file {str(path)!r}", file=file, field=f"{entry}.path")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if params.get("file_sha256") not in (None, digest):
        raise InputError(f"the run file's sha256 is {digest[:12]}, the configuration says "
                         f"{params['file_sha256'][:12]}", file=file, field=f"{entry}.file_sha256")
    load_ranked(str(path), digest)  # a malformed file is refused now, naming its line
    return {**params, "path": str(path), "file_sha256": digest}


def load_ranked(path: str, digest: str) -> dict[str, list[tuple[str, float]]]:
    from searcheval.io.trec import load_trec_run

    with _lock:
        key = (path, digest)
        if key not in _cache:
            run = load_trec_run(path)
            _cache.clear()
            _cache[key] = {q: sorted(docs.items(), key=lambda h: (h[1], h[0]), reverse=True)
                           for q, docs in run.items()}
        return _cache[key]


def run_trec(configuration, context: RunContext, queries: Sequence[Query], query_vectors,
             k: int) -> RankedRun:
    params = configuration.params
    if hashlib.sha256(Path(params["path"]).read_bytes()).hexdigest() != params["file_sha256"]:
        raise InputError("the run file changed since the configurations were loaded",
                         file=params["path"], field=f"{configuration.name}.path")
    ranked = load_ranked(params["path"], params["file_sha256"])
    results, errors = {}, {}
    for q in queries:
        if q.id in ranked:
            results[q.id] = ranked[q.id][:k]
        elif params["missing"] == "error":
            errors[q.id] = {"cause": f"no line for this query in {Path(params['path']).name}",
                            "attempts": 1}
        else:
            results[q.id] = []
    return RankedRun(configuration=configuration.name, results=results, errors=errors)


KIND = register_kind(Kind(name="trec", params=PARAMS, run=run_trec, validate=_validate,
                          description="a TREC run file produced in batch"))
