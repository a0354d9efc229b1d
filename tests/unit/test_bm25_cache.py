"""The BM25F index kept on disk (searcheval.rankers.bm25_cache): a second process loads what the
first built, and any change to the catalog, the parameters or the code is a new index."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from searcheval.io.fixtures import load_fixtures
from searcheval.rankers import bm25_cache, registry
from searcheval.rankers.bm25 import BM25FIndex
from searcheval.rankers.configs import builtin_configurations

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PARAMS = builtin_configurations()["bm25"].params


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder and an empty in-process cache (a new process, as far as the index
    is concerned)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(bm25_cache.ENV_DIR, str(folder))
    monkeypatch.setattr(registry, "_indexes", {})
    return folder


@pytest.fixture(scope="module")
def resources():
    return list(load_fixtures(FIXTURES).resources)


def files(folder: Path) -> list[Path]:
    return sorted(folder.glob("bm25-*.pickle"))


def no_build(monkeypatch):
    def refused(self, *args, **kwargs):
        raise AssertionError("built, not loaded")

    monkeypatch.setattr(BM25FIndex, "__init__", refused)


def test_a_second_process_loads_the_index_the_first_built(cache, resources, monkeypatch):
    built = registry.bm25_index(resources, **PARAMS)
    assert len(files(cache)) == 1
    monkeypatch.setattr(registry, "_indexes", {})  # a new process
    no_build(monkeypatch)
    loaded = registry.bm25_index(resources, **PARAMS)
    assert loaded is not built
    for text in ("weather forecast api", "real-time bitcoin price api", "translate text"):
        assert loaded.search(text, 10) == built.search(text, 10)
        assert loaded.search(text, 10)  # the fixtures answer these


def test_a_changed_listing_parameter_or_scorer_is_a_new_index(cache, resources, monkeypatch):
    registry.bm25_index(resources, **PARAMS)
    first = bm25_cache.index_key(resources, PARAMS)
    changed = [replace(resources[0], description=resources[0].description + " quantum"),
               *resources[1:]]
    assert bm25_cache.index_key(changed, PARAMS) != first
    assert bm25_cache.index_key(resources, {**PARAMS, "k1": 0.9}) != first
    assert bm25_cache.index_key(list(reversed(resources)), PARAMS) != first  # rows follow order
    monkeypatch.setattr(registry, "_indexes", {})
    index = registry.bm25_index(changed, **PARAMS)
    assert index.idf_of("quantum") > 0  # built from the changed listing, not the stored one
    assert len(files(cache)) == 2
    monkeypatch.setattr(bm25_cache, "code_version", lambda: "another scorer")
    assert bm25_cache.index_key(resources, PARAMS) != first


def test_the_code_version_follows_the_scorer_source():
    from searcheval.rankers import bm25

    bm25_cache.code_version.cache_clear()
    import hashlib

    source = hashlib.sha256(Path(bm25.__file__).read_bytes()).hexdigest()
    assert bm25_cache.code_version() != source  # the library versions are in it too
    assert len(bm25_cache.code_version()) == 64


def test_a_damaged_file_is_rebuilt_and_rewritten(cache, resources, monkeypatch):
    registry.bm25_index(resources, **PARAMS)
    [path] = files(cache)
    path.write_bytes(b"not a pickle")
    monkeypatch.setattr(registry, "_indexes", {})
    index = registry.bm25_index(resources, **PARAMS)
    assert index.search("weather forecast api", 1)
    assert path.stat().st_size > 100  # rewritten whole
    monkeypatch.setattr(registry, "_indexes", {})
    no_build(monkeypatch)
    assert registry.bm25_index(resources, **PARAMS).search("weather forecast api", 1)


def test_off_writes_nothing_and_builds_in_the_process(tmp_path, resources, monkeypatch):
    monkeypatch.setenv(bm25_cache.ENV_DIR, "off")
    monkeypatch.setattr(registry, "_indexes", {})
    monkeypatch.chdir(tmp_path)
    assert bm25_cache.cache_dir() is None
    registry.bm25_index(resources, **PARAMS)
    assert not any(tmp_path.rglob("bm25-*"))


def test_the_default_folder_is_searcheval_cache_of_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(bm25_cache.ENV_DIR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert bm25_cache.cache_dir() == tmp_path.resolve() / ".searcheval" / "cache"


def test_an_unwritable_folder_leaves_the_index_in_memory(tmp_path, resources, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv(bm25_cache.ENV_DIR, str(blocker / "cache"))  # under a file: no mkdir
    monkeypatch.setattr(registry, "_indexes", {})
    assert registry.bm25_index(resources, **PARAMS).search("weather forecast api", 1)


def test_only_the_newest_files_are_kept(cache, resources, monkeypatch):
    monkeypatch.setattr(bm25_cache, "KEEP", 2)
    small = resources[:6]
    for age, k1 in enumerate((0.5, 0.9, 1.2)):
        key = bm25_cache.index_key(small, {"k1": k1})
        bm25_cache.save(key, BM25FIndex(small, k1=k1), cache)
        os.utime(cache / f"bm25-{key}.pickle", (1_000_000 + age, 1_000_000 + age))
    bm25_cache.prune(cache)
    assert len(files(cache)) == 2
    assert bm25_cache.load(bm25_cache.index_key(small, {"k1": 0.5}), cache) is None  # oldest
    assert bm25_cache.load(bm25_cache.index_key(small, {"k1": 1.2}), cache) is not None
