"""Fork (issue 36 items 2 and 6; docs/design/replay.md, "Fork"): a recorded run of the shop
agent (tests/test_replay.py) is forked at its last LLM call onto another model of the scripted
server on 127.0.0.1: nothing before the label asks the model, the first live call is at the
label and is sent with the overrides (model, system prompt, request keywords), ``diff`` finds
the first divergence there, and the fork's session file and root span name the source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace

from . import replay_agent
from .conftest import Traced
from .helpers import ROOT
from .llm_server import LLMServer, Reply
from .test_cli import agenttrace as run_cli
from .test_cli import ok, one_error_line
from .test_replay import CHARGES, labels, record, session_file, shop_agent

NEW_MODEL = "openai/gpt-4o"


def journal(tmp_path: Path, session_id: str) -> list[dict[str, Any]]:
    """The step lines of a session's event stream, in order."""
    path = tmp_path / "sessions" / f"{session_id}.events.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("event_type") == "step"]


def last_llm_label(tmp_path: Path, source: agenttrace.Session) -> str:
    """The label of the source run's last LLM call of Shop (not Barista's, in a tool body)."""
    return [
        line["step"]
        for line in journal(tmp_path, source.session_id)
        if line["kind"] == "llm" and line["state"] == "intent" and ":" not in line["step"]
    ][-1]


def ops(node: Any) -> list[dict[str, Any]]:
    """Every op node under ``node`` (a session file's ``runs``), at any depth."""
    if isinstance(node, list):
        return [op for item in node for op in ops(item)]
    if not isinstance(node, dict):
        return []
    found = [node] if "opId" in node else []
    return found + [op for value in node.values() for op in ops(value)]


def root_span(traced: Traced, session_id: str) -> Any:
    (root,) = [
        s
        for s in traced.ours()
        if s.parent is None
        and (s.attributes or {}).get("agenttrace.kind") == "session"
        and (s.attributes or {}).get("agenttrace.session.id") == session_id
    ]
    return root


def test_a_fork_serves_what_came_before_its_label_and_sends_the_rest_with_its_overrides(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    at = last_llm_label(tmp_path, source)
    llm.reset(Reply(content="A forked tea."))
    with agenttrace.forking(
        source.session_id,
        at=at,
        model=NEW_MODEL,
        system_prompt="Answer in five words.",
        settings={"temperature": 0.2, "max_tokens": 50},
    ) as fork:
        assert shop("a tea, please") == "A forked tea."
    # No model call before the label (Shop's first, Barista's in a served tool body); one at it.
    (sent,) = llm.requests
    body = sent.body
    assert body["model"] == "gpt-4o" and body["temperature"] == 0.2 and body["max_tokens"] == 50
    assert body["messages"][0] == {"role": "system", "content": "Answer in five words."}
    assert [m["role"] for m in body["messages"][1:]] == ["user", "assistant", "user"]
    assert CHARGES == [5] and fork.report.served == 3  # the first call and both tool calls
    assert [n.label for n in fork.report.live] == [at]
    # The fork's journal: its first live step is at the label, named by the model it asked.
    lines = journal(tmp_path, fork.session.session_id)
    (live,) = [line for line in lines if line["state"] == "intent" and line["kind"] == "llm"]
    assert (live["step"], live["name"]) == (at, "gpt-4o")
    # The span records the request as sent.
    source_span, span = [
        s for s in traced.ours() if (s.attributes or {}).get("agenttrace.path") == at
    ]
    assert source_span.name == "chat gpt-4o-mini"
    assert span.name == "chat gpt-4o"
    assert span.attributes is not None and span.attributes["gen_ai.request.model"] == "gpt-4o"
    # The session file names its source, and the op at the label by the model it asked.
    written = session_file(traced, tmp_path, fork.session.session_id)
    assert [op["name"] for op in ops(written["runs"]) if op["path"] == at] == ["gpt-4o"]
    meta = written["meta"]
    assert meta["replay_of"]["until"] == at
    fork_of = meta["fork_of"]
    assert (fork_of["session"], fork_of["run"], fork_of["label"]) == (
        source.session_id,
        meta["replay_of"]["run"],
        at,
    )
    assert fork_of["overrides"]["model"] == NEW_MODEL
    assert fork_of["overrides"]["settings"] == {"temperature": 0.2, "max_tokens": 50}
    assert fork_of["overrides"]["system_prompt"]["chars"] == len("Answer in five words.")
    # Its root span links to the source run's and says where it branched.
    source_root = root_span(traced, source.session_id)
    fork_root = root_span(traced, fork.session.session_id)
    assert len(fork_root.links) == 1, [(k.context, k.attributes) for k in fork_root.links]
    (link,) = fork_root.links
    assert link.context.trace_id == source_root.context.trace_id
    assert link.context.span_id == source_root.context.span_id
    attributes = fork_root.attributes or {}
    assert attributes["agenttrace.fork.session"] == source.session_id
    assert attributes["agenttrace.fork.run"] == fork_of["run"]
    assert attributes["agenttrace.fork.label"] == at
    assert attributes["agenttrace.fork.model"] == NEW_MODEL


def test_a_fork_without_overrides_only_runs_the_label_on_live(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    at = labels(tmp_path, source)["charge"]
    llm.reset(Reply(content="Here is your green tea."))
    with agenttrace.forking(source.session_id, at=at) as fork:
        assert shop("a tea, please") == "Here is your green tea."
    assert CHARGES == [5, 5]  # the charge at the label ran again
    (sent,) = llm.requests  # the call after it: live, as the program made it
    assert sent.body["model"] == "gpt-4o-mini" and "temperature" not in sent.body
    assert sent.body["messages"][0]["role"] == "user"
    assert fork.report.served == 2
    fork_root = root_span(traced, fork.session.session_id)
    assert "agenttrace.fork.model" not in (fork_root.attributes or {})


def test_what_cannot_be_forked_is_refused_before_anything_runs(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    source = record(traced, llm, shop_agent(llm))
    with pytest.raises(ValueError, match=r"no step at '9\.9'"):
        agenttrace.forking(source.session_id, at="9.9").__enter__()
    for key in ("messages", "stream", "model"):
        with pytest.raises(ValueError, match=f"'{key}' cannot be set"):
            agenttrace.forking(source.session_id, at="1.1", settings={key: 1}).__enter__()
    with pytest.raises(TypeError, match="at must be a path label"):
        agenttrace.forking(source.session_id, at=None).__enter__()  # type: ignore[arg-type]
    assert agenttrace.current_session() is source  # left as it was


def test_the_cli_forks_onto_another_model_and_refuses_bad_input_in_one_line(
    traced: Traced, tmp_path: Path, llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_LLM_BASE", llm.api_base)
    llm.reset(Reply(content="One tea."), Reply(content="Here it is."))
    assert replay_agent.shop() == "Here it is."
    source = agenttrace.current_session()
    traced.handle.force_flush()
    at = labels(tmp_path, source)["gpt-4o-mini"]  # the second call: after the charge
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Be terse.", encoding="utf-8")
    llm.reset(Reply(content="Tea."))
    sessions = str(tmp_path / "sessions")
    args = ("fork", source.session_id, "--agent", "tests.replay_agent:rebuild")
    args += ("--sessions-dir", sessions)
    out = ok(
        run_cli(
            tmp_path,
            *args,
            "--at",
            at,
            "--model",
            NEW_MODEL,
            "--system-prompt",
            str(prompt),
            "--set",
            "temperature=0.5",
            "--set",
            "user=shop",
            cwd=ROOT,
            REPLAY_LLM_BASE=llm.api_base,
        )
    )
    assert "Answer: Tea." in out
    assert "2 step(s) served from the recording, 1 run live" in out
    assert f"(of {source.session_id}, run {source.session_id}, at {at})" in out
    (sent,) = llm.requests
    assert (sent.body["model"], sent.body["temperature"], sent.body["user"]) == (
        "gpt-4o",
        0.5,
        "shop",
    )
    assert sent.body["messages"][0] == {"role": "system", "content": "Be terse."}
    (line,) = [line for line in out.splitlines() if line.startswith("Fork session ")]
    forked = line.split()[2]
    meta = session_file(traced, tmp_path, forked)["meta"]
    assert meta["fork_of"]["session"] == source.session_id and meta["fork_of"]["label"] == at
    # diff finds the first divergence at the label: the request sent there.
    compared = run_cli(
        tmp_path, "diff", source.session_id, forked, "--json", "--sessions-dir", sessions
    )
    assert compared.returncode == 1, compared.stderr
    first = json.loads(compared.stdout)["first_divergence"]
    assert (first["a"], first["b"], first["step_kind"]) == (at, at, "llm"), first

    def refused(*more: str) -> str:
        return one_error_line(run_cli(tmp_path, *args, *more, cwd=ROOT))

    assert "no step at '9.9'" in refused("--at", "9.9")
    assert "'model' cannot be set" in refused("--at", at, "--set", "model=x")
    assert "'stream' cannot be set" in refused("--at", at, "--set", "stream=true")
    assert "is not key=value" in refused("--at", at, "--set", "temperature")
    assert "no such file" in refused("--at", at, "--system-prompt", str(tmp_path / "none"))
    prompt.write_bytes(b"\xff\xfe")
    assert "not UTF-8" in refused("--at", at, "--system-prompt", str(prompt))
    prompt.write_bytes(b"x" * ((1 << 20) + 1))
    assert "over 1048576 bytes" in refused("--at", at, "--system-prompt", str(prompt))
