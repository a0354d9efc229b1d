"""`searcheval benchmark embed`: the cached embedder cold against raw `SentenceTransformer.encode` on
the same texts (same loaded model, batch size, normalisation; the cached embedder's model batches
hold at most 64 x 32 padded tokens, so texts longer than 32 tokens go in smaller batches there,
and that cost shows), in a throwaway database; then the same texts warm, in this process and in
a new one that must neither embed nor load the model."""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from searcheval.bench.common import rate, say, throwaway_database

#: cached embedder cold / raw `SentenceTransformer.encode`, in texts per second.
GOAL_EMBED_RATIO = 0.9
#: HNSW top k against exact top k.
def warm_embed_child(spec_path: str) -> None:
    """The warm pass of `benchmark embed`, in a process of its own: embeds the texts of the JSON
    spec through a fresh CachedEmbedder and prints one JSON line of what happened, including
    whether the model was loaded and whether sentence_transformers / torch were even imported."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    from searcheval.rankers import embeddings
    from searcheval.rankers.embeddings import CachedEmbedder
    from searcheval.store import database

    start = time.perf_counter()
    conn = database.connect(spec["url"])
    try:
        embedder = CachedEmbedder(conn, spec["model_path"], batch_size=spec["batch_size"],
                                  show_progress=False)
        init_s = time.perf_counter() - start
        t = time.perf_counter()
        vectors = embedder.embed(spec["texts"])
        embed_s = time.perf_counter() - t
    finally:
        conn.close()
    print(json.dumps({
        "embedded": embedder.embedded, "from_cache": embedder.from_cache,
        "model_loads": embeddings.load_count,
        "imported_sentence_transformers": "sentence_transformers" in sys.modules,
        "imported_torch": "torch" in sys.modules,
        "connect_and_fingerprint_s": init_s, "embed_s": embed_s,
        "vectors_sha256": hashlib.sha256(np.ascontiguousarray(vectors).tobytes()).hexdigest(),
    }))


def _warm_pass_in_new_process(url: str, texts: list[str], model_path: str | None,
                              batch_size: int) -> dict:
    # the spec (with the URL, which may hold a password) goes through a 0600 file, not argv
    with tempfile.TemporaryDirectory(prefix="se-bench-") as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"url": url, "texts": texts, "model_path": model_path,
                                    "batch_size": batch_size}), encoding="utf-8")
        spec.chmod(0o600)
        code = "import sys; from searcheval.bench.embed import warm_embed_child; " \
               "warm_embed_child(sys.argv[1])"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                              text=True, timeout=1800, check=False)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the warm pass process failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def benchmark_embed(texts: Sequence[str], database_url: str | None = None, *,
                    batch_size: int = 64, model_path: str | None = None, rounds: int = 4,
                    say: Callable[[str], None] = say) -> dict:
    """Cold throughput of CachedEmbedder against raw `SentenceTransformer.encode`, then a warm pass.

    Both embed the same distinct `texts` with the same loaded model, batch size (capped at
    `embeddings.MAX_BATCH_TOKENS` padded tokens in the cached one) and
    normalize_embeddings=True, in a throwaway database on the server of `database_url` (so the
    cache is really cold). The texts are split into `rounds` chunks and the two paths alternate
    on each chunk (cached first, then raw first, ...), so load from other processes on the machine
    falls on both alike. Then the same texts again, through a fresh CachedEmbedder in this process
    and in a new process that has never loaded the model.
    """
    from searcheval.errors import InputError
    from searcheval.rankers import embeddings
    from searcheval.rankers.embeddings import CachedEmbedder
    from searcheval.store import database

    texts = list(dict.fromkeys(texts))
    if not texts:
        raise InputError("expected at least one text", field="texts")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise InputError(f"expected rounds >= 1, got {rounds!r}", field="rounds")
    url = database.resolve_url(database_url)
    path = embeddings.resolve_model_path(model_path)
    loads = embeddings.load_count
    start = time.perf_counter()
    model = embeddings.load_model(path)
    load_s = time.perf_counter() - start
    loaded_here = embeddings.load_count > loads
    figures: dict = {"texts": len(texts), "batch_size": batch_size,
                     "model": embeddings.model_name(path),
                     "model_load_s": load_s, "model_loaded_here": loaded_here}
    say(f"model {figures['model']}: "
        + (f"loaded in {load_s:.2f} s" if loaded_here else "already loaded in this process")
        + f" (not part of either rate); {len(texts)} distinct texts, batch size {batch_size}")

    with throwaway_database(url, "bench_embed") as db_url:
        figures["database"] = database.describe(db_url)
        conn = database.connect(db_url)
        try:
            embedder = CachedEmbedder(conn, path, batch_size=batch_size, show_progress=False)
            # first calls allocate thread pools and buffers: once, outside the timing, and
            # through the raw model only (the cache stays cold)
            model.encode(texts[:8], batch_size=batch_size, show_progress_bar=False,
                         convert_to_numpy=True, normalize_embeddings=True)
            bounds = np.linspace(0, len(texts), min(rounds, len(texts)) + 1).astype(int)
            seconds = {"cached": 0.0, "raw": 0.0}
            parts: dict[str, list[np.ndarray]] = {"cached": [], "raw": []}
            say(f"cold pass in {len(bounds) - 1} alternating chunks (texts/s so far):")
            for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
                chunk = texts[lo:hi]
                for which in (("cached", "raw") if i % 2 == 0 else ("raw", "cached")):
                    t = time.perf_counter()
                    if which == "cached":
                        out = embedder.embed(chunk)
                    else:
                        out = np.asarray(model.encode(
                            chunk, batch_size=batch_size, show_progress_bar=False,
                            convert_to_numpy=True, normalize_embeddings=True), dtype=np.float32)
                    seconds[which] += time.perf_counter() - t
                    parts[which].append(out)
                say(f"  {hi:>6}/{len(texts)} texts   cached {rate(hi, seconds['cached']):7.1f}"
                    f"   raw {rate(hi, seconds['raw']):7.1f}")
            cached_vectors = np.concatenate(parts["cached"])
            raw_vectors = np.concatenate(parts["raw"])
            figures["cached"] = {"seconds": seconds["cached"],
                                 "texts_per_s": rate(len(texts), seconds["cached"]),
                                 "embedded": embedder.embedded, "from_cache": embedder.from_cache}
            figures["raw"] = {"seconds": seconds["raw"],
                              "texts_per_s": rate(len(texts), seconds["raw"])}
            figures["ratio"] = figures["cached"]["texts_per_s"] / figures["raw"]["texts_per_s"]
            figures["max_abs_diff"] = float(np.abs(cached_vectors - raw_vectors).max())

            # warm, in this process: a fresh embedder, the model stays untouched
            loads = embeddings.load_count
            fresh = CachedEmbedder(conn, path, batch_size=batch_size, show_progress=False)
            t = time.perf_counter()
            warm_vectors = fresh.embed(texts)
            warm_s = time.perf_counter() - t
            figures["warm_in_process"] = {
                "seconds": warm_s, "texts_per_s": rate(len(texts), warm_s),
                "embedded": fresh.embedded, "from_cache": fresh.from_cache,
                "model_loads": embeddings.load_count - loads,
                "same_vectors": bool(np.array_equal(warm_vectors, cached_vectors)),
            }
        finally:
            conn.close()
        say("warm pass in a new process (never loads the model) ...")
        child = _warm_pass_in_new_process(db_url, texts, str(path), batch_size)
        digest = hashlib.sha256(np.ascontiguousarray(cached_vectors).tobytes()).hexdigest()
        child["same_vectors"] = child.pop("vectors_sha256") == digest
        child["texts_per_s"] = rate(len(texts), child["embed_s"])
        figures["warm_new_process"] = child

    warm, new = figures["warm_in_process"], figures["warm_new_process"]
    figures["goals"] = {
        f"cached cold >= {GOAL_EMBED_RATIO}x raw encode": figures["ratio"] >= GOAL_EMBED_RATIO,
        "warm passes embed nothing": warm["embedded"] == 0 and new["embedded"] == 0,
        "warm passes load no model": warm["model_loads"] == 0 and new["model_loads"] == 0
        and not new["imported_sentence_transformers"] and not new["imported_torch"],
        "same vectors every way": figures["max_abs_diff"] <= 1e-5 and warm["same_vectors"]
        and new["same_vectors"],
    }
    figures["goal_met"] = all(figures["goals"].values())
    say(embed_table(figures))
    return figures


def embed_table(f: dict) -> str:
    """The paste-able summary of `benchmark_embed`'s figures."""
    warm, new = f["warm_in_process"], f["warm_new_process"]
    lines = [
        (f"embedding {f['texts']} texts, {f['model']}, batch {f['batch_size']}, "
         f"normalize_embeddings=True, database {f['database']} (throwaway)"),
        ("model load: " + (f"{f['model_load_s']:.2f} s, outside both rates"
                           if f["model_loaded_here"] else "already loaded in this process")),
        "",
        f"| {'pass':<38} | {'seconds':>8} | {'texts/s':>9} | {'embedded':>8} | {'cached':>6} |",
        f"| {'-' * 38} | {'-' * 8}:| {'-' * 9}:| {'-' * 8}:| {'-' * 6}:|",
        (f"| {'raw SentenceTransformer.encode':<38} | {f['raw']['seconds']:>8.2f} | "
         f"{f['raw']['texts_per_s']:>9.1f} | {f['texts']:>8} | {'-':>6} |"),
        (f"| {'CachedEmbedder, cold':<38} | {f['cached']['seconds']:>8.2f} | "
         f"{f['cached']['texts_per_s']:>9.1f} | {f['cached']['embedded']:>8} | "
         f"{f['cached']['from_cache']:>6} |"),
        (f"| {'CachedEmbedder, warm, same process':<38} | {warm['seconds']:>8.2f} | "
         f"{warm['texts_per_s']:>9.1f} | {warm['embedded']:>8} | {warm['from_cache']:>6} |"),
        (f"| {'CachedEmbedder, warm, new process':<38} | {new['embed_s']:>8.2f} | "
         f"{new['texts_per_s']:>9.1f} | {new['embedded']:>8} | {new['from_cache']:>6} |"),
        "",
        (f"cached cold / raw: {f['ratio']:.3f}x (goal >= {GOAL_EMBED_RATIO}x); "
         f"max |cached - raw| = {f['max_abs_diff']:.1e}"),
        (f"warm, same process: model loads {warm['model_loads']}, same vectors "
         f"{warm['same_vectors']}"),
        (f"warm, new process: wall {new['wall_s']:.2f} s (interpreter, imports, connect and model "
         f"fingerprint {new['connect_and_fingerprint_s']:.2f} s, embed {new['embed_s']:.2f} s); "
         f"model loads {new['model_loads']}, imported sentence_transformers "
         f"{new['imported_sentence_transformers']}, torch {new['imported_torch']}, same vectors "
         f"{new['same_vectors']}"),
    ]
    lines += [f"{'met ' if ok else 'MISSED'}  {goal}" for goal, ok in f["goals"].items()]
    return "\n".join(lines)


