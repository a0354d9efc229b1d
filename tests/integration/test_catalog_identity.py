"""A catalog's identity in Postgres is the dataset's declared name or its content's fingerprint,
never the folder's base name: two folders both called `fixtures` no longer overwrite each other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from searcheval import store
from searcheval.evaluation import pipeline
from searcheval.io.collection import load_collection

ROOT = Path(__file__).resolve().parents[2]


def fixtures_at(folder: Path, drop: str | None = None, settings: str | None = None) -> Path:
    folder.mkdir(parents=True)
    for name in ("catalog.json", "golden_queries.json", "judgments.csv"):
        shutil.copy(ROOT / "fixtures" / name, folder / name)
    if drop:
        catalog = [r for r in json.loads((folder / "catalog.json").read_text()) if r["id"] != drop]
        (folder / "catalog.json").write_text(json.dumps(catalog))
    if settings:
        (folder / "searcheval.yaml").write_text(settings)
    return folder


def test_two_folders_of_one_name_are_two_catalogs(conn, tmp_path):
    a = load_collection(fixtures=fixtures_at(tmp_path / "a" / "fixtures"))
    b = load_collection(fixtures=fixtures_at(tmp_path / "b" / "fixtures", drop="email-validation"))
    assert a.name == b.name == "fixtures" and a.catalog_id != b.catalog_id
    pipeline.seed_catalog(conn, a)
    pipeline.seed_catalog(conn, b)
    assert len(store.load_catalog_hashes(conn, a.catalog_id)) == 18
    assert len(store.load_catalog_hashes(conn, b.catalog_id)) == 18 - 1
    assert store.load_catalog_hashes(conn, "fixtures") == {}


def test_the_same_content_in_two_folders_is_one_catalog(tmp_path):
    a = load_collection(fixtures=fixtures_at(tmp_path / "one"))
    b = load_collection(dataset=fixtures_at(tmp_path / "two"))
    assert a.catalog_id == b.catalog_id and a.catalog_id.startswith("sha256:")


def test_a_declared_name_is_the_identity(conn, tmp_path):
    c = load_collection(fixtures=fixtures_at(tmp_path / "x", settings="name: seed-catalog\n"))
    assert c.catalog_id == "seed-catalog"
    pipeline.seed_catalog(conn, c)
    assert len(store.load_catalog_hashes(conn, "seed-catalog")) == 18
