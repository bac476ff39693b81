"""The scripted model (``agenttrace.testing.ScriptedModel``, ``agenttrace scripted-model``) as
litellm and the OpenAI SDK meet it on 127.0.0.1, both protocols, streamed and not; and a call
litellm answers from ``mock_response`` marked as mocked in the ledger, at no cost."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.testing import ScriptedModel, ScriptError, load_script

from .conftest import Traced
from .helpers import ROOT, child_env

MODELS = ("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5-20250929")
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SCRIPTS: dict[str, Any] = {
    "You forecast.": [
        {"tool": "weather", "input": {"city": "Paris"}, "id": "call_paris"},
        {"text": "Sunny in Paris, a fine day for a long walk along the river."},
    ],
}


def ask(model: str, base: str, messages: list[dict[str, Any]], stream: bool) -> Any:
    """One litellm call to the scripted model (a stream read to its end and rebuilt)."""
    extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
    response = litellm.completion(
        model=model,
        messages=messages,
        tools=[WEATHER_TOOL],
        api_base=base,
        api_key="offline",
        stream=stream,
        **extra,
    )
    if not stream:
        return response
    chunks = list(response)
    return litellm.stream_chunk_builder(chunks, messages=messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("model", MODELS)
def test_litellm_gets_a_tool_call_then_text_with_usage(model: str, stream: bool) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You forecast."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    with ScriptedModel(SCRIPTS) as server:
        first = ask(model, server.api_base, messages, stream)
        (call,) = first.choices[0].message.tool_calls
        assert call.id == "call_paris" and call.function.name == "weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert first.choices[0].finish_reason == "tool_calls"
        messages.append(first.choices[0].message.model_dump())
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 24C"})
        second = ask(model, server.api_base, messages, stream)
    text = second.choices[0].message.content
    assert text == "Sunny in Paris, a fine day for a long walk along the river."
    assert second.choices[0].finish_reason == "stop"
    # The second request resent the first's messages: a cache hit, counted as the protocol does.
    assert second.usage.prompt_tokens > first.usage.prompt_tokens > 0
    assert second.usage.completion_tokens > 0
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    paths = {("anthropic" if "system" in r else "openai") for r in server.requests}
    assert paths == {"anthropic" if model.startswith("anthropic/") else "openai"}
    assert [bool(r.get("stream")) for r in server.requests] == [stream, stream]


@pytest.mark.parametrize("model", MODELS)
def test_without_a_script_it_echoes_and_a_past_the_end_reply_says_so(model: str) -> None:
    with ScriptedModel() as server:
        hello = [{"role": "user", "content": "hello there"}]
        reply = litellm.completion(
            model=model, messages=hello, api_base=server.api_base, api_key="x"
        )
        assert reply.choices[0].message.content == "You said: hello there"
    with ScriptedModel({"": [{"text": "only one"}]}) as server:
        later = [*hello, {"role": "assistant", "content": "only one"}]
        later.append({"role": "user", "content": "and?"})
        reply = litellm.completion(
            model=model, messages=later, api_base=server.api_base, api_key="x"
        )
        assert "nothing more to say" in reply.choices[0].message.content


def test_the_openai_sdk_streams_from_it() -> None:
    openai = pytest.importorskip("openai")
    with ScriptedModel({"": [{"text": "streamed to the SDK, in pieces"}]}) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="offline")
        stream = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        whole = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "streamed to the SDK, in pieces"
    assert len(chunks) > 3 and chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert whole.choices[0].message.content == text and whole.usage.prompt_tokens > 0


@pytest.mark.e2e  # starts the SDK's bundled CLI, a real process
@pytest.mark.timeout(300)
def test_the_claude_agent_sdks_cli_streams_from_it(tmp_path: Path) -> None:
    sdk = pytest.importorskip("claude_agent_sdk")
    work, home = tmp_path / "work", tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    work.mkdir()

    async def ask(base: str) -> list[Any]:
        env = {
            "HOME": str(home),
            "TMPDIR": str(home / "tmp"),
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": "offline",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }
        options = sdk.ClaudeAgentOptions(cwd=str(work), env=env)
        return [message async for message in sdk.query(prompt="hello", options=options)]

    with ScriptedModel() as server:
        messages = asyncio.run(ask(server.api_base))
    (answer,) = [m for m in messages if isinstance(m, sdk.AssistantMessage)]
    assert [block.text for block in answer.content] == ["You said: hello"]
    assert answer.message_id.startswith("msg_scripted_")
    assert messages[-1].subtype == "success" and messages[-1].usage["input_tokens"] > 0
    assert [r.get("stream") for r in server.requests] == [True]


def test_the_anthropic_stream_is_the_apis_event_sequence() -> None:
    body = {
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "weather?"}],
    }
    script = {"": [{"text": "Let me look.", "tool": "weather", "input": {"city": "Oslo"}}]}
    with ScriptedModel(script) as server:
        request = urllib.request.Request(
            f"{server.api_base}/v1/messages",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.headers["Content-Type"] == "text/event-stream"
            raw = answer.read().decode()
    events = re.findall(r"^event: (\w+)$", raw, re.MULTILINE)
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop") == 2
    data = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
    tool_json = "".join(
        d["delta"]["partial_json"]
        for d in data
        if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta"
    )
    assert json.loads(tool_json) == {"city": "Oslo"}
    delta = next(d for d in data if d["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0


def test_an_unknown_path_is_a_404() -> None:
    with ScriptedModel() as server:
        request = urllib.request.Request(f"{server.api_base}/v1/embeddings", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as raised:
            urllib.request.urlopen(request, timeout=30)
    assert raised.value.code == 404
    assert "no such endpoint" in json.loads(raised.value.read())["error"]["message"]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "is not JSON"),
        ("[]", "expected an object"),
        ('{"": {"text": "hi"}}', "expected a list of replies"),
        ('{"": [{"txt": "hi"}]}', "reply 1: unknown key 'txt'"),
        ('{"": [{"text": "ok"}, {"tool": "w"}]}', 'reply 2: a tool call needs "input"'),
    ],
)
def test_a_bad_script_file_is_one_line_and_exit_2(tmp_path: Path, content: str, says: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(content)
    with pytest.raises(ScriptError, match=re.escape(says)):
        load_script(script)
    done = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "scripted-model", "--script", str(script)],
        env=child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("agenttrace: error: script ") and says in line


def test_the_command_serves_a_script_until_stopped(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"": [{"text": "from the command's script"}]}))
    process = subprocess.Popen(
        [sys.executable, "-m", "agenttrace.cli", "scripted-model", "--script", str(script)],
        env=child_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", first)
        assert found, first
        base = found.group(1)
        shown = [process.stdout.readline() for _ in range(3)]
        assert f"OPENAI_BASE_URL={base}/v1" in shown[1]
        assert f"ANTHROPIC_BASE_URL={base}" in shown[2]
        for model in MODELS:
            reply = litellm.completion(
                model=model,
                messages=[{"role": "user", "content": "hi"}],
                api_base=base,
                api_key="offline",
            )
            assert reply.choices[0].message.content == "from the command's script"
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.returncode is not None


def test_a_mock_response_is_marked_mocked_and_costs_nothing(traced: Traced, tmp_path: Path) -> None:
    agenttrace.new_session()

    @agenttrace.agent(name="Mocker")
    def run() -> None:
        litellm.completion(
            model="anthropic/claude-sonnet-4-5-20250929",
            messages=[{"role": "user", "content": "hi"}],
            mock_response="made up by litellm",
        )
        chunks = litellm.completion(
            model="openai/gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            mock_response="made up, streamed",
            stream=True,
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "made up, streamed"
        # A Router deployment that mocks: the kwargs litellm's completion gets carry it.
        deployment = {"model": "anthropic/claude-sonnet-4-5-20250929", "mock_response": "routed"}
        router = litellm.Router(model_list=[{"model_name": "m", "litellm_params": deployment}])
        router.completion(model="m", messages=[{"role": "user", "content": "hi"}])

    run()
    traced.handle.force_flush()
    spans = [s for s in traced.ours() if (s.attributes or {}).get(sc.KIND) == sc.KIND_LLM]
    assert len(spans) == 3
    for span in spans:
        attributes = span.attributes or {}
        assert attributes[sc.MOCKED] is True and attributes[sc.COST_USD] == 0.0
    lines = (tmp_path / "accounting.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [(e["type"], e["mocked"], e["costUsd"]) for e in entries] == [("llm", True, 0)] * 3
    # litellm's made-up tokens are kept, at no price.
    assert all(e["tokens"]["outputTokens"] > 0 for e in entries)
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    accounted = [json.loads(line) for line in stream.read_text().splitlines()]
    ops = [line for line in accounted if line["event_type"] == "op_accounted"]
    assert [op["accounting"]["mocked"] for op in ops] == [True] * 3
    shown = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "stats", "--json", str(stream)],
        env=child_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert shown.returncode == 0, shown.stderr
    totals = json.loads(shown.stdout)["total"]
    assert totals["llm_attempts_ok"] == 3 and totals["output_tokens"] > 0
    assert totals["cost_usd"] == 0 and totals["llm_attempts_cost_unknown"] == 0


def test_a_real_call_is_not_marked_mocked(traced: Traced, tmp_path: Path) -> None:
    with ScriptedModel() as server:
        litellm.completion(
            model="anthropic/claude-sonnet-4-5-20250929",
            messages=[{"role": "user", "content": "hi"}],
            api_base=server.api_base,
            api_key="offline",
        )
    traced.handle.force_flush()
    (entry,) = [json.loads(line) for line in (tmp_path / "accounting.jsonl").open()]
    assert "mocked" not in entry and entry["costUsd"] > 0


def test_the_examples_module_still_imports_the_same_server() -> None:
    from examples.scripted_model import ScriptedModel as Old

    assert Old is ScriptedModel
    assert os.path.basename(sys.modules[Old.__module__].__file__ or "") == "scripted_model.py"
