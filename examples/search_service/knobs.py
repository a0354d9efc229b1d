"""Test knobs (what the service does wrong, on purpose) and the counters that show what it served.

Knobs are set at start-up by command-line flags and replaced at run time by `POST /_knobs`. They
act on the search and document endpoints only, never on `/health`, `/_knobs` or `/_stats`.

The service runs on one asyncio event loop (one uvicorn worker, async handlers), so the counters
are changed only between awaits and need no lock: `max_in_flight` is exact under concurrency.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Malformation = Literal["not_json", "no_hits", "object_id"]
Status = Annotated[int, Field(ge=400, le=599)]


class Knobs(BaseModel):
    """Every knob, with its default (a well-behaved service)."""

    model_config = ConfigDict(extra="forbid")

    fail_first: int = Field(0, ge=0, description="the next N requests fail with fail_status")
    fail_status: Status = 503
    fail_queries: dict[str, Status] = Field(default_factory=dict,
                                            description="query text -> status, every time")
    fail_documents: dict[str, Status] = Field(default_factory=dict,
                                              description="document id -> status, every time")
    delay_ms: float = Field(0.0, ge=0, le=60_000, description="every answer waits this long")
    malformed: Malformation | None = Field(None, description="every search answer is malformed")
    malformed_queries: dict[str, Malformation] = Field(default_factory=dict)
    require_headers: dict[str, str] = Field(default_factory=dict,
                                            description="header -> value, else 401")
    gone_documents: list[str] = Field(default_factory=list,
                                      description="404 on lookup, never in results")
    edited_documents: list[str] = Field(default_factory=list,
                                        description="lookup returns changed text and hash")


class Stats:
    """What the service answered since start-up or since the knobs were last set."""

    RECENT = 200  # how many requests `recent` remembers

    def __init__(self) -> None:
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        """Zero every counter; requests still in flight stay counted as in flight."""
        self.requests = 0
        self.by_status: Counter[int] = Counter()
        self.by_endpoint: Counter[str] = Counter()
        self.malformed = 0
        self.max_in_flight = self.in_flight
        self.peers: set[tuple] = set()
        self.recent: deque[dict] = deque(maxlen=self.RECENT)
        self.zeroed = time.monotonic()

    def begin(self, endpoint: str, peer: tuple | None = None) -> float:
        """Count a request arriving (`peer`: the client's address and port, one per
        connection); returns when it arrived, in seconds since the reset."""
        if peer is not None:
            self.peers.add(peer)
        self.requests += 1
        self.by_endpoint[endpoint] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return time.monotonic() - self.zeroed

    def end(self, status: int, record: dict) -> None:
        self.in_flight -= 1
        self.by_status[status] += 1
        self.recent.append({**record, "status": status})

    def as_dict(self, fail_first_remaining: int) -> dict:
        return {
            "requests": self.requests,
            "failed": sum(n for status, n in self.by_status.items() if status >= 400),
            "malformed": self.malformed,
            "by_status": {str(s): n for s, n in sorted(self.by_status.items())},
            "by_endpoint": dict(sorted(self.by_endpoint.items())),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "connections": len(self.peers),
            "fail_first_remaining": fail_first_remaining,
            "recent": list(self.recent),
        }
