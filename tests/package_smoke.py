"""Run by `make package-check` in a clean virtual environment holding only the built wheel
(and, with `litellm`, its [litellm] extra): a user's first minutes, checked."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace


def main(mode: str) -> None:
    home = Path(tempfile.mkdtemp(prefix="agenttrace-package-"))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=home / "sessions",
        billing_file=home / "ledger.jsonl",
    )

    @agenttrace.tool
    def lookup(query: str) -> str:
        return f"found {query}"

    @agenttrace.agent("Smoke")
    def run() -> str:
        lookup("cafes")
        if mode == "litellm":
            return _litellm_calls()
        return "done"

    answer = run()
    handle.shutdown()
    names = sorted(span.name for span in exporter.get_finished_spans())
    expected = ["execute_tool lookup", "invoke_agent Smoke", "turn 1"]
    if mode == "litellm":
        expected += ["chat gpt-4o-mini", "turn 2", "chat gpt-4o-mini", "turn 3"]
        expected += ["chat gpt-4o-mini", "turn 4"]
        assert answer == "ok routed routed", answer
        _assert_unpatched()
    assert names == sorted(expected), names
    snapshots = list((home / "sessions").glob("*.json.gz"))
    assert snapshots, "no session file"
    # The schema ships with the package, and what agenttrace wrote passes it.
    from agenttrace.formats.session.files import read_session_file
    from agenttrace.formats.session.schema_file import published_text, schema_text

    assert published_text() == schema_text(), "the shipped schema is not the structs' own"
    assert read_session_file(snapshots[0]).runs, "the session file reads back without its run"
    # So does STD-008's, and an export of the session is a valid document (no extra needed).
    from agenttrace.formats.std008 import rules as std008_rules
    from agenttrace.formats.std008 import schema as std008_schema
    from agenttrace.views.exports import to_std008

    assert std008_schema.published_text() == std008_schema.schema_text(), "STD-008 schema"
    assert std008_rules.validate(to_std008(snapshots[0])) == [], "an invalid STD-008 export"
    # The diff page's template and CSS ship too (package data): a run against itself.
    from agenttrace.views.diff import to_html

    page = to_html(agenttrace.diff_runs(snapshots[0], snapshots[0]))
    assert "banner-same" in page and "--failed-bg" in page, "the diff page without its files"
    ledger = (home / "ledger.jsonl").read_text()
    assert ledger.count("\n") == (4 if mode == "litellm" else 1)
    # Every call above was litellm's mock_response: marked so, billed nothing.
    assert ledger.count('"mocked":true') == (3 if mode == "litellm" else 0), ledger
    _scripted_model()
    if mode == "core":
        for extra in ("litellm", "rich", "grpc"):
            assert extra not in sys.modules, f"the core install imported {extra}"
    print(f"package smoke ({mode}): {len(names)} spans, session file and ledger written")


def _litellm_calls() -> str:
    """A call, and the Router's sync and async entry points (patched where litellm keeps them)."""
    import litellm

    messages = [{"role": "user", "content": "hi"}]
    reply = litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="ok")
    router = litellm.Router(
        model_list=[
            {
                "model_name": "smoke",
                "litellm_params": {"model": "gpt-4o-mini", "mock_response": "routed"},
            }
        ]
    )
    routed = router.completion(model="smoke", messages=messages)
    awaited = asyncio.run(router.acompletion(model="smoke", messages=messages))
    return " ".join(str(r.choices[0].message.content) for r in (reply, routed, awaited))


def _scripted_model() -> None:
    """The scripted model ships in the wheel and answers (no extra needed)."""
    import json
    import urllib.request

    from agenttrace.testing import ScriptedModel

    with ScriptedModel() as model:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        request = urllib.request.Request(
            f"{model.api_base}/v1/chat/completions", data=json.dumps(body).encode()
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            reply = json.loads(answer.read())
    assert reply["choices"][0]["message"]["content"] == "You said: hi", reply


def _assert_unpatched() -> None:
    """After shutdown litellm is as it was: no wrapper of ours left anywhere we patched."""
    import litellm
    import wrapt

    print(f"package smoke: litellm {metadata.version('litellm')}")
    for owner, name in (
        (litellm, "completion"),
        (litellm, "acompletion"),
        (litellm.Router, "completion"),
        (litellm.Router, "acompletion"),
    ):
        assert not isinstance(getattr(owner, name), wrapt.FunctionWrapper), f"{owner}.{name}"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "core")
