"""One redaction policy for everything that leaves the process, checked with planted canaries.

An agent runs (in its own process, as an application would) with secrets planted as: an API key
passed to litellm, a header, a litellm config value, a credential in the environment, and a tool
argument named ``password``. Then every output is searched:

- spans (over OTLP to a real receiver), console lines (trace mode: bodies included), the billing
  ledger, and every export: no secret at all;
- the event stream and session file are the agent's state and keep transcript content verbatim:
  the password (which the model put in its tool call) is there, the credentials are not; with
  ``AGENTTRACE_REDACTED_SAVE`` the password is redacted there too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .helpers import child_env
from .otlp_receiver import OTLPReceiver

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "sk-canary-api-key-3f9a2c7d1e"
HEADER = "canary-header-value-8b41d0"
CONFIG = "canary-config-key-5e77a1"
ENVIRONMENT = "canary-env-token-c0ffee42"
PASSWORD = "canary-password-hunter2x"
CREDENTIALS = (API_KEY, HEADER, CONFIG, ENVIRONMENT)

AGENT = textwrap.dedent(
    f"""
    import asyncio, os
    import litellm, agenttrace
    from examples.cafe import Agent
    from examples.scripted_model import ScriptedModel

    litellm.suppress_debug_info = True
    litellm.anthropic_key = {CONFIG!r}  # a config value that holds a key
    agenttrace.init(console="trace")

    class Secure(Agent):
        @agenttrace.tool
        async def login(self, user: str, password: str) -> str:
            agenttrace.log("WRN", "using token " + os.environ["MY_SERVICE_TOKEN"])
            return f"logged in as {{user}}"

    scripts = {{"": [
        {{"tool": "login", "id": "c1", "input": {{"user": "ann", "password": {PASSWORD!r}}}}},
        {{"text": "You are logged in."}},
    ]}}
    with ScriptedModel(scripts) as model:
        root = Secure(options={{
            "api_base": model.api_base,
            "api_key": {API_KEY!r},
            "extra_headers": {{"x-api-key": {HEADER!r}}},
        }})
        root.harken("Log me in")
        print(asyncio.run(root.response()))
    agenttrace.shutdown()
    """
)


def run_agent(tmp_path: Path, receiver: OTLPReceiver, redacted_save: bool) -> dict[str, str]:
    """Run the agent; return each output's text, by name."""
    sessions, ledger = tmp_path / "sessions", tmp_path / "accounting.jsonl"
    env = child_env()
    env.update(
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
        AGENTTRACE_SESSIONS_DIR=str(sessions),
        AGENTTRACE_BILLING_FILE=str(ledger),
        AGENTTRACE_REDACTED_SAVE="true" if redacted_save else "false",
        # Content on spans too: the canaries must be looked for in every place they could be.
        AGENTTRACE_CAPTURE_CONTENT="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
        OTEL_SERVICE_NAME=f"canary-{tmp_path.name}",
        MY_SERVICE_TOKEN=ENVIRONMENT,
    )
    result = subprocess.run(
        [sys.executable, "-c", AGENT], env=env, capture_output=True, text=True, timeout=480
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "You are logged in."
    spans = [
        s
        for s in receiver.wait_for(len(receiver.spans) + 6)
        if s.resource.get("service.name") == f"canary-{tmp_path.name}"
    ]
    assert len(spans) >= 6
    (stream,) = sessions.glob("*.events.jsonl")
    (snapshot,) = sessions.glob("*.json.gz")
    outputs = {
        "spans": json.dumps(
            [(s.name, s.attributes, s.events, s.status_message) for s in spans], default=str
        ),
        "console": result.stderr,
        "ledger": ledger.read_text(),
        "stream": stream.read_text(),
        "session file": json.dumps(_gunzipped(snapshot)),
    }
    for export in ("jaeger", "otlp-json", "html", "exchanges"):
        exported = subprocess.run(
            [sys.executable, "-m", "agenttrace.cli", "export", str(snapshot), "--format", export],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert exported.returncode == 0, exported.stderr
        outputs[f"export {export}"] = exported.stdout
    return outputs


def _gunzipped(path: Path) -> object:
    import gzip

    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture(scope="module")
def receiver() -> OTLPReceiver:
    server = OTLPReceiver().start()
    yield server  # type: ignore[misc]
    server.stop()


@pytest.mark.e2e
def test_every_output_follows_the_policy(tmp_path: Path, receiver: OTLPReceiver) -> None:
    outputs = run_agent(tmp_path, receiver, redacted_save=False)
    # The run really happened: the tool ran with the password, and the console traced bodies.
    assert "login" in outputs["spans"] and "TRC request" in outputs["console"]
    assert "[REDACTED]" in outputs["spans"] and "[REDACTED]" in outputs["console"]
    for name, text in outputs.items():
        for secret in CREDENTIALS:
            assert secret not in text, f"{secret} leaked into {name}"
    # The state keeps what the model said verbatim, the password included; nothing else does.
    for name, text in outputs.items():
        if name in ("stream", "session file"):
            assert PASSWORD in text, f"the {name} lost the transcript's content"
        else:
            assert PASSWORD not in text, f"the password leaked into {name}"


@pytest.mark.e2e
def test_redacted_save_applies_the_policy_to_the_state_too(
    tmp_path: Path, receiver: OTLPReceiver
) -> None:
    outputs = run_agent(tmp_path, receiver, redacted_save=True)
    for name, text in outputs.items():
        for secret in (*CREDENTIALS, PASSWORD):
            assert secret not in text, f"{secret} leaked into {name}"
    assert "[REDACTED]" in outputs["stream"] and "[REDACTED]" in outputs["session file"]
    assert "Log me in" in outputs["stream"]  # ordinary content is kept
