"""Pooling: the union of the configurations' top k that has no effective grade, in the order a
grade could move the metrics most (best rank any configuration gave the document first, then how
many configurations returned it, then query and document id), with what a judge needs to see
(query text, category, notes; the document's title and text) and nothing that would bias the
grade (no score, rank or configuration name in what is written out or shown).

A pair whose every grade is stale has no effective grade either: it is pooled, since it needs a new
grade.

`--overlap S` assigns a share S of the pool to two judges, so that agreement can be measured: the
items are picked by a hash of (pool, query, document), spread over the whole pool rather than
its head; with named judges each single item goes to one of them in turn and each double item to
two consecutive ones.

The ranked lists come from the run's TREC files (`<output>/<run_id>/runs/*.trec`, or
`<output>/runs/*.trec` when `<output>/metrics.json` is that run's).

A document's title and text come from the catalog; a document the catalog does not hold (a
dataset without one: the engine holds the documents) shows the latest version its document lookup
reported (`store.documents`, kept by the runs; nothing is asked of the engine here).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from searcheval.defaults import POOL_DEPTH
from searcheval.errors import InputError
from searcheval.io.escape import csv_cell
from searcheval.io.files import read_json
from searcheval.io.trec import load_trec_run
from searcheval.judging.versions import Version
from searcheval.types import Collection, Resource

POOL_FORMATS = ("csv", "jsonl")


@dataclass
class PoolItem:
    query_id: str
    doc_id: str
    best_rank: int
    configurations: int
    judges_needed: int = 1
    assigned: tuple[str, ...] = ()


def ranked_ids(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """A run's documents per query in rank order: score descending, ties by document id
    descending (as trec_eval breaks them)."""
    out = {}
    for qid, docs in run.items():
        by_id = sorted(docs.items(), key=lambda kv: kv[0], reverse=True)
        out[qid] = [d for d, _ in sorted(by_id, key=lambda kv: -kv[1])]  # stable: ties keep id order
    return out


def build_pool(runs: dict[str, dict[str, list[str]]], judged: set[tuple[str, str]],
               depth: int = POOL_DEPTH, query_ids: set[str] | None = None) -> list[PoolItem]:
    """The unjudged (query, document) pairs of every configuration's top `depth`, ordered."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InputError(f"expected a depth >= 1, got {depth!r}", field="depth")
    best: dict[tuple[str, str], int] = {}
    count: dict[tuple[str, str], int] = {}
    for ranking in runs.values():
        for qid, docs in ranking.items():
            if query_ids is not None and qid not in query_ids:
                continue
            for rank, doc in enumerate(docs[:depth], start=1):
                pair = (qid, doc)
                if pair in judged:
                    continue
                best[pair] = min(best.get(pair, rank), rank)
                count[pair] = count.get(pair, 0) + 1
    order = sorted(best, key=lambda p: (best[p], -count[p], p[0], p[1]))
    return [PoolItem(q, d, best[(q, d)], count[(q, d)]) for q, d in order]


def assign(items: list[PoolItem], overlap: float, judges: list[str], seed: str) -> list[PoolItem]:
    """Mark round(overlap * len(items)) items as needing two judges (picked by hash, spread over
    the pool) and, when judges are named, assign each item to one or two of them in turn."""
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) \
            or not 0.0 <= overlap <= 1.0:
        raise InputError(f"expected an overlap share in [0, 1], got {overlap!r}", field="overlap")
    if overlap > 0 and len(judges) == 1:
        raise InputError("an overlap needs two judges at least; name them with --judges A,B",
                         field="judges")
    if len(set(judges)) != len(judges):
        raise InputError("a judge is named twice", field="judges")
    doubles = round(overlap * len(items))
    by_hash = sorted(range(len(items)), key=lambda i: hashlib.sha256(
        f"{seed}\x1f{items[i].query_id}\x1f{items[i].doc_id}".encode()).hexdigest())
    chosen = set(by_hash[:doubles])
    out = []
    for i, item in enumerate(items):
        needed = 2 if i in chosen else 1
        assigned: tuple[str, ...] = ()
        if judges:
            assigned = tuple(judges[(i + k) % len(judges)] for k in range(needed))
        out.append(PoolItem(item.query_id, item.doc_id, item.best_rank, item.configurations,
                            needed, assigned))
    return out


def shown_document(resource: Resource | None, version: Version | None) -> dict:
    """{title, text, tags} of a document as a judge sees it: the catalog's, else the latest
    version its lookup reported, else nothing (empty strings)."""
    if resource is not None:
        return {"title": resource.name, "text": resource.description,
                "tags": list(resource.tags)}
    if version is not None and not version.gone:
        return {"title": version.title or "", "text": version.text or "", "tags": []}
    return {"title": "", "text": "", "tags": []}


def pool_rows(items: list[PoolItem], collection: Collection,
              documents: Mapping[str, Version] | None = None) -> list[dict]:
    """What a judge may see of each item, in pool order (for CSV / JSONL and the rating page);
    `documents`: the latest looked-up version of documents the catalog does not hold."""
    queries = {q.id: q for q in collection.queries}
    docs = {r.id: r for r in collection.resources}
    documents = documents or {}
    rows = []
    for position, item in enumerate(items, start=1):
        q = queries.get(item.query_id)
        shown = shown_document(docs.get(item.doc_id), documents.get(item.doc_id))
        rows.append({"position": position, "query_id": item.query_id,
                     "query": q.text if q else "", "category": q.category if q else "",
                     "intent": q.intent if q else "", "persona": q.persona if q else "",
                     "doc_id": item.doc_id, "title": shown["title"], "text": shown["text"],
                     "tags": " ".join(shown["tags"]),
                     "judges_needed": item.judges_needed, "assigned": ",".join(item.assigned)})
    return rows


def write_pool(rows: list[dict], fmt: str) -> str:
    if fmt not in POOL_FORMATS:
        raise InputError(f"expected a format {', '.join(POOL_FORMATS)}; got {fmt!r}",
                         field="format")
    out = io.StringIO()
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return out.getvalue()
    columns = list(rows[0]) if rows else ["position", "query_id", "query", "category", "intent",
                                          "persona", "doc_id", "title", "text", "tags",
                                          "judges_needed", "assigned"]
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return out.getvalue()


def run_folder(output: str | Path, run_id: str) -> Path:
    """The folder of run `run_id`'s TREC files under an output folder (module docstring)."""
    output = Path(output)
    own = output / run_id / "runs"
    if own.is_dir():
        return own
    metrics = output / "metrics.json"
    if metrics.is_file():
        data, _ = read_json(metrics)
        found = data.get("run_id") if isinstance(data, dict) else None
        if found == run_id and (output / "runs").is_dir():
            return output / "runs"
        raise InputError(f"the ranked lists of run {run_id} are not in {output} (its "
                         f"metrics.json is of run {found}); pass the run's --output folder",
                         file=output, field="run")
    raise InputError(f"no ranked lists of run {run_id} in {output} (expected {own} or "
                     f"{output / 'runs'} beside metrics.json); pass the run's --output folder",
                     file=output, field="run")


def load_run_rankings(folder: Path, configurations: list[str] | None = None
                      ) -> dict[str, dict[str, list[str]]]:
    """configuration -> query -> document ids in rank order, from `<folder>/<configuration>.trec`."""
    files = {p.stem: p for p in sorted(folder.glob("*.trec"))}
    if not files:
        raise InputError("no TREC run file (*.trec) here", file=folder, field="run")
    if configurations:
        unknown = [c for c in configurations if c not in files]
        if unknown:
            raise InputError(f"the run has no configuration {', '.join(map(repr, unknown))}; it "
                             f"has {', '.join(files)}", field="configurations")
        files = {c: files[c] for c in configurations}
    return {name: ranked_ids(load_trec_run(path)) for name, path in files.items()}


def new_pool_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"pool-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def read_pool_file(path: str | Path, collection: Collection) -> list[tuple[str, str]]:
    """The (query, document) pairs of a pool file written by `searcheval judgments pool --file`
    or `searcheval tune` (`pool.csv`; `.jsonl` for JSON lines), in its order: the columns
    `query_id` and `doc_id` are read, the others (what a judge was shown) are not. A pair of a
    query that is not one of the collection's golden queries is refused, naming the line."""
    from searcheval.io.escape import csv_value
    from searcheval.io.files import csv_problem, read_jsonl, read_text

    path = Path(path)
    if not path.is_file():
        raise InputError("no such pool file", file=path, field="pool_file")
    rows: list[tuple[int, dict]] = []
    if path.suffix == ".jsonl":
        rows = read_jsonl(path)
    else:
        reader = csv.reader(io.StringIO(read_text(path), newline=""))
        try:
            header = [h.strip() for h in next(reader)]
            for row in reader:
                if row and any(c.strip() for c in row):
                    rows.append((reader.line_num, dict(zip(header, map(csv_value, row)))))
        except StopIteration:
            raise InputError("the file is empty", file=path) from None
        except csv.Error as exc:
            raise InputError(csv_problem(exc, "CSV"), file=path, line=reader.line_num) from None
    golden = {q.id for q in collection.queries}
    pairs = []
    for line, row in rows:
        for key in ("query_id", "doc_id"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise InputError(f"expected a {key} (a pool file has the columns query_id and "
                                 "doc_id)", file=path, line=line, field=key)
        if row["query_id"] not in golden:
            raise InputError(f"query {row['query_id']!r} is not a golden query of "
                             f"{collection.name}: pass the pool's --fixtures/--dataset",
                             file=path, line=line, field="query_id")
        pairs.append((row["query_id"], row["doc_id"]))
    return pairs
