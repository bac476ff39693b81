"""A decorated function defined in a class body is a method by binding, whatever its first
parameter is called: each instance is an agent (a classmethod's class is one), a staticmethod
and a function defined elsewhere are plain functions."""

from __future__ import annotations

from typing import Any

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs


def text_reply(text: str) -> dict[str, Any]:
    return {
        "model": "gpt-x",
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


@agenttrace.llm("openai/gpt-x")
def chat(messages: list[Any], reply: dict[str, Any]) -> dict[str, Any]:
    return reply


def agents_created() -> list[tuple[str, str]]:
    """(agent id, name) of each agent the session created, in order."""
    return [
        (e["agent_id"], e["name"])
        for e in agenttrace.current_session().events
        if e["event_type"] == "agent_created"
    ]


def event_types() -> list[str]:
    return [e["event_type"] for e in agenttrace.current_session().events]


class Person:
    """An agent class whose methods do not call their instance ``self``."""

    def __init__(s, name: str) -> None:  # the point: any name binds
        s.name = name
        s.transcript: list[dict[str, Any]] = [{"role": "user", "content": f"Hello {name}."}]

    @agenttrace.agent
    def run(s) -> str:
        reply = chat(messages=list(s.transcript), reply=text_reply(f"{s.name} here."))
        s.transcript.append(reply["choices"][0]["message"])
        return str(reply["choices"][0]["message"]["content"])

    @agenttrace.tool
    def note(me, text: str, *more: str) -> str:
        return text

    @staticmethod
    @agenttrace.agent
    def introduce(person: Person) -> str:
        return person.name

    @agenttrace.agent  # above @staticmethod: still a staticmethod
    @staticmethod
    def greet(person: Person) -> str:
        return f"hi {person.name}"


def test_two_instances_whose_method_is_def_run_s_are_two_agents(traced: Traced) -> None:
    jack, jill = Person("Jack"), Person("Jill")
    assert (jack.run(), jill.run(), jack.run()) == ("Jack here.", "Jill here.", "Jack here.")
    created = agents_created()
    assert [name for _, name in created] == ["Jack", "Jill"]
    assert created[0][0] != created[1][0]
    assert (jack.agent_id, jill.agent_id) == (created[0][0], created[1][0])
    # Jill's history is her own, not a rewrite of Jack's.
    assert "transcript_reset" not in event_types()
    runs = traced.by_name("invoke_agent Jack")
    assert len(runs) == 2 and {attrs(s)[sc.AGENT_ID] for s in runs} == {jack.agent_id}


def test_a_method_tool_records_its_arguments_without_the_instance(traced: Traced) -> None:
    @agenttrace.agent("Boss")
    def boss() -> None:
        Person("Jack").note("milk", "eggs")

    boss()
    assert attrs(traced.one("execute_tool note"))[sc.TOOL_CHARS_IN] == len(
        '{"text": "milk", "more": ["eggs"]}'
    )


def test_a_staticmethod_is_a_plain_function(traced: Traced) -> None:
    jack = Person("Jack")
    # Called on the class and on an instance, with an instance of its own class as argument:
    # that argument is no agent, the run goes by the function's name.
    assert Person.introduce(jack) == "Jack"
    assert jack.introduce(jack) == "Jack"
    assert jack.greet(jack) == "hi Jack" and Person.greet(jack) == "hi Jack"
    assert isinstance(Person.__dict__["greet"], staticmethod)
    assert [s.name for s in traced.ours()] == [
        "invoke_agent introduce",
        "invoke_agent introduce",
        "invoke_agent greet",
        "invoke_agent greet",
    ]
    assert not hasattr(jack, "agent_id")  # nothing was written on the argument


def test_a_classmethod_is_an_agent_per_class(traced: Traced) -> None:
    class Planner:
        name = "planner"

        @classmethod
        @agenttrace.agent
        def plan(klass) -> str:
            return klass.__name__

        @agenttrace.agent  # above @classmethod: still a classmethod
        @classmethod
        def review(klass) -> str:
            return f"reviewed by {klass.__name__}"

        @agenttrace.agent
        def run(me) -> str:
            return "run"

    class Nightly(Planner):
        name = "nightly"

    planner = Planner()
    assert (Planner.plan(), planner.plan(), Nightly.plan()) == ("Planner", "Planner", "Nightly")
    planner.run()
    assert Nightly.review() == "reviewed by Nightly"
    assert isinstance(vars(Planner)["review"], classmethod)
    created = agents_created()
    # One agent per class, and the instance's own runs are another agent: the class's id is
    # not inherited by its subclass nor by its instances.
    assert [name for _, name in created] == ["planner", "nightly", "planner"]
    assert len({agent_id for agent_id, _ in created}) == 3
    plans = traced.by_name("invoke_agent planner")
    assert len({attrs(s)[sc.AGENT_ID] for s in plans[:2]}) == 1
    nightly = traced.by_name("invoke_agent nightly")
    assert len(nightly) == 2 and len({attrs(s)[sc.AGENT_ID] for s in nightly}) == 1
    assert "agent_id" not in vars(Planner)


def test_functions_defined_outside_a_class_body_are_plain(traced: Traced) -> None:
    @agenttrace.agent
    def helper(self: Person) -> str:  # a first parameter named self is no method
        return self.name

    assert helper(Person("Jack")) == "Jack"
    assert [s.name for s in traced.ours()] == ["invoke_agent helper"]
