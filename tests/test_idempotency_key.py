"""``agenttrace.idempotency_key()`` (issue 22, item 4): inside a tool call, a key of that one
logical call (session, run, step label, tool), the same however often it is computed, sent to an
API that honours it, and never recorded by agenttrace."""

from __future__ import annotations

import gzip
import json
import urllib.request
from pathlib import Path
from typing import Any

import litellm

import agenttrace
from agenttrace import semconv as sc
from agenttrace.model.journal import idempotency_key as key_of

from .conftest import Traced, attrs
from .payment_server import PaymentServer


def test_a_tool_call_has_a_key_of_its_own_and_nothing_records_it(
    traced: Traced, tmp_path: Path
) -> None:
    payments = PaymentServer().start()
    seen: list[str | None] = []

    @agenttrace.tool
    def charge(amount: int) -> str:
        key = agenttrace.idempotency_key()
        seen.append(key)
        request = urllib.request.Request(
            payments.url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        request.add_header("Idempotency-Key", str(key))
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged: dict[str, Any] = json.loads(answer.read())
        if len(seen) == 1:  # the same call asked twice (a retry inside it): charged once
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert json.loads(answer.read())["replayed"] is True
        return str(charged["charge"])

    @agenttrace.agent("Shop")
    def shop() -> None:
        charge(5)
        charge(7)
        litellm.completion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": str(agenttrace.idempotency_key())}],
            mock_response="ok",
        )

    try:
        shop()
    finally:
        payments.stop()
    traced.handle.force_flush()
    first, second = seen
    assert first is not None and first.startswith("at-") and first != second
    assert [charge["key"] for charge in payments.charges] == [first, second]
    # The key is the call's: session, run, label and tool, as the journal computes it.
    spans = [attrs(s) for s in traced.by_name("execute_tool charge")]
    run = attrs(traced.one("invoke_agent Shop"))
    session_id, origin = run[sc.SESSION_ID], run[sc.TXN_ORIGIN]
    assert [key_of(session_id, origin, s[sc.PATH], "charge") for s in spans] == seen
    # Outside a tool call there is none (an LLM call is no tool call).
    assert agenttrace.idempotency_key() is None
    # agenttrace recorded it nowhere: spans, stream, session file, ledger.
    recorded = str([(s.name, dict(s.attributes or {}), s.events) for s in traced.spans()])
    for path in (tmp_path / "sessions").iterdir():
        data = path.read_bytes()
        recorded += (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    recorded += (tmp_path / "accounting.jsonl").read_text()
    assert first not in recorded and second not in recorded
