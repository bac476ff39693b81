"""A real OTLP trace receiver on 127.0.0.1 (HTTP/protobuf and gRPC), decoding what it gets.

Independent of agenttrace: it parses the wire format with the OpenTelemetry protobuf classes,
so a test sees exactly what a collector or Jaeger would receive.
"""

from __future__ import annotations

import gzip
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


def _attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in key_values}


class ReceivedSpan:
    """A span as it arrived over the wire: every field of the protobuf ``Span``, ids as hex."""

    def __init__(
        self,
        span: Any,
        resource: dict[str, Any],
        scope: tuple[str, str] = ("", ""),
        envelope: tuple[Any, Any] | None = None,
    ) -> None:
        self.proto = span
        """The protobuf ``Span`` itself."""
        self.envelope = envelope
        """The protobuf ``ResourceSpans`` and ``ScopeSpans`` it came in."""
        self.name: str = span.name
        self.trace_id: str = span.trace_id.hex()
        self.span_id: str = span.span_id.hex()
        self.parent_span_id: str = span.parent_span_id.hex()
        self.kind: int = span.kind
        """OTLP's ``SpanKind`` enum (``SPAN_KIND_INTERNAL`` = 1)."""
        self.start_ns: int = span.start_time_unix_nano
        self.end_ns: int = span.end_time_unix_nano
        self.attributes = _attributes(span.attributes)
        self.events = [(e.name, _attributes(e.attributes)) for e in span.events]
        self.timed_events = [
            (e.name, e.time_unix_nano, _attributes(e.attributes)) for e in span.events
        ]
        """``events`` with each event's time in ns."""
        self.links = [
            (link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
            for link in span.links
        ]
        self.status_code: int = span.status.code
        self.status_message: str = span.status.message
        self.dropped = (
            span.dropped_attributes_count,
            span.dropped_events_count,
            span.dropped_links_count,
        )
        self.resource = resource
        self.scope = scope
        """The instrumentation scope's (name, version)."""


class OTLPReceiver:
    """Collects spans sent to ``http_endpoint`` (OTLP/HTTP) or ``grpc_endpoint`` (OTLP/gRPC)."""

    def __init__(self, http_port: int = 0) -> None:
        """``http_port``: the OTLP/HTTP port (0: any free one)."""
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._collect(request)
                data = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._collect(request)
                return trace_service_pb2.ExportTraceServiceResponse()

        self._http = ThreadingHTTPServer(("127.0.0.1", http_port), Handler)
        self._http.daemon_threads = True
        self.http_endpoint = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._grpc)
        port = self._grpc.add_insecure_port("127.0.0.1:0")
        self.grpc_endpoint = f"http://127.0.0.1:{port}"

    def _collect(self, request: Any) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    scope = (scope_spans.scope.name, scope_spans.scope.version)
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(span, resource, scope, (resource_spans, scope_spans))
                        )

    def start(self) -> OTLPReceiver:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self._grpc.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(None)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        """The received spans once at least ``count`` arrived (or what arrived by ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        with self._lock:
            return list(self.spans)
