"""The database password from a Secret block (searcheval.store.database): used only with the
configured URL and only when that URL holds none, read once, remembered for redaction. The
reader is a plain function here; tests/deploy/test_pages.py reads a real Prefect Secret block
with a password role on the embedded Postgres."""

from __future__ import annotations

import pytest

from searcheval.errors import DatabaseError
from searcheval.redaction import forget_all, redact
from searcheval.store import database

URL = "postgresql://searcheval@db.internal:5432/searcheval"


@pytest.fixture
def reader(monkeypatch):
    reads: list[str] = []

    def source(name: str) -> str:
        reads.append(name)
        return "block-password-1234"

    monkeypatch.setenv(database.ENV_URL, URL)
    monkeypatch.setenv(database.PASSWORD_SECRET_ENV, "db-password")
    monkeypatch.setattr(database, "_password_source", source)
    monkeypatch.setattr(database, "_passwords", {})
    yield reads
    forget_all()


def test_the_block_gives_the_configured_urls_password_once_and_it_is_redacted(reader):
    assert database.secret_password(URL) == "block-password-1234"
    assert database.secret_password(URL) == "block-password-1234"
    assert reader == ["db-password"]  # read once per process
    assert redact("auth failed with block-password-1234") == "auth failed with [redacted]"
    assert database.redact("x block-password-1234 y", URL) == "x *** y"


def test_never_for_another_server_nor_over_the_urls_own_password(reader):
    assert database.secret_password("postgresql://other@elsewhere/db") is None
    assert database.secret_password(URL.replace("searcheval@", "searcheval:own@")) is None
    assert reader == []


def test_without_the_variable_nothing_is_read(reader, monkeypatch):
    monkeypatch.delenv(database.PASSWORD_SECRET_ENV)
    assert database.secret_password(URL) is None and reader == []


def test_a_process_without_the_reader_says_where_the_password_is_read(reader, monkeypatch):
    monkeypatch.setattr(database, "_password_source", None)
    with pytest.raises(DatabaseError) as caught:
        database.secret_password(URL)
    assert "SEARCHEVAL_DATABASE_PASSWORD_SECRET names the Prefect Secret block 'db-password'" \
        in str(caught.value)
