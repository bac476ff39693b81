"""An agent for ``agenttrace replay SESSION --agent tests.replay_agent:rebuild``: the root's
``response()`` runs ``shop``, which asks the model at ``REPLAY_LLM_BASE`` (the scripted model
on 127.0.0.1), charges, and asks again; ``REPLAY_PROMPT`` edits its first prompt (a program
changed since its run was recorded)."""

from __future__ import annotations

import os
from typing import Any

import litellm

import agenttrace


def ask(messages: list[dict[str, Any]]) -> str:
    reply = litellm.completion(
        model="openai/gpt-4o-mini",
        messages=messages,
        api_base=os.environ["REPLAY_LLM_BASE"],
        api_key="sk-agenttrace-test-key-0001",
        max_retries=0,
    )
    return str(reply.choices[0].message.content)


@agenttrace.tool(effect="effect")
def charge(amount: int) -> str:
    return f"ch_{amount}"


@agenttrace.agent("Shop")
def shop() -> str:
    messages = [{"role": "user", "content": os.environ.get("REPLAY_PROMPT", "a tea, please")}]
    first = ask(messages)
    paid = charge(5)
    messages += [{"role": "assistant", "content": first}, {"role": "user", "content": paid}]
    return ask(messages)


class Root:
    """The root agent as the replay rebuilds it: its run is ``shop``."""

    def response(self) -> str:
        return shop()


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Any:
    return Root()
