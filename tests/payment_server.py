"""A payment server on 127.0.0.1 for the resume tests (issue 22): it counts charges and honours
idempotency keys, as a real payment API does (a charge sent again with a key already used is
answered with the first charge, not made twice).

``POST /charge`` with a JSON body ``{"amount": n}`` and an optional ``Idempotency-Key`` header
answers ``{"charge": id, "amount": n, "replayed": bool}``; ``GET /charges`` lists every charge
made. It can run in this process (``PaymentServer().start()``) or as its own
(``python -m tests.payment_server PORT_FILE``), so an agent killed mid-call cannot take it down.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class PaymentServer:
    """The server and what it has charged."""

    def __init__(self) -> None:
        self.charges: list[dict[str, Any]] = []
        self.by_key: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> PaymentServer:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def charge(self, amount: Any, key: str | None) -> dict[str, Any]:
        with self.lock:
            if key is not None and key in self.by_key:
                return {**self.by_key[key], "replayed": True}
            made = {"charge": f"ch_{len(self.charges) + 1}", "amount": amount, "key": key}
            self.charges.append(made)
            if key is not None:
                self.by_key[key] = made
            return {**made, "replayed": False}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # A payer killed while it sent its request leaves part of it: as a real payment
                # API does, a request that is not whole charges nothing (and its key stays
                # unused: a retry with it is a charge of its own).
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                try:
                    amount = json.loads(data)["amount"] if len(data) == length else None
                except (ValueError, KeyError, TypeError):
                    amount = None
                if type(amount) is not int:
                    self._send({"error": "a charge needs a whole JSON body with an amount"}, 400)
                    return
                key = self.headers.get("Idempotency-Key") or None  # an empty header: no key
                self._send(server.charge(amount, key))

            def do_GET(self) -> None:
                with server.lock:
                    self._send({"charges": list(server.charges)})

            def _send(self, answer: Any, status: int = 200) -> None:
                data = json.dumps(answer).encode()
                # A payer killed while it waited: the charge stands, unanswered.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


if __name__ == "__main__":
    payments = PaymentServer()
    Path(sys.argv[1]).write_text(payments.url)
    payments.server.serve_forever()


def post_charge(payments_url: str, amount: int, idempotency_key: str | None) -> dict[str, Any]:
    """What a paying tool of the test agents does: ``POST /charge`` for ``amount`` under the
    call's idempotency key (none: an empty header), and return the server's answer."""
    request = urllib.request.Request(
        payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
    )
    request.add_header("Idempotency-Key", idempotency_key or "")
    with urllib.request.urlopen(request, timeout=30) as answer:
        charged: dict[str, Any] = json.loads(answer.read())
    return charged
