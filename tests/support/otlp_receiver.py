"""A local OTLP/HTTP receiver (a collector's ``otlp`` receiver, its HTTP half): ``POST
/v1/traces``, ``/v1/metrics`` and ``/v1/logs`` with protobuf bodies (gzip or not), decoded with the
OpenTelemetry protobuf definitions (opentelemetry-proto) and kept for the test to read.

Switches: ``hang`` (a request is read, then not answered until ``release()`` or the end:
the collector wedged), ``stop()`` (connections refused: the collector down). ``spans`` are
dicts (ids in hex, attributes decoded, the resource's too); ``raw`` every body received.
"""

from __future__ import annotations

import gzip
import http.server
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OtlpReceiver", "otlp_receiver"]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    return None if kind is None else getattr(v, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        kv: KeyValue = pair
        found[kv.key] = _value(kv.value)
    return found


def _items(resources: Any, scopes: str, items: str) -> Iterator[tuple[dict[str, Any], Any, Any]]:
    """Each item of an OTLP request (a span, a log record, a metric) with its resource's
    attributes and its scope."""
    for resource in resources:
        attributes = _attributes(resource.resource.attributes)
        for scope in getattr(resource, scopes):
            for item in getattr(scope, items):
                yield attributes, scope, item


def _point(kind: str, point: Any) -> float:
    """A data point's value: a gauge's or a sum's number, a histogram's sum (codex sends
    histograms: they have no ``value``)."""
    if kind in ("histogram", "exponential_histogram", "summary"):
        return float(point.sum)
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


class OtlpReceiver:
    """What the receiver was sent, and its switches."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []  # log records (Claude Code's events), decoded
        self.raw: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.hang = False
        self._released = threading.Event()
        self._changed = threading.Condition()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def release(self) -> None:
        """Answer the requests held by ``hang`` (and every later one at once)."""
        self.hang = False
        self._released.set()

    def wait_for(self, check: Callable[[OtlpReceiver], bool], timeout: float = 20.0) -> bool:
        """Block (a thread's wait: call it through anyio.to_thread) until ``check`` holds."""
        with self._changed:
            return self._changed.wait_for(lambda: check(self), timeout)

    def received(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        if self.hang:
            self._released.wait(60.0)
        with self._changed:
            self.raw.append(body)
            self.headers.append(headers)
            answer = {"/v1/traces": self._traces, "/v1/metrics": self._metrics,
                      "/v1/logs": self._logs}[path](body)
            self._changed.notify_all()
        return answer

    def _traces(self, body: bytes) -> bytes:
        request = ExportTraceServiceRequest.FromString(body)
        for resource, _scope, s in _items(request.resource_spans, "scope_spans", "spans"):
            self.spans.append({
                "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                "parent_id": s.parent_span_id.hex() or None, "name": s.name,
                "attributes": _attributes(s.attributes), "resource": resource,
                "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                "status": s.status.code})
        return ExportTraceServiceResponse().SerializeToString()

    def _logs(self, body: bytes) -> bytes:
        request = ExportLogsServiceRequest.FromString(body)
        for resource, scope, r in _items(request.resource_logs, "scope_logs", "log_records"):
            self.logs.append({"resource": resource, "scope": scope.scope.name,
                              "body": _value(r.body), "attributes": _attributes(r.attributes),
                              "trace_id": r.trace_id.hex() or None,
                              "span_id": r.span_id.hex() or None})
        return ExportLogsServiceResponse().SerializeToString()

    def _metrics(self, body: bytes) -> bytes:
        request = ExportMetricsServiceRequest.FromString(body)
        for resource, _scope, m in _items(request.resource_metrics, "scope_metrics", "metrics"):
            kind = m.WhichOneof("data")
            points = getattr(m, kind).data_points if kind else []
            self.metrics.append({"name": m.name, "resource": resource, "points": [
                {"attributes": _attributes(p.attributes), "value": _point(kind, p)}
                for p in points]})
        return ExportMetricsServiceResponse().SerializeToString()

    def start(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(size)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path not in ("/v1/traces", "/v1/metrics", "/v1/logs"):
                    self.send_response(404)
                    self.end_headers()
                    return
                answer = receiver.received(self.path, body, dict(self.headers.items()))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        # stop() waits for the serving loop to see it, which looks every poll_interval
        # (socketserver's 0.5 s: half a second a test, for nothing)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()

    def stop(self) -> None:
        """Connections refused from now on (the port is closed)."""
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()
