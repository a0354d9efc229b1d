"""The embedding cache with the real model and a real Postgres: texts are embedded once, ever."""

from __future__ import annotations

import numpy as np
import pytest

from searcheval import store
from searcheval.errors import InputError
from searcheval.rankers import embeddings
from searcheval.rankers.embeddings import CachedEmbedder

EVIL = "'); DROP TABLE x; --"


def fake_model(folder, weights: bytes = b"weights", readme: str = "hello"):
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 4}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "README.md").write_text(readme)
    return folder


def test_fingerprint_covers_weights_and_config_not_readme_or_location(tmp_path):
    a = embeddings.model_fingerprint(fake_model(tmp_path / "a"))
    moved = embeddings.model_fingerprint(fake_model(tmp_path / "b", readme="other words"))
    retrained = embeddings.model_fingerprint(fake_model(tmp_path / "c", weights=b"weights2"))
    assert a == moved
    assert a != retrained
    assert len(a) == 64


def test_model_name_and_refused_paths(tmp_path):
    assert embeddings.model_name() == "all-MiniLM-L6-v2"
    assert embeddings.model_name(fake_model(tmp_path / "my-model")) == "my-model"
    with pytest.raises(InputError) as err:
        embeddings.resolve_model_path(tmp_path / "absent")
    assert err.value.file == str(tmp_path / "absent")
    empty = tmp_path / "no-weights"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    with pytest.raises(InputError) as err:
        embeddings.model_fingerprint(empty)
    assert "weight" in err.value.message


@pytest.mark.slow
def test_texts_are_embedded_once_and_then_served_from_the_cache(conn, embedding_model,
                                                               monkeypatch):
    texts = ["pay per call weather forecast", EVIL, "translate text to french",
             "pay per call weather forecast", "", "image generation from a prompt"]
    distinct = 5
    loads = embeddings.load_count
    first = CachedEmbedder(conn)
    vectors = first.embed(texts)
    assert (first.embedded, first.from_cache) == (distinct, 0)
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), np.ones(len(texts)), atol=1e-6)
    np.testing.assert_array_equal(vectors[0], vectors[3])
    assert store.count_embeddings(conn, first.model, first.fingerprint) == distinct

    # a fresh embedder (as in the next run) must not touch the model at all
    def no_model(*args, **kwargs):
        raise AssertionError("the model was asked for although every text is cached")

    monkeypatch.setattr(embeddings, "load_model", no_model)
    second = CachedEmbedder(conn)
    again = second.embed(texts)
    assert (second.embedded, second.from_cache) == (0, distinct)
    np.testing.assert_array_equal(again, vectors)
    assert embeddings.load_count == loads  # the session's model, loaded by the fixture
    assert store.count_embeddings(conn, first.model, first.fingerprint) == distinct

    fresh = embedding_model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(again, fresh, atol=1e-6)


@pytest.mark.slow
def test_only_missing_texts_are_encoded(conn, embedding_model, monkeypatch):
    embedder = CachedEmbedder(conn)
    embedder.embed(["settlement on base in usdc"])
    encoded: list[list[str]] = []
    real_encode = embedding_model.encode

    def spy(texts, **kwargs):
        encoded.append(list(texts))
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(embedding_model, "encode", spy)
    out = embedder.embed(["dup", "settlement on base in usdc", "dup", "dup"])
    assert encoded == [["dup"]]
    assert (embedder.embedded, embedder.from_cache) == (1 + 1, 1)
    np.testing.assert_array_equal(out[0], out[3])


@pytest.mark.slow
def test_embed_refuses_non_text(conn):
    embedder = CachedEmbedder(conn)
    with pytest.raises(InputError) as err:
        embedder.embed(["fine", 3])
    assert err.value.field == "texts[1]"
    with pytest.raises(InputError):
        embedder.embed("one string")
    assert embedder.embed([]).shape == (0, 0)


@pytest.mark.slow
def test_texts_encoded_longest_first_across_chunks_come_back_in_their_order(conn,
                                                                             embedding_model):
    """The missing texts are encoded longest first, in chunks of batch_size x 4 (here 8): 20
    texts of shuffled lengths over three chunks must each get their own vector back."""
    texts = [f"{'resource ' * (n % 7)}number {n} of the catalog" for n in
             (13, 2, 19, 7, 0, 11, 5, 17, 3, 9, 1, 15, 6, 18, 4, 12, 8, 16, 10, 14)]
    embedder = CachedEmbedder(conn, batch_size=2)
    vectors = embedder.embed(texts)
    assert embedder.embedded == len(texts)
    one_by_one = np.stack([embedding_model.encode([t], normalize_embeddings=True,
                                                  convert_to_numpy=True)[0] for t in texts])
    np.testing.assert_allclose(vectors, one_by_one, atol=1e-5)
