"""Arize Phoenix as a real, independent OTLP receiver: its own process, on loopback, offline.

Phoenix comes from PyPI into ``.venv-phoenix`` (``make test`` builds it from
``requirements-phoenix.lock``), apart from the project's venv. ``Phoenix.start()`` runs
``phoenix serve`` with its settings in the environment (names from ``phoenix/config.py``):

- ``PHOENIX_HOST``, ``PHOENIX_PORT`` (HTTP: web UI, REST API under ``/v1``, OTLP/HTTP at
  ``/v1/traces``) and ``PHOENIX_GRPC_PORT`` (OTLP/gRPC), on free ports of 127.0.0.1;
- ``PHOENIX_WORKING_DIR``: its SQLite database (``phoenix.db``) and everything else it writes;
- no calls out: ``PHOENIX_TELEMETRY_ENABLED=false``, ``PHOENIX_ALLOW_EXTERNAL_RESOURCES=false``
  (no web fonts, telemetry pixels or WASM sandbox download), and the agent assistant, its
  server-side bash and the MCP server off.

It is ready when ``GET /healthz`` answers ``OK``, and is stopped by its process id.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PHOENIX_VENV = ROOT / ".venv-phoenix"
PHOENIX_BIN = PHOENIX_VENV / "bin" / "phoenix"
HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Phoenix:
    """One ``phoenix serve`` process; ``start()`` waits until it answers, ``stop()`` ends it."""

    def __init__(self, working_dir: Path, *, start_timeout: float = 480.0) -> None:
        self.working_dir = working_dir
        self.start_timeout = start_timeout
        self.port = _free_port()
        self.grpc_port = _free_port()
        while self.grpc_port == self.port:
            self.grpc_port = _free_port()
        self.base_url = f"http://{HOST}:{self.port}"
        self.log_path = working_dir / "phoenix.log"
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def otlp_http_endpoint(self) -> str:
        """The base for ``OTEL_EXPORTER_OTLP_ENDPOINT``: the exporter appends ``/v1/traces``."""
        return self.base_url

    def environment(self) -> dict[str, str]:
        """A clean environment: nothing of the caller's (no OTEL_*, no keys), Phoenix's settings."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.working_dir),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PHOENIX_HOST": HOST,
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_WORKING_DIR": str(self.working_dir),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
            "PHOENIX_AGENTS_DISABLE_BASH": "true",
            "PHOENIX_ENABLE_MCP_SERVER": "false",
        }

    def start(self) -> Phoenix:
        if not PHOENIX_BIN.exists():
            pytest.fail(
                f"Arize Phoenix is not installed: {PHOENIX_BIN} is missing. Run `make test`: it "
                "builds .venv-phoenix from requirements-phoenix.lock before running pytest.",
                pytrace=False,
            )
        self.working_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [str(PHOENIX_BIN), "serve"],
                env=self.environment(),
                cwd=self.working_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _wait_healthy(self, started: float) -> None:
        assert self._process is not None
        while True:
            code = self._process.poll()
            if code is not None:
                raise RuntimeError(f"phoenix serve exited with {code}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as response:
                    if response.status == 200 and response.read().strip() == b"OK":
                        return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() - started > self.start_timeout:
                raise TimeoutError(
                    f"phoenix serve not healthy after {self.start_timeout:.0f} s:\n"
                    + self.log_tail()
                )
            time.sleep(0.25)

    def stop(self) -> None:
        """Terminate the process by its id, wait, and kill it if it does not end."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def get(self, path: str, **query: Any) -> str:
        """``GET`` a path of Phoenix's HTTP server; the response body as text (200 expected)."""
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200, (url, response.status)
            return str(response.read().decode())

    def get_json(self, path: str, **query: Any) -> Any:
        return json.loads(self.get(path, **query))

    def stored_bytes(self) -> bytes:
        """Every file Phoenix wrote into its working directory (database, WAL, log), joined."""
        return b"".join(p.read_bytes() for p in sorted(self.working_dir.rglob("*")) if p.is_file())
