"""Labelling a pool with a model judge (`searcheval judgments label`, the nightly's `label` task).

For every pooled pair: if the judge (same identity) already has a live grade of it on the same
document content, it is done; else if the judge's answer for (query text, document content hash,
judge hash) is cached, that answer becomes its grade at no cost; else the judge is asked. Each
answer is written as it comes, in small transactions (the answer into the cache, the grade into
the judgments table, together), so a run killed halfway keeps what it paid for, and a rerun labels
only what is left; a grade row is keyed by the answer's time, so no rerun writes a duplicate.

A failed pair (request failed after its retries, unparseable answer, grade outside the scale) is
that pair's error, reported and recorded with the run, never a grade; a rerun asks again.

The run's count, requests, tokens, cost and time are returned and recorded (`judge_runs`). The
cost is `prices.per_request` x requests + `per_1000_input_tokens` x input tokens / 1000 +
`per_1000_output_tokens` x output tokens / 1000; a dry run estimates it from the rendered prompts
(characters / 4 tokens each) and the judge's `max_tokens` as the most an answer can take.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

import psycopg

from searcheval.defaults import GUIDELINE_VERSION
from searcheval.errors import InputError
from searcheval.judging.grading import (PairInput, answers, default_guideline, estimate_tokens,
                                        query_key, render_messages)
from searcheval.judging.judges import Judge, check_prompt
from searcheval.judging.judgments import judgment_set
from searcheval.judging.pool import shown_document
from searcheval.store import judges as store
from searcheval.types import Collection

FLUSH_PAIRS = 64  # answers written per transaction at most
FLUSH_SECONDS = 1.0  # ... and at least this often while answers come


def document_of(doc_id: str, resource, version) -> tuple[dict, str]:
    """(the fields a prompt may name, the content hash) of one document."""
    shown = shown_document(resource, version)
    document = {"doc_id": doc_id, "title": shown["title"], "text": shown["text"],
                "tags": list(shown["tags"])}
    if resource is not None:
        document.update(network=resource.network, asset=resource.asset,
                        price_usd=resource.price_usd)
        document.update(dict(resource.fields))
        return document, resource.content_hash
    if version is not None and not version.gone and version.content_hash:
        return document, version.content_hash
    digest = hashlib.sha256(f"{doc_id}\x1f{shown['title']}\x1f{shown['text']}".encode()).hexdigest()
    return document, digest


def pair_inputs(collection: Collection, pairs: Iterable[tuple[str, str]],
                documents: Mapping | None = None) -> list[PairInput]:
    """What the judge sees of each (query, document) pair of a golden query, in the given order;
    `documents`: the latest looked-up versions of documents the catalog does not hold."""
    queries = {q.id: q for q in collection.queries}
    resources = {r.id: r for r in collection.resources}
    documents = documents or {}
    out = []
    seen = set()
    shown: dict[str, tuple[dict, str]] = {}  # a document is shown alike to every query
    for qid, doc in pairs:
        if qid not in queries or (qid, doc) in seen:
            continue
        seen.add((qid, doc))
        if doc not in shown:
            shown[doc] = document_of(doc, resources.get(doc), documents.get(doc))
        document, content = shown[doc]
        out.append(PairInput(query=queries[qid], doc_id=doc, document=document,
                             content_hash=content))
    return out


def cost_of(prices: Mapping[str, float], requests: int, input_tokens: int,
            output_tokens: int) -> float:
    return (prices.get("per_request", 0.0) * requests
            + prices.get("per_1000_input_tokens", 0.0) * input_tokens / 1000.0
            + prices.get("per_1000_output_tokens", 0.0) * output_tokens / 1000.0)


@dataclass
class LabelResult:
    """What one labelling run did (or, dry, would do)."""

    judge: str
    judge_hash: str
    catalog: str
    pairs: int = 0  # pairs of the pool this run took on (after --limit)
    done_before: int = 0  # already graded by this judge on this content: nothing to do
    from_cache: int = 0
    requested: int = 0  # pairs sent to the judge
    requests: int = 0  # requests, retries included
    graded: int = 0
    failed: int = 0
    written: int = 0  # grade rows written
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    dry_run: bool = False
    errors: list[dict] = field(default_factory=list)
    run_id: int | None = None
    planned: list[tuple[str, str]] = field(default_factory=list)  # a dry run's pairs to label

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.dry_run:
            return (f"dry run of judge {self.judge} on {self.catalog}: {self.pairs} pair(s) to "
                    f"label, {self.done_before} already graded, {self.from_cache} from the cache, "
                    f"{self.requested} request(s) (at least), about {self.input_tokens} input and "
                    f"at most {self.output_tokens} output tokens, estimated cost "
                    f"{self.cost:.4f}; nothing was sent or written")
        return (f"judge {self.judge} on {self.catalog}: {self.graded} pair(s) graded "
                f"({self.from_cache} from the cache, {self.requested - self.failed} asked), "
                f"{self.failed} failed, {self.done_before} already graded; {self.requests} "
                f"request(s), {self.input_tokens} input + {self.output_tokens} output tokens, "
                f"cost {self.cost:.4f}, {self.seconds:.1f} s")


def label(conn: psycopg.Connection, judge: Judge, collection: Collection,
          pairs: Iterable[tuple[str, str]], *, limit: int | None = None, dry_run: bool = False,
          secrets: Mapping[str, str] | None = None, pool_id: str | None = None,
          documents: Mapping | None = None, guideline: str | None = None,
          on_answer: Callable | None = None) -> LabelResult:
    """Grade `pairs` of the collection's golden queries with `judge` (module docstring);
    `on_answer(pair, answer)` sees each answer as it comes (the benchmark's timings)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InputError(f"expected a limit >= 0, got {limit!r}", field="limit")
    check_prompt(judge, collection)
    started_at = datetime.now(timezone.utc)
    began = time.perf_counter()
    catalog = judgment_set(collection)
    scale = tuple(int(g) for g in collection.grade_scale)
    guideline = guideline or default_guideline(scale)
    result = LabelResult(judge=judge.name, judge_hash=judge.sha256, catalog=catalog,
                         dry_run=dry_run)
    inputs = pair_inputs(collection, pairs, documents)
    done = store.done_pairs(conn, catalog, judge.name, judge.sha256)
    todo = [p for p in inputs if (p.query.id, p.doc_id, p.content_hash) not in done]
    result.done_before = len(inputs) - len(todo)
    if limit is not None:
        todo = todo[:limit]
    result.pairs = len(todo)
    keys = {id(p): (query_key(p, judge), p.content_hash) for p in todo}
    cached = store.cached_answers(conn, judge.sha256, list(set(keys.values())))
    hits = [p for p in todo if keys[id(p)] in cached]
    ask = [p for p in todo if keys[id(p)] not in cached]
    result.from_cache = len(hits)
    result.requested = len(ask)

    def grade_row(p: PairInput) -> dict:
        return {"query_id": p.query.id, "doc_id": p.doc_id, "judge": judge.name,
                "guideline": GUIDELINE_VERSION, "content_hash": p.content_hash,
                "origin": f"judge:{judge.name}:{judge.sha256[:12]}",
                "judge_hash": judge.sha256, "prompt_version": judge.prompt_version}

    if dry_run:
        result.planned = [(p.query.id, p.doc_id) for p in todo]
        if judge.kind == "openai":
            result.requests = len(ask)
            result.input_tokens = sum(estimate_tokens(render_messages(judge, p, scale, guideline))
                                      for p in ask)
            result.output_tokens = judge.params["max_tokens"] * len(ask)
        result.cost = cost_of(judge.prices, result.requests, result.input_tokens,
                              result.output_tokens)
        result.seconds = time.perf_counter() - began
        return result

    from_cache = []
    for p in hits:
        c = cached[keys[id(p)]]
        from_cache.append({**grade_row(p), "grade": c["grade"], "rationale": c["rationale"],
                           "judged_at": c["answered_at"]})
    for start in range(0, len(from_cache), 20_000):
        result.written += store.save_answers(conn, catalog, [], from_cache[start:start + 20_000])
    result.graded += len(from_cache)

    buffer: list[dict] = []
    last = time.perf_counter()

    def flush() -> None:
        nonlocal buffer, last
        if buffer:
            result.written += store.save_answers(conn, catalog, buffer, [])
        buffer, last = [], time.perf_counter()

    try:
        for p, answer in answers(judge, ask, scale, guideline, secrets):
            if on_answer is not None:
                on_answer(p, answer)
            result.requests += answer.requests
            result.input_tokens += answer.input_tokens
            result.output_tokens += answer.output_tokens
            if answer.grade is None:
                result.failed += 1
                result.errors.append({"query_id": p.query.id, "doc_id": p.doc_id,
                                      "cause": answer.error, "attempts": answer.attempts})
            else:
                result.graded += 1
                qk, content = keys[id(p)]
                buffer.append({"answer": {"judge_hash": judge.sha256, "query_key": qk,
                                          "content_hash": content, "judge": judge.name,
                                          "model": judge.model, "grade": answer.grade,
                                          "rationale": answer.rationale,
                                          "input_tokens": answer.input_tokens,
                                          "output_tokens": answer.output_tokens},
                               "grade": grade_row(p)})
            if len(buffer) >= FLUSH_PAIRS or time.perf_counter() - last >= FLUSH_SECONDS:
                flush()
    finally:
        flush()  # what was paid for is kept, even when the run is stopped
        result.cost = cost_of(judge.prices, result.requests, result.input_tokens,
                              result.output_tokens)
        result.seconds = time.perf_counter() - began
        if result.pairs:
            result.run_id = store.record_run(conn, {
                "judge": judge.name, "judge_hash": judge.sha256, "catalog": catalog,
                "pool_id": pool_id, "resolved": judge.resolved(), "started_at": started_at,
                "pairs": result.pairs, "requested": result.requested,
                "requests": result.requests, "from_cache": result.from_cache,
                "graded": result.graded, "failed": result.failed,
                "input_tokens": result.input_tokens, "output_tokens": result.output_tokens,
                "cost": result.cost, "seconds": result.seconds, "errors": result.errors})
    return result


def parse_judge_reference(text: str) -> tuple[str, str | None]:
    """`NAME` (of judges.yaml) or `FILE:NAME` -> (file, name)."""
    from searcheval.judging.judges import DEFAULT_FILE

    file, sep, name = text.rpartition(":")
    if sep and file.endswith((".yaml", ".yml")):
        return file, name or None
    return DEFAULT_FILE, text or None


def check_judge_reference(judge_reference: str, configurations_file: str,
                          model_path: str | None = None):
    """The judge `NAME` / `FILE:NAME` names, loaded and checked against the configurations it
    would judge (the product's rule); InputError otherwise. Returns the judge."""
    from searcheval.judging.judges import check_against_configurations, load_judges, pick_judge
    from searcheval.rankers.configs import load_configurations

    file, name = parse_judge_reference(judge_reference)
    judge = pick_judge(load_judges(file), name)
    check_against_configurations(judge, load_configurations(configurations_file), model_path)
    return judge


def label_run_pool(conn: psycopg.Connection, collection: Collection, runs: Mapping, qrels: Mapping,
                   judge_reference: str, configurations_file: str, model_path: str | None, *,
                   limit: int | None = None, depth: int = 10,
                   secret: Callable[[str], str] | None = None) -> LabelResult:
    """A run's own pool (the unjudged pairs of its configurations' top `depth`) graded by a judge
    of a judges file: what the nightly's `judge` parameter does."""
    from searcheval.judging.grading import secret_blocks
    from searcheval.judging.pool import build_pool

    judge = check_judge_reference(judge_reference, configurations_file, model_path)
    judged = {(q, d) for q, docs in qrels.items() for d in docs}
    rankings = {n: {q: run.top_ids(q, depth) for q in run.results} for n, run in runs.items()}
    items = build_pool(rankings, judged, depth, {q.id for q in collection.queries})
    secrets = {b: secret(b) for b in secret_blocks(judge)} if secret else {}
    return label(conn, judge, collection, [(i.query_id, i.doc_id) for i in items], limit=limit,
                 secrets=secrets)
