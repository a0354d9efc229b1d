"""A run's inputs as every front end loads them: `searcheval.io.collection.load_collection`, with a
mapping's SQL tables read from Postgres (searcheval.store.tables). io opens no database itself, so
the two packages never import each other; this is where they meet."""

from __future__ import annotations

from searcheval.types import Collection


def load_collection(**options) -> Collection:
    """`searcheval.io.collection.load_collection(**options)`, reading a mapping's `sql` tables
    with `searcheval.store.tables.read_query` (Postgres: `database_url`, else
    SEARCHEVAL_DATABASE_URL, else the embedded server)."""
    from searcheval.io.collection import load_collection as load
    from searcheval.store.tables import read_query

    options.setdefault("read_query", read_query)
    return load(**options)
