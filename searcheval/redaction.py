"""Secrets never leave: every value searcheval reads from `{env: VAR}` or a Prefect Secret block
is remembered here when it is read, and `redact` replaces it (and its URL-encoded, JSON-escaped
and base64 forms) with `[redacted]` in any text before that text is kept: an error's cause, a
body excerpt, a log record (the `httpx` and `httpcore` loggers and every logger given
`RedactingFilter`), a report, a row.

The registry is per process (a Dask worker remembers what it resolved itself); values shorter than
`MIN_LENGTH` characters are not remembered as such (redacting "a" would erase every "a"), which is
why a credential that short is refused where it is read.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["MIN_LENGTH", "REDACTED", "RedactingFilter", "forget_all", "redact", "redact_deep",
           "remember", "remembered"]

REDACTED = "[redacted]"
MIN_LENGTH = 4

_lock = threading.Lock()
_values: set[str] = set()
_forms: list[str] = []  # every form of every value, longest first


def _variants(value: str) -> set[str]:
    out = {value, quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1],
           base64.b64encode(value.encode()).decode().rstrip("=")}
    return {v for v in out if len(v) >= MIN_LENGTH}


def remember(value: str | None) -> None:
    """Remember a secret's value (no-op for None and values under MIN_LENGTH)."""
    if not value or len(value) < MIN_LENGTH:
        return
    with _lock:
        if value in _values:
            return
        _values.add(value)
        forms = set(_forms) | _variants(value)
        _forms[:] = sorted(forms, key=len, reverse=True)
    _install_filters()


def remembered() -> int:
    return len(_values)


def forget_all() -> None:
    """Tests only: start from no secrets."""
    with _lock:
        _values.clear()
        _forms.clear()


def redact(text: Any) -> Any:
    """`text` with every remembered secret replaced by [redacted] (non-strings unchanged)."""
    if not isinstance(text, str) or not _forms:
        return text
    for form in list(_forms):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def redact_deep(value: Any) -> Any:
    """Every string in a JSON-like value (keys too) redacted."""
    if not _forms:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k): redact_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_deep(v) for v in value)
    return value


class RedactingFilter(logging.Filter):
    """Redacts a record's message (and its arguments) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _forms:
            try:
                message = record.getMessage()
            except Exception:  # a record whose arguments do not format: leave it to logging
                return True
            record.msg, record.args = redact(message), None
        return True


_FILTER = RedactingFilter()
# a filter applies to the records of its own logger only (not to its children's): the run loggers
# of Prefect are named here, without importing Prefect
_LOGGERS: Iterable[str] = ("httpx", "httpcore", "searcheval", "prefect.flow_runs",
                           "prefect.task_runs", "prefect")


def _install_filters() -> None:
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
