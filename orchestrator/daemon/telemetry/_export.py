"""One OTLP exporter (docs/telemetry.md, "Export"): the OpenTelemetry SDK's span and metric
exporters — OTLP/HTTP, or gRPC with teamctl's ``grpc`` extra — behind a bounded queue, so an
exporter that is down never slows a turn.

The daemon's loop only ``offer``s finished spans — an append under a lock, never a wait; a
thread of this pipeline's own converts them and sends them in batches. Past ``max_queue`` a
span is dropped and counted (``dropped``); the service logs the count at most once a minute.
This module imports the SDK: it is loaded only when a team has ``[telemetry]``; the exporter of
each protocol only when a signal is sent over it (grpcio never over OTLP/HTTP).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from orchestrator.errors import TelemetryExporterMissing, map_exceptions

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.trace.export import SpanExporter

    from orchestrator.protocol.traces import SpanDoc
    from orchestrator.telemetry_config import ExportSettings

__all__ = ["Gauges", "Pipeline", "metric_exporter", "span_exporter"]

_BATCH = 512
_SCOPE = InstrumentationScope("teamctl", "0.1.0")
# what a gauge reads: (team, member) → value, per gauge name
Gauges = dict[str, dict[tuple[str, ...], float]]
_FAILED = frozenset({"failed", "daemon_restarted"})
# the SDK's exporters per protocol (grpc: teamctl's grpc extra), each imported when first used
_PACKAGES = {"http/protobuf": "opentelemetry.exporter.otlp.proto.http",
             "grpc": "opentelemetry.exporter.otlp.proto.grpc"}


class Pipeline:
    """Spans and metrics to one endpoint, off the daemon's loop: a span waits up to
    ``export_delay`` seconds for others to share its request; the metrics leave every
    ``metric_interval`` seconds (None: the settings')."""

    def __init__(self, settings: ExportSettings, *, gauges: Callable[[], Gauges],
                 export_delay: float = 1.0, metric_interval: float | None = None) -> None:
        self._resource = Resource.create({"service.name": "teamctl",
                                          "service.instance.id": str(os.getpid())})
        self._spans = span_exporter(settings)
        self._max_queue = settings.max_queue
        self._queue: deque[tuple[str, SpanDoc, Mapping[str, Any]]] = deque()
        self._lock = threading.Condition()
        self._closing = False
        self._export_delay = export_delay
        self.dropped = self.exported = self.failed = 0
        self._gauges = gauges
        reader = PeriodicExportingMetricReader(
            metric_exporter(settings),
            export_interval_millis=(metric_interval or settings.metric_interval) * 1000.0,
            export_timeout_millis=settings.timeout * 1000.0)
        self._meters = MeterProvider(metric_readers=[reader], resource=self._resource)
        self._instruments()
        self._thread = threading.Thread(target=self._run, name="otlp exporter", daemon=True)
        self._thread.start()

    def offer(self, trace_id: str, spans: Iterable[tuple[SpanDoc, Mapping[str, Any]]]) -> None:
        """Queue finished spans (with their extra attributes); never waits. Past the bound,
        each is dropped and counted."""
        with self._lock:
            for span, extra in spans:
                if len(self._queue) >= self._max_queue:
                    self.dropped += 1
                    continue
                self._queue.append((trace_id, span, extra))
            self._lock.notify()

    def turn_ended(self, span: SpanDoc) -> None:
        """Count a turn and what it used (the metrics' counters)."""
        where = {"teamctl.team": span.team, "teamctl.member": span.member,
                 "teamctl.runtime": span.runtime or "", "gen_ai.request.model": span.model or "",
                 "teamctl.outcome": span.outcome or ""}
        self._turns.add(1, where)
        if span.tokens is not None:
            for kind, value in span.tokens.model_dump().items():
                self._tokens.add(value, {**where, "gen_ai.token.type": kind})
        if span.cost_usd is not None:
            self._cost.add(span.cost_usd, where)

    def close(self, timeout: float) -> None:
        """Send what is queued (within ``timeout``), then stop."""
        with self._lock:
            self._closing = True
            self._lock.notify()
        self._thread.join(timeout)
        self._meters.shutdown(timeout_millis=timeout * 1000.0)
        self._spans.shutdown()

    # -- the pipeline's thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                # a span waits up to export_delay for others to share its request
                self._lock.wait_for(lambda: self._closing or len(self._queue) >= _BATCH,
                                    self._export_delay)
                if not self._queue:
                    return
                batch = [self._queue.popleft() for _ in range(min(_BATCH, len(self._queue)))]
            spans = [_readable(trace, span, extra, self._resource) for trace, span, extra in batch]
            try:
                ok = self._spans.export(spans) == SpanExportResult.SUCCESS
            except Exception:  # the exporter's own bug: counted, never the daemon's end
                ok = False
            with self._lock:
                if ok:
                    self.exported += len(spans)
                else:
                    self.failed += len(spans)

    def _instruments(self) -> None:
        meter = self._meters.get_meter("teamctl")
        self._turns = meter.create_counter("teamctl.turns", "{turn}", "turns ended, by outcome")
        self._tokens = meter.create_counter("teamctl.tokens", "{token}", "tokens used")
        self._cost = meter.create_counter("teamctl.cost", "USD", "what the turns cost")
        for name, description in (
                ("teamctl.queue.depth", "messages queued, prepared or sent, per member"),
                ("teamctl.member.restarts", "restarts of a member's process"),
                ("teamctl.approvals.waiting", "requests waiting on the operator, per member"),
                ("teamctl.member.held", "1 while a budget or quota window holds the member")):
            meter.create_observable_gauge(name, [self._observer(name)], description=description)
        meter.create_observable_counter("teamctl.telemetry.spans_dropped",
                                        [self._dropped_observation], "{span}")

    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for (team, member), value in self._gauges().get(name, {}).items():
                yield Observation(value, {"teamctl.team": team, "teamctl.member": member})
        return observe

    def _dropped_observation(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(self.dropped)


def span_exporter(settings: ExportSettings) -> SpanExporter:
    """The SDK's span exporter of ``settings.traces_protocol``."""
    return cast("SpanExporter", _exporter(settings, "trace_exporter.OTLPSpanExporter",
                                          settings.traces_protocol, settings.traces_url))


def metric_exporter(settings: ExportSettings) -> MetricExporter:
    """The SDK's metric exporter of ``settings.metrics_protocol``."""
    return cast("MetricExporter", _exporter(settings, "metric_exporter.OTLPMetricExporter",
                                            settings.metrics_protocol, settings.metrics_url))


def _exporter(settings: ExportSettings, name: str, protocol: str, url: str) -> Any:
    """``name`` (module.class) of the SDK's exporter package for ``protocol``, imported now —
    gRPC's failing is ``TelemetryExporterMissing`` (the extra missing or broken), never an
    ImportError — and made for ``url``."""
    module, cls = name.split(".")
    grpc = protocol == "grpc"
    with map_exceptions({ImportError: _grpc_missing} if grpc else {}):
        found = importlib.import_module(f"{_PACKAGES[protocol]}.{module}")
    options = {"insecure": _insecure(url), "headers": _metadata(settings.headers)} if grpc \
        else {"headers": dict(settings.headers)}
    return getattr(found, cls)(endpoint=url, timeout=settings.timeout, **options)


def _insecure(url: str) -> bool:
    """Over gRPC, ``http://`` is plaintext and ``https://`` TLS — said to the exporter, which
    would otherwise read OTEL_EXPORTER_OTLP_INSECURE from the daemon's environment."""
    return url.startswith("http://")


def _metadata(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The headers as gRPC metadata: lower-case keys (grpcio refuses any other)."""
    return tuple((name.lower(), value) for name, value in headers)


def _grpc_missing(_exc: BaseException) -> TelemetryExporterMissing:
    """The gRPC exporter's import failed: the extra is missing (or broken) — a typed error."""
    return TelemetryExporterMissing("[telemetry]", sys.executable)


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1_000_000_000)


def _readable(trace_id: str, span: SpanDoc, extra: Mapping[str, Any],
              resource: Resource) -> ReadableSpan:
    parent = None if span.parent_id is None else _context(trace_id, span.parent_id)
    status = Status(StatusCode.ERROR, span.error_code or span.outcome) \
        if span.outcome in _FAILED else Status(StatusCode.UNSET)
    return ReadableSpan(span.name, _context(trace_id, span.span_id), parent, resource,
                        {**attributes(span), **extra}, kind=SpanKind.INTERNAL, status=status,
                        start_time=_ns(span.start), end_time=_ns(span.end or span.start),
                        instrumentation_scope=_SCOPE)


def attributes(span: SpanDoc) -> dict[str, Any]:
    """A span's attributes: who, on what, how it ended, what it used — never its content."""
    found: dict[str, Any] = {
        "teamctl.kind": span.kind, "teamctl.team": span.team, "teamctl.member": span.member,
        "teamctl.sender": span.sender, "teamctl.message.id": span.message_id,
        "teamctl.runtime": span.runtime, "gen_ai.request.model": span.model,
        "teamctl.attempt": span.attempt, "teamctl.epoch": span.epoch,
        "teamctl.outcome": span.outcome, "teamctl.error.code": span.error_code,
        "teamctl.task.id": span.task_id, "teamctl.cost_usd": span.cost_usd,
        "teamctl.queued_at" if span.kind == "delivery" else "teamctl.started_at": span.start,
        "teamctl.sent_at": span.sent_at, "teamctl.ended_at": span.end}
    if span.tokens is not None:
        found.update({"gen_ai.usage.input_tokens": span.tokens.input,
                      "gen_ai.usage.output_tokens": span.tokens.output,
                      "teamctl.usage.cached_input_tokens": span.tokens.cached_input,
                      "teamctl.usage.reasoning_output_tokens": span.tokens.reasoning_output})
    return {key: value for key, value in found.items() if value is not None}
