"""``mask_sensitive``: a canary IP address and a canary provider request id through every output.

A real run on the local LLM server (tests/llm_server.py, over litellm's HTTP path): the user
names an IPv4 and an IPv6 address, the run's ingress holds the caller's IP, the model asks a
tool to look the IPv4 one up (the tool logs it) and to probe the IPv6 one (the tool fails with
an error naming the address and the provider's ``x-request-id``), and every response's ``id``
is the canary ``chatcmpl-...``. Every output is then read whole (test_output_boundaries'
``outputs``: spans, log records, console, ledger, the session file's opTree, each export and
command, the serve API) and so are the event stream and the whole session file: with masking
on no canary is anywhere; with it off they are, so the check can fail.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

import agenttrace
from agenttrace._internal.masking import ID_MARK, IP_MARK, mask_text
from agenttrace._internal.redact import mask_json_text, redact, scrub_json_text
from examples.cafe import Agent

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_leak_paths import Run
from .test_output_boundaries import outputs

IPV4 = "203.0.113.77"
IPV6 = "2001:db8:85a3::8a2e:370:7334"
CLIENT_IP = "198.51.100.23"
RESPONSE_ID = "chatcmpl-CanaryResp9Xq2Lm7Tz4"
REQUEST_ID = "req_011CanaryReqQ7hY3kP2wZ9"
CANARIES = (IPV4, IPV6, CLIENT_IP, RESPONSE_ID, REQUEST_ID)
MODEL = "openai/gpt-4o-mini"


class Prober(Agent):
    """The cafe's agent with two network tools, started by an API call from ``CLIENT_IP``."""

    @agenttrace.agent(ingress={"source": "api", "api": {"route": "/ask", "client_ip": CLIENT_IP}})
    async def ask(self) -> str | None:
        return await Agent.response.__wrapped__(self)  # type: ignore[attr-defined]

    @agenttrace.tool
    async def lookup(self, host: str) -> str:
        agenttrace.log("VRB", f"looking up {host}", host=host)
        return f"{host} answers"

    @agenttrace.tool
    async def probe(self, host: str) -> str:
        raise ConnectionError(f"probe of {host} refused (x-request-id: {REQUEST_ID})")

    async def run_tool(self, call_id: str, name: str, arguments: str | None) -> None:
        try:
            await super().run_tool(call_id, name, arguments)
        except ConnectionError as exc:  # the model is told, as agents do
            self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": str(exc)})


def _call(call_id: str, name: str, host: str) -> dict[str, Any]:
    arguments = json.dumps({"host": host})
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture
async def run(
    request: pytest.FixtureRequest,
    llm: LLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Run:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    traced: Traced = request.getfixturevalue("traced")
    llm.reset(
        Reply(content="", tool_calls=[_call("c1", "lookup", IPV4)], response_id=RESPONSE_ID),
        Reply(content="", tool_calls=[_call("c2", "probe", IPV6)], response_id=RESPONSE_ID),
        Reply(content=f"{IPV4} answers; {IPV6} refused", response_id=RESPONSE_ID),
    )
    agenttrace.new_session()
    root = Prober(model=MODEL, options={"api_base": llm.api_base, "api_key": "offline-test-key"})
    root.harken(f"Is {IPV4} up? And {IPV6}?")
    assert await root.ask() == f"{IPV4} answers; {IPV6} refused"
    traced.handle.force_flush()
    return Run(traced, tmp_path, llm.api_base)


@pytest.fixture
def logs() -> InMemoryLogRecordExporter:
    from .helpers import log_records

    exporter: InMemoryLogRecordExporter = log_records()
    return exporter


def every_output(run: Run, logs: InMemoryLogRecordExporter) -> dict[str, str]:
    """Each output of the run, read whole, the saved state (stream, session file) too."""
    seen = dict(outputs(run, logs))
    seen["the event stream"] = run.stream.read_text()
    seen["the session file"] = gzip.decompress(run.snapshot.read_bytes()).decode()
    return seen


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True, mask_sensitive=True)
async def test_no_output_carries_an_ip_or_a_request_id(
    run: Run, logs: InMemoryLogRecordExporter
) -> None:
    seen = every_output(run, logs)
    for where, text in seen.items():
        for canary in CANARIES:
            assert canary not in text, f"{canary} leaked into {where}"
    # Masked, not dropped: the outputs that carried them show the marks.
    for where in ("spans", "the console", "the billing ledger", "the event stream"):
        assert IP_MARK in seen[where], where
    assert f"chatcmpl-{ID_MARK}" in seen["the event stream"]
    assert f"x-request-id: req_{ID_MARK}" in seen["the billing ledger"]
    # agenttrace's own ids are no provider's: the stream still reads by them.
    assert '"message_id":"msg_001"' in seen["the event stream"].replace(" ", "")
    spans = run.traced.spans()
    llm_spans = [s for s in spans if (s.attributes or {}).get("gen_ai.response.id")]
    assert llm_spans and all(s.attributes["gen_ai.response.id"] == ID_MARK for s in llm_spans)  # type: ignore[index]


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True)
async def test_without_masking_the_canaries_are_there(
    run: Run, logs: InMemoryLogRecordExporter
) -> None:
    """The same run with masking off: each canary reaches the outputs the test above checks,
    so that test can fail."""
    seen = every_output(run, logs)
    for where in ("spans", "the console", "the billing ledger"):
        assert IPV6 in seen[where] and REQUEST_ID in seen[where], where
    for where in ("spans", "the event stream", "the session file"):
        for canary in CANARIES:
            if canary != CLIENT_IP or where != "the event stream":  # ingress: not an event
                assert canary in seen[where], f"{canary} not in {where}"
    assert IPV4 in seen["GET /api/runs/" + run.snapshot.name.removesuffix(".json.gz") + "/tree"]


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("from 203.0.113.7:8080 and 10.0.0.1.", "from [IP]:8080 and [IP]."),
        ("http://[2001:db8::1]:80/ fe80::1%eth0", "http://[[IP]]:80/ [IP]%eth0"),
        ("id chatcmpl-9xYzAbCdEfGhIjKlMn", "id chatcmpl-[ID]"),
        ("msg_01XFDUDYJgAACzvnptvVoYEL req_011CV5ABCDEFghijklmn", "msg_[ID] req_[ID]"),
        ("gen-1712345678-AbCdEfGhIjKlMnOpQr", "gen-1712345678-[ID]"),
    ],
)
def test_addresses_and_provider_ids_are_masked(text: str, masked: str) -> None:
    assert mask_text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "msg_001 msg_3f9a0c1b-4242_001 msg_test chatcmpl-test",  # agenttrace's ids, short ones
        "127.0.0.1 ::1 0.0.0.0 localhost",  # loopback and unspecified name no host
        "v1.2.3.4, version 1.2.3.4, pkg==1.2.3.4, 1.2.3.4.5",  # versions
        "12:30:45 00:1a:2b:3c:4d:5e std::map x[1::2]",  # times, MACs, code
        "4bf92f3577b34da6a3ce929d0e0e4736 00f067aa0ba902b7",  # trace and span ids
    ],
)
def test_what_is_no_address_or_provider_id_is_kept(text: str) -> None:
    assert mask_text(text) == text


def test_request_id_keys_are_masked_whatever_their_value() -> None:
    document = {"x-request-id": "3e2f-opaque", "request_id": "abc", "id": "keep-me"}
    assert json.loads(mask_json_text(json.dumps(document))) == {
        "x-request-id": ID_MARK,
        "request_id": ID_MARK,
        "id": "keep-me",
    }


def test_masking_is_off_unless_set() -> None:
    text = f'{{"host": "{IPV4}", "x-request-id": "{REQUEST_ID}"}}'
    assert scrub_json_text(text) == text
    assert redact({"request-id": "opaque"}) == {"request-id": "opaque"}


def test_the_variable_sets_it() -> None:
    from agenttrace._internal.config import Settings

    assert Settings.resolve(env={"AGENTTRACE_MASK_SENSITIVE": "true"}).mask_sensitive
    assert not Settings.resolve(env={}).mask_sensitive
    assert not Settings.resolve(
        env={"AGENTTRACE_MASK_SENSITIVE": "true"}, mask_sensitive=False
    ).mask_sensitive
