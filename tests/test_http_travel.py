"""HTTP across processes (issue 35, item 1): ``agenttrace.http_headers(url)`` carries the trace
and agenttrace's identity in a request's headers (baggage only to allowed hosts), and
``agenttrace.asgi.Middleware`` joins the request to the client's op, so an agent run the handler
starts nests under the client's tool span, in one trace.

The server is real (``tests/asgi_tool_server.py``: a plain ASGI app behind the middleware,
served by uvicorn on 127.0.0.1) in a process of its own; both processes export their spans to
one file the test reads.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from opentelemetry import baggage, trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
import agenttrace.asgi
from agenttrace.tracing import travel
from tests import travel_child
from tests.conftest import Traced
from tests.listening import listening

pytest.importorskip("uvicorn")


def _get_with_httpx(url: str) -> str:
    return httpx.get(url, headers=agenttrace.http_headers(url), timeout=480).text


def _get_with_requests(url: str) -> str:
    return requests.get(url, headers=agenttrace.http_headers(url), timeout=480).text


@pytest.mark.parametrize("get", [_get_with_httpx, _get_with_requests], ids=["httpx", "requests"])
def test_a_request_joins_the_server_to_the_clients_tool(
    traced: Traced, tmp_path: Path, get: Any
) -> None:
    spans = str(tmp_path / "spans.jsonl")
    traced.provider.add_span_processor(SimpleSpanProcessor(travel_child.FileSpanExporter(spans)))
    sessions = tmp_path / "server-sessions"
    sessions.mkdir()
    seen: dict[str, Any] = {}

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "tests.asgi_tool_server", spans, str(sessions), str(port)]

    with listening(command) as port:

        @agenttrace.tool(name="research")
        def research(x: int) -> str:
            seen["tool"] = trace.get_current_span().get_span_context()
            return str(get(f"http://127.0.0.1:{port}/research?x={x}"))

        @agenttrace.agent("boss")
        def boss() -> str:
            attributes = dict(trace.get_current_span().attributes)  # type: ignore[attr-defined]
            seen["txn"] = attributes["agenttrace.txn.id"]
            return research(21)

        assert boss() == "42"
    found = travel_child.read_spans(spans)
    assert len({span["trace_id"] for span in found}) == 1
    (root,) = [span for span in found if span["name"] == "invoke_agent helper"]
    assert root["pid"] != os.getpid()
    assert root["parent_span_id"] == format(seen["tool"].span_id, "016x")
    joined = root["attributes"]
    assert joined["agenttrace.ingress.joined.session_id"] == agenttrace.current_session().session_id
    assert joined["agenttrace.ingress.joined.parent_txn_id"] == seen["txn"]
    assert joined["agenttrace.ingress.joined.parent_path"] == "1.1"
    assert joined["agenttrace.ingress.joined.parent_writer_id"] == travel.writer_id()
    runs = [
        run
        for path in sorted(sessions.glob("*.json.gz"))
        for run in json.loads(gzip.decompress(path.read_bytes()))["runs"]
    ]
    (helper,) = [run for run in runs if run["agentName"] == "helper"]
    assert helper["span"]["parentSpanId"] == root["parent_span_id"]
    assert helper["attributes"]["ingress"]["joined"]["parent_path"] == "1.1"


def _headers_in_a_tool(url: str, given: dict[str, str] | None = None) -> dict[str, str]:
    @agenttrace.tool
    def call() -> dict[str, str]:
        return agenttrace.http_headers(url, given)

    @agenttrace.agent("boss")
    def boss() -> dict[str, str]:
        return call()

    return boss()


def test_baggage_goes_only_to_an_allowed_host(traced: Traced) -> None:
    away = _headers_in_a_tool("https://api.example.com/v1", {"X-Key": "k"})
    assert set(away) == {"X-Key", "traceparent"}
    here = _headers_in_a_tool("http://localhost:8080/")
    assert "agenttrace.writer.id=" in here["baggage"]


@pytest.mark.init(baggage_hosts=["api.example.com"])
def test_an_allowed_host_gets_the_baggage(traced: Traced) -> None:
    headers = _headers_in_a_tool("https://API.example.com/v1")
    assert "agenttrace.session.id=" in headers["baggage"]


def test_a_stale_trace_context_in_the_given_headers_is_replaced(traced: Traced) -> None:
    stale = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    headers = _headers_in_a_tool("http://127.0.0.1/", {"TraceParent": stale})
    assert list(headers).count("traceparent") == 1 and "TraceParent" not in headers
    assert headers["traceparent"] != stale


def test_outside_any_span_the_headers_come_back_as_given(traced: Traced) -> None:
    given = {"A": "b", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    assert agenttrace.http_headers("http://127.0.0.1/", given) == given


async def _served(scope: dict[str, Any]) -> dict[str, Any]:
    """What an app behind the middleware sees: the current span and the joined parent."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["span"] = trace.get_current_span().get_span_context()
        seen["joined"] = travel.joined_parent()
        seen["baggage"] = dict(baggage.get_all())

    async def nothing() -> dict[str, Any]:
        return {}

    async def ignore(message: Any) -> None:
        pass

    await agenttrace.asgi.Middleware(app)(scope, nothing, ignore)
    return seen


def test_the_middleware_ignores_a_malformed_traceparent_and_lifespan(traced: Traced) -> None:
    bad = asyncio.run(_served({"type": "http", "headers": [(b"traceparent", b"00-zz-zz-01")]}))
    assert not bad["span"].is_valid and bad["joined"] is None
    life = asyncio.run(_served({"type": "lifespan"}))
    assert life["joined"] is None


def test_the_middleware_joins_without_agenttrace_baggage(traced: Traced) -> None:
    parent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    seen = asyncio.run(_served({"type": "http", "headers": [(b"traceparent", parent.encode())]}))
    assert format(seen["span"].trace_id, "032x") == "a" * 32
    assert seen["joined"].session_id is None
    assert travel.joined_parent() is None  # only for the request
