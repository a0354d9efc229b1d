"""Secrets from Prefect Secret blocks, for the library, which never imports Prefect: the rating
page's token (the CLI imports this lazily) and the database password.

Importing this module installs the reader of `SEARCHEVAL_DATABASE_PASSWORD_SECRET` in
`searcheval.store.database` (tasks/evaluation.py imports it, so every flow run and every Dask
worker that runs a task has it): the block's value is the password of the configured database
URL, read when the first connection is opened, never logged.
"""

from __future__ import annotations

from searcheval.errors import DatabaseError, InputError
from searcheval.store import database


def secret_value(name: str) -> str:
    """The value of the Prefect Secret block `name`; never logged."""
    from prefect.blocks.system import Secret

    try:
        value = Secret.load(name).get()
    except ValueError:
        raise InputError(f"no Prefect Secret block named {name!r}", field="token_secret") from None
    if not isinstance(value, str) or not value:
        raise InputError(f"the Prefect Secret block {name!r} holds no text", field="token_secret")
    return value


def database_password(name: str) -> str:
    """The database password held by the Prefect Secret block `name`; a block that is missing
    or empty is refused input naming the variable, never showing a value."""
    from prefect.blocks.system import Secret

    where = database.PASSWORD_SECRET_ENV
    try:
        value = Secret.load(name).get()
    except ValueError:
        raise InputError(f"no Prefect Secret block named {name!r}", field=where) from None
    except Exception as exc:  # noqa: BLE001 - the Prefect server cannot be reached
        raise DatabaseError(f"cannot read the Prefect Secret block {name!r} ({where}): "
                            f"{type(exc).__name__}") from None
    if not isinstance(value, str) or not value:
        raise InputError(f"the Prefect Secret block {name!r} holds no text", field=where)
    return value


database.use_password_source(database_password)
