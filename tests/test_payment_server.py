"""The test suite's payment server (tests/payment_server.py) rejects a request that is not whole:
a payer killed between sending its headers and its body (http.client sends them apart) must
leave no charge and no used idempotency key behind, as a real payment API does. Before, such a
request was charged with no amount under the payer's key, and the payer's retry with that key
was answered with it: the 1,000-kill bench reported the booking as never made."""

from __future__ import annotations

import socket

from .payment_server import PaymentServer, post_charge


def test_a_request_cut_after_its_headers_charges_nothing_and_leaves_its_key_unused() -> None:
    payments = PaymentServer().start()
    try:
        host, port = payments.server.server_address[:2]
        with socket.create_connection((str(host), int(port))) as payer:
            payer.sendall(
                b"POST /charge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 14\r\nIdempotency-Key: at-1\r\n\r\n"
            )
            payer.shutdown(socket.SHUT_WR)  # killed: its body never comes
            answer = payer.recv(4096)
        assert answer.startswith(b"HTTP/1.0 400"), answer
        assert payments.charges == []
        post_charge(payments.url, 17, "at-1")  # the retry, with the same key
        assert [charge["amount"] for charge in payments.charges] == [17]
    finally:
        payments.stop()
