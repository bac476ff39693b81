"""Substance links that are right or absent (issue 21, item 1; docs/events.md, "Which reply
heard text stands for").

A link says that what an agent heard is what another agent said; every view presents it as
fact, so a wrong link is worse than none. Identity (a ``LoggedString``, the reply's own
``str`` object) always links; content links only when it cannot be a coincidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm

import agenttrace
from agenttrace.model.events import LoggedString

from .conftest import Traced


def text_reply(text: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}


@agenttrace.llm("openai/gpt-x")
def chat(messages: list[Any], reply: dict[str, Any]) -> dict[str, Any]:
    # A reply decoded from the wire, as a client gives it: a str object of its own.
    return json.loads(json.dumps(reply))  # type: ignore[no-any-return]


@agenttrace.agent_class
class Person:
    def __init__(self, name: str) -> None:
        self.name = name
        self.language_model = "openai/gpt-x"

    @agenttrace.hears
    def harken(self, text: str) -> None:
        pass

    @agenttrace.agent
    def respond(self, line: str) -> str:
        return str(chat(messages=[], reply=text_reply(line))["choices"][0]["message"]["content"])


def heard(session: agenttrace.Session, name: str) -> list[tuple[str, Any]]:
    agent = session.agent_named(name)
    assert agent is not None
    return [(e["content"], e.get("substance")) for e in agent.transcript if e.get("role") == "user"]


def reply_id(session: agenttrace.Session, content: str) -> str:
    return next(
        e["message_id"]
        for e in session.events
        if e.get("role") == "assistant" and e.get("content") == content
    )


def test_a_short_text_someone_else_typed_is_not_the_reply_that_said_it(traced: Traced) -> None:
    session = agenttrace.new_session()
    jack, jill = Person("Jack"), Person("Jill")
    yes = jack.respond("Yes.")
    jill.harken("Yes.")  # the user types it: the same words, not Jack's reply
    jill.harken(yes)  # Jack's reply itself, passed along unchanged: the same object
    jill.harken(LoggedString("Yes", reply_id(session, "Yes.")))  # an id carried by the text
    assert heard(session, "Jill") == [
        ("Yes.", None),
        ("Yes.", reply_id(session, "Yes.")),
        ("Yes", reply_id(session, "Yes.")),
    ]


def test_a_hook_that_redacts_relayed_text_keeps_the_link(traced: Traced) -> None:
    """The specification's hook-transparency example: Jack says "password: 1234", Jill hears
    "password: [REDACTED]", and both stand for the same message."""
    session = agenttrace.new_session()
    jack, jill = Person("Jack"), Person("Jill")

    def hook(text: str) -> str:  # what a hook between two agents does, on a plain str
        return text.replace("1234", "[REDACTED]")

    said = jack.respond("password: 1234")
    jill.harken(hook(said))
    jill.harken("[Jack]: " + hook(said))  # redacted and tagged
    jill.harken("password: [REDACTED] and more besides that")  # not what Jack said
    jill.harken("[REDACTED]")  # a marker alone fits anything: nothing
    jack_said = reply_id(session, "password: 1234")
    assert heard(session, "Jill") == [
        ("password: [REDACTED]", jack_said),
        ("[Jack]: password: [REDACTED]", jack_said),
        ("password: [REDACTED] and more besides that", None),
        ("[REDACTED]", None),
    ]


def test_agents_of_unrelated_trees_do_not_link(traced: Traced) -> None:
    session = agenttrace.new_session()
    text = "A reply long enough to be told apart from others"

    def tree(name: str) -> tuple[str, str]:
        root = session.allocate_agent_id()
        session.log_agent_created(root, name=f"{name} root")
        call = session.log_transcript_entry(
            root,
            {"role": "assistant", "tool_calls": [{"id": f"c-{name}", "function": {"name": "t"}}]},
        )
        child = session.allocate_agent_id()
        session.log_agent_created(child, cause=call, name=f"{name} child")
        return root, child

    root_a, child_a = tree("A")
    _, child_b = tree("B")
    sibling = session.allocate_agent_id()
    session.log_agent_created(
        sibling, cause=session.revivify(child_a).cause, name="A's other child"
    )
    said = session.log_transcript_entry(child_a, {"role": "assistant", "content": text})
    copy = "".join([text[:10], text[10:]])  # the same words, another object
    assert session.reply_saying(copy, sibling) == said  # a sibling heard it
    assert session.reply_saying(copy, root_a) == said  # its parent
    assert session.reply_saying(copy, child_b) is None  # a sub-agent of another tree
    assert session.reply_saying(copy) == said  # no hearer named: any speaker


def test_a_message_an_agent_relays_into_its_own_history_links_to_the_reply(
    traced: Traced,
) -> None:
    """Agents that keep their own history (no ``@hears``) get the link too: the user message
    their request adds is the other agent's reply."""
    session = agenttrace.new_session()
    jack = Person("Jack")
    said = jack.respond("Meet me at the station at noon")
    history: list[dict[str, Any]] = [{"role": "user", "content": "[Jack]: " + said}]

    @agenttrace.agent("Jill")
    def jill() -> None:
        litellm.completion(model="gpt-4o-mini", messages=history, mock_response="See you there")

    jill()
    assert heard(session, "Jill") == [
        ("[Jack]: Meet me at the station at noon", reply_id(session, said))
    ]


def test_a_tool_message_sent_again_keeps_the_answer_its_call_id_gave(
    traced: Traced, tmp_path: Path
) -> None:
    """A framework's ids link a tool call's result to a sub-agent's reply (the smolagents and
    Claude Agent SDK tests); a history the framework rewrites sends that result again, as an
    OpenAI-style ``tool`` message: its ``tool_call_id`` says it is the same answer, whatever
    its text, in this process and after a resume."""
    session = agenttrace.new_session()
    manager, other = session.allocate_agent_id(), session.allocate_agent_id()
    session.log_agent_created(manager, name="manager")
    session.log_agent_created(other, name="other")
    call = session.log_transcript_entry(
        manager,
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "ask"}}]},
    )
    helper = session.allocate_agent_id()
    session.log_agent_created(helper, cause=call, name="helper")
    yes = session.log_transcript_entry(helper, {"role": "assistant", "content": "Yes."})
    first = session.log_transcript_entry(
        manager, {"role": "tool", "tool_call_id": "c1", "content": "helper: Yes."}, yes
    )

    # The history rewritten: the result sent again in other words, with its call id.
    session.log_transcript_reset(
        manager,
        1,
        [
            {"role": "user", "content": "You asked the helper."},
            {"role": "tool", "tool_call_id": "c1", "content": "Yes."},
        ],
    )
    restated = session.revivify(manager).transcript[-1]
    assert (restated["content"], restated["substance"]) == ("Yes.", yes)
    assert restated["message_id"] != first

    # Read back from its stream, the session still knows what the call's result stands for.
    stream = tmp_path / "links.events.jsonl"
    stream.write_bytes(b"".join(session.event_lines()))
    resumed = agenttrace.Session.load(stream)
    again = resumed.log_transcript_entry(
        manager, {"role": "tool", "tool_call_id": "c1", "content": "(the helper said yes)"}
    )
    # Only that agent's call with that id: not another call, not another agent's "c1", and
    # text that merely says the same is no answer.
    elsewhere = [
        resumed.log_transcript_entry(
            manager, {"role": "tool", "tool_call_id": "c2", "content": "Yes."}
        ),
        resumed.log_transcript_entry(
            other, {"role": "tool", "tool_call_id": "c1", "content": "Yes."}
        ),
        resumed.log_transcript_entry(other, {"role": "user", "content": "Yes."}),
    ]
    substances = {e["message_id"]: e.get("substance") for e in resumed.events}
    assert substances[again] == yes
    assert [substances[m] for m in elsewhere] == [None, None, None]
