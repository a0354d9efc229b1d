"""Helpers of the deployment tests: subprocesses in their own session, a Prefect server handle,
a loopback webhook receiver, and headless Chromium driven over the DevTools protocol."""

from __future__ import annotations

import base64
import itertools
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
CHROMIUM = "/usr/bin/chromium"
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


class Chromium:
    """Headless Chromium driven over the DevTools protocol (a websocket): navigate, wait for text,
    click, screenshot. The Prefect UI is a JS app, so pages are read after they render."""

    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

    def __init__(self, user_data_dir: Path, log: Path) -> None:
        from websockets.sync.client import connect

        self.process = Process([CHROMIUM, *self.FLAGS, f"--user-data-dir={user_data_dir}",
                                "--remote-debugging-port=0", "--window-size=1400,1200",
                                "about:blank"], log, dict(os.environ), log.parent)
        port_file = user_data_dir / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if time.monotonic() > deadline or not self.process.alive():
                self.process.stop()
                pytest.fail(f"chromium did not start:\n{self.process.tail()}")
            time.sleep(0.1)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 2**20)
        self.ids = itertools.count(1)
        self.call("Page.enable")

    def call(self, method: str, **params):
        message_id = next(self.ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def wait_for_text(self, *needles: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if all(n in text for n in needles):
                return text
            if time.monotonic() > deadline:
                pytest.fail(f"the page never showed {needles}; it shows:\n{text[:3000]}")
            time.sleep(0.25)

    def click_text(self, label: str) -> bool:
        """Click the first tab, button or link whose whole text is `label`."""
        return bool(self.js(
            "(() => { const e = [...document.querySelectorAll('button, a, li, [role=tab]')]"
            f".find(e => e.textContent.trim() === {json.dumps(label)}); "
            "if (!e) return false; e.click(); return true; })()"))

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.process.stop()
