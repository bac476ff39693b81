"""Every way out of the process, checked with a credential in a URL and a password argument.

An agent (the cafe's, on its scripted model, over litellm's real HTTP path) is told to log in
at ``https://api.example.com/v1/data?key=SECRET&x=1``; the model calls ``login(url, password=
SECRET)``, then ``fetch`` on a local URL with ``?key=SECRET&x=1``, which fails with httpx's
error naming that URL. SECRET must then appear nowhere that leaves the process: span attributes,
span events, span status, console lines (trace mode: bodies too), the billing ledger, each export
format and each command's output (``dialog``, ``perspective``, ``tree``, ``stats``), while the
parameters that are no secret (``x=1``) survive. The event stream and the session file are the
agent's state and keep the transcript verbatim, unless ``redacted_save`` is on.

The spans are real (the ``traced`` fixture), the files are the ones the run wrote, and the
commands run through click's ``CliRunner`` on those files.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

import agenttrace
from agenttrace import semconv as sc
from agenttrace.cli import main
from agenttrace.formats.session.files import read_session_file, snapshot_bytes
from examples.cafe import Agent
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .helpers import is_event_line

SECRET = "s3cr3t-Canary-7f2a91"
URL = f"https://api.example.com/v1/data?key={SECRET}&x=1"
SHOWN = "https://api.example.com/v1/data?key=[REDACTED]&x=1"
"""The URL as every output shows it: the key replaced, the other parameter kept."""


class Fetcher(Agent):
    """The cafe's agent with two tools that handle a URL and a password."""

    @agenttrace.tool
    async def login(self, url: str, password: str) -> str:
        agenttrace.log("WRN", f"logging in at {url}", url=url)
        return f"logged in at {url}"

    @agenttrace.tool
    async def fetch(self, url: str) -> str:
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
            response.raise_for_status()  # httpx names the URL in its error
        return response.text

    async def run_tool(self, call_id: str, name: str, arguments: str | None) -> None:
        try:
            await super().run_tool(call_id, name, arguments)
        except httpx.HTTPStatusError as exc:  # the model is told, as agents do
            self.transcript.append({"role": "tool", "tool_call_id": call_id, "content": str(exc)})


@dataclass
class Run:
    """What the run left behind."""

    traced: Traced
    tmp_path: Path
    local_url: str

    @property
    def snapshot(self) -> Path:
        (path,) = (self.tmp_path / "sessions").glob("*.json.gz")
        return path

    @property
    def stream(self) -> Path:
        (path,) = (self.tmp_path / "sessions").glob("*.events.jsonl")
        return path

    def cli(self, *args: str) -> str:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.stderr
        return result.stdout


async def run_agent(traced: Traced, tmp_path: Path) -> Run:
    agenttrace.new_session()
    with ScriptedModel({}) as model:
        local_url = f"{model.api_base}/v1/data?key={SECRET}&x=1"  # GET there fails (501)
        model.scripts = {
            "": [
                {"tool": "login", "id": "c1", "input": {"url": URL, "password": SECRET}},
                {"tool": "fetch", "id": "c2", "input": {"url": local_url}},
                {"text": f"Logged in, see {URL}"},
            ]
        }
        root = Fetcher(options={"api_base": model.api_base, "api_key": "offline-test-key"})
        root.harken(f"Log me in at {URL}")
        assert await root.response() == f"Logged in, see {URL}"
    traced.handle.force_flush()
    return Run(traced, tmp_path, local_url)


@pytest.fixture
async def run(traced: Traced, tmp_path: Path) -> Run:
    return await run_agent(traced, tmp_path)


def assert_clean(text: str, where: str) -> None:
    """No trace of SECRET in ``text``, and the URL there with its harmless parameter."""
    assert SECRET not in text, f"SECRET leaked into {where}"
    assert SHOWN in text, f"{where} lost the URL or its other parameters"


def page_data(html: str) -> Any:
    """The session an HTML export embeds, as its script reads it."""
    data = html.split('<script type="application/json" id="agenttrace-data">', 1)[1]
    return json.loads(data.split("</script>", 1)[0])


def span_texts(traced: Traced) -> dict[str, str]:
    """Each part of the finished spans as text: attributes, events, status, names."""
    spans = traced.spans()
    assert len(spans) >= 6
    return {
        "span attributes": json.dumps([dict(s.attributes or {}) for s in spans]),
        "span events": json.dumps(
            [[(e.name, dict(e.attributes or {})) for e in s.events] for s in spans]
        ),
        "span status": json.dumps([s.status.description for s in spans]),
        "span names": json.dumps([s.name for s in spans]),
    }


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True)
async def test_spans_carry_no_secret(run: Run) -> None:
    texts = span_texts(run.traced)
    assert_clean(texts["span attributes"], "span attributes")
    assert_clean(texts["span events"], "span events")
    for where in ("span status", "span names"):
        assert SECRET not in texts[where], f"SECRET leaked into {where}"
    fetch = run.traced.one("execute_tool fetch")
    assert fetch.status.description is not None
    assert run.local_url.replace(SECRET, "[REDACTED]") in fetch.status.description
    login = dict(run.traced.one("execute_tool login").attributes or {})
    arguments = json.loads(str(login[sc.GEN_AI_TOOL_CALL_ARGUMENTS]))
    assert arguments == {"url": SHOWN, "password": "[REDACTED]"}


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True)
async def test_console_lines_carry_no_secret(run: Run) -> None:
    console = run.traced.output()
    assert "TRC arguments" in console and "WRN logging in at" in console
    assert_clean(console, "the console")


async def test_the_ledger_carries_no_secret(run: Run, tmp_path: Path) -> None:
    ledger = (tmp_path / "accounting.jsonl").read_text()
    failed = [json.loads(line) for line in ledger.splitlines() if '"failed"' in line]
    assert len(failed) == 1  # the fetch, whose error names the URL
    assert SECRET not in ledger
    assert run.local_url.replace(SECRET, "[REDACTED]") in failed[0]["error"]


@pytest.mark.parametrize("form", ["jaeger", "otlp-json", "html", "exchanges"])
async def test_each_export_carries_no_secret(run: Run, tmp_path: Path, form: str) -> None:
    shown = run.cli("export", str(run.snapshot), "--format", form)
    assert SECRET not in shown, f"SECRET leaked into the {form} export"
    # The page writes & as \u0026 inside its JSON: the data as the page reads it.
    readable = json.dumps(page_data(shown), ensure_ascii=False) if form == "html" else shown
    assert_clean(readable, f"the {form} export")
    written = tmp_path / f"export.{form}"
    run.cli("export", str(run.snapshot), "--format", form, "-o", str(written))
    assert written.read_text() == shown


async def test_perspective_shows_what_the_html_export_shows(run: Run) -> None:
    perspective = run.cli("perspective", str(run.snapshot), "agent_001")
    assert_clean(perspective, "perspective")
    assert f'login({{"url": "{SHOWN}", "password": "[REDACTED]"}})' in perspective
    page = page_data(run.cli("export", str(run.snapshot), "--format", "html"))
    (agent,) = page["agents"]
    assert agent["perspective"] == perspective.rstrip("\n")


async def test_dialog_carries_no_secret(run: Run) -> None:
    for source in (run.snapshot, run.stream):
        dialog = run.cli("dialog", str(source), "--agents", "agent_001")
        assert_clean(dialog, f"the dialog of the {source.name}")


async def test_tree_and_stats_of_a_handed_file_carry_no_secret(run: Run, tmp_path: Path) -> None:
    """A session file someone hands us may hold anything anywhere: the agent's name is a URL."""
    loaded = read_session_file(run.snapshot)
    loaded.runs[0]["agentName"] = f"fetcher {URL}"
    handed = tmp_path / "handed.json.gz"
    lines = [  # its events: the stream less its op_accounted lines
        line for line in run.stream.read_bytes().splitlines() if is_event_line(line)
    ]
    handed.write_bytes(snapshot_bytes("handed", loaded.runs, lines, loaded.meta))
    name = "fetcher https://api.example.com/v1/data?key=[REDACTED]&x=1"
    assert name in run.cli("tree", str(handed))
    totals = json.loads(run.cli("stats", "--json", str(handed)))
    assert [agent["name"] for agent in totals["by_agent"]] == [name]
    for args in (("tree",), ("stats",), ("stats", "--json")):
        shown = run.cli(*args, str(handed))
        # A table may fold a long cell: then one half of SECRET at least stays whole.
        for part in (SECRET[:8], SECRET[-8:]):
            assert part not in shown, f"SECRET leaked into {' '.join(args)}"


async def test_the_state_keeps_the_transcript_verbatim(run: Run) -> None:
    """The stream and the session file are what resume reads: the model's own words stay."""
    assert f'"password": "{SECRET}"' in run.stream.read_text().replace('\\"', '"')
    events = json.loads(gzip.decompress(run.snapshot.read_bytes()))["events"]
    assert URL in json.dumps(events)
    # Only the events hold it: the opTree the session file keeps is redacted like the spans.
    assert SECRET not in json.dumps(json.loads(gzip.decompress(run.snapshot.read_bytes()))["runs"])


@pytest.mark.init(redacted_save=True)
async def test_redacted_save_scrubs_urls_in_the_state_too(run: Run) -> None:
    assert_clean(run.stream.read_text(), "the event stream")
    assert_clean(gzip.decompress(run.snapshot.read_bytes()).decode(), "the session file")
