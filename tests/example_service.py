"""The example search service (examples/search_service) as a real subprocess, for tests.

`running_service(...)` starts `python -m examples.search_service` on a free loopback port (the
service binds port 0 and prints the URL it got, so no port is ever raced for), waits until
`/health` answers, yields an `ExampleService` handle and stops the process when the block ends,
on failure too; `--watch-parent` makes the service exit by itself should the test process die
without cleaning up. The session fixture `example_service` in tests/conftest.py uses it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
LISTENING = re.compile(r"search_service: serving .* on (http://\S+)")


@dataclass
class ExampleService:
    """A running service: its base URL, and the admin endpoints as methods."""

    url: str
    process: subprocess.Popen
    log: Path

    def set_knobs(self, **knobs) -> dict:
        """Replace every knob (those not named go back to their defaults) and zero the counters.

        Call it at the start of a test: `service.set_knobs()` is a well-behaved service again.
        """
        response = httpx.post(f"{self.url}/_knobs", json=knobs, timeout=10)
        response.raise_for_status()
        return response.json()

    def knobs(self) -> dict:
        return httpx.get(f"{self.url}/_knobs", timeout=10).raise_for_status().json()

    def stats(self) -> dict:
        """`GET /_stats`: requests, failed, malformed, by_status, by_endpoint, in_flight,
        max_in_flight, fail_first_remaining, recent."""
        return httpx.get(f"{self.url}/_stats", timeout=10).raise_for_status().json()


@contextmanager
def running_service(*args: str, log_dir: Path, timeout: float = 60.0) -> Iterator[ExampleService]:
    """Start the service with `args` (e.g. "--fixtures", "fixtures"), yield it, stop it."""
    log_path = log_dir / "search_service.log"
    command = [sys.executable, "-m", "examples.search_service", *args,
               "--host", "127.0.0.1", "--port", "0", "--watch-parent"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            url = _wait_until_healthy(process, log_path, timeout)
            yield ExampleService(url=url, process=process, log=log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_healthy(process: subprocess.Popen, log_path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the example service exited with {process.returncode}:\n"
                               f"{log_path.read_text()}")
        if url is None and (m := LISTENING.search(log_path.read_text())):
            url = m[1]
        if url is not None:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"the example service was not healthy within {timeout:.0f} s:\n"
                       f"{log_path.read_text()}")


def answers(url: str, queries) -> dict[str, dict[str, float]]:
    """The service's own answers (its native `/search`, k=100) to each query with its filters,
    as the `native` configuration asks: the run the tests score directly."""
    out = {}
    for q in queries:
        f = {k: v for k, v in (("network", q.filters.network), ("asset", q.filters.asset),
                               ("max_price_usd", q.filters.max_price_usd)) if v is not None}
        hits = httpx.get(f"{url}/search", params={"q": q.text, "k": 100, **f}).json()
        out[q.id] = {h["id"]: h["score"] for h in hits["hits"]}
    return out

