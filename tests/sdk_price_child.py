"""A program that uses only the OpenAI SDK (issue 34 item 1): one ``chat.completions.create``
against the test's scripted server (argv[1], an OpenAI base URL), traced by agenttrace into a
real in-memory exporter. Prints the call's span cost, the ledger's amount and whether litellm
was ever imported, and the session file's pricing snapshot, as one JSON line."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import openai
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file


def main(api_base: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tempfile.TemporaryDirectory() as folder:
        ledger = Path(folder) / "accounting.jsonl"
        handle = agenttrace.init(
            tracer_provider=provider,
            console="quiet",
            sessions_dir=Path(folder) / "sessions",
            billing_file=ledger,
        )
        client = openai.OpenAI(base_url=api_base, api_key="sk-test", max_retries=0)
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
        handle.shutdown()
        provider.shutdown()
        (span,) = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o-mini"]
        lines = ledger.read_text().splitlines() if ledger.exists() else []
        (snapshot,) = (Path(folder) / "sessions").glob("*.json.gz")
        meta = read_session_file(snapshot).meta
    print(
        json.dumps(
            {
                "cost": (span.attributes or {}).get(sc.COST_USD),
                "ledger": [json.loads(line) for line in lines],
                "litellm_imported": "litellm" in sys.modules,
                "pricing": meta.get("pricingSnapshot"),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
