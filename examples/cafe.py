"""The cafe scenario of seed 001, traced with agenttrace: a root agent creates Jack and Jill with
a ``task`` tool, then runs a ``discuss`` tool in which both of them speak.

Offline by default: the model is a scripted stand-in for Anthropic's API on 127.0.0.1 (see
``scripted_llm.py``), reached through litellm's real HTTP path. Set ``CAFE_MODEL`` (for example
``anthropic/claude-sonnet-4-5``, with ``ANTHROPIC_API_KEY``) to run it against a real model.

Run it with ``make demo``; ``OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make demo`` sends
the trace to the collector of ``docker-compose.yml`` (and on to Jaeger).

The agent code is ordinary litellm code in the seed's style; the only agenttrace lines are
``init()`` and the decorators ``@agenttrace.agent`` and ``@agenttrace.tool``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: litellm's bundled prices

import litellm
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_llm import ScriptedModel

SCRIPTED_MODEL = "anthropic/claude-sonnet-4-5-20250929"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "task",
            "description": "Create a sub-agent with a name and a system prompt.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "system_prompt": {"type": "string"}},
                "required": ["name", "system_prompt"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "discuss",
            "description": "Give sub-agents a prompt and let each speaker answer in turn.",
            "parameters": {
                "type": "object",
                "properties": {
                    "prompt": {"type": "string"},
                    "speakers": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["prompt", "speakers"],
            },
        },
    },
]


class Agent:
    """An LLM agent with a transcript and sub-agents, in the seed's style."""

    def __init__(
        self, name: str, model: str, options: dict[str, Any], system_prompt: str | None = None
    ):
        self.name = name
        self.language_model = model
        self.options = options
        self.transcript: list[dict[str, Any]] = []
        self.subagents: dict[str, Agent] = {}
        if system_prompt:
            self.transcript.append({"role": "system", "content": system_prompt})

    def harken(self, text: str) -> None:
        """Hear a message: it enters the transcript as a user message."""
        self.transcript.append({"role": "user", "content": str(text)})

    def inform(self, other: Agent, text: str) -> None:
        """Say something to another agent."""
        other.harken(text)

    @agenttrace.agent
    async def response(self) -> str:
        """Run the loop: ask the model, run the tools it asks for, until it answers in words."""
        while True:
            reply = await litellm.acompletion(
                model=self.language_model,
                messages=self.transcript,
                tools=TOOLS
                if not self.transcript or self.transcript[0]["role"] != "system"
                else None,
                **self.options,
            )
            message = reply.choices[0].message
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [call.model_dump() for call in message.tool_calls]
            self.transcript.append(entry)
            if not message.tool_calls:
                return str(message.content or "")
            for call in message.tool_calls:
                arguments = json.loads(call.function.arguments or "{}")
                result = await getattr(self, call.function.name)(**arguments)
                self.transcript.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "name": call.function.name,
                        "content": result,
                    }
                )

    @agenttrace.tool
    async def task(self, name: str, system_prompt: str) -> str:
        """Create a sub-agent."""
        self.subagents[name] = Agent(name, self.language_model, self.options, system_prompt)
        return f"Created subagent: {name}"

    @agenttrace.tool
    async def discuss(self, prompt: str, speakers: list[str]) -> str:
        """Everyone hears the prompt; each speaker answers, and the others hear the answer."""
        for name in speakers:
            self.inform(self.subagents[name], prompt)
        said = []
        for name in speakers:
            speaker = self.subagents[name]
            utterance = await speaker.response()  # a sub-agent session under this tool call
            said.append(utterance)
            for other in speakers:
                if other != name:
                    speaker.inform(self.subagents[other], f"[{name}]: {utterance}")
        return "\n".join(said)


def span_tree(spans: list[ReadableSpan]) -> list[str]:
    """The spans as an indented text tree with their path labels."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            attributes = span.attributes or {}
            lines.append(
                f"{'  ' * depth}{span.name}  [{attributes.get('agenttrace.path')}] "
                f"{attributes.get('agenttrace.kind')} {attributes.get('agenttrace.status', '')}"
            )
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def run(prompt: str, model: str, options: dict[str, Any]) -> str:
    root = Agent("Root", model, options)
    root.harken(prompt)
    return await root.response()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default="Create Jack and Jill for a cafe discussion")
    parser.add_argument("--out", default=".agenttrace-demo", help="where to write the spans")
    args = parser.parse_args(argv)
    litellm.suppress_debug_info = True

    tracing = agenttrace.init(
        service_name=os.environ.get("OTEL_SERVICE_NAME", "agenttrace-demo"),
        console=os.environ.get("AGENTTRACE_CONSOLE") or "verbose",  # type: ignore[arg-type]
    )
    collected = InMemorySpanExporter()
    assert tracing.provider is not None
    tracing.provider.add_span_processor(SimpleSpanProcessor(collected))

    real_model = os.environ.get("CAFE_MODEL")
    if real_model:
        answer = asyncio.run(run(args.prompt, real_model, {}))
    else:
        with ScriptedModel() as scripted:
            options = {"api_base": scripted.api_base, "api_key": "offline-demo-key"}
            answer = asyncio.run(run(args.prompt, SCRIPTED_MODEL, options))
    tracing.force_flush()
    spans = list(collected.get_finished_spans())
    trace_id = format(spans[0].context.trace_id, "032x") if spans else "-"

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spans_file = out / f"trace-{trace_id}.jsonl"
    spans_file.write_text("".join(span.to_json(indent=None) + "\n" for span in spans))

    print(f"\nAnswer: {answer}\n")
    print(f"Trace {trace_id}: {len(spans)} spans")
    print("\n".join(span_tree(spans)))
    print(f"\nSpans written to {spans_file}")
    endpoint = tracing.settings.otlp_endpoint
    if endpoint:
        print(
            f"Sent over OTLP to {endpoint}: open http://localhost:16686/trace/{trace_id} in Jaeger"
        )
    else:
        print(
            "Set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 to send it to Jaeger (README)."
        )
    tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
