"""What a resume sets each agent back to when the interrupted run created or told sub-agents
(docs/journal.md, "Re-entry"): a sub-agent created in a call that runs again did not exist when
the run started (emptied, and not rebuilt by a ``load_session`` factory); what the body of a
call the journal answers logged stands, since that body does not run again. On sessions and
journals written by hand; tests/test_subagent_reentry.py runs the real thing."""

from __future__ import annotations

from typing import Any

from msgspec import to_builtins

import agenttrace
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.rewind import rewind_transcripts, undo_rewind
from agenttrace.model.skipped_bodies import skipped_bodies

RUN = "0123456789abcdef"
FP = "sha256:" + "1" * 64


class Story:
    """A session whose events are logged at the labels a traced run would give them."""

    def __init__(self) -> None:
        self.session = agenttrace.Session("story")
        self.root = self.session.allocate_agent_id()
        self.session.log_agent_created(
            self.root, name="Boss", initial=[{"role": "system", "content": "Boss"}]
        )
        self.say(self.root, "user", "Ask the expert.")
        self.journal: list[dict[str, Any]] = []

    def say(self, agent: str, role: str, content: str, path: str | None = None) -> None:
        self.session.log_transcript_entry(agent, {"role": role, "content": content})
        self._at(path)

    def create(self, name: str, path: str) -> str:
        agent = self.session.allocate_agent_id()
        self.session.log_agent_created(
            agent, name=name, initial=[{"role": "system", "content": name}]
        )
        self.session.events[-2]["path"] = path
        self._at(path)
        return agent

    def run_starts(self, attempt: int) -> None:
        line = to_builtins(
            jl.run_line(RUN, attempt, agent_id=self.root, name="response", messages=self.counter())
        )
        self.journal.append(line)

    def tool(self, label: str, done: bool, attempt: int = 1) -> None:
        key = (RUN, label, attempt)
        self.journal.append(
            to_builtins(
                jl.intent_line(
                    key, agent_id=self.root, name="consult", effect="effect", request_fingerprint=FP
                )
            )
        )
        if done:
            self.journal.append(
                to_builtins(
                    jl.done_line(
                        key, agent_id=self.root, kind="tool", name="consult", result='"ok"'
                    )
                )
            )

    def counter(self) -> int:
        return int(self.session.message_counter)

    def rewind(self, messages: int) -> Any:
        journal = j.Journal(self.journal)
        events = list(self.session.events)
        return rewind_transcripts(self.session, events, messages, skipped_bodies(journal, RUN))

    def contents(self, agent: str) -> list[str]:
        return [entry["content"] for entry in self.session.agents[agent].transcript]

    def _at(self, path: str | None) -> None:
        if path is not None:
            self.session.events[-1]["path"] = path


def test_a_sub_agent_created_in_a_call_that_runs_again_did_not_exist() -> None:
    story = Story()
    story.run_starts(1)
    started = story.counter()
    story.say(story.root, "assistant", "consult", "1.1")
    story.tool("1.2", done=False)  # killed inside the Expert's LLM call
    expert = story.create("Expert", "1.2")
    story.say(expert, "user", "Good?", "1.2")
    rewound = story.rewind(started)
    assert rewound.absent == {expert}
    assert story.contents(expert) == []
    assert story.contents(story.root) == ["Boss", "Ask the expert."]
    # The stream says so: replayed, the events give what the session holds.
    replayed = agenttrace.Session("story")
    replayed.restore(list(story.session.events), raw_lines=None)
    assert replayed.agents[expert].transcript == []
    undo_rewind(story.session, rewound)  # a new run after all: as the killed run left it
    assert story.contents(expert) == ["Expert", "Good?"]


def test_what_the_body_of_an_answered_call_logged_stands() -> None:
    story = Story()
    helper = story.create("Helper", "")  # created before the run, by an earlier one
    story.run_starts(1)
    started = story.counter()
    story.say(story.root, "assistant", "consult", "1.1")
    story.tool("1.2", done=True)
    expert = story.create("Expert", "1.2")
    story.say(expert, "user", "Good?", "1.2")
    story.say(expert, "assistant", "Yes.", "1.2.1.1")
    story.say(helper, "user", "Note it.", "1.2.1.2")  # told inside the answered call
    story.say(story.root, "tool", "Yes.", "1.2")  # its result: logged again by the re-entry
    story.say(story.root, "assistant", "pay", "2.1")
    story.tool("2.2", done=False)
    story.say(helper, "user", "Paying.", "2.2")  # told inside a call that runs again
    rewound = story.rewind(started)
    assert rewound.absent == frozenset()
    assert story.contents(expert) == ["Expert", "Good?", "Yes."]
    assert story.contents(helper) == ["Helper", "Note it."]
    assert story.contents(story.root) == ["Boss", "Ask the expert."]


def test_a_run_re_entered_again_keeps_the_sub_agent_its_last_body_made() -> None:
    story = Story()
    story.run_starts(1)
    first_start = story.counter()
    story.tool("1.2", done=False)  # killed in it
    first = story.create("Expert", "1.2")
    story.say(first, "user", "Good?", "1.2")
    story.rewind(first_start)
    # The re-entry ran the call again (decided --retry), made a new Expert, and was killed
    # after the call ended.
    story.run_starts(2)
    second_start = story.counter()
    story.tool("1.2", done=True, attempt=2)
    second = story.create("Expert", "1.2")
    story.say(second, "user", "Good?", "1.2")
    story.say(second, "assistant", "Yes.", "1.2.1.1")
    rewound = story.rewind(second_start)
    assert rewound.absent == {first}
    assert story.contents(second) == ["Expert", "Good?", "Yes."]
    assert story.contents(first) == []


def test_a_nested_sub_agent_of_a_call_that_runs_again_is_absent_too() -> None:
    story = Story()
    story.run_starts(1)
    started = story.counter()
    story.tool("1.2", done=False)
    expert = story.create("Expert", "1.2")
    story.journal.append(
        to_builtins(
            jl.intent_line(
                (RUN, "1.2.1.2", 1),
                agent_id=expert,
                name="lookup",
                effect="read",
                request_fingerprint=FP,
            )
        )
    )
    specialist = story.create("Specialist", "1.2.1.2")
    story.say(specialist, "user", "tea", "1.2.1.2")
    rewound = story.rewind(started)
    assert rewound.absent == {expert, specialist}
