"""The Prefect server a local `searcheval run` talks to, kept running per project folder.

A flow run needs a Prefect API. Without one configured (PREFECT_API_URL), Prefect starts a
temporary server for the process and stops it at exit: 8-12 s of a warm `make run` that takes 5.
So, like the embedded Postgres under `.searcheval/pg`, a run starts a local server once and keeps
it: `prefect server start` on a free loopback port, in a session of its own, its data (SQLite
database, UI build, log) under `.searcheval/prefect` in the working directory, described by
`.searcheval/prefect/server.json`. The next run finds it there and reuses it; `searcheval server
stop` stops it. Which server a run uses, in this order:

  PREFECT_API_URL set (the environment or the active Prefect profile)   that server
  SEARCHEVAL_PREFECT_SERVER=temporary                                   Prefect's temporary one
  otherwise (SEARCHEVAL_PREFECT_SERVER unset or `kept`)                 the kept server

This module starts and stops the server as a process (`python -m prefect server start` with the
interpreter running searcheval) and never imports Prefect itself: flows/prefect_api.py chooses
the server for a flow run and points Prefect's settings at it.

A server that no longer answers, whose process is gone (a reboot, a kill), or that runs another
version of Prefect than this environment is replaced; one process at a time decides (an fcntl
lock on `.searcheval/prefect.lock`), so two runs started together share one server.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from searcheval.errors import InputError, PrefectServerError

ENV_MODE = "SEARCHEVAL_PREFECT_SERVER"
MODES = ("kept", "temporary")
STATE_DIR = Path(".searcheval") / "prefect"  # beside the embedded Postgres's .searcheval/pg
STATE_FILE = "server.json"
LOG_FILE = "server.log"
PORT_FILE = "port"
HOST = "127.0.0.1"
START_TIMEOUT_S = 120.0  # the first start migrates a new database: 10 s on a busy 2-core machine
STOP_TIMEOUT_S = 15.0

_children: dict[int, subprocess.Popen] = {}  # servers this process started: reaped when stopped


@dataclass(frozen=True)
class KeptServer:
    """What server.json records of a running kept server."""

    pid: int
    port: int
    api_url: str
    ui_url: str
    prefect_version: str
    python: str
    started_at: str
    home: str  # its PREFECT_HOME: the database, the UI build, the log

    @property
    def log(self) -> Path:
        return Path(self.home) / LOG_FILE


@dataclass(frozen=True)
class Status:
    """The kept server of a folder as `searcheval server status` reports it."""

    state: str  # running | stopped | stale (server.json names a process that is gone) | silent
    server: KeptServer | None
    directory: Path

    def describe(self) -> str:
        s = self.server
        if self.state == "running":
            return (f"running: {s.api_url} (pid {s.pid}, Prefect {s.prefect_version}, started "
                    f"{s.started_at}); the UI at {s.ui_url}; its data and log in {s.home}")
        if self.state == "stale":
            return (f"stopped: {self.directory / STATE_FILE} names pid {s.pid}, which is gone "
                    "(the next run starts a new server)")
        if self.state == "silent":
            return (f"not answering: pid {s.pid} runs but {s.api_url} does not answer (the next "
                    f"run replaces it); see {s.log}")
        return f"stopped: no kept Prefect server in {self.directory}"


# --------------------------------------------------------------------------- settings


def server_mode(environ: Mapping[str, str] | None = None) -> str:
    """`kept` (the default) or `temporary`, from SEARCHEVAL_PREFECT_SERVER."""
    env = os.environ if environ is None else environ
    mode = env.get(ENV_MODE, "").strip().lower() or "kept"
    if mode not in MODES:
        raise InputError(f"expected one of {', '.join(MODES)}, got {env.get(ENV_MODE)!r}",
                         field=ENV_MODE)
    return mode


def state_dir(folder: str | Path | None = None) -> Path:
    """`.searcheval/prefect` in `folder` (default: the working directory), absolute."""
    return (Path(folder) if folder is not None else Path.cwd()).absolute() / STATE_DIR


def prefect_version() -> str:
    """The installed Prefect's version, read from its metadata (Prefect is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prefect")
    except PackageNotFoundError:
        return "unknown"


def ui_environment(host: str, port: int, environ: Mapping[str, str] | None = None) -> dict:
    """A Prefect server's environment: the UI is told the port its API is on, flow run logs are
    streamed out (`prefect deployment run --watch`), telemetry stays off; what the user set
    wins, except nothing is left pointing the UI at another port by default."""
    env = dict(os.environ if environ is None else environ)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    env.setdefault("PREFECT_UI_API_URL", f"{url}/api")
    env.setdefault("PREFECT_UI_URL", url)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED", "true")
    env.setdefault("PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED", "true")
    return env


# --------------------------------------------------------------------------- state


def read_state(directory: Path) -> KeptServer | None:
    """The server server.json describes, or None (no file, or one that is not ours)."""
    try:
        data = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
        return KeptServer(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_state(directory: Path, server: KeptServer) -> None:
    temporary = directory / (STATE_FILE + ".tmp")
    temporary.write_text(json.dumps(asdict(server), indent=2) + "\n", encoding="utf-8")
    temporary.replace(directory / STATE_FILE)  # a reader never sees half a file


def _forget(directory: Path) -> None:
    (directory / STATE_FILE).unlink(missing_ok=True)


def _last_port(directory: Path) -> int | None:
    """The port the folder's last server had (`port`, kept when it stops): the next one takes
    it again when it is free, so the UI's address stays the same."""
    try:
        return int((directory / PORT_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One process at a time decides about the folder's server (`<dir>.lock`, beside it)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory.with_name(directory.name + ".lock"), "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------- processes


def process_alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, exited but not reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: kill(0) is all there is
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _is_prefect_server(pid: int) -> bool:
    """Whether `pid` runs `prefect server start` (a pid reused by another program is not ours
    to stop)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return process_alive(pid)
    return b"prefect" in command and b"server" in command and b"start" in command


def group_alive(pid: int) -> bool:
    """Whether any process of the session the server leads (its process group) is alive."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            return True
    return False


def answers(api_url: str, timeout_s: float = 2.0) -> bool:
    """Whether the Prefect API at `api_url` answers its health check (no proxy: loopback)."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{api_url}/health", timeout=timeout_s) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _free_port(preferred: int | None = None) -> int:
    """`preferred` (the port a folder's server had) when it is free, else one the OS picks."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((HOST, port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise PrefectServerError("no free port on the loopback interface for the Prefect server")


def _reap(pid: int) -> None:
    """Collect the exit status of a server this process started (else it stays a zombie)."""
    process = _children.get(pid)
    if process is not None and process.poll() is not None:
        _children.pop(pid, None)


def _log_tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:] if line.strip())


# --------------------------------------------------------------------------- start, stop


def status(folder: str | Path | None = None) -> Status:
    """The folder's kept server: running (answers), silent, stale, or stopped."""
    directory = state_dir(folder)
    server = read_state(directory)
    if server is None:
        return Status("stopped", None, directory)
    if not process_alive(server.pid) or not _is_prefect_server(server.pid):
        return Status("stale", server, directory)
    if not answers(server.api_url):
        return Status("silent", server, directory)
    return Status("running", server, directory)


def ensure_running(folder: str | Path | None = None, *,
                   timeout_s: float = START_TIMEOUT_S) -> tuple[KeptServer, str]:
    """The folder's kept server, started if it is not running. Returns (server, how): how is
    `reused`, `started` (none was there), or `restarted (WHY)` (one was there, unusable)."""
    directory = state_dir(folder)
    with _locked(directory):
        found = status(folder)
        server = found.server
        if found.state == "running" and server.prefect_version == prefect_version():
            return server, "reused"
        why = None
        if found.state == "running":  # another Prefect than this environment's: its API may differ
            why = f"it ran Prefect {server.prefect_version}, this environment has " \
                  f"{prefect_version()}"
        elif found.state == "silent":
            why = f"pid {server.pid} did not answer"
        elif found.state == "stale":
            why = f"its process {server.pid} was gone"
        if found.state in ("running", "silent"):
            _stop_process(server)
        _forget(directory)
        started = _start(directory, preferred_port=server.port if server else _last_port(
            directory), timeout_s=timeout_s)
        return started, f"restarted ({why})" if why else "started"


def _start(directory: Path, *, preferred_port: int | None, timeout_s: float) -> KeptServer:
    log = directory / LOG_FILE
    last_problem = ""
    for attempt in range(3):  # a port taken between choosing it and binding it: another one
        port = _free_port(preferred_port if attempt == 0 else None)
        api_url = f"http://{HOST}:{port}/api"
        env = ui_environment(HOST, port)
        env.pop("PREFECT_API_URL", None)
        env["PREFECT_HOME"] = str(directory)
        with open(log, "a", encoding="utf-8") as output:
            output.write(f"\n--- {datetime.now(timezone.utc).isoformat(timespec='seconds')}: "
                         f"starting on port {port}\n")
            output.flush()
            process = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", HOST,
                 "--port", str(port)],
                cwd=directory, env=env, stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, start_new_session=True)  # outlives this process
            _children[process.pid] = process
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            if answers(api_url, timeout_s=1.0):
                server = KeptServer(
                    pid=process.pid, port=port, api_url=api_url, ui_url=f"http://{HOST}:{port}",
                    prefect_version=prefect_version(), python=sys.executable,
                    started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    home=str(directory))
                _write_state(directory, server)
                (directory / PORT_FILE).write_text(f"{port}\n", encoding="utf-8")
                return server
            time.sleep(0.1)
        if process.poll() is None:  # still starting after the timeout: give up on it
            _terminate_group(process.pid)
            raise PrefectServerError(f"the Prefect server did not answer at {api_url} within "
                                     f"{timeout_s:.0f} s; see its log {log}")
        last_problem = _log_tail(log)
        if "in use" not in last_problem.lower():
            break
    raise PrefectServerError(f"the Prefect server exited as it started "
                             f"({last_problem or 'no output'}); see its log {log}")


def _terminate_group(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to the server's session (its process group), SIGKILL after `timeout_s`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            _reap(pid)
            return
        deadline = time.monotonic() + (timeout_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            _reap(pid)
            if not group_alive(pid):
                return
            time.sleep(0.1)
    raise PrefectServerError(f"the Prefect server's processes (group {pid}) did not exit")


def _stop_process(server: KeptServer) -> None:
    if process_alive(server.pid) and _is_prefect_server(server.pid):
        _terminate_group(server.pid)


def stop(folder: str | Path | None = None) -> Status:
    """Stop the folder's kept server and forget it. Returns what it was before (its `state`:
    running or silent when stopped now; stale or stopped when there was nothing to stop)."""
    directory = state_dir(folder)
    with _locked(directory):
        found = status(folder)
        if found.state in ("running", "silent"):
            _stop_process(found.server)
        _forget(directory)
    return found
