"""A canary secret through every output of a real run: no way out of the process may bypass
the redaction policy applied at its boundary (docs/architecture.md, "Content and redaction").

The run is test_leak_paths' (an agent on a scripted model over litellm's real HTTP path, told
to log in at a URL whose ``key`` parameter is the canary, with the canary as a password
argument; a tool that fails with an error naming the URL), with content on spans *and* as the
GenAI conventions' log events, the console in trace mode, and the canary also in a log line's
message and details and in the model's reasoning. What leaves the process is then read whole,
as bytes or JSON, never picked field by field, so that an attribute, event or line added later
is checked too: every span as the SDK serialises it, every log record, the console, the billing
ledger, the opTree the session file keeps, every export format, every command's output, and
the serve API over real HTTP. The event stream keeps the canary: it is the agent's state.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter

import agenttrace
from agenttrace.cli import FORMATS

from .conftest import Traced
from .helpers import log_records
from .test_leak_paths import SECRET, SHOWN, URL, Fetcher, Run, run_agent
from .test_serve import BEARER, _served, _trees


class Thinker(Fetcher):
    """The fetcher, whose login also logs and reasons about the URL."""

    @agenttrace.tool
    async def login(self, url: str, password: str) -> str:
        agenttrace.log("VRB", f"a password for {url}", url=url, password=password)
        agenttrace.thinking(f"the key is in {url}")
        return f"logged in at {url}"


@pytest.fixture
def logs() -> InMemoryLogRecordExporter:
    """The log records agenttrace emits through the application's logger provider."""
    exporter: InMemoryLogRecordExporter = log_records()
    return exporter


@pytest.fixture
async def run(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    logs: InMemoryLogRecordExporter,
    tmp_path: Path,
) -> Run:
    # Content everywhere it can go: on spans and as log events.
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_AND_EVENT")
    traced: Traced = request.getfixturevalue("traced")
    monkeypatch.setattr("tests.test_leak_paths.Fetcher", Thinker)
    return await run_agent(traced, tmp_path)


def assert_no_canary(text: str, where: str) -> None:
    assert SECRET not in text, f"the canary leaked into {where}"
    # A table may fold a long cell: then one half of the canary at least stays whole.
    for part in (SECRET[:8], SECRET[-8:]):
        assert part not in text, f"part of the canary leaked into {where}"


def outputs(run: Run, logs: InMemoryLogRecordExporter) -> Iterator[tuple[str, str]]:
    """(where, what it holds) for every output of the run, each read whole."""
    spans = run.traced.spans()
    yield "spans", "\n".join(span.to_json() for span in spans)
    yield "log records", "\n".join(data.to_json() for data in logs.get_finished_logs())
    yield "the console", run.traced.output()
    yield "the billing ledger", (run.tmp_path / "accounting.jsonl").read_text()
    document = json.loads(gzip.decompress(run.snapshot.read_bytes()))
    yield "the session file's opTree", json.dumps(document["runs"], ensure_ascii=False)
    snapshot = str(run.snapshot)
    for form in FORMATS:
        yield f"the {form} export", run.cli("export", snapshot, "--format", form)
    for args in (
        ("dialog", snapshot, "--agents", "agent_001"),
        ("dialog", str(run.stream), "--agents", "agent_001"),
        ("perspective", snapshot, "agent_001"),
        ("tree", snapshot),
        ("stats", snapshot),
        ("stats", "--json", snapshot),
        ("doubts", snapshot),
        ("list", "--sessions-dir", str(run.tmp_path / "sessions")),
    ):
        yield f"agenttrace {args[0]}", run.cli(*args)
    yield from served(run)


def served(run: Run) -> Iterator[tuple[str, str]]:
    """The serve API's answers, over real HTTP on 127.0.0.1."""
    session_id = run.snapshot.name.removesuffix(".json.gz")
    with _served(run.tmp_path / "sessions") as base, httpx.Client(timeout=480) as http:
        for path in ("/api/runs", f"/api/runs/{session_id}/tree"):
            response = http.get(f"{base}{path}", headers=BEARER)
            assert response.status_code == 200, path
            yield f"GET {path}", response.text
        with http.stream("GET", f"{base}/api/runs/{session_id}/events", headers=BEARER) as sent:
            assert sent.status_code == 200
            yield "the serve event stream", json.dumps(next(_trees(sent.iter_lines())))


@pytest.mark.console("trace")
async def test_no_output_carries_the_canary(run: Run, logs: InMemoryLogRecordExporter) -> None:
    # The canary went in: the agent's state keeps the transcript as it was said.
    assert SECRET in run.stream.read_text()
    seen = dict(outputs(run, logs))
    for where, text in seen.items():
        assert_no_canary(text, where)
    # ... and the outputs that carry content carried it, redacted: the check above can fail.
    for where in ("spans", "log records", "the console", "the session file's opTree"):
        assert SHOWN in seen[where].replace("\\u0026", "&").replace('\\"', '"'), where
    assert URL not in json.dumps(seen)


def test_a_name_scrubbed_before_a_secret_was_known_is_scrubbed_again_after() -> None:
    """The boundary remembers short texts it scrubbed (names recur on every span): a secret
    remembered later must not be let through by that memory, for attributes or op names."""
    from agenttrace._internal.redact import remember_secret
    from agenttrace.tracing.outbound import outbound_attributes, outbound_text

    secret = "late-known-Secret-4d1c"
    name = f"tool {secret}"
    assert outbound_text(name, 4096) == name  # not yet a secret
    assert outbound_attributes({"gen_ai.tool.name": name}, 4096) == {"gen_ai.tool.name": name}
    remember_secret(secret)
    assert outbound_text(name, 4096) == "tool [REDACTED]"
    assert outbound_attributes({"gen_ai.tool.name": name}, 4096) == {
        "gen_ai.tool.name": "tool [REDACTED]"
    }
