"""Server tools through the Anthropic SDK (issue 34 item 2): a reply in which Anthropic ran a
tool itself (``server_tool_use`` and its ``web_search_tool_result``, with the usage's
``server_tool_use`` count), plain and streamed. The call is visible, marked server-side, on the
span and in the transcript, with its result; it is never offered to the client's tools nor
closed on resume; the journal holds one LLM step and gives the reply back whole on re-entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, server_result, server_tool_use, text
from .conftest import Traced, attrs
from .test_anthropic_sdk import (
    HI,
    MODEL,
    claude,
    client,
    expected_cost,
    llm_spans,
    server,
    transcripts,
)
from .test_llm_steps import rearm
from .test_steps_journal import journal_lines

__all__ = ["claude", "server"]  # the fixtures, used by name

QUERY = {"query": "weather in Paris"}
RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://weather.example/paris",
            "title": "Paris weather",
            "encrypted_content": "RU5DUllQVEVE" * 40,
            "page_age": None,
        }
    ],
}
SEARCHED = Reply(
    blocks=[
        server_tool_use("web_search", QUERY, id="srvtoolu_01"),
        server_result(RESULT),
        text("It is sunny in Paris."),
    ],
    usage={
        "input_tokens": 10,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 5,
        "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
    },
)
SERVER_CALL = {
    "id": "srvtoolu_01",
    "type": "server_tool_use",
    "function": {"name": "web_search", "arguments": json.dumps(QUERY)},
}
PARTS = [  # the assistant entry's content: the result (not its encrypted content), the text
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://weather.example/paris",
                "title": "Paris weather",
            }
        ],
    },
    {"type": "text", "text": "It is sunny in Paris."},
]


def _content(stream: bool, claude: AnthropicServer) -> list[Any]:
    """The reply's content blocks as the SDK gives them (a stream's final message's)."""
    sdk = client(claude)
    if stream:
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=HI) as events:
            return list(events.get_final_message().content)
    return list(sdk.messages.create(model=MODEL, max_tokens=64, messages=HI).content)


@pytest.mark.init(capture_content=True)
@pytest.mark.parametrize("stream", [False, True])
def test_a_server_tool_call_is_shown_marked_and_never_the_client_s_to_run(
    traced: Traced, tmp_path: Path, claude: AnthropicServer, stream: bool
) -> None:
    @agenttrace.tool
    def web_search(query: str) -> str:
        """The client's own tool of the same name: not what the server's call asked for."""
        return "client search"

    @agenttrace.agent("Searcher")
    def ask() -> list[Any]:
        content = _content(stream, claude)
        web_search("something else")
        again = [*HI, {"role": "assistant", "content": content}, {"role": "user", "content": "ok"}]
        client(claude).messages.create(model=MODEL, max_tokens=64, messages=again)
        return content

    claude.reset(SEARCHED, Reply(blocks=[text("Anything else?")]))
    content = ask()
    assert [block.type for block in content] == [
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    first = attrs(llm_spans(traced)[0])
    (output,) = json.loads(str(first[sc.GEN_AI_OUTPUT_MESSAGES]))
    assert output == {"role": "assistant", "content": PARTS, "tool_calls": [SERVER_CALL]}
    assert "RU5DUllQVEVE" not in str(first)  # encrypted content: the journal's only
    assert first[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    # The search is billed per request, as litellm prices the same reply.
    per_search = litellm.get_model_info(MODEL)["search_context_cost_per_query"]
    searched_cost = expected_cost(SEARCHED.usage) + per_search["search_context_size_medium"]
    assert per_search["search_context_size_medium"] > 0
    assert first[sc.COST_USD] == pytest.approx(searched_cost)
    (tool,) = [s for s in traced.spans() if attrs(s).get(sc.KIND) == "tool"]
    assert attrs(tool).get(sc.GEN_AI_TOOL_CALL_ID) != "srvtoolu_01"  # not offered to the tool
    (entries,) = transcripts(traced, tmp_path).values()
    assert [e["event_type"] for e in entries].count("transcript_reset") == 0  # sent back as is
    (searched, answered) = [e for e in entries if e["role"] == "assistant"]
    assert searched["tool_calls"] == [SERVER_CALL]
    assert searched["content"] == PARTS
    assert answered["content"] == "Anything else?"
    traced.handle.force_flush()
    kinds = [line["kind"] for line in journal_lines(tmp_path) if line["state"] == "done"]
    assert kinds == ["llm", "tool", "llm"]  # the server's search is no step of the client's


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_gets_the_server_tool_reply_back_whole(
    traced: Traced, tmp_path: Path, claude: AnthropicServer, stream: bool
) -> None:
    @agenttrace.agent("Searcher")
    def ask() -> list[Any]:
        return _content(stream, claude)

    claude.reset(SEARCHED)
    first = ask()
    traced.handle.force_flush()
    rearm(tmp_path)
    claude.reset(Reply(blocks=[text("not asked")]))
    again = ask()
    assert claude.message_requests() == []
    assert [block.model_dump() for block in again] == [block.model_dump() for block in first]
    assert again[1].content[0].encrypted_content == "RU5DUllQVEVE" * 40  # sent back as it came


def test_an_mcp_connector_call_through_beta_messages_is_server_side_too(
    traced: Traced, tmp_path: Path, claude: AnthropicServer
) -> None:
    """``beta.messages`` (pydantic-ai's path) with the MCP connector: Anthropic calls the MCP
    server itself, so its ``mcp_tool_use`` is marked as such and its result is in the reply."""
    call = {
        "type": "mcp_tool_use",
        "id": "mcptoolu_01",
        "name": "lookup",
        "server_name": "crm",
        "input": {"who": "Ada"},
    }
    answer = {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_01",
        "is_error": False,
        "content": [{"type": "text", "text": "Ada: VIP", "citations": None}],
    }
    claude.reset(Reply(blocks=[server_result(call), server_result(answer), text("Ada is a VIP.")]))

    @agenttrace.agent("Connector")
    def ask() -> Any:
        return client(claude).beta.messages.create(model=MODEL, max_tokens=64, messages=HI)

    reply = ask()
    assert [block.type for block in reply.content] == ["mcp_tool_use", "mcp_tool_result", "text"]
    (entries,) = transcripts(traced, tmp_path).values()
    (said,) = [e for e in entries if e["role"] == "assistant"]
    assert said["tool_calls"] == [
        {
            "id": "mcptoolu_01",
            "type": "mcp_tool_use",
            "function": {"name": "lookup", "arguments": json.dumps({"who": "Ada"})},
        }
    ]
    assert said["content"] == [
        {
            "type": "mcp_tool_result",
            "tool_use_id": "mcptoolu_01",
            "is_error": False,
            "content": [{"type": "text", "text": "Ada: VIP"}],
        },
        {"type": "text", "text": "Ada is a VIP."},
    ]
