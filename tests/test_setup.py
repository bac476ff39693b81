"""init/shutdown as an application uses them: fresh interpreters, a real OTLP receiver."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace
from agenttrace import semconv as sc

from .helpers import child_env
from .otlp_receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent

AGENT_SCRIPT = """
import litellm, wrapt, agenttrace
litellm.suppress_debug_info = True
handle = agenttrace.init(console="verbose")

@agenttrace.tool
def lookup(q):
    return q.upper()

@agenttrace.agent(name="Exported")
def run():
    litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                       mock_response="y", api_key="sk-exported-secret-0042")
    return lookup("done")

print(run())
print("enabled", handle.enabled, "litellm patched",
      isinstance(litellm.completion, wrapt.FunctionWrapper))
agenttrace.shutdown()
"""


def run_python(code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    full_env = child_env()
    full_env.update(
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl"),
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=480,
    )


@pytest.fixture(scope="module")
def receiver() -> Iterator[OTLPReceiver]:
    server = OTLPReceiver().start()
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.e2e
def test_otlp_export_from_the_environment(
    receiver: OTLPReceiver, tmp_path: Path, protocol: str
) -> None:
    before = len(receiver.spans)
    endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
    result = run_python(
        AGENT_SCRIPT,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_SERVICE_NAME": f"svc-{protocol}",
        },
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "DONE" in result.stdout
    spans = [
        s
        for s in receiver.wait_for(before + 4)[before:]
        if s.resource.get("service.name") == f"svc-{protocol}"
    ]
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {
        "invoke_agent Exported",
        "turn 1",
        "chat gpt-4o-mini",
        "execute_tool lookup",
    }
    session, turn = by_name["invoke_agent Exported"], by_name["turn 1"]
    assert session.parent_span_id == ""
    assert turn.parent_span_id == session.span_id
    assert by_name["chat gpt-4o-mini"].parent_span_id == turn.span_id
    assert by_name["execute_tool lookup"].parent_span_id == turn.span_id
    assert {s.trace_id for s in spans} == {session.trace_id}
    chat = by_name["chat gpt-4o-mini"].attributes
    assert chat[sc.PATH] == "1.1" and chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
    assert by_name["execute_tool lookup"].attributes[sc.PATH] == "1.2"
    # Console lines went to stderr, with the origin txn id of the run.
    origin = session.attributes[sc.TXN_ORIGIN]
    assert f"[txn:{origin}] 1.1 llm/openai:gpt-4o-mini: VRB ok" in result.stderr
    everything = repr([(s.attributes, s.events) for s in spans]) + result.stderr
    assert "sk-exported-secret-0042" not in everything


@pytest.mark.e2e
def test_otel_sdk_disabled_makes_agenttrace_a_no_op(receiver: OTLPReceiver, tmp_path: Path) -> None:
    before = len(receiver.spans)
    result = run_python(
        AGENT_SCRIPT,
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint},
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "DONE" in result.stdout
    assert "enabled False litellm patched False" in result.stdout
    assert result.stderr == ""
    assert receiver.wait_for(before + 1, timeout=1.0)[before:] == []


def test_an_application_provider_is_kept_and_gets_our_processor(
    receiver: OTLPReceiver, tmp_path: Path
) -> None:
    before = len(receiver.spans)
    code = """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import agenttrace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    handle = agenttrace.init()
    assert handle.provider is provider and not handle.owns_provider

    @agenttrace.agent
    def run():
        agenttrace.log("WRN", "visible")
        with trace.get_tracer("app").start_as_current_span("app work"):
            with agenttrace.tool("inner"):
                pass

    run()
    provider.force_flush()  # agenttrace ends its spans on a background thread
    names = sorted(s.name for s in exporter.get_finished_spans())
    print(names)
    agenttrace.shutdown()
    """
    result = run_python(code, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "['app work', 'execute_tool inner', 'invoke_agent run', 'turn 1']" in result.stdout
    assert "0 session/run: WRN visible" in result.stderr
    # The application configured its own export: agenttrace did not add an OTLP exporter.
    assert receiver.wait_for(before + 1, timeout=1.0)[before:] == []


def test_without_init_canonical_events_reach_the_spans_of_the_application_s_provider(
    tmp_path: Path,
) -> None:
    """No recorder: the session hands each event to the scope it was logged in, which puts it
    on its span; nothing is written, and nothing needed registering at import."""
    code = """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import agenttrace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    @agenttrace.llm("openai/gpt-x")
    def chat(messages):
        return {"choices": [{"message": {"role": "assistant", "content": "hello"}}]}

    @agenttrace.agent("Speaker")
    def speak():
        return chat(messages=[{"role": "user", "content": "hi"}])

    speak()
    for span in exporter.get_finished_spans():
        types = [
            dict(event.attributes)["agenttrace.event.type"]
            for event in span.events
            if event.name == "agenttrace.event"
        ]
        print(span.name, types)
    """
    result = run_python(code, {}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "chat gpt-x ['transcript_entry', 'transcript_entry']" in result.stdout
    assert "invoke_agent Speaker []" in result.stdout
    assert not (tmp_path / "sessions").exists()  # no recorder: no files


def test_explicit_endpoint_exports_from_a_given_provider(receiver: OTLPReceiver) -> None:
    before = len(receiver.spans)
    provider = TracerProvider()
    handle = agenttrace.init(
        tracer_provider=provider, endpoint=receiver.http_endpoint, instrument_litellm=False
    )
    try:

        @agenttrace.agent("Direct")
        def run() -> None:
            pass

        run()
    finally:
        handle.shutdown()
    spans = receiver.wait_for(before + 1)[before:]
    assert [s.name for s in spans] == ["invoke_agent Direct"]


def test_init_twice_is_harmless_and_shutdown_twice_is_safe() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    first = agenttrace.init(tracer_provider=provider, instrument_litellm=False)
    second = agenttrace.init(tracer_provider=TracerProvider(), console="trace")
    assert second is first
    assert len(provider._active_span_processor._span_processors) == 2  # ours added once

    @agenttrace.agent
    def run() -> None:
        pass

    run()
    first.force_flush()
    first.shutdown()
    first.shutdown()
    agenttrace.shutdown()
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_agent run"]
    # After shutdown, spans no longer go to the provider we were given.
    run()
    assert len(exporter.get_finished_spans()) == 1


@pytest.mark.e2e
def test_spans_queued_at_exit_are_exported(receiver: OTLPReceiver, tmp_path: Path) -> None:
    before = len(receiver.spans)
    code = """
    import agenttrace
    agenttrace.init()

    @agenttrace.tool
    def last():
        return 1

    @agenttrace.agent("Exiting")
    def run():
        last()

    run()  # no flush, no shutdown: the exit hooks must end and export everything
    """
    result = run_python(code, {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint}, tmp_path)
    assert result.returncode == 0, result.stderr
    names = sorted(s.name for s in receiver.wait_for(before + 3)[before:])
    assert names == ["execute_tool last", "invoke_agent Exiting", "turn 1"]
