"""docker-compose.yml and the collector config: offline checks, and a Docker end-to-end run.

Offline: the compose file against the compose spec's JSON schema (vendored in check-jsonschema),
the collector config against collector/config.schema.json, and the wiring between the two.
End to end (only where a Docker engine answers): the stack up, ``examples/cafe.py`` exporting to
the collector, and the trace read back from Jaeger's query API (``/api/v3/traces/<id>``).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from agenttrace import semconv as sc

from .helpers import child_env

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
COLLECTOR_CONFIG = ROOT / "collector" / "otel-collector.yaml"
COLLECTOR_SCHEMA = ROOT / "collector" / "config.schema.json"
# The one next to this interpreter (the project venv's), else whichever is on PATH.
_VENV_CHECK_JSONSCHEMA = Path(sys.executable).with_name("check-jsonschema")
CHECK_JSONSCHEMA = (
    str(_VENV_CHECK_JSONSCHEMA)
    if _VENV_CHECK_JSONSCHEMA.exists()
    else shutil.which("check-jsonschema") or "check-jsonschema"
)
PIPELINE_KINDS = ("receivers", "processors", "exporters")
# The cafe demo's nesting, from the subagent up to the root (see test_demo.py).
CHAIN = ["invoke_agent Jill", "execute_tool discuss", "turn 3", "invoke_agent Agent"]
CHAIN_ATTRIBUTES = {  # span name -> (agenttrace.kind, agenttrace.path)
    "invoke_agent Jill": (sc.KIND_SESSION, "3.2:2"),
    "execute_tool discuss": (sc.KIND_SESSION, "3.2"),
    "turn 3": (sc.KIND_TURN, "3"),
    "invoke_agent Agent": (sc.KIND_SESSION, "0"),
}


# --- helpers ------------------------------------------------------------------------------------


def check_jsonschema(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run check-jsonschema with proxies pointed at a closed port: it must not need the network."""
    dead = "http://127.0.0.1:9"
    env = {**os.environ, "HTTP_PROXY": dead, "HTTPS_PROXY": dead, "ALL_PROXY": dead}
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    return subprocess.run(
        [CHECK_JSONSCHEMA, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path} is not a mapping"
    return data


def interpolate(value: str) -> str:
    """Compose's ``${NAME:-default}`` / ``${NAME-default}``, with the variables unset."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", value)


def published_ports(service: Mapping[str, Any]) -> dict[int, int]:
    """Host port -> container port, from the short ("[ip:]host:container") or long syntax."""
    ports: dict[int, int] = {}
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            if "published" in entry:
                ports[int(entry["published"])] = int(entry["target"])
            continue
        parts = interpolate(str(entry)).split("/")[0].split(":")
        if len(parts) >= 2:
            ports[int(parts[-2])] = int(parts[-1])
    return ports


def bind_mounts(service: Mapping[str, Any]) -> dict[str, str]:
    """Container path -> host path (relative to the repository root) of a service's volumes."""
    mounts: dict[str, str] = {}
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            source, target = str(entry.get("source", "")), str(entry["target"])
        else:
            source, target = interpolate(str(entry)).split(":")[:2]
        mounts[target] = source
    return mounts


def config_path(service: Mapping[str, Any]) -> str:
    """The path given to the collector's --config flag."""
    command = service.get("command", [])
    args = command.split() if isinstance(command, str) else [str(a) for a in command]
    for i, arg in enumerate(args):
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
        if arg == "--config" and i + 1 < len(args):
            return args[i + 1]
    raise AssertionError(f"no --config in the collector's command: {command!r}")


def same_file(host_path: str, expected: Path) -> bool:
    return (ROOT / host_path).resolve() == expected.resolve()


# --- the compose file against the compose spec --------------------------------------------------


def test_compose_file_matches_the_compose_spec() -> None:
    result = check_jsonschema("--builtin-schema", "vendor.compose-spec", COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_spec_check_rejects_an_unknown_key(tmp_path: Path) -> None:
    """The negative control: the same check must fail on a compose file with a bad key."""
    compose = load_yaml(COMPOSE_FILE)
    compose["services"]["jaeger"]["healthcheck_typo"] = {"test": ["CMD", "true"]}
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(yaml.safe_dump(compose))
    result = check_jsonschema("--builtin-schema", "vendor.compose-spec", broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "healthcheck_typo" in result.stdout


# --- the collector config ---------------------------------------------------------------------


def test_collector_schema_is_valid_json_schema() -> None:
    result = check_jsonschema("--check-metaschema", COLLECTOR_SCHEMA)
    assert result.returncode == 0, result.stdout + result.stderr


def test_collector_config_matches_its_schema() -> None:
    result = check_jsonschema("--schemafile", COLLECTOR_SCHEMA, COLLECTOR_CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr


def test_collector_schema_rejects_a_pipeline_without_receivers(tmp_path: Path) -> None:
    """The negative control for the collector schema."""
    config = load_yaml(COLLECTOR_CONFIG)
    del config["service"]["pipelines"]["traces"]["receivers"]
    broken = tmp_path / "otel-collector.yaml"
    broken.write_text(yaml.safe_dump(config))
    result = check_jsonschema("--schemafile", COLLECTOR_SCHEMA, broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "receivers" in result.stdout


def undefined_components(config: Mapping[str, Any]) -> list[str]:
    """Components a pipeline (or service.extensions) names but its section does not define."""
    missing = []
    for pipeline_name, pipeline in config["service"]["pipelines"].items():
        for kind in PIPELINE_KINDS:
            defined = config.get(kind) or {}
            missing += [
                f"{pipeline_name}.{kind}: {name}"
                for name in pipeline.get(kind, [])
                if name not in defined
            ]
    defined_extensions = config.get("extensions") or {}
    missing += [
        f"service.extensions: {name}"
        for name in config["service"].get("extensions", [])
        if name not in defined_extensions
    ]
    return missing


def test_every_component_in_the_pipelines_is_defined() -> None:
    config = load_yaml(COLLECTOR_CONFIG)
    assert undefined_components(config) == []
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert traces["processors"][0] == "memory_limiter", "memory_limiter must come first"
    assert "batch" in traces["processors"]
    assert {"check_interval", "limit_mib", "spike_limit_mib"} <= set(
        config["processors"]["memory_limiter"]
    )
    assert config["service"]["extensions"] == ["health_check"]
    assert config["extensions"]["health_check"]["endpoint"] == "0.0.0.0:13133"
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"


def test_the_definedness_check_uses_full_component_names() -> None:
    """``otlp_grpc/jaeger`` is one component: defining ``otlp_grpc`` alone does not define it."""
    config = load_yaml(COLLECTOR_CONFIG)
    renamed = copy.deepcopy(config)
    renamed["exporters"] = {
        name.split("/")[0]: settings for name, settings in config["exporters"].items()
    }
    assert "traces.exporters: otlp_grpc/jaeger" in undefined_components(renamed)
    renamed["service"]["extensions"] = ["health_check", "zpages"]
    assert "service.extensions: zpages" in undefined_components(renamed)


def test_collector_exports_to_jaeger_and_to_the_mounted_output() -> None:
    config = load_yaml(COLLECTOR_CONFIG)
    compose = load_yaml(COMPOSE_FILE)
    exporters = config["exporters"]
    pipeline_exporters = config["service"]["pipelines"]["traces"]["exporters"]
    # `otlp_grpc` is the OTLP/gRPC exporter's name since collector v0.144.0 (`otlp`: old alias).
    (to_jaeger,) = [n for n in pipeline_exporters if n.split("/")[0] in {"otlp", "otlp_grpc"}]
    assert "file" in pipeline_exporters
    host, port = exporters[to_jaeger]["endpoint"].rsplit(":", 1)
    assert host in compose["services"] and port == "4317"
    assert exporters[to_jaeger]["tls"]["insecure"] is True
    assert exporters["file"]["path"] == "/output/traces.jsonl"
    assert exporters["file"].get("format", "json") == "json"
    mounts = bind_mounts(compose["services"]["otel-collector"])
    assert same_file(mounts["/output"], ROOT / "collector" / "output")


# --- the compose file's wiring ----------------------------------------------------------------


def test_compose_mounts_the_config_the_collector_is_started_with() -> None:
    collector = load_yaml(COMPOSE_FILE)["services"]["otel-collector"]
    started_with = config_path(collector)
    mounts = bind_mounts(collector)
    assert started_with in mounts, f"{started_with} is not mounted: {mounts}"
    assert same_file(mounts[started_with], COLLECTOR_CONFIG)


def test_compose_publishes_otlp_on_the_collector_and_the_ui_on_jaeger() -> None:
    services = load_yaml(COMPOSE_FILE)["services"]
    collector = published_ports(services["otel-collector"])
    jaeger = published_ports(services["jaeger"])
    assert collector[4317] == 4317 and collector[4318] == 4318
    assert jaeger[16686] == 16686
    # The collector is the front door: Jaeger's own OTLP ports stay inside the compose network.
    assert not {4317, 4318} & set(jaeger)


def test_compose_pins_images_and_waits_for_a_healthy_jaeger() -> None:
    services = load_yaml(COMPOSE_FILE)["services"]
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", services["jaeger"]["image"])
    assert re.fullmatch(
        r"otel/opentelemetry-collector-contrib:0\.\d+\.\d+", services["otel-collector"]["image"]
    )
    healthcheck = services["jaeger"]["healthcheck"]
    assert healthcheck["test"][0] == "CMD" and "13133" in healthcheck["test"][-1]
    depends = services["otel-collector"]["depends_on"]
    assert depends["jaeger"]["condition"] == "service_healthy"


# --- Jaeger's /api/v3 answer ------------------------------------------------------------------


def hex_id(value: Any, size: int) -> str:
    """A trace or span id as lowercase hex. Jaeger's api/v3 writes OTLP JSON's hex ids; a plain
    protobuf-JSON encoder would write base64, so take either. Missing or empty: ""."""
    if not value:
        return ""
    text = str(value)
    if re.fullmatch(f"[0-9a-fA-F]{{{size * 2}}}", text):
        return text.lower()
    raw = base64.b64decode(text)
    assert len(raw) == size, f"bad id {text!r}"
    return raw.hex()


def any_value(value: Mapping[str, Any]) -> Any:
    """An OTLP JSON AnyValue as a Python value (int64s arrive as strings)."""
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return tuple(any_value(v) for v in value["arrayValue"].get("values", []))
    if "kvlistValue" in value:
        return {kv["key"]: any_value(kv.get("value", {})) for kv in value["kvlistValue"]["values"]}
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    return None


def spans_from_apiv3(answer: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The spans in a GET /api/v3/traces/<id> answer: ``{"result": {"resourceSpans": [...]}}``
    (OTLP JSON TracesData inside the grpc-gateway wrapper)."""
    for resource_spans in answer.get("result", {}).get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                yield {
                    "name": span.get("name", ""),
                    "trace_id": hex_id(span.get("traceId"), 16),
                    "span_id": hex_id(span.get("spanId"), 8),
                    "parent_span_id": hex_id(span.get("parentSpanId"), 8),
                    "attributes": {
                        kv["key"]: any_value(kv.get("value", {}))
                        for kv in span.get("attributes", [])
                    },
                }


def check_cafe_trace(spans: list[dict[str, Any]], trace_id: str) -> None:
    """The demo's nesting and attributes, as Jaeger stored them."""
    assert spans and {s["trace_id"] for s in spans} == {trace_id}
    by_id = {s["span_id"]: s for s in spans}
    span = next(s for s in spans if s["name"] == CHAIN[0])
    chain = [span]
    while span["parent_span_id"]:
        span = by_id[span["parent_span_id"]]
        chain.append(span)
    assert [s["name"] for s in chain] == CHAIN
    for s in chain:
        kind, path = CHAIN_ATTRIBUTES[s["name"]]
        assert s["attributes"].get(sc.KIND) == kind, s
        assert s["attributes"].get(sc.PATH) == path, s


def otlp_span(name: str, span_id: str, parent: str, kind: str, path: str) -> dict[str, Any]:
    return {
        "traceId": "7963770c13ec0c0a47ed485e918dde8c",
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": 1,
        "attributes": [
            {"key": sc.KIND, "value": {"stringValue": kind}},
            {"key": sc.PATH, "value": {"stringValue": path}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "38"}},
        ],
    }


def apiv3_answer(base64_ids: bool = False) -> dict[str, Any]:
    """An answer shaped like Jaeger's (its apiv3 snapshots/GetTrace.json), for the cafe chain."""
    spans = [
        otlp_span("invoke_agent Agent", "b8a0f4584e3629ca", "", "session", "0"),
        otlp_span("turn 3", "3bd79f030a644162", "b8a0f4584e3629ca", "turn", "3"),
        otlp_span("execute_tool discuss", "875f9e58781c9131", "3bd79f030a644162", "session", "3.2"),
        otlp_span("invoke_agent Jill", "0422f7729d1efafe", "875f9e58781c9131", "session", "3.2:2"),
    ]
    if base64_ids:
        for span in spans:
            for key in ("traceId", "spanId", "parentSpanId"):
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    del spans[0]["parentSpanId"]  # a root span has none
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "demo"}}]}
    return {
        "result": {
            "resourceSpans": [
                {"resource": resource, "scopeSpans": [{"scope": {}, "spans": spans[:2]}]},
                {"resource": resource, "scopeSpans": [{"scope": {}, "spans": spans[2:]}]},
            ]
        }
    }


@pytest.mark.parametrize("base64_ids", [False, True], ids=["hex-ids", "base64-ids"])
def test_apiv3_parser_reads_the_cafe_chain(base64_ids: bool) -> None:
    """The end-to-end test's parser and checks, on an answer of Jaeger's shape (runs anywhere)."""
    spans = list(spans_from_apiv3(apiv3_answer(base64_ids)))
    assert len(spans) == 4
    assert spans[0]["parent_span_id"] == ""
    assert spans[0]["attributes"]["gen_ai.usage.input_tokens"] == 38
    check_cafe_trace(spans, "7963770c13ec0c0a47ed485e918dde8c")


def test_apiv3_checks_catch_a_broken_chain() -> None:
    answer = apiv3_answer()
    spans = answer["result"]["resourceSpans"][1]["scopeSpans"][0]["spans"]
    spans[1]["parentSpanId"] = "b8a0f4584e3629ca"  # Jill straight under the root
    with pytest.raises(AssertionError):
        check_cafe_trace(list(spans_from_apiv3(answer)), "7963770c13ec0c0a47ed485e918dde8c")


# --- end to end, with Docker ------------------------------------------------------------------


def docker_skip_reason() -> str | None:
    """Why the end-to-end test cannot run here, or None when it can."""
    if shutil.which("docker") is None:
        return "needs a Docker engine: `docker info` failed: docker is not installed"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "needs a Docker engine: `docker info` failed: it timed out after 30 s"
    if info.returncode != 0:
        lines = [line.strip() for line in (info.stderr or info.stdout).splitlines()]
        first = next((line for line in lines if line), f"exit code {info.returncode}")
        return f"needs a Docker engine: `docker info` failed: {first}"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, timeout=30
    )
    if compose.returncode != 0:
        first = (compose.stderr or compose.stdout).strip().splitlines()[:1]
        return f"needs Docker Compose v2: `docker compose version` failed: {''.join(first)}"
    return None


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


def wait_for_trace(trace_id: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Poll Jaeger until the trace's chain spans are all there (404 until the first arrive)."""
    url = f"http://localhost:16686/api/v3/traces/{trace_id}"
    deadline = time.monotonic() + timeout
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        status, answer = get_json(url)
        if status == 200 and answer:
            spans = list(spans_from_apiv3(answer))
            if set(CHAIN) <= {s["name"] for s in spans}:
                return spans
        time.sleep(0.5)
    names = sorted(s["name"] for s in spans)
    raise AssertionError(f"trace {trace_id} not complete in Jaeger after {timeout}s: {names}")


def wait_for_collector(timeout: float = 60.0) -> None:
    """The collector has no Docker health check (see docker-compose.yml): probe its extension."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://localhost:13133/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise AssertionError(f"the collector's health check did not answer 200 within {timeout}s")


@pytest.mark.timeout(600)
def test_demo_trace_reaches_jaeger_through_the_collector(tmp_path: Path) -> None:
    reason = docker_skip_reason()
    if reason:
        pytest.skip(reason)
    output = tmp_path / "collector-output"
    output.mkdir()
    compose_env = {**os.environ, "AGENTTRACE_COLLECTOR_OUTPUT": str(output)}
    compose = ["docker", "compose", "-f", str(COMPOSE_FILE), "-p", "agenttrace-e2e"]
    try:
        up = subprocess.run(
            [*compose, "up", "-d", "--wait", "--wait-timeout", "180"],
            cwd=ROOT,
            env=compose_env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert up.returncode == 0, f"docker compose up failed:\n{up.stdout}\n{up.stderr}"
        wait_for_collector()

        env = child_env()
        env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT="http://localhost:4318",
            AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
            AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl"),
        )
        demo = subprocess.run(
            [sys.executable, "examples/cafe.py", "--sessions-dir", str(tmp_path / "sessions")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert demo.returncode == 0, demo.stderr
        found = re.search(r"run 1: trace ([0-9a-f]{32}) \(txn ", demo.stdout)
        assert found, f"no trace id in the demo's opTree:\n{demo.stdout}"
        trace_id = found.group(1)

        check_cafe_trace(wait_for_trace(trace_id), trace_id)
        _screenshot_jaeger(trace_id, tmp_path)
        # The same trace went to the file exporter's JSON lines too.
        traces_file = output / "traces.jsonl"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            not traces_file.exists() or trace_id not in traces_file.read_text()
        ):
            time.sleep(0.5)
        lines = traces_file.read_text().splitlines()
        assert any(trace_id in line for line in lines)
        assert all("resourceSpans" in json.loads(line) for line in lines)
    finally:
        subprocess.run(
            [*compose, "down", "-v", "--remove-orphans"],
            cwd=ROOT,
            env=compose_env,
            capture_output=True,
            text=True,
            timeout=180,
        )


def _screenshot_jaeger(trace_id: str, tmp_path: Path) -> None:
    """Jaeger's page of the demo's trace as a person sees it, in headless Chromium, kept in
    tests/artifacts/jaeger-trace.png (the README's picture of a trace: copy it to
    docs/screenshots/). Where Chromium is missing, the trace was checked; no picture is made."""
    from .chromium import MISSING, Chromium

    if MISSING:
        return
    browser = Chromium(tmp_path / "profile", width=1400, height=900)
    try:
        browser.open(f"http://localhost:16686/trace/{trace_id}")
        # The trace page's header shows the trace id's first 7 digits once the trace is loaded.
        browser.wait_for(
            f"document.body.innerText.includes('{trace_id[:7]}')", "Jaeger's trace page"
        )
        time.sleep(1)  # its timeline lays out after the text is in
        artifacts = ROOT / "tests" / "artifacts"
        artifacts.mkdir(exist_ok=True)
        shot = browser.screenshot(artifacts / "jaeger-trace.png")
        assert shot.startswith(b"\x89PNG"), "the screenshot is not a PNG"
    finally:
        browser.close()
