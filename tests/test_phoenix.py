"""The demo's trace, exported over OTLP/HTTP to Arize Phoenix and read back over its REST API.

Phoenix (``tests/phoenix.py``) is a real, independent receiver: if it stores and serves the
whole opTree with the right parents and attributes, so will any OTLP backend. Phoenix files
spans under the project named by the resource attribute ``openinference.project.name``
(``phoenix/utilities/project.py``; ``service.name`` is not used, spans without it go to
``default``), so the demo sets it through ``OTEL_RESOURCE_ATTRIBUTES``.

Spans come back from ``GET /v1/projects/{project}/spans`` (flattened attributes, with
``openinference.span.kind`` moved out into ``span_kind``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agenttrace import semconv as sc

from .helpers import child_env
from .phoenix import Phoenix

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "agenttrace-cafe"
SERVICE = "agenttrace-cafe-phoenix"
# An API key in the demo's environment: agenttrace scrubs such values from all it records.
CANARY = "sk-ant-canary-phoenix-0123456789abcdef"
CHAT = "chat claude-sonnet-4-5-20250929"

# Phoenix start-up (~10-20 s here, migrations included), the demo and ingestion.
pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]

# agenttrace.path -> (span name, parent's agenttrace.path): the cafe demo's whole opTree.
EXPECTED_TREE: dict[str, tuple[str, str | None]] = {
    "0": ("invoke_agent Agent", None),
    "1": ("turn 1", "0"),
    "1.1": (CHAT, "1"),
    "1.2": ("execute_tool task", "1"),
    "2": ("turn 2", "0"),
    "2.1": (CHAT, "2"),
    "2.2": ("execute_tool task", "2"),
    "3": ("turn 3", "0"),
    "3.1": (CHAT, "3"),
    "3.2": ("execute_tool discuss", "3"),
    "3.2:1": ("invoke_agent Jack", "3.2"),
    "3.2.1": ("turn 1", "3.2:1"),
    "3.2.1.1": (CHAT, "3.2.1"),
    "3.2:2": ("invoke_agent Jill", "3.2"),
    "3.2:2.1": ("turn 1", "3.2:2"),
    "3.2:2.1.1": (CHAT, "3.2:2.1"),
    "4": ("turn 4", "0"),
    "4.1": (CHAT, "4"),
}


@dataclass
class CafeInPhoenix:
    phoenix: Phoenix
    demo: subprocess.CompletedProcess[str]
    spans: list[dict[str, Any]]
    responses: str
    """Every response body the test got from Phoenix, concatenated."""
    stored: bytes
    """Every file Phoenix wrote (its SQLite database and WAL, its log)."""

    def by_path(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for span in self.spans:
            path = span["attributes"].get(sc.PATH)
            assert path not in found, f"two spans with agenttrace.path {path!r}"
            found[path] = span
        return found


def _spans(phoenix: Phoenix, project: str) -> tuple[list[dict[str, Any]], str]:
    """All of a project's spans (following the cursor) and the raw response bodies."""
    spans: list[dict[str, Any]] = []
    bodies: list[str] = []
    cursor: str | None = None
    while True:
        query: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        body = phoenix.get(f"/v1/projects/{project}/spans", **query)
        bodies.append(body)
        page = json.loads(body)
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans, "\n".join(bodies)


def _wait_for_spans(phoenix: Phoenix, count: int, timeout: float = 480) -> tuple[list[Any], str]:
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while True:
        try:
            spans, bodies = _spans(phoenix, PROJECT)
        except urllib.error.HTTPError as error:
            if error.code != 404:  # 404: no span of the project stored yet
                raise
        else:
            if len(spans) >= count:
                return spans, bodies
        if time.monotonic() > deadline:
            raise AssertionError(
                f"Phoenix has {len(spans)} of {count} spans after {timeout:.0f} s:\n"
                + phoenix.log_tail()
            )
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cafe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CafeInPhoenix]:
    """Phoenix started, the cafe demo run against it, and everything read back."""
    tmp = tmp_path_factory.mktemp("phoenix")
    phoenix = Phoenix(tmp / "phoenix").start()
    try:
        print(f"Phoenix healthy after {phoenix.startup_seconds:.1f} s at {phoenix.base_url}")
        env = child_env()
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.otlp_http_endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_SERVICE_NAME=SERVICE,
            OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={PROJECT}",
            AGENTTRACE_OPENINFERENCE="true",  # Phoenix users switch OpenInference's names on
            AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
            AGENTTRACE_BILLING_FILE=str(tmp / "accounting.jsonl"),
            ANTHROPIC_API_KEY=CANARY,
        )
        demo = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "cafe.py"),
                "--sessions-dir",
                str(tmp / "sessions"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert demo.returncode == 0, demo.stderr
        _wait_for_spans(phoenix, len(EXPECTED_TREE))
        time.sleep(1)  # a straggler past the 18th would show up as a 19th span
        spans, bodies = _spans(phoenix, PROJECT)
        responses = [
            bodies,
            phoenix.get("/v1/projects"),
            phoenix.get(f"/v1/projects/{PROJECT}"),
            phoenix.get(f"/v1/projects/{PROJECT}/spans/otlpv1", limit=1000),
            phoenix.get(f"/v1/projects/{PROJECT}/traces", include_spans="true", limit=1000),
            phoenix.get("/v1/projects/default/spans", limit=1000),
        ]
        yield CafeInPhoenix(phoenix, demo, spans, "\n".join(responses), phoenix.stored_bytes())
    finally:
        phoenix.stop()


def test_phoenix_stores_the_whole_tree(cafe: CafeInPhoenix) -> None:
    assert "Answer: Jack and Jill have met in the cafe" in cafe.demo.stdout
    assert len(cafe.spans) == len(EXPECTED_TREE), sorted(s["name"] for s in cafe.spans)
    assert len({s["context"]["trace_id"] for s in cafe.spans}) == 1
    spans = cafe.by_path()
    assert set(spans) == set(EXPECTED_TREE)
    path_of = {s["context"]["span_id"]: path for path, s in spans.items()}
    tree = {
        path: (span["name"], path_of[span["parent_id"]] if span["parent_id"] else None)
        for path, span in spans.items()
    }
    assert tree == EXPECTED_TREE
    assert sorted(s["name"] for s in cafe.spans).count(CHAT) == 6
    # Jill's session, under the discuss tool, under turn 3, under the root agent.
    chain, path = [], "3.2:2"
    while True:
        chain.append(spans[path]["name"])
        if not spans[path]["parent_id"]:
            break
        path = path_of[spans[path]["parent_id"]]
    assert chain[::-1] == [
        "invoke_agent Agent",
        "turn 3",
        "execute_tool discuss",
        "invoke_agent Jill",
    ]
    # The project came from the resource: nothing landed in Phoenix's default project.
    assert cafe.phoenix.get_json("/v1/projects/default/spans", limit=1000)["data"] == []


def test_phoenix_keeps_the_agenttrace_attributes(cafe: CafeInPhoenix) -> None:
    spans = cafe.by_path()
    # A tool that runs sub-agents (discuss) is a session; the task tool is a plain tool.
    kind_of = {"invoke_agent": "session", "turn": "turn", "chat": "llm", "execute_tool": "tool"}
    expected = {path: kind_of[name.split()[0]] for path, (name, _) in EXPECTED_TREE.items()}
    expected["3.2"] = "session"
    assert {path: s["attributes"][sc.KIND] for path, s in spans.items()} == expected
    root_txn = spans["0"]["attributes"][sc.TXN_ID]
    assert root_txn
    assert {s["attributes"][sc.TXN_ORIGIN] for s in cafe.spans} == {root_txn}
    chats = [s for s in cafe.spans if s["name"] == CHAT]
    assert len(chats) == 6
    for chat in chats:
        attributes = chat["attributes"]
        assert isinstance(attributes[sc.GEN_AI_USAGE_INPUT_TOKENS], int), attributes
        assert attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0, attributes
        assert attributes[sc.COST_USD] > 0, attributes
        assert attributes[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    tool_calls = {
        path: s["attributes"][sc.GEN_AI_TOOL_CALL_ID]
        for path, s in spans.items()
        if s["name"].startswith("execute_tool")
    }
    assert tool_calls == {"1.2": "c1", "2.2": "c2", "3.2": "c3"}


def test_phoenix_reads_the_openinference_span_kinds(cafe: CafeInPhoenix) -> None:
    expected = {"invoke_agent": "AGENT", "turn": "CHAIN", "chat": "LLM", "execute_tool": "TOOL"}
    kinds = {path: s["span_kind"] for path, s in cafe.by_path().items()}
    # openinference.span.kind (Phoenix serves it as `span_kind`, UNKNOWN when absent): set by
    # agenttrace on every span so that Phoenix shows its agent/chain/LLM/tool views.
    assert kinds == {path: expected[name.split()[0]] for path, (name, _) in EXPECTED_TREE.items()}


def test_phoenix_counts_the_llm_tokens(cafe: CafeInPhoenix) -> None:
    """Phoenix understood the chat spans as LLM calls: its trace totals are their tokens."""
    chats = [s for s in cafe.spans if s["name"] == CHAT]
    traces = cafe.phoenix.get_json(f"/v1/projects/{PROJECT}/traces", limit=10)["data"]
    assert len(traces) == 1
    assert traces[0]["trace_id"] == cafe.spans[0]["context"]["trace_id"]
    assert traces[0]["token_count_prompt"] == sum(
        s["attributes"][sc.GEN_AI_USAGE_INPUT_TOKENS] for s in chats
    )


def test_the_api_key_reaches_phoenix_nowhere(cafe: CafeInPhoenix) -> None:
    root_txn = cafe.by_path()["0"]["attributes"][sc.TXN_ID]
    # The search itself works: an attribute value is there to be found in both.
    assert root_txn in cafe.responses
    assert root_txn.encode() in cafe.stored
    assert CANARY not in cafe.responses
    assert CANARY.encode() not in cafe.stored
    assert CANARY not in cafe.demo.stdout + cafe.demo.stderr
