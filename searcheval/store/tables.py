"""The rows of a table mapping's own SELECT (searcheval.io.mapped), read in a read-only
transaction of the project's Postgres."""

from __future__ import annotations

import psycopg
from psycopg import sql as pgsql

from searcheval.errors import InputError
from searcheval.store import sql
from searcheval.store.database import connect, resolve_url


def read_query(statement: str, url: str | None = None) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of `statement`, run read-only. A statement Postgres refuses (syntax,
    an unknown table or column, an attempt to write) is an InputError with Postgres' message; a
    database that cannot be reached is a DatabaseError."""
    with connect(resolve_url(url)) as conn:
        try:
            with conn.transaction():
                conn.execute(sql.SET_TRANSACTION_READ_ONLY)
                cursor = conn.execute(pgsql.SQL(statement.strip().rstrip(";")))  # the mapping's own
                if cursor.description is None:
                    raise InputError("the statement returns no rows; expected a SELECT")
                columns = [c.name for c in cursor.description]
                rows = cursor.fetchall()
        except psycopg.Error as exc:
            message = (exc.diag.message_primary or str(exc)).strip()
            raise InputError(f"Postgres refused the statement: {message}") from None
    return columns, rows
