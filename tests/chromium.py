"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``):
no websocket library and no port. A test opens a page, evaluates expressions in it until a
condition holds, and takes screenshots; console errors and Content-Security-Policy refusals are
collected as they come.

The pipe is Chromium's file descriptors 3 (it reads commands) and 4 (it writes replies and
events), each message a JSON object ended by a NUL byte.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
MISSING = (
    f"{CHROMIUM} is missing: install the Debian package `chromium` "
    "(apt-get install -y chromium); CI installs it"
)


HEADLESS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
"""How every test runs Chromium: headless, offline, no first-run work, /tmp not /dev/shm."""


class ChromiumError(Exception):
    """The browser answered a command with an error, or stopped answering."""


class Chromium:
    """One headless browser with one page (a tab), until :meth:`close`."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def on_fds_3_and_4() -> None:  # in the child, before exec
            # Out of the way first: either end may itself be fd 3 or 4.
            os.dup2(commands_read, 200)
            os.dup2(replies_write, 201)
            os.dup2(200, 3)
            os.dup2(201, 4)

        self.process = subprocess.Popen(
            [
                str(CHROMIUM),
                *HEADLESS,
                f"--window-size={width},{height}",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=on_fds_3_and_4,  # fine here: no other thread runs while it forks
            close_fds=False,  # fds 3 and 4 are made after close_fds would run; others are
            # close-on-exec, as Python opens them
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.console: list[str] = []
        """Console errors, uncaught exceptions and CSP refusals, as the page logged them."""
        target = self.command("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.command("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.command(f"{domain}.enable", session=self.session)
        self.command(
            "Emulation.setDeviceMetricsOverride",
            session=self.session,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def command(self, method: str, session: str | None = None, **params: Any) -> Any:
        """Send one command and return its result (events that arrive first are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(deadline=time.monotonic() + 60)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise ChromiumError("the browser did not answer within 60 s")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise ChromiumError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def _event(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.console.append(f"uncaught: {details.get('text')} {details.get('exception')}")
        elif event.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console.append(f"console.error: {params.get('args')}")
        elif event.get("method") == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") == "error":
                self.console.append(f"log: {entry.get('text')} ({entry.get('url')})")

    def open(self, url: str) -> None:
        self.command("Page.navigate", session=self.session, url=url)

    def evaluate(self, expression: str) -> Any:
        """The value of ``expression`` in the page (JSON-able values only)."""
        result = self.command(
            "Runtime.evaluate", session=self.session, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, seconds: float = 60) -> Any:
        """Evaluate ``expression`` until it is truthy (a generous deadline: never a timing
        assertion, only a guard against a page that never gets there)."""
        deadline = time.monotonic() + seconds
        # A page being loaded may have no document element yet: that is "not yet", not an error.
        guarded = (
            f"(function () {{ try {{ return ({expression}); }} catch (e) {{ return null; }} }})()"
        )
        while True:
            value = self.evaluate(guarded)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {what}; console: {self.console}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> bytes:
        data = self.command("Page.captureScreenshot", session=self.session, format="png")["data"]
        png = base64.b64decode(data)
        path.write_bytes(png)
        return png

    def close(self) -> None:
        with contextlib.suppress(ChromiumError):  # it may be gone already
            self.command("Browser.close")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
