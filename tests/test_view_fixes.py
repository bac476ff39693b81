"""What the views show of a real traced run: message content, cost and usage as a person reads them.

One run through litellm against the scripted server on 127.0.0.1: multi-part messages (text,
an image, a file, a tool result as a list of parts), a model missing from litellm's price map
(sync, and async streamed), a 429 (a failed attempt that reported no usage), a priced model and
a model priced at 0. Then ``dialog``, ``perspective``, ``tree``, ``stats`` (text and
``--json``), the console lines, the ledger and the HTML page (in headless Chromium) are read
as a user reads them: content as text (never a Python repr), an unknown price as unknown
(never ``$0.000000``), a real zero as ``$0``, no ``None`` where a count was missing.
"""

from __future__ import annotations

import asyncio
import copy
import html
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litellm
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.cli import main
from agenttrace.formats.content import content_text
from agenttrace.formats.session.files import LoadedFile, read_session_file
from agenttrace.formats.session.totals import cost_text, session_stats
from agenttrace.views.exports import to_html

from .helpers import child_env
from .llm_server import LLMServer, Reply
from .test_exports import _Browser, _root_attributes, _without_scripts

ROOT = Path(__file__).resolve().parent.parent
UNPRICED = "openai/acme-private-7b"  # no entry in litellm's price map
PRICED = "openai/gpt-4o-mini"
FREE = "openrouter/openrouter/free"  # priced at 0 per token
PRICED_COST = sum(
    litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=11, completion_tokens=7)
)
WEATHER_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}
SYSTEM = [{"type": "text", "text": "You describe pictures."}]
QUESTION = [
    {"type": "text", "text": "What is in this picture?"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    {"type": "file", "file": {"filename": "notes.pdf", "file_data": "data:;base64,JVBERi0="}},
]
WEATHER = [{"type": "text", "text": "4 degrees"}, {"type": "text", "text": "light rain"}]


@dataclass
class Run:
    """What one traced run left: its files and the console lines it printed."""

    sessions: Path
    snapshot: Path
    ledger: Path
    console: str
    loaded: LoadedFile


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, llm_server: LLMServer) -> Iterator[Run]:
    directory = tmp_path_factory.mktemp("view-fixes")
    if FREE not in litellm.model_cost:  # litellm 1.110's map (the lock's) has no OpenRouter models
        litellm.register_model(
            {
                FREE: {
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    "litellm_provider": "openrouter",
                    "mode": "chat",
                }
            }
        )
    console = io.StringIO()
    provider = TracerProvider()
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        console="verbose",
        console_stream=console,
        sessions_dir=directory / "sessions",
        billing_file=directory / "accounting.jsonl",
    )
    llm_server.reset(
        Reply(content="A cat."),  # 1: unpriced, sync
        Reply(content="A dog."),  # 2: unpriced, async stream
        Reply(status=429, error_message="slow down"),  # 3: a failed attempt
        Reply(content="", tool_calls=[WEATHER_CALL]),  # 4: priced
        Reply(content="Rainy."),  # 5: priced at 0
    )
    base = {"api_base": llm_server.api_base, "api_key": "sk-test-key"}

    @agenttrace.agent(name="Looker")
    async def looker() -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": QUESTION},
        ]
        reply = litellm.completion(model=UNPRICED, messages=messages, **base)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        messages.append({"role": "user", "content": [{"type": "text", "text": "And this one?"}]})
        stream = await litellm.acompletion(
            model=UNPRICED,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **base,
        )
        text = "".join(
            [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
        )
        messages.append({"role": "assistant", "content": text})
        messages.append({"role": "user", "content": "What is the weather there?"})
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(model=PRICED, messages=messages, num_retries=0, **base)
        # Asked again: attempt 2 of the same call, in the same turn (3.1 failed, 3.2).
        reply = litellm.completion(model=PRICED, messages=messages, **base)
        messages.append(reply.choices[0].message.model_dump())
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": WEATHER})
        litellm.completion(model=FREE, messages=messages, **base)

    try:
        asyncio.run(looker())
    finally:
        handle.shutdown()
        provider.shutdown()
    (snapshot,) = (directory / "sessions").glob("*.json.gz")
    yield Run(
        directory / "sessions",
        snapshot,
        directory / "accounting.jsonl",
        console.getvalue(),
        read_session_file(snapshot),
    )


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def no_repr(text: str) -> None:
    """Nothing in ``text`` is a Python or JSON rendering of a list of parts."""
    assert "'type'" not in text and '"type"' not in text and "[{" not in text, text
    assert "None" not in text, text


# --- content ----------------------------------------------------------------------------------

CONTENT_CASES: list[tuple[Any, str]] = [
    ("plain text", "plain text"),
    ("", ""),
    (None, ""),
    ([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}], "one\ntwo"),
    ([{"type": "input_text", "text": "in"}, {"type": "output_text", "text": "out"}], "in\nout"),
    ([{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": "x"}}],
     "Look:\n[image]"),
    ([{"type": "image", "source": {"type": "base64", "data": "AAAA"}}], "[image]"),
    ([{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}], "[image]"),
    ([{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}], "[audio]"),
    ([{"type": "video_url", "video_url": {"url": "x"}}], "[video]"),
    ([{"type": "file", "file": {"filename": "a.pdf", "file_data": "AAAA"}}], "[file a.pdf]"),
    ([{"type": "file", "file": {"file_id": "file-1"}}], "[file]"),
    ([{"type": "input_file", "filename": "b.txt"}], "[file b.txt]"),
    ([{"type": "document", "source": {"data": "AAAA"}}], "[file]"),
    ([{"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "cats"}}],
     "[tool call search]"),
    ([{"type": "function_call", "arguments": "{}"}], "[tool call]"),
    ([{"type": "tool_result", "tool_use_id": "t1",
       "content": [{"type": "text", "text": "3 cats"}]}], "[tool result] 3 cats"),
    ([{"type": "function_call_output", "output": "done"}], "[tool result] done"),
    ([{"type": "tool_result", "tool_use_id": "t1"}], "[tool result]"),
    ([{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Hi"}],
     "[thinking]\nHi"),
    ([{"type": "refusal", "refusal": "I can't."}], "I can't."),
    ([{"type": "cache_point"}], "[cache_point]"),
    ([{"type": "x" * 50}], "[" + "x" * 40 + "]"),
    ([{"type": "\U0001f600" * 41}], "[" + "\U0001f600" * 40 + "]"),
    ([{"type": "text", "text": 5}], "[text]"),
    ([{"type": 7, "text": "t"}], '{"type":7,"text":"t"}'),
    (["a", "b", ["c", {"type": "text", "text": "d"}]], "a\nb\nc\nd"),
    ([None, 3, True], "\n3\ntrue"),
    ({"type": "text", "text": "a lone part"}, "a lone part"),
    ({"answer": 42, "why": "ünïcode"}, '{"answer":42,"why":"ünïcode"}'),
    (42, "42"),
    (False, "false"),
    ([], ""),
]  # fmt: skip


@pytest.mark.parametrize(("content", "expected"), CONTENT_CASES)
def test_content_text_renders_each_kind_of_content(content: Any, expected: str) -> None:
    assert content_text(content) == expected


def test_dialog_shows_the_text_of_multi_part_messages(run: Run) -> None:
    shown = cli("dialog", str(run.snapshot), "--agents", "Looker")
    assert shown == (
        "(Looker's instructions) You describe pictures.\n"
        "(Looker) What is in this picture?\n[image]\n[file notes.pdf]\n"
        "Looker: A cat.\n"
        "(Looker) And this one?\n"
        "Looker: A dog.\n"
        "(Looker) What is the weather there?\n"
        "Looker: \n"  # the tool call's message: the server said "" beside the call
        # The tool's result, a list of text parts: what the tool returned, not Looker's words.
        "(Looker's tool get_weather returned) 4 degrees\nlight rain\n"
        "Looker: Rainy.\n"
    )
    no_repr(shown)
    assert "base64" not in shown  # a placeholder, never the bytes


def test_perspective_shows_the_text_of_multi_part_messages(run: Run) -> None:
    shown = cli("perspective", str(run.snapshot), "Looker")
    assert shown == (
        "[System]: You describe pictures.\n"
        "[Heard]: What is in this picture?\n[image]\n[file notes.pdf]\n"
        "[Said]: A cat.\n"
        "[Heard]: And this one?\n"
        "[Said]: A dog.\n"
        "[Heard]: What is the weather there?\n"
        '[Action]: get_weather({"city": "Oslo"})\n'
        "[Received]: 4 degrees\nlight rain\n"
        "[Said]: Rainy.\n"
    )
    no_repr(shown)


def test_extract_dialog_gives_each_message_as_text_too(run: Run) -> None:
    viewer = agenttrace.SessionViewer(run.snapshot)
    (looker,) = viewer.agent_ids(["Looker"])
    question = viewer.extract_dialog([looker])[1]
    assert question["content"] == QUESTION  # the data as the agent sent it
    assert question["text"] == "What is in this picture?\n[image]\n[file notes.pdf]"


# --- cost and usage ---------------------------------------------------------------------------


def _console_line(run: Run, path: str) -> str:
    (line,) = [line for line in run.console.splitlines() if f"] {path} llm/" in line]
    return line


def test_console_says_cost_unknown_and_never_none(run: Run) -> None:
    assert " 1.1 llm/openai:acme-private-7b: VRB ok " in _console_line(run, "1.1")
    assert _console_line(run, "1.1").endswith("tokens in 11 (cache r 0 w 0) out 7, cost unknown")
    streamed = _console_line(run, "2.1")
    assert "tokens in 11 (cache r 0 w 0) out 7" in streamed and streamed.endswith("cost unknown")
    failed = _console_line(run, "3.1")
    assert " WRN attempt 1 failed (quota) after " in failed
    assert _console_line(run, "3.2").endswith(f"out 7, ${PRICED_COST:.6f}")
    assert _console_line(run, "4.1").endswith("out 7, $0.000000")  # priced at 0: free, known
    assert "None" not in run.console and "$0.000000" not in _console_line(run, "1.1")


def test_tree_says_cost_unknown_and_no_usage(run: Run) -> None:
    lines = cli("tree", str(run.snapshot)).splitlines()

    def op(path: str) -> str:
        (line,) = [line for line in lines if f" {path} llm " in line]
        return line

    assert op("1.1").endswith(" in 11 out 7 cost unknown")
    assert op("2.1").endswith(" in 11 out 7 cost unknown")
    assert " failed " in op("3.1") and op("3.1").endswith(" no usage")
    assert op("3.2").endswith(f" in 11 out 7 ${PRICED_COST:.6f}")
    assert op("4.1").endswith(" in 11 out 7 $0.000000")
    assert not any("None" in line for line in lines)


def test_ledger_records_an_unknown_price_as_null_and_a_zero_as_zero(run: Run) -> None:
    lines = [json.loads(line) for line in run.ledger.read_text().splitlines()]
    by_path = {line["path"]: line for line in lines}
    assert by_path["1.1"]["costUsd"] is None and by_path["2.1"]["costUsd"] is None
    assert by_path["3.1"]["status"] == "failed" and by_path["3.1"]["costUsd"] is None
    assert by_path["3.1"]["tokens"]["inputTokens"] is None
    assert by_path["3.2"]["costUsd"] == pytest.approx(PRICED_COST)
    assert by_path["4.1"]["costUsd"] == 0.0
    # The ledger's lines total as the session's opTree does: the same entries, the same rules.
    ops = [{"accounting": [line]} for line in lines]
    from_ledger = session_stats([{"agentId": "agent_001", "turns": [{"ops": ops}]}])["total"]
    from_tree = session_stats(run.loaded.runs)["total"]
    assert from_ledger == from_tree
    assert cost_text(from_ledger) == f"at least ${PRICED_COST:.6f} (2 calls of unknown cost)"


def test_stats_json_says_null_for_an_unknown_total(run: Run) -> None:
    totals = json.loads(cli("stats", "--json", str(run.snapshot)))
    total = totals["total"]
    assert total["cost_usd"] is None
    assert total["cost_usd_known"] == pytest.approx(PRICED_COST)
    assert total["llm_attempts_cost_unknown"] == 2
    assert total["llm_attempts_ok"] == 4 and total["llm_attempts_failed"] == 1
    models = {row["model"]: row for row in totals["by_model"]}
    unpriced = models["openai:acme-private-7b"]
    assert unpriced["cost_usd"] is None and unpriced["cost_usd_known"] == 0
    assert unpriced["llm_attempts_cost_unknown"] == 2
    # A failed attempt without usage does not make its model's cost unknown.
    priced = models["openai:gpt-4o-mini"]
    assert priced["cost_usd"] == pytest.approx(PRICED_COST)
    assert priced["llm_attempts_failed"] == 1 and priced["llm_attempts_cost_unknown"] == 0
    free = models["openrouter:openrouter/free"]
    assert free["cost_usd"] == 0.0 and free["llm_attempts_cost_unknown"] == 0
    (agent,) = totals["by_agent"]
    assert agent["cost_usd"] is None and agent["llm_attempts_cost_unknown"] == 2


def test_stats_text_says_at_least_and_unknown(run: Run) -> None:
    shown = cli("stats", str(run.snapshot))
    lines = shown.splitlines()
    (unpriced,) = [line for line in lines if "acme-private-7b" in line]
    assert "unknown (2 calls of unknown cost)" in unpriced and "$0.0" not in unpriced
    (free,) = [line for line in lines if "openrouter/free" in line]
    assert "$0.000000" in free
    (total,) = [line for line in lines if line.startswith("│ all ")]
    assert f"at least ${PRICED_COST:.6f} (2 calls of unknown cost)" in total
    assert "None" not in shown


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"cost_usd": 0.25, "cost_usd_known": 0.25, "llm_attempts_cost_unknown": 0}, "$0.250000"),
        ({"cost_usd": 0.0, "cost_usd_known": 0.0, "llm_attempts_cost_unknown": 0}, "$0.000000"),
        ({"cost_usd": None, "cost_usd_known": 0.5, "llm_attempts_cost_unknown": 1},
         "at least $0.500000 (1 call of unknown cost)"),
        ({"cost_usd": None, "cost_usd_known": 0.0, "llm_attempts_cost_unknown": 3},
         "unknown (3 calls of unknown cost)"),
    ],
)  # fmt: skip
def test_cost_text(row: dict[str, Any], expected: str) -> None:
    assert cost_text(row) == expected


# --- SessionViewer, public as the README says ---------------------------------------------------


def _readme_block(marker: str) -> str:
    """The fenced Python block of docs/how-to/exports.md (where the README's section on reading
    a session moved) that follows the line holding ``marker``."""
    text = (ROOT / "docs" / "how-to" / "exports.md").read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match is not None
    return match.group(1)


def test_session_viewer_is_exported() -> None:
    from agenttrace.views.viewer import SessionViewer

    assert "SessionViewer" in agenttrace.__all__
    assert agenttrace.SessionViewer is SessionViewer


@pytest.mark.e2e
def test_the_readme_session_viewer_example_runs_as_written(run: Run, tmp_path: Path) -> None:
    script = tmp_path / "show_session.py"
    script.write_text(_readme_block("**Reading a session.**"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script), str(run.snapshot)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Looker (agent_001) heard, did and said:\n"
        + cli("perspective", str(run.snapshot), "Looker")
        + "Looker (system): You describe pictures.\n"
        "Looker (user): What is in this picture?\n[image]\n[file notes.pdf]\n"
        "Looker (assistant): A cat.\n"
        "Looker (user): And this one?\n"
        "Looker (assistant): A dog.\n"
        "Looker (user): What is the weather there?\n"
        "Looker (assistant): \n"
        "Looker (tool): 4 degrees\nlight rain\n"
        "Looker (assistant): Rainy.\n"
    )


# --- the HTML page, in headless Chromium -------------------------------------------------------


@pytest.fixture
def browser(tmp_path: Path) -> _Browser:
    return _Browser(tmp_path)


def _texts(dom: str, element: str, css_class: str) -> list[str]:
    """The text of every ``<element class="css_class">`` in ``dom`` (no nested elements)."""
    pattern = rf'<{element} class="{css_class}">([^<]*)</{element}>'
    return [html.unescape(text) for text in re.findall(pattern, dom)]


@pytest.mark.e2e
def test_html_page_shows_content_as_text_and_unknown_costs(
    run: Run, browser: _Browser, tmp_path: Path
) -> None:
    page = tmp_path / "session.html"
    page.write_text(to_html(run.loaded), encoding="utf-8")
    dom = browser.dom(page, "#expand=all")
    assert _root_attributes(dom).get("data-ready") == "1"
    assert _root_attributes(dom).get("data-errors") == ""
    shown = _without_scripts(dom)
    dialog = shown[shown.index('id="dialog-list"') : shown.index('id="perspective"')]
    assert _texts(dialog, "div", "content") == [
        "You describe pictures.",
        "What is in this picture?\n[image]\n[file notes.pdf]",
        "A cat.",
        "And this one?",
        "A dog.",
        "What is the weather there?",
        "",
        "4 degrees\nlight rain",
        "Rainy.",
    ]
    perspective = shown[shown.index('id="perspective-list"') :]
    assert "4 degrees\nlight rain" in html.unescape(perspective)
    no_repr(html.unescape(dialog + perspective))
    # The request of the first call, as messages with their content as text.
    request = html.unescape(shown[shown.index('data-path="1.1"') :])
    assert "user: What is in this picture?\n[image]\n[file notes.pdf]" in request
    # Costs: the summary, the run and each op; a real zero stays $0; no usage said so.
    summary = html.unescape(shown[shown.index('id="summary"') : shown.index('id="main"')])
    assert f"at least ${PRICED_COST:.6f} (2 calls of unknown cost)" in summary
    costs = _texts(shown, "span", "cost")
    assert costs == ["cost unknown", "cost unknown", f"${PRICED_COST:.6f}", "$0.0000"]
    assert "$0.0000" not in shown[shown.index('data-path="1.1"') : shown.index('data-path="3"')]
    facts = _texts(shown, "div", "facts")
    assert "openai \u00b7 no usage" in facts  # the failed attempt


@pytest.mark.e2e
def test_html_page_renders_content_as_content_text_does(
    run: Run, browser: _Browser, tmp_path: Path
) -> None:
    """The page renders content in its script: for every case, what Chromium shows in the
    dialog is exactly what ``content_text`` (the command line's rendering) gives."""
    loaded = copy.deepcopy(run.loaded)
    (looker,) = agenttrace.SessionViewer(loaded.events).agent_ids(["Looker"])
    cases = [content for content, _ in CONTENT_CASES if content is not None]
    for number, content in enumerate(cases, 900):
        loaded.events.append(
            {
                "message_id": f"msg_{number}",
                "event_type": "transcript_entry",
                "agent_id": looker,
                "role": "user",
                "content": content,
            }
        )
    page = tmp_path / "cases.html"
    page.write_text(to_html(loaded), encoding="utf-8")
    dom = _without_scripts(browser.dom(page))
    assert _root_attributes(dom).get("data-errors") == ""
    dialog = dom[dom.index('id="dialog-list"') : dom.index('id="perspective"')]
    shown = _texts(dialog, "div", "content")[-len(cases) :]
    assert shown == [content_text(content) for content in cases]
