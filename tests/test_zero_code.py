"""Zero-code instrumentation: ``opentelemetry-instrument python app.py`` on a plain litellm script
finds agenttrace's instrumentor through its entry point, and agenttrace's spans reach OTLP."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from agenttrace import semconv as sc

from .helpers import ROOT, child_env
from .otlp_receiver import OTLPReceiver, ReceivedSpan

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check

SCRIPT = """\
import litellm

reply = litellm.completion(
    model="gpt-4o-mini",
    messages=[{"role": "user", "content": "Say hi"}],
    mock_response="hi",
)
print(reply.choices[0].message.content)
"""


def test_the_entry_point_names_the_instrumentor() -> None:
    # One entry point per instrumented library: this one is litellm's.
    (entry,) = [
        e
        for e in metadata.entry_points(group="opentelemetry_instrumentor")
        if e.name == "agenttrace_litellm"
    ]
    from agenttrace.instrumentation.litellm import LiteLLMInstrumentor

    assert entry.load() is LiteLLMInstrumentor
    assert LiteLLMInstrumentor().instrumentation_dependencies() == ("litellm >= 1.75",)


def test_opentelemetry_instrument_traces_a_plain_litellm_script(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    env = child_env(
        OTEL_SERVICE_NAME="zero-code-app",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "ledger.jsonl"),
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
    )
    _, spans = run_instrumented([str(script)], env)
    by_name = {span.name: span for span in spans}
    chat = by_name["chat gpt-4o-mini"]
    assert chat.attributes[sc.KIND] == sc.KIND_LLM
    assert chat.attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    assert chat.resource["service.name"] == "zero-code-app"  # the distro's provider, kept
    # No decorator anywhere: the bare call still gets an agent run and a turn around it.
    assert {"invoke_agent zero-code-app", "turn 1"} <= set(by_name)
    # agenttrace was set up by the instrumentor: the session's files were written too.
    assert list((tmp_path / "sessions").glob("*.json.gz"))
    assert (tmp_path / "ledger.jsonl").read_text().count("\n") == 1


def run_instrumented(
    arguments: list[str], env: dict[str, str], cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], list[ReceivedSpan]]:
    """``opentelemetry-instrument python ARGUMENTS`` in ``env``, exporting to a receiver of
    ours; it must succeed and print ``hi``. What it printed, and the first 3 spans it sent."""
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    receiver = OTLPReceiver().start()
    try:
        result = subprocess.run(
            [str(instrument), sys.executable, *arguments],
            cwd=cwd,
            env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.http_endpoint},
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "hi"
        return result, receiver.wait_for(3)
    finally:
        receiver.stop()


def _readme_recipe() -> tuple[list[str], dict[str, str], list[str]]:
    """The zero-code block of docs/how-to/zero-code.md, as a shell reads it: what its
    ``pip install`` line installs, the variables it exports, and the command it runs."""
    page = (ROOT / "docs" / "how-to" / "zero-code.md").read_text()
    section = page.split("\n## Zero-code: opentelemetry-instrument\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    (block,) = [b for b in blocks if "opentelemetry-instrument" in b]
    requirements: list[str] = []
    env: dict[str, str] = {}
    command: list[str] = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["pip", "install"]:
            requirements = words[2:]
        elif words[:1] == ["export"]:
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                env[name] = value
        elif words:
            assert not command, f"a second command in the recipe: {line}"
            command = words
    return requirements, env, command


def test_the_readme_recipe_as_written_exports_spans_and_nothing_else(tmp_path: Path) -> None:
    requirements, recipe_env, command = _readme_recipe()
    # What its pip line installs is what this environment has: agenttrace with [litellm] from
    # the checkout, and the distro.
    assert requirements == [".[litellm]", "opentelemetry-distro"]
    for distribution in ("agenttrace-otel", "litellm", "opentelemetry-distro"):
        metadata.version(distribution)
    assert command == ["opentelemetry-instrument", "python", "app.py"]
    # The one thing changed: the endpoint, from Jaeger's to the receiver's (also OTLP/HTTP).
    assert recipe_env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://localhost:4318"
    (tmp_path / "app.py").write_text(SCRIPT)
    env = child_env(
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "ledger.jsonl"),
    )
    del env["LITELLM_LOCAL_MODEL_COST_MAP"]  # the recipe has to set it itself
    env.update(recipe_env)
    result, spans = run_instrumented(command[2:], env, cwd=tmp_path)
    assert {"invoke_agent my-agent", "turn 1", "chat gpt-4o-mini"} <= {s.name for s in spans}
    assert {s.resource["service.name"] for s in spans} == {"my-agent"}
    assert "Traceback" not in result.stderr, result.stderr
    assert "404" not in result.stderr, result.stderr  # no metrics or logs sent where none go
