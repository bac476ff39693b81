"""A re-entered run's tool results come back as the tool returned them (issue 22): the journal
keeps JSON, and a dataclass, a pydantic model, a TypedDict or plain types are rebuilt from the
tool function's return annotation. A result its JSON cannot give back (no annotation, a class
no annotation rebuilds) is marked so on its ``done`` line; a re-entry then runs the call again
if its class allows it, and otherwise stops with a clear error: never a dict for an object."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any, TypedDict

import pydantic
import pytest
from msgspec import to_builtins

import agenttrace
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.reentry import Reentry, check_policy

from .conftest import Traced
from .test_llm_steps import rearm
from .test_steps_journal import journal_lines


@dataclasses.dataclass
class Receipt:
    charge: str
    amount: int
    items: tuple[str, ...] = ()


class Invoice(pydantic.BaseModel):
    number: int
    receipt: Receipt
    notes: list[str] = []


class Totals(TypedDict):
    net: int
    tax: float


class Opaque:
    """A class of the user's that no annotation can rebuild from JSON."""

    def __init__(self, charge: str) -> None:
        self.charge = charge

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.charge == self.charge

    def __str__(self) -> str:
        return f"Opaque({self.charge})"


def receipt() -> Receipt:
    return Receipt("ch_1", 5, ("tea", "cake"))


def invoice() -> Invoice:
    return Invoice(number=7, receipt=receipt(), notes=["paid"])


def totals() -> Totals:
    return {"net": 5, "tax": 0.5}


def tools(ran: list[str], effect: str) -> dict[str, Any]:
    """Tools of every shape of result, each counting its runs in ``ran``."""

    @agenttrace.tool(effect=effect)
    def pay_dataclass(amount: int) -> Receipt:
        ran.append("dataclass")
        return receipt()

    @agenttrace.tool(effect=effect)
    async def pay_model(amount: int) -> Invoice:
        ran.append("model")
        return invoice()

    @agenttrace.tool(effect=effect)
    def pay_list(amount: int) -> list[Receipt]:
        ran.append("list")
        return [receipt(), Receipt("ch_2", 1)]

    @agenttrace.tool(effect=effect)
    def pay_typed_dict(amount: int) -> Totals:
        ran.append("typed dict")
        return totals()

    @agenttrace.tool(effect=effect)
    def pay_plain(amount: int) -> str:
        ran.append("plain")
        return "ch_1"

    @agenttrace.tool(effect=effect)
    def pay_untyped(amount: int):  # type: ignore[no-untyped-def]
        ran.append("untyped")
        return {"charge": "ch_1", "amounts": [5, 1.5, None, True]}

    return {
        "dataclass": pay_dataclass,
        "model": pay_model,
        "list": pay_list,
        "typed dict": pay_typed_dict,
        "plain": pay_plain,
        "untyped": pay_untyped,
    }


def call(tool: Any) -> Any:
    result = tool(5)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def test_results_come_back_as_the_tool_returned_them(traced: Traced, tmp_path: Path) -> None:
    ran: list[str] = []
    shop_tools = tools(ran, "effect")  # not run again: only the journal can answer

    @agenttrace.agent("Shop")
    def shop() -> dict[str, Any]:
        return {name: call(tool) for name, tool in shop_tools.items()}

    live = shop()
    traced.handle.force_flush()
    assert all("replayable" not in line for line in journal_lines(tmp_path))
    rearm(tmp_path)
    replayed = shop()
    assert ran == list(shop_tools)  # each body ran once: the re-entry was answered
    assert replayed == live
    assert {name: type(value) for name, value in replayed.items()} == {
        name: type(value) for name, value in live.items()
    }
    assert replayed["dataclass"].items == ("tea", "cake")  # a tuple again, not a list
    assert type(replayed["model"].receipt) is Receipt
    assert type(replayed["list"][1]) is Receipt


def unanswerable_tools(ran: list[str], effect: str) -> tuple[Any, Any]:
    @agenttrace.tool(effect=effect)
    def pay_untyped(amount: int):  # type: ignore[no-untyped-def]
        ran.append("untyped")
        return receipt()

    @agenttrace.tool(effect=effect)
    def pay_opaque(amount: int) -> Opaque:
        ran.append("opaque")
        return Opaque("ch_1")

    return pay_untyped, pay_opaque


def test_a_result_its_json_cannot_give_back_is_marked_so(traced: Traced, tmp_path: Path) -> None:
    ran: list[str] = []
    untyped, opaque = unanswerable_tools(ran, "idempotent")
    agenttrace.agent("Shop")(lambda: (untyped(5), opaque(5)))()
    traced.handle.force_flush()
    done = [line for line in journal_lines(tmp_path) if line["state"] == "done"]
    assert [line.get("replayable") for line in done] == [False, False]
    assert j.Journal(done).steps[done[0]["run"], "1.1", 1].replayable is False


def test_a_result_not_given_back_runs_again_if_its_class_allows(
    traced: Traced, tmp_path: Path
) -> None:
    ran: list[str] = []
    untyped, opaque = unanswerable_tools(ran, "idempotent")

    @agenttrace.agent("Shop")
    def shop() -> tuple[Any, Any]:
        return untyped(5), opaque(5)

    live = shop()
    traced.handle.force_flush()
    rearm(tmp_path)
    again = shop()
    assert ran == ["untyped", "opaque", "untyped", "opaque"]  # run again, not answered
    assert again == live and type(again[0]) is Receipt and type(again[1]) is Opaque
    traced.handle.force_flush()
    attempts = [(line["step"], line["state"], line["attempt"]) for line in journal_lines(tmp_path)]
    assert sorted(attempts[-4:]) == [  # a done line is written later: in no set order
        ("1.1", "done", 2), ("1.1", "intent", 2), ("1.2", "done", 2), ("1.2", "intent", 2)
    ]  # fmt: skip


def test_a_result_not_given_back_stops_the_resume_if_its_class_is_not_run_again(
    traced: Traced, tmp_path: Path
) -> None:
    ran: list[str] = []
    untyped, _ = unanswerable_tools(ran, "effect")

    @agenttrace.agent("Shop")
    def shop() -> Any:
        return untyped(5)

    shop()
    traced.handle.force_flush()
    rearm(tmp_path)
    with pytest.raises(agenttrace.UnanswerableToolCall) as stopped:
        shop()
    assert ran == ["untyped"]  # not run again, and no dict handed back instead
    assert isinstance(stopped.value, agenttrace.InDoubtToolCall)
    message = str(stopped.value)
    assert "pay_untyped at 1.1 ended, but its result cannot be given back" in message
    assert "annotate the tool's return type" in message


def rearm_with_decision(tmp_path: Path, result: str) -> None:
    """Arm a re-entry whose journal holds the run's tool call in doubt, decided ``done`` by
    its user with ``result`` (as ``agenttrace resolve --done`` writes it)."""
    lines = [line for line in journal_lines(tmp_path, runs=True) if line["state"] != "done"]
    (tool,) = [line for line in lines if line.get("kind") == "tool"]
    decision = to_builtins(
        jl.decision_line((tool["run"], tool["step"], tool["attempt"]), "done", result=result)
    )
    session = agenttrace.current_session()
    session.reentry = Reentry(tool["run"], 2, j.Journal([*lines, decision]), check_policy(None))


@pytest.mark.parametrize("effect", ["idempotent", "effect"])
def test_a_decided_result_the_annotation_does_not_take_is_not_handed_back(
    traced: Traced, tmp_path: Path, effect: str
) -> None:
    ran: list[str] = []
    pay = tools(ran, effect)["dataclass"]

    @agenttrace.agent("Shop")
    def shop() -> Any:
        return pay(5)

    shop()
    traced.handle.force_flush()
    rearm_with_decision(tmp_path, '{"charge": "ch_1", "amount": 5, "items": ["tea"]}')
    assert shop() == Receipt("ch_1", 5, ("tea",))  # the user's answer, as a Receipt
    assert ran == ["dataclass"]

    rearm_with_decision(tmp_path, '{"refund": true}')
    if effect == "idempotent":
        assert shop() == receipt()  # run again
        assert ran == ["dataclass", "dataclass"]
    else:
        with pytest.raises(agenttrace.UnanswerableToolCall, match="cannot be given back"):
            shop()
        assert ran == ["dataclass"]
