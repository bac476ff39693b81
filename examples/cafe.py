"""The cafe scenario as plain agent code, traced by agenttrace: ``make demo``.

A root agent creates Jack and Jill with a ``task`` tool, then runs a ``discuss`` tool in which
both speak. The agent code is ordinary litellm code; agenttrace's only marks on it are
``@agent_class``, ``@hears``, ``@agent`` and ``@tool``, and the event stream of
docs/responsibility.md comes out.

Run it with ``python examples/cafe.py`` (``--help`` for the options). From the checkout,
``agenttrace resume SESSION --agent examples.cafe:rebuild --prompt "What will you order?"``
continues its session: :func:`rebuild` is the agent factory that command calls.

Offline by default: the model is a scripted stand-in for Anthropic's API on 127.0.0.1
(``agenttrace.testing.ScriptedModel``) whose replies are the scenario's. It answers for one model,
``anthropic/claude-sonnet-4-5-20250929``; name any other model (``--model
anthropic/claude-sonnet-4-5``, with its key in the environment) to talk to it instead, here and
in ``agenttrace resume``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if not __package__:  # run as a script, python examples/cafe.py: make ``examples`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: litellm's own prices

import atexit
import inspect
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import litellm

import agenttrace
from agenttrace.testing import Reply, Script, ScriptedModel, last_user_text

litellm.suppress_debug_info = True  # a failed call raises; no help banner on stdout besides

SCRIPTED_MODEL = "anthropic/claude-sonnet-4-5-20250929"
FIRST_PROMPT = "Create Jack and Jill for a cafe discussion"
JACK_PROMPT = "You work in HR..."
JILL_PROMPT = "You are an aspiring author..."

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "task",
            "description": "Create a sub-agent with a name and a system prompt.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "system_prompt": {"type": "string"}},
                "required": ["name"],
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


@agenttrace.agent_class
class Agent:
    """An LLM agent with a transcript and sub-agents (the interface of docs/responsibility.md)."""

    def __init__(
        self,
        name: str | None = None,
        system_prompt: str | None = None,
        model: str = SCRIPTED_MODEL,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.language_model = model
        self.options = options or {}
        self.transcript: list[dict[str, Any]] = []
        self.subagents: dict[str, Agent] = {}
        self.agent_id: str | None = None  # set by @agent_class when the agent is registered
        if system_prompt:
            self.transcript.append({"role": "system", "content": system_prompt})

    @classmethod
    def revive(cls, record: agenttrace.AgentRecord, options: dict[str, Any]) -> Agent:
        """The agent as a session file left it (not a new agent: nothing is logged)."""
        agent = cls.__new__(cls)
        agent.name = record.name
        agent.language_model = record.language_model or SCRIPTED_MODEL
        agent.options = options
        agent.transcript = record.messages()
        agent.subagents = {}
        agent.agent_id = record.agent_id
        return agent

    @agenttrace.hears
    def harken(self, text: str) -> None:
        """Hear a message: it enters the transcript as a user message."""
        self.transcript.append({"role": "user", "content": str(text)})

    def inform(self, other: Agent, text: str) -> None:
        """Say something to another agent."""
        other.harken(text)

    @agenttrace.agent
    async def response(self, max_turns: int | None = None) -> str | None:
        """Ask the model and run the tools it asks for until it answers in words."""
        turns = 0
        while max_turns is None or turns < max_turns:
            turns += 1
            reply = await litellm.acompletion(
                model=self.language_model,
                messages=api_messages(self.transcript),
                tools=TOOLS if self.tools_enabled() else None,
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
                await self.run_tool(call.id, call.function.name, call.function.arguments)
        return None

    def tools_enabled(self) -> bool:
        """Only agents without a system prompt of their own (the root) get the tools."""
        return not self.transcript or self.transcript[0]["role"] != "system"

    async def run_tool(self, call_id: str, name: str, arguments: str | None) -> None:
        """Run a tool the model asked for; each result it gives enters the transcript."""
        tool = getattr(self, name)
        kwargs = json.loads(arguments or "{}")
        if inspect.isasyncgenfunction(getattr(tool, "__wrapped__", tool)):
            async for item in tool(**kwargs):
                self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": item})
        else:
            result = await tool(**kwargs)
            if result is not None:
                self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": result})

    @agenttrace.tool
    async def task(self, name: str, system_prompt: str | None = None) -> str:
        """Create a sub-agent."""
        self.subagents[name] = Agent(name, system_prompt, self.language_model, self.options)
        return f"Created subagent: {name}"

    @agenttrace.tool
    async def discuss(self, prompt: str, speakers: list[str]) -> AsyncIterator[str]:
        """Everyone hears the prompt; each speaker answers, and the others hear the answer."""
        for name in speakers:
            self.inform(self.subagents[name], prompt)
        for name in speakers:
            speaker = self.subagents[name]
            utterance = await speaker.response() or ""  # a sub-agent session under this call
            yield utterance
            for other in speakers:
                if other != name:
                    speaker.inform(self.subagents[other], f"[{name}]: " + utterance)


def api_messages(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript as a model request: consecutive results of one tool call (``discuss``
    streams one per speaker) are merged, since APIs take one result per call."""
    messages: list[dict[str, Any]] = []
    for entry in transcript:
        previous = messages[-1] if messages else None
        if (
            previous is not None
            and entry.get("role") == "tool"
            and previous.get("role") == "tool"
            and previous.get("tool_call_id") == entry.get("tool_call_id")
        ):
            previous["content"] = f"{previous['content']}\n{entry['content']}"
        else:
            messages.append(dict(entry))
    return messages


# --- the scripted model's replies (the cafe of docs/responsibility.md) --------------------------


def _root_after_the_script(request: dict[str, Any], turns: int) -> Reply:
    # A resumed session: every new prompt goes to Jack and Jill, then the root sums up.
    if turns % 2 == 0:
        return {
            "tool": "discuss",
            "id": f"c{turns}",
            "input": {"prompt": last_user_text(request), "speakers": ["Jack", "Jill"]},
        }
    return {"text": "Jack and Jill have answered."}


def _lines(*lines: str) -> Any:
    def speak(request: dict[str, Any], turns: int) -> Reply:
        return {"text": lines[(turns - 1) % len(lines)]}  # turn 0 was the scripted opening

    return speak


SCRIPTS: dict[str, Script] = {
    "": [
        {"tool": "task", "id": "c1", "input": {"name": "Jack", "system_prompt": JACK_PROMPT}},
        {"tool": "task", "id": "c2", "input": {"name": "Jill", "system_prompt": JILL_PROMPT}},
        {
            "tool": "discuss",
            "id": "c3",
            "input": {
                "prompt": "You meet in a cafe. Introduce yourselves.",
                "speakers": ["Jack", "Jill"],
            },
        },
        {"text": "Jack and Jill have met in the cafe and introduced themselves."},
        _root_after_the_script,
    ],
    JACK_PROMPT: [
        {"text": "Hi, I'm Jack. *extends hand*"},
        _lines("A flat white for me, thanks.", "So, Jill, what are you writing?"),
    ],
    JILL_PROMPT: [
        {"text": "*smiles* Hello Jack, I'm Jill."},
        _lines("Tea, please. Earl grey.", "A novel about a cafe, as it happens."),
    ],
}


async def run_first(options: dict[str, Any], model: str = SCRIPTED_MODEL) -> str | None:
    """The scenario from the start: a new root agent hears the first prompt and runs."""
    root = Agent(model=model, options=options)
    root.harken(FIRST_PROMPT)
    return await root.response()


async def run_resumed(
    session_file: str, prompt: str, options: dict[str, Any]
) -> tuple[str | None, agenttrace.Session]:
    """Continue a saved cafe session: the root hears ``prompt`` and runs, ids running on."""

    def revive(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Agent:
        return Agent.revive(record, options)

    # A new prompt is a new run: an interrupted run is left as it stopped, not re-entered.
    root, session = agenttrace.load_session(session_file, revive, reenter=False)
    root.harken(prompt)
    return await root.response(), session


def scripted_model() -> ScriptedModel:
    """The offline model with the cafe's replies."""
    return ScriptedModel(SCRIPTS)


OFFLINE_KEY = "offline-demo-key"
_offline: ScriptedModel | None = None
_offline_lock = threading.Lock()


def options_for(model: str) -> dict[str, Any]:
    """litellm options for an agent on ``model``: the scripted model's address when ``model`` is
    the one it answers for (started on first use, stopped at exit), else none (the real one)."""
    global _offline
    if model != SCRIPTED_MODEL:
        return {}
    with _offline_lock:
        if _offline is None:
            _offline = scripted_model().__enter__()
            atexit.register(_offline.__exit__)
        return {"api_base": _offline.api_base, "api_key": OFFLINE_KEY}


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Agent:
    """The agent factory of ``agenttrace resume --agent examples.cafe:rebuild`` (and of
    ``agenttrace.load_session``): the agent ``record`` describes, as the session left it, on
    its recorded model (the command's ``--model`` replaces it), offline on the scripted one."""
    model = record.language_model or SCRIPTED_MODEL
    return Agent.revive(record, options_for(model))


# --- the demo -----------------------------------------------------------------------------------


def report(session: agenttrace.Session, tracing: agenttrace.Tracing) -> None:
    """Print where the session went, its opTree (read back from the session file) and the
    Jack-and-Jill dialog (read back from the event stream)."""
    from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
    from agenttrace.views.tree import render_optree
    from agenttrace.views.viewer import SessionViewer, format_dialog

    directory = tracing.settings.sessions_dir
    stream = stream_path(directory, session.session_id)
    snapshot = snapshot_path(directory, session.session_id)
    print(f"\nSession {session.session_id}")
    print(f"  event stream: {stream}")
    print(f"  session file: {snapshot}")
    if snapshot.exists():
        print("\nopTree:")
        print("\n".join(render_optree(read_session_file(snapshot).runs)))
    if stream.exists():
        viewer = SessionViewer(stream)
        people = [a for a, name in viewer.list_agents().items() if name in ("Jack", "Jill")]
        print("\nJack and Jill, from the stream:")
        print(format_dialog(viewer.extract_dialog(people)))
    endpoint = tracing.settings.otlp_endpoint
    if endpoint:
        print(f"\nTrace sent over OTLP to {endpoint}: see it in Jaeger at http://localhost:16686")
    else:
        print(
            "\nSet OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 to send the trace to Jaeger."
        )


def main(argv: list[str] | None = None) -> int:
    """``make demo``: run the cafe scenario, offline unless ``--model`` names a real model."""
    import argparse
    import asyncio

    parser = argparse.ArgumentParser(description="agenttrace demo: the cafe scenario")
    parser.add_argument(
        "--model",
        default=SCRIPTED_MODEL,
        help=f"a model for litellm (default: {SCRIPTED_MODEL}, which the scripted model answers)",
    )
    parser.add_argument("--sessions-dir", help="where the session files go")
    args = parser.parse_args(argv)
    # The demo shows what was said on the spans too (agenttrace keeps content off spans by
    # default, as the GenAI conventions ask); the session's files keep it either way.
    os.environ.setdefault("AGENTTRACE_CAPTURE_CONTENT", "true")
    tracing = agenttrace.init(
        service_name=os.environ.get("OTEL_SERVICE_NAME", "agenttrace-demo"),
        console=os.environ.get("AGENTTRACE_CONSOLE") or "verbose",  # type: ignore[arg-type]
        sessions_dir=args.sessions_dir,
    )
    session = agenttrace.new_session()
    answer = asyncio.run(run_first(options_for(args.model), model=args.model))
    tracing.force_flush()
    print(f"\nAnswer: {answer}")
    report(session, tracing)
    tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
