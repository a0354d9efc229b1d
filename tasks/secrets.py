"""Secrets from Prefect Secret blocks, for the commands of the library that may take one (the
rating page's token): the library never imports Prefect, the CLI imports this lazily."""

from __future__ import annotations

from searcheval.errors import InputError


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
