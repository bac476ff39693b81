"""MCP tool calls across processes (issue 35, item 1): a tool call over the ``mcp`` SDK carries
the trace and agenttrace's identity in ``params._meta``, and the server's work nests under the
client's ``execute_tool`` span, in one trace, with one tool span for the call.

The server is real (``tests/mcp_tool_server.py``, the SDK's ``MCPServer``) in a process of its
own, over stdio and over streamable HTTP on 127.0.0.1; both processes export their spans to one
file the test reads.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import wrapt
from opentelemetry import baggage, trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
from agenttrace.model import journal as j
from agenttrace.model.reentry import Reentry, check_policy
from agenttrace.tracing import travel
from tests import travel_child
from tests.conftest import Traced
from tests.helpers import ROOT, child_env
from tests.listening import listening

pytestmark = pytest.mark.usefixtures("mcp_sdk_spans_off")

mcp = pytest.importorskip("mcp")

SERVER = "tests.mcp_tool_server"


class Client:
    """The client side: an agent whose ``research`` tool calls the MCP server's ``research``."""

    def __init__(self, traced: Traced, tmp_path: Path) -> None:
        self.spans = str(tmp_path / "spans.jsonl")
        traced.provider.add_span_processor(
            SimpleSpanProcessor(travel_child.FileSpanExporter(self.spans))
        )
        self.server_sessions = tmp_path / "server-sessions"
        self.server_sessions.mkdir()
        self.session_id = agenttrace.current_session().session_id
        self.tool_span: Any = None
        self.txn_id = ""
        self.traced = traced

    def run(self, call: Any, *, in_tool: bool = True) -> Any:
        """The boss agent calls ``call(21)``: in its ``research`` tool (a framework's tool
        that calls the MCP tool), or (``in_tool`` false) in its own body, outside any op."""
        client = self

        @agenttrace.tool(name="research")
        def research(x: int) -> Any:
            client.tool_span = trace.get_current_span().get_span_context()
            return asyncio.run(call(x))

        @agenttrace.agent("boss")
        def boss() -> Any:
            attributes = dict(trace.get_current_span().attributes)  # type: ignore[attr-defined]
            client.txn_id = str(attributes["agenttrace.txn.id"])
            return research(21) if in_tool else asyncio.run(call(21))

        result = boss()
        if not in_tool:
            self.tool_span = self.traced.by_name("execute_tool research")[-1].get_span_context()
        return result

    def check(self, transport: str) -> None:
        """One trace; the server's work under the client's tool span; the helper run joined
        the client's session, op and writer; one tool span of agenttrace's for the call."""
        # Every span of both processes, the server's of notifications/initialized included.
        spans = travel_child.read_spans(self.spans)
        assert len({span["trace_id"] for span in spans}) == 1
        by_id = {span["span_id"]: span for span in spans}
        tool_id = format(self.tool_span.span_id, "016x")
        (root,) = [span for span in spans if span["name"] == "invoke_agent helper"]
        assert root["pid"] != os.getpid()
        ancestors = []
        parent = root["parent_span_id"]
        while parent in by_id and parent != tool_id:
            ancestors.append(by_id[parent])
            parent = by_id[parent]["parent_span_id"]
        assert parent == tool_id  # the helper run is under the client's tool span
        # What lies between is the SDK's own span of the request, in the server, no tool op.
        assert [span["name"] for span in ancestors] == ["tools/call research"]
        assert ancestors[0]["kind"] == "SERVER" and ancestors[0]["pid"] == root["pid"]
        # One execute_tool span for the call on the client: agenttrace's, with the MCP
        # attributes; agenttrace makes none of its own on the server.
        tool_spans = [
            span
            for span in spans
            if span["attributes"].get("gen_ai.tool.name") == "research" and span["kind"] != "SERVER"
        ]
        assert [span["span_id"] for span in tool_spans] == [tool_id]
        attributes = tool_spans[0]["attributes"]
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["network.transport"] == transport
        assert attributes["agenttrace.tool.mcp_server"] == "research-server"
        assert not [
            span
            for span in spans
            if span["pid"] == root["pid"]
            and span["attributes"].get("agenttrace.kind") == "tool"
            and span["name"] == "execute_tool research"
        ]
        joined = root["attributes"]
        assert joined["agenttrace.ingress.joined.session_id"] == self.session_id
        assert joined["agenttrace.ingress.joined.parent_txn_id"] == self.txn_id
        assert joined["agenttrace.ingress.joined.parent_path"] == "1.1"
        assert joined["agenttrace.ingress.joined.parent_writer_id"] == travel.writer_id()
        runs = [
            run
            for path in sorted(self.server_sessions.glob("*.json.gz"))
            for run in json.loads(gzip.decompress(path.read_bytes()))["runs"]
        ]
        (helper,) = [run for run in runs if run["agentName"] == "helper"]
        assert helper["attributes"]["ingress"]["joined"]["parent_path"] == "1.1"


def _server_command(client: Client, *transport: str) -> list[str]:
    """The server's command line: ``python -m tests.mcp_tool_server SPANS SESSIONS ...``."""
    return [sys.executable, "-m", SERVER, client.spans, str(client.server_sessions), *transport]


def _text(result: Any) -> str:
    assert not result.is_error, result
    return str(result.content[0].text)


def _over_stdio(client: Client, *, listed: bool = False) -> Any:
    """A call of the server's ``research`` tool over stdio, the server started for it
    (``listed``: its tools listed first, as an agent framework does)."""
    from mcp.client import stdio

    async def call(x: int) -> str:
        parameters = stdio.StdioServerParameters(
            command=sys.executable,
            args=_server_command(client, "stdio")[1:],
            env=child_env(PYTHONPATH=str(ROOT)),
            cwd=ROOT,
        )
        async with (
            stdio.stdio_client(parameters) as (read, write),
            mcp.ClientSession(read, write) as session,
        ):
            await session.initialize()
            if listed:
                await session.list_tools()
            return _text(await session.call_tool("research", {"x": x}))

    return call


def test_a_tool_call_over_stdio_nests_the_servers_work_under_the_clients_tool(
    traced: Traced, tmp_path: Path
) -> None:
    client = Client(traced, tmp_path)
    assert client.run(_over_stdio(client)) == "42"
    client.check("pipe")


@pytest.mark.init(capture_content=True)
def test_a_call_in_an_agent_run_outside_any_op_is_its_own_tool_op(
    traced: Traced, tmp_path: Path
) -> None:
    client = Client(traced, tmp_path)
    assert client.run(_over_stdio(client), in_tool=False) == "42"
    client.check("pipe")
    tool = traced.one("execute_tool research")
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"x": 21}


async def _with_a_session(url: str, x: int) -> str:
    """The call through the transport and a ``ClientSession``, as a framework makes it."""
    from mcp.client import streamable_http

    async with (
        streamable_http.streamable_http_client(url) as (read, write),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        return _text(await session.call_tool("research", {"x": x}))


async def _with_the_client(url: str, x: int) -> str:
    """The call through the SDK's high-level ``mcp.Client(url)``."""
    async with mcp.Client(url) as client:
        return _text(await client.call_tool("research", {"x": x}))


@pytest.mark.parametrize("how", [_with_a_session, _with_the_client], ids=["session", "client"])
def test_a_tool_call_over_streamable_http_nests_the_servers_work_under_the_clients_tool(
    traced: Traced, tmp_path: Path, how: Any
) -> None:
    client = Client(traced, tmp_path)
    with listening(lambda port: _server_command(client, "http", str(port))) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        assert client.run(lambda x: how(url, x)) == "42"
    client.check("tcp")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_servers_span_of_the_initialized_notification_is_under_the_clients_op(
    traced: Traced, tmp_path: Path, transport: str
) -> None:
    """The SDK sends no trace context with a notification; agenttrace's does: the server's
    ``notifications/initialized`` span (exported by the server's own provider) is a child of
    the client's tool span, in its trace, not a root."""
    client = Client(traced, tmp_path)
    if transport == "stdio":
        assert client.run(_over_stdio(client)) == "42"
    else:
        with listening(lambda port: _server_command(client, "http", str(port))) as port:
            url = f"http://127.0.0.1:{port}/mcp"
            assert client.run(lambda x: _with_a_session(url, x)) == "42"
    (initialized,) = [
        span
        for span in travel_child.read_spans(client.spans)
        if span["name"] == "notifications/initialized"
    ]
    assert initialized["pid"] != os.getpid() and initialized["kind"] == "SERVER"
    assert initialized["trace_id"] == format(client.tool_span.trace_id, "032x")
    assert initialized["parent_span_id"] == format(client.tool_span.span_id, "016x")


async def _sent(notification: Any) -> dict[str, Any]:
    """What ``ClientSession.send_notification(notification)`` writes, as JSON: a session on
    memory streams (no transport agenttrace saw opened, so no baggage)."""
    import anyio

    to_server, written = anyio.create_memory_object_stream[Any](1)
    from_server, read = anyio.create_memory_object_stream[Any](1)
    async with to_server, written, from_server, read:
        await mcp.ClientSession(read, to_server).send_notification(notification)
        message = written.receive_nowait().message
    return dict(message.model_dump(by_alias=True, mode="json", exclude_none=True))


def test_a_notification_with_no_span_current_carries_no_context(traced: Traced) -> None:
    sent = asyncio.run(_sent(mcp.types.InitializedNotification()))
    assert sent == {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_a_notification_in_a_span_carries_its_context_and_keeps_its_params(
    traced: Traced,
) -> None:
    types = mcp.types

    @agenttrace.tool
    def report() -> tuple[Any, dict[str, Any], dict[str, Any]]:
        progress = types.ProgressNotification(
            params=types.ProgressNotificationParams(
                progress_token="t", progress=0.5, _meta={"mine": "kept"}
            )
        )
        return (
            trace.get_current_span().get_span_context(),
            asyncio.run(_sent(types.InitializedNotification())),
            asyncio.run(_sent(progress)),
        )

    @agenttrace.agent("boss")
    def boss() -> Any:
        return report()

    span, initialized, progress = boss()
    traceparent = f"00-{span.trace_id:032x}-{span.span_id:016x}-{span.trace_flags:02x}"
    # The current span's context, through the global propagator; no baggage: agenttrace saw no
    # transport of this session opened (the allow-list rule of a tool call's).
    assert initialized["params"] == {"_meta": {"traceparent": traceparent}}
    assert progress["params"] == {
        "progressToken": "t",
        "progress": 0.5,
        "_meta": {"traceparent": traceparent, "mine": "kept"},
    }


def test_a_notification_keeps_the_trace_context_its_caller_set(traced: Traced) -> None:
    theirs = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    cancelled = mcp.types.CancelledNotification(
        params=mcp.types.CancelledNotificationParams(request_id=7, _meta={"traceparent": theirs})
    )

    @agenttrace.agent("boss")
    def boss() -> dict[str, Any]:
        return asyncio.run(_sent(cancelled))

    assert boss()["params"] == {"requestId": 7, "_meta": {"traceparent": theirs}}


async def _outgoing_to(url: str) -> Any:
    """The context a tool call to the MCP server at ``url`` would run in (the SDK's transport
    opened, no request sent: nothing listens there)."""
    from mcp.client import streamable_http

    from agenttrace.instrumentation.mcp import client

    async with streamable_http.streamable_http_client(url) as (read, write):
        return client._outgoing(mcp.ClientSession(read, write))


def _baggage_in_a_tool(url: str) -> dict[str, object]:
    @agenttrace.tool
    def research() -> dict[str, object]:
        context = asyncio.run(_outgoing_to(url))
        assert trace.get_current_span(context).get_span_context().is_valid
        return dict(baggage.get_all(context))

    @agenttrace.agent("boss")
    def boss() -> dict[str, object]:
        return research()

    return boss()


def test_an_mcp_server_on_a_host_not_allowed_gets_no_baggage(traced: Traced) -> None:
    assert _baggage_in_a_tool("http://mcp.example.invalid/mcp") == {}
    carried = _baggage_in_a_tool("http://127.0.0.1:9/mcp")
    assert carried["agenttrace.writer.id"] == travel.writer_id()


@pytest.mark.init(baggage_hosts=["mcp.example.invalid"])
def test_an_mcp_server_on_an_allowed_host_gets_the_baggage(traced: Traced) -> None:
    carried = _baggage_in_a_tool("http://mcp.example.invalid/mcp")
    assert carried["agenttrace.session.id"] == agenttrace.current_session().session_id


def test_shutdown_puts_the_sdk_back(traced: Traced) -> None:
    from mcp.client import stdio
    from mcp.server.runner import ServerRunner

    assert isinstance(vars(mcp.ClientSession)["call_tool"], wrapt.FunctionWrapper)
    assert isinstance(vars(mcp.ClientSession)["send_notification"], wrapt.FunctionWrapper)
    assert mcp.stdio_client is stdio.stdio_client
    assert isinstance(stdio.stdio_client, wrapt.FunctionWrapper)
    traced.handle.shutdown()
    assert not isinstance(vars(mcp.ClientSession)["call_tool"], wrapt.FunctionWrapper)
    assert not isinstance(vars(mcp.ClientSession)["send_notification"], wrapt.FunctionWrapper)
    assert not isinstance(vars(ServerRunner)["_compose_server_middleware"], wrapt.FunctionWrapper)
    assert not isinstance(stdio.stdio_client, wrapt.FunctionWrapper)
    assert mcp.stdio_client is stdio.stdio_client


def _rearm(tmp_path: Path) -> None:
    """Arm the current session to re-enter its last run, as a resume of a killed run would
    (tests/test_llm_steps.py's ``rearm``, without the litellm that module imports)."""
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    steps = [line for line in lines if line["event_type"] in ("step", "step_decision")]
    (origin,) = {line["run"] for line in steps}
    session = agenttrace.current_session()
    session.reentry = Reentry(origin, 2, j.Journal(steps), check_policy(None))


def test_a_re_entered_run_answers_the_call_from_the_journal(traced: Traced, tmp_path: Path) -> None:
    """A bare call is journaled as its tool op; a re-entered run gets its ``CallToolResult``
    back rebuilt from the journal, and the server's tool does not run again."""
    client = Client(traced, tmp_path)
    assert client.run(_over_stdio(client), in_tool=False) == "42"
    traced.handle.force_flush()
    _rearm(tmp_path)  # as a resume of this run, killed, would
    assert client.run(_over_stdio(client), in_tool=False) == "42"
    helpers = [
        span
        for span in travel_child.read_spans(client.spans)
        if span["name"] == "invoke_agent helper"
    ]
    assert len(helpers) == 1


def _journaled_effects(tmp_path: Path) -> list[str]:
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    return [
        line["effect"]
        for line in lines
        if line["event_type"] == "step" and line.get("kind") == "tool" and "effect" in line
    ]


@pytest.mark.init(trusted_mcp_servers=["research-server"])
def test_a_trusted_servers_annotations_give_the_effect_class(
    traced: Traced, tmp_path: Path
) -> None:
    client = Client(traced, tmp_path)
    assert client.run(_over_stdio(client, listed=True), in_tool=False) == "42"
    traced.handle.force_flush()
    assert _journaled_effects(tmp_path) == ["read"]


def test_an_untrusted_servers_annotations_are_not_believed(traced: Traced, tmp_path: Path) -> None:
    client = Client(traced, tmp_path)
    assert client.run(_over_stdio(client, listed=True), in_tool=False) == "42"
    traced.handle.force_flush()
    assert _journaled_effects(tmp_path) == ["effect"]


def test_malformed_baggage_in_meta_joins_the_trace_without_agenttraces_identity(
    traced: Traced, tmp_path: Path
) -> None:
    """A ``_meta`` whose agenttrace baggage cannot be ours (sent here by hand, outside any
    span, where nothing of agenttrace's is added): the server's run still joins the trace,
    with one warning, and no identity from it."""
    client = Client(traced, tmp_path)
    errors = tmp_path / "server-stderr.txt"
    parent = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"
    meta = {"traceparent": parent, "baggage": "agenttrace.session.id=..%2F..%2Fetc"}
    from mcp.client import stdio

    async def call() -> str:
        parameters = stdio.StdioServerParameters(
            command=sys.executable,
            args=_server_command(client, "stdio")[1:],
            env=child_env(PYTHONPATH=str(ROOT)),
            cwd=ROOT,
        )
        with errors.open("w") as errlog:
            async with (
                stdio.stdio_client(parameters, errlog=errlog) as (read, write),
                mcp.ClientSession(read, write) as session,
            ):
                await session.initialize()
                return _text(await session.call_tool("research", {"x": 1}, meta=meta))

    assert asyncio.run(call()) == "2"
    (root,) = [
        span
        for span in travel_child.read_spans(client.spans)
        if span["name"] == "invoke_agent helper"
    ]
    assert root["trace_id"] == "c" * 32
    assert "agenttrace.ingress.joined.session_id" not in root["attributes"]
    assert root["attributes"]["agenttrace.ingress.source"] == "joined"
    logged = " ".join(errors.read_text().split())  # the server's logging wraps its lines
    assert "agenttrace: an MCP tool call's _meta:" in logged and "not an id; ignored" in logged


def test_a_stdio_server_recording_where_the_client_does_is_a_writer_of_its_session(
    traced: Traced, tmp_path: Path
) -> None:
    """The stdio transport names the client's sessions directory in the server's environment
    (``AGENTTRACE_JOIN_SESSIONS_DIR``, never in ``_meta``): a server recording there writes a
    segment of the client's session, read whole with its run under the tool call."""
    from agenttrace.formats.session.fullest import load_pair
    from agenttrace.formats.session.optree import hosted_sessions, session_ops

    client = Client(traced, tmp_path)
    client.server_sessions = tmp_path / "sessions"  # the client's own directory
    assert client.run(_over_stdio(client)) == "42"
    traced.handle.force_flush()
    assert sorted(p.name for p in client.server_sessions.glob("*.json.gz")) == [
        f"{client.session_id}.json.gz"
    ]
    [segment] = (client.server_sessions / f"{client.session_id}.w").glob("*.json.gz")
    loaded, _ = load_pair(client.server_sessions / f"{client.session_id}.json.gz")
    [root] = loaded.runs
    [research] = session_ops(root)
    [helper] = hosted_sessions(research)
    assert (helper["agentName"], helper["path"]) == ("helper", "1.1:1")
    assert [op["path"] for op in session_ops(helper)] == ["1.1.1.1"]
    assert helper["attributes"]["ingress"]["joined"]["writer_id"] == segment.name.removesuffix(
        ".json.gz"
    )


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A directory store the client ships to (``AGENTTRACE_SESSIONS_URL``, set before
    :func:`traced_to_store` initialises agenttrace)."""
    from agenttrace.formats.stores.local import LocalStore

    store = LocalStore(tmp_path / "store")
    monkeypatch.setenv("AGENTTRACE_SESSIONS_URL", store.url)
    return store


@pytest.fixture
def traced_to_store(store: Any, traced: Traced) -> Traced:
    """The suite's ``traced``, its ``init`` shipping to :func:`store`."""
    return traced


def test_a_server_shipping_to_the_clients_store_is_a_writer_of_its_session(
    traced_to_store: Traced, store: Any, tmp_path: Path
) -> None:
    """Recording into a directory of its own, the server joins the client's session by the
    store both ship to (the baggage names it): the store's copy has its run under the call."""
    from agenttrace.formats.session.fullest import load_pair
    from agenttrace.formats.session.optree import hosted_sessions, session_ops
    from agenttrace.formats.stores.materialize import materialize

    client = Client(traced_to_store, tmp_path)
    assert client.run(_over_stdio(client)) == "42"
    traced_to_store.handle.force_flush()
    assert list(client.server_sessions.glob("*.json.gz")) == []  # no session of its own
    assert len(list((client.server_sessions / f"{client.session_id}.w").glob("*.json.gz"))) == 1
    rebuilt = tmp_path / "rebuilt"
    materialize(store, client.session_id, rebuilt)
    loaded, _ = load_pair(rebuilt / f"{client.session_id}.json.gz")
    [root] = loaded.runs
    [research] = session_ops(root)
    [helper] = hosted_sessions(research)
    assert (helper["agentName"], helper["path"]) == ("helper", "1.1:1")
