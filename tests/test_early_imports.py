"""``from litellm import completion`` before ``init()``: the copy is never traced, so init says so,
once, through the ``agenttrace`` logger, naming the copies and the fixes."""

from __future__ import annotations

import logging
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import litellm
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace

from .helpers import child_env

MESSAGES = [{"role": "user", "content": "hi"}]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "agenttrace"
        and r.levelno == logging.WARNING
        and "not traced" in r.getMessage()
    ]


def _init(tmp_path: Path) -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handle = agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "ledger.jsonl",
    )
    return handle, exporter


def test_init_names_each_copy_bound_before_it_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = types.ModuleType("early_app")
    exec("from litellm import completion\nfrom litellm import acompletion as ask\n", vars(app))
    monkeypatch.setitem(sys.modules, "early_app", app)
    caplog.set_level(logging.WARNING, logger="agenttrace")
    handle, exporter = _init(tmp_path)
    try:
        (message,) = _warnings(caplog)
        assert "calls through early_app.completion, early_app.ask are not traced" in message
        assert "litellm.completion(...)" in message
        assert "agenttrace.init() before `from litellm import ...`" in message
        # What it warns about is so: the copy makes no span, the module's function does.
        app.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="a")
        assert exporter.get_finished_spans() == ()
        litellm.completion(model="gpt-4o-mini", messages=MESSAGES, mock_response="b")
        handle.force_flush()
        assert "chat gpt-4o-mini" in {s.name for s in exporter.get_finished_spans()}
    finally:
        handle.shutdown()


def test_no_warning_when_no_module_holds_a_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = types.ModuleType("late_app")
    exec("import litellm\ncall = litellm.completion\ncall = None\n", vars(app))
    monkeypatch.setitem(sys.modules, "late_app", app)
    caplog.set_level(logging.WARNING, logger="agenttrace")
    handle, _ = _init(tmp_path)
    handle.shutdown()
    assert _warnings(caplog) == []


APP = """\
import os
import sys
{before}
import agenttrace
handle = agenttrace.init(console="quiet")
{after}
completion(model="gpt-4o-mini", messages=[{{"role": "user", "content": "hi"}}], mock_response="ok")
handle.shutdown()
ledger = sys.argv[1]
print(sum(1 for _ in open(ledger)) if os.path.exists(ledger) else 0)
"""

IMPORT = "from litellm import completion"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("before", "after", "warned", "ledger_lines"),
    [(IMPORT, "", True, 0), ("", IMPORT, False, 1)],
    ids=["imported-before-init", "imported-after-init"],
)
def test_a_program_that_imports_completion_by_name(
    tmp_path: Path, before: str, after: str, warned: bool, ledger_lines: int
) -> None:
    """As a user's program: init() after the import warns once and the call goes unrecorded;
    init() before it (litellm is patched as it is imported) needs no warning and is traced."""
    script = tmp_path / "app.py"
    ledger = tmp_path / "ledger.jsonl"
    script.write_text(APP.format(before=before, after=after))
    result = subprocess.run(
        [sys.executable, str(script), str(ledger)],
        env=child_env(
            AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
            AGENTTRACE_BILLING_FILE=str(ledger),
        ),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("__main__.completion are not traced") == int(warned), result.stderr
    assert result.stdout.strip() == str(ledger_lines)
