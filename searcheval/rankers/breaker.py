"""Fail fast when a backend is down: the circuit breaker the `http` and `python` kinds share.

A backend that failed `after` queries in a row and answered none yet is down (unreachable,
refusing, timing out, a retriever that raises on every call): the queries not yet sent are not
sent, each recorded as a failed query with `not_sent: True` and the first failure's cause, and
the run ends incomplete at once instead of waiting on every query. A backend that answered once
is not down: its later failures are counted one by one. `after` is the configuration's
`fail_fast_after` (default 3, `rankers.configs.FAIL_FAST_AFTER`); 0 never opens.
"""

from __future__ import annotations

import threading


class Breaker:
    """Shared by the threads of one configuration's shard. `what` names the backend in the
    cause of a query not sent ("the service", "the ranker")."""

    def __init__(self, after: int, what: str = "the service"):
        self.after = after
        self.what = what
        self.failed_in_a_row = 0
        self.answered = 0
        self.first_cause: str | None = None
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return bool(self.after) and not self.answered and self.failed_in_a_row >= self.after

    def record(self, failed: bool, cause: str | None = None) -> None:
        with self._lock:
            if failed:
                self.failed_in_a_row += 1
                self.first_cause = self.first_cause or cause
            else:
                self.answered += 1
                self.failed_in_a_row = 0

    def skipped(self) -> dict:
        """The error recorded for a query not sent."""
        return {"cause": f"not sent: {self.what} looks down ({self.failed_in_a_row} queries "
                         f"failed in a row, none answered; first: {self.first_cause})",
                "attempts": 0, "not_sent": True}
