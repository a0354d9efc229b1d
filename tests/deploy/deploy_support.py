"""Helpers of the deployment tests: subprocesses in their own session and a Prefect server handle.
The browser is the session's Playwright `browser` fixture (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
UI_OUTPUT = ROOT / "test-output" / "ui"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A subprocess in its own session (so its children stop with it), output in a log file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str], cwd: Path) -> None:
        self.args, self.log = args, log
        self._fh = open(log, "wb")
        self.popen = subprocess.Popen(args, stdout=self._fh, stderr=subprocess.STDOUT, env=env,
                                      cwd=cwd, start_new_session=True)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 15) -> None:
        if self.alive():
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout)
            except ProcessLookupError:
                pass
        self._fh.close()


def close_process(process: subprocess.Popen) -> None:
    """A command started with pipes: killed if a failure left it running, reaped, and its pipes
    closed even when it ended on its own (left open, they are a ResourceWarning that fails
    whichever later test the garbage collector lands in)."""
    if process.poll() is None:
        process.kill()
    process.communicate()  # reads what is left; closes the pipes (a no-op once closed)


def wait_healthy(url: str, process: Process, timeout: float = 90) -> None:
    """Until the Prefect server at `url` answers its health check; fails the test with the
    server's log when it exits or does not answer within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if not process.alive():
            pytest.fail(f"prefect server exited {process.popen.returncode}:\n{process.tail()}")
        try:
            with urllib.request.urlopen(f"{url}/api/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"prefect server not healthy after {timeout:g} s:\n{process.tail()}")
        time.sleep(0.25)


def prefect_env(home: Path, api_url: str, **extra: str) -> dict[str, str]:
    """The environment of a Prefect subprocess: nothing PREFECT_* leaks in from this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_API_URL=api_url,
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_CLI_COLORS="false",
               PREFECT_CLI_WRAP_LINES="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               COLUMNS="200")
    env.pop("SEARCHEVAL_DATABASE_URL", None)
    env.pop("SEARCHEVAL_ALERT_WEBHOOK", None)
    env.update(extra)
    return env


@dataclass
class PrefectServer:
    url: str
    api_url: str
    home: Path
    process: Process

    def env(self, **extra: str) -> dict[str, str]:
        return prefect_env(self.home, self.api_url, **extra)

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            cwd: Path = ROOT) -> subprocess.CompletedProcess:
        """`prefect ARGS` against this server; fails the test with its output on non-zero exit."""
        done = subprocess.run([str(VENV_BIN / "prefect"), "--no-prompt", *args], cwd=cwd,
                              env=env or self.env(), capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            pytest.fail(f"prefect {' '.join(args)} exited {done.returncode}:\n"
                        f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(
            self.api_url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
        return json.loads(raw) if raw else None
