"""The embedding's batch policy and its allocator settings, without the model: a model batch
holds at most MAX_BATCH_TOKENS padded tokens, so long texts are encoded in smaller batches."""

from __future__ import annotations

import time

import numpy as np
import pytest

from searcheval.rankers import embeddings
from searcheval.rankers.embeddings import CachedEmbedder, batch_for


@pytest.mark.parametrize(("longest", "asked", "expected"), [
    (256, 64, 8),       # 2048 // 256 = 8: the model's maximum length cuts the batch to an eighth
    (32, 64, 64),       # 2048 // 32 = 64: exactly the budget
    (128, 64, 16),      # 2048 // 128 = 16
    (20, 64, 64),       # 2048 // 20 = 102, capped at the 64 asked for
    (300, 64, 6),       # 2048 // 300 = 6 (6.83 rounded down)
    (256, 4, 4),        # a smaller batch asked for is kept
    (10_000, 64, 1),    # 2048 // 10000 = 0: never below one text
    (0, 64, 64),        # an empty tokenization counts as one token: 2048 // 1, capped at 64
])
def test_batch_for(longest, asked, expected):
    assert batch_for(longest, asked) == expected


ENCODE_S = 0.02  # each fake encode call's time


class FakeModel:
    """Tokens: the words of a text, at most 256 (the model's maximum length); records the batch
    size of every encode call."""

    def __init__(self):
        self.calls: list[tuple[int, int]] = []  # (texts, batch_size)

    def tokenize(self, texts):
        longest = min(256, max(len(t.split()) for t in texts))
        return {"input_ids": np.zeros((len(texts), longest), dtype=np.int64)}

    def encode(self, texts, batch_size, **_):
        self.calls.append((len(texts), batch_size))
        time.sleep(ENCODE_S)  # a model's time, for model_seconds to add up
        return np.array([[float(len(t.split())), 1.0] for t in texts], dtype=np.float32)


def test_long_chunks_are_encoded_in_smaller_batches(monkeypatch):
    model = FakeModel()
    monkeypatch.setattr(embeddings, "load_model", lambda path: model)
    released = []
    monkeypatch.setattr(embeddings, "release_heap", lambda: released.append(len(model.calls)))
    embedder = object.__new__(CachedEmbedder)  # no database: only the encoding is exercised
    embedder.model_path, embedder.batch_size, embedder.show_progress = None, 4, False
    embedder.model_seconds = 0.0
    # chunks of 4 x 4 = 16 texts, longest first; a budget of 400 tokens so that a batch of 4
    # asked for is cut
    monkeypatch.setattr(embeddings, "MAX_BATCH_TOKENS", 4 * 100)
    texts = ["w " * 300] * 16 + ["w " * 150] * 16 + ["w " * 50] * 16
    texts = [f"{t}{i}" for i, t in enumerate(texts)][::-1]  # distinct, shortest first
    vectors = embedder._encode(texts)
    # chunk 1: 256 tokens (300 words cut) -> 400 // 256 = 1; chunk 2: 151 -> 400 // 151 = 2;
    # chunk 3: 51 -> 400 // 51 = 7, capped at 4
    assert model.calls == [(16, 1), (16, 2), (16, 4)]
    assert released == [3]  # the heap given back once, after the last of the 3 encode calls
    # the 3 calls' time in the model, summed: 3 x 0.02 s of sleep, plus counting tokens
    assert 3 * ENCODE_S <= embedder.model_seconds < 3 * ENCODE_S + 1.0
    # each text gets its own vector back, in its given order
    assert [v[0] for v in vectors] == [float(len(t.split())) for t in texts]


def test_the_allocator_is_bound_once_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's mallopt only")
    assert embeddings.bound_allocator() is True
    assert embeddings.bound_allocator() is True  # idempotent
    embeddings.release_heap()  # malloc_trim exists there and takes no error


def test_the_mmap_threshold_keeps_hidden_states_in_the_heap():
    # all-MiniLM-L6-v2: hidden size 384, feed-forward 1536, float32. At the token budget a
    # batch's hidden states take 2048 x 384 x 4 = 3 MiB: under the 8 MiB threshold, so the heap
    # reuses them batch after batch (mapped afresh, each is page-faulted and zeroed: 15% slower);
    # its feed-forward activations take 2048 x 1536 x 4 = 12 MiB: over it, so they are mapped and
    # given back after each batch, as are long batches' attention scores
    hidden = embeddings.MAX_BATCH_TOKENS * 384 * 4
    feed_forward = embeddings.MAX_BATCH_TOKENS * 1536 * 4
    assert hidden <= embeddings.MALLOC_MMAP_THRESHOLD < feed_forward
