"""An agent framework's MCP tool across processes: an OpenAI Agents SDK agent with an
``MCPServerStdio`` (the framework's own MCP client, on the ``mcp`` SDK) calls the server's
``research`` tool; the framework's function tool span is agenttrace's one ``execute_tool`` op for
the call, and the server's agent run nests under it (tests/mcp_tool_server.py, a real process).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import openai
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from agenttrace.instrumentation.openai_agents import tracing_processor
from agenttrace.tracing import travel
from tests import travel_child
from tests.conftest import Traced
from tests.helpers import ROOT, child_env
from tests.llm_server import LLMServer, Reply

agents = pytest.importorskip("agents")
pytest.importorskip("mcp")

from agents.mcp import MCPServerStdio  # noqa: E402

pytestmark = pytest.mark.usefixtures("mcp_sdk_spans_off")


@pytest.mark.init(capture_content=True)
def test_an_agents_mcp_tool_is_one_tool_op_with_the_servers_run_under_it(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    agents.set_trace_processors([tracing_processor()])  # no export to OpenAI's backend
    spans = str(tmp_path / "spans.jsonl")
    traced.provider.add_span_processor(SimpleSpanProcessor(travel_child.FileSpanExporter(spans)))
    sessions = tmp_path / "server-sessions"
    sessions.mkdir()
    arguments = json.dumps({"x": 21})
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "research", "arguments": arguments},
    }
    llm.reset(Reply(content="", tool_calls=[call]), Reply(content="It is 42."))
    model = agents.OpenAIChatCompletionsModel(
        model="gpt-4o-mini",
        openai_client=openai.AsyncOpenAI(base_url=llm.api_base, api_key="sk-test", max_retries=0),
    )

    async def run() -> str:
        async with MCPServerStdio(
            {
                "command": sys.executable,
                "args": ["-m", "tests.mcp_tool_server", spans, str(sessions), "stdio"],
                "env": child_env(PYTHONPATH=str(ROOT)),
                "cwd": str(ROOT),
            },
            name="research-server",
        ) as server:
            agent = agents.Agent(name="boss", model=model, mcp_servers=[server])
            return str((await agents.Runner.run(agent, "Research 21.")).final_output)

    assert asyncio.run(run()) == "It is 42."
    tools = [span for span in traced.spans() if span.name.startswith("execute_tool")]
    assert [span.name for span in tools] == ["execute_tool research"]
    tool = dict(tools[0].attributes or {})
    assert tool["gen_ai.tool.call.id"] == "call_1"
    assert tool["mcp.method.name"] == "tools/call" and tool["network.transport"] == "pipe"
    found = travel_child.read_spans(spans)
    (root,) = [span for span in found if span["name"] == "invoke_agent helper"]
    context = tools[0].get_span_context()
    assert root["trace_id"] == format(context.trace_id, "032x")
    by_id = {span["span_id"]: span for span in found}
    between = by_id[str(root["parent_span_id"])]  # the SDK's server span of the request
    assert between["name"] == "tools/call research" and between["kind"] == "SERVER"
    assert between["parent_span_id"] == format(context.span_id, "016x")
    joined = root["attributes"]
    assert joined["agenttrace.ingress.joined.parent_writer_id"] == travel.writer_id()
    assert joined["agenttrace.ingress.joined.parent_path"] == "1.2"
