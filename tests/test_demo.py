"""`make demo`'s example, run as a user runs it, exporting to a real OTLP receiver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agenttrace import semconv as sc

from .helpers import child_env
from .otlp_receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check


def test_cafe_demo_nests_root_turn_tool_subagent(tmp_path: Path) -> None:
    receiver = OTLPReceiver().start()
    try:
        env = child_env()
        env.update(
            AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
            AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
            AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl"),
        )
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "cafe.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert result.returncode == 0, result.stderr
        spans = receiver.wait_for(18)
    finally:
        receiver.stop()

    assert "Answer: Jack and Jill have met in the cafe" in result.stdout
    assert "Trace sent over OTLP to" in result.stdout
    # The session's two files, the opTree read back from one and the dialog from the other.
    streams = list((tmp_path / "sessions").glob("*.events.jsonl"))
    snapshots = list((tmp_path / "sessions").glob("*.json.gz"))
    assert len(streams) == len(snapshots) == 1
    assert f"event stream: {streams[0]}" in result.stdout
    assert f"session file: {snapshots[0]}" in result.stdout
    assert "└── 3.2 session discuss ok" in result.stdout
    assert "├── 3.2:1 session Jack [agent_002] ok" in result.stdout
    assert "└── 3.2:2 session Jill [agent_003] ok" in result.stdout
    assert (
        "Jack: Hi, I'm Jack. *extends hand*\nJill: *smiles* Hello Jack, I'm Jill." in result.stdout
    )
    # The console summary: one line per LLM attempt and tool call, tagged with txn and path.
    stderr = result.stderr.splitlines()
    assert any(" 3.2:2.1.1 llm/anthropic:claude-sonnet-4-5-20250929: VRB ok" in s for s in stderr)
    assert any(" 3.2 session/discuss: VRB ok" in line for line in stderr)

    by_id = {s.span_id: s for s in spans}
    assert len(spans) == 18

    def chain(span_name: str) -> list[str]:
        span = next(s for s in spans if s.name == span_name)
        names = [span.name]
        while span.parent_span_id:
            span = by_id[span.parent_span_id]
            names.append(span.name)
        return names[::-1]

    assert chain("invoke_agent Jill") == [
        "invoke_agent Agent",
        "turn 3",
        "execute_tool discuss",
        "invoke_agent Jill",
    ]
    jill_chat = [s for s in spans if s.attributes.get(sc.PATH) == "3.2:2.1.1"]
    assert len(jill_chat) == 1
    assert [by_id[jill_chat[0].parent_span_id].name] == ["turn 1"]
    discuss = next(s for s in spans if s.name == "execute_tool discuss")
    assert discuss.attributes[sc.KIND] == "session"
    root = next(s for s in spans if s.name == "invoke_agent Agent")
    assert {s.attributes[sc.TXN_ORIGIN] for s in spans} == {root.attributes[sc.TXN_ID]}
    chats = [s for s in spans if s.attributes.get(sc.KIND) == "llm"]
    assert len(chats) == 6
    assert all(s.attributes[sc.COST_USD] > 0 for s in chats)
    assert all(s.attributes[sc.GEN_AI_PROVIDER_NAME] == "anthropic" for s in chats)
    # Anthropic-style accounting: cache reads are part of the input tokens.
    last = next(s for s in chats if s.attributes[sc.PATH] == "4.1")
    assert last.attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] > 0
    assert (
        last.attributes[sc.GEN_AI_USAGE_INPUT_TOKENS]
        > last.attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]
    )
    tools = [
        s.attributes.get(sc.GEN_AI_TOOL_CALL_ID) for s in spans if s.name.startswith("execute_tool")
    ]
    assert tools == ["c1", "c2", "c3"] or sorted(tools) == ["c1", "c2", "c3"]


def test_the_demo_imports_as_a_module_too() -> None:
    # agenttrace resume --agent examples.cafe:rebuild imports it from a checkout.
    from examples import cafe

    assert callable(cafe.rebuild) and cafe.__file__ == str(ROOT / "examples" / "cafe.py")
