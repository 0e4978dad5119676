"""Telemetry's export (docs/telemetry.md, "Export"): each ended attempt of a team with
``[telemetry]`` becomes spans — the attempt, the approvals it waited on, the tool calls it made,
the gate and integration check of the task it completed and, once the delivery has ended, the
delivery — sent by that team's exporter; metrics beside them. The tool calls the runtimes
report and the checks that ran are journaled here too (``_tools``, ``_checks``), for every
team.

The mailbox tells ``ended`` (a set append, never a wait: a turn is never slowed by telemetry);
this service's own task reads the message's rows from the journal, builds its spans with the
same model as ``teamctl trace`` (the same ids) and offers them to the exporter's bounded
queue. Spans dropped (the exporter down, its queue full) are counted and logged at most once
a minute. Nothing of the SDK is imported until a team with ``[telemetry]`` ends a turn.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import structlog

from orchestrator.daemon.telemetry._checks import CheckRow
from orchestrator.daemon.telemetry._model import build_trace
from orchestrator.daemon.telemetry._tools import ToolRecorder
from orchestrator.errors import TelemetryConfigInvalid
from orchestrator.redaction import redact
from orchestrator.runtime_table import Collector, OtlpTarget, runtime_info
from orchestrator.telemetry_config import ExportSettings, export_settings

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import ToolLog
    from orchestrator.daemon.queue import Delivery
    from orchestrator.daemon.telemetry._checks import CheckRan
    from orchestrator.daemon.telemetry._export import Gauges, Pipeline
    from orchestrator.daemon.telemetry._journal import TraceJournal, TraceRows
    from orchestrator.protocol.traces import SpanDoc

__all__ = ["DELAYS", "Delays", "Telemetry"]

log = structlog.get_logger("teamctl.telemetry")

DROP_LOG_INTERVAL = 60.0  # seconds between two telemetry_spans_dropped lines
_PENDING_MAX = 10_000  # ended attempts waiting to be read (past it: dropped, counted)
_SENT_MAX = 100_000  # span ids remembered as exported (the oldest forgotten first)
_CONTENT_CHARS = 4096


@dataclass(frozen=True)
class Delays:
    """How long telemetry gathers before it works: ``batch``, seconds the ended attempts
    gather before one journal read takes them all; ``export``, seconds a span waits for others
    to share its request (or 512 of them); ``metrics``, seconds between two metric exports in
    place of the team's ``metric_interval`` (None: the team's, 1 s at least). A test's are
    short."""

    batch: float = 0.5
    export: float = 1.0
    metrics: float | None = None


DELAYS = Delays()  # the daemon's
_TERMINAL = frozenset({"answered", "failed", "blocked"})
_CHILDREN = frozenset({"approval", "tool", "gate", "check"})  # an attempt's child spans


class Telemetry:
    """The exporters of the teams that have ``[telemetry]``, fed by the mailbox's ended
    attempts. ``config_of(team)``: a running team's file; ``sample()``: the gauges now (queue
    depth, restarts, approvals waiting, held); ``environ``: where the standard
    ``OTEL_EXPORTER_OTLP_*`` variables are read."""

    def __init__(self, journal: TraceJournal, *,
                 config_of: Callable[[str], TeamConfig | None],
                 sample: Callable[[], Awaitable[Gauges]],
                 environ: Mapping[str, str] = os.environ,
                 turn_of: Callable[[str, str], str | None] = lambda team, member: None,
                 clock: Callable[[], float] = time.monotonic,
                 delays: Delays = DELAYS) -> None:
        self._journal = journal
        self._config_of = config_of
        self._sample = sample
        self._environ = environ
        self._clock = clock
        self._delays = delays
        self._pending: deque[tuple[str, str, str]] = deque()
        self._sent: OrderedDict[str, None] = OrderedDict()  # span ids exported
        self._wake = anyio.Event()
        self._tools = ToolRecorder(lambda: self._wake.set())
        self._turn_of = turn_of
        self._checks: list[CheckRow] = []
        self._pipelines: dict[ExportSettings, Pipeline] = {}
        self._gauges: Gauges = {}
        self._lost = 0  # ended attempts not read: the pending bound was reached
        self._logged_drops = 0
        self._last_drop_log: float | None = None

    @property
    def dropped(self) -> int:
        """Spans dropped so far: every exporter's queue overflows, and attempts not read."""
        return self._lost + self._tools.dropped + sum(p.dropped
                                                      for p in self._pipelines.values())

    @property
    def exported(self) -> int:
        return sum(p.exported for p in self._pipelines.values())

    @property
    def failed(self) -> int:
        """Spans a collector refused or did not answer in time (sent, not received)."""
        return sum(p.failed for p in self._pipelines.values())

    def own(self, team: str, member: str) -> tuple[dict[str, str], dict[str, Any]]:
        """What points ``member``'s CLI's own telemetry at its team's collector (env, config;
        docs/telemetry.md, "The runtimes' own telemetry"), over the protocol teamctl exports
        with: nothing without ``[telemetry]``, for a runtime that exports none, or when the
        collector needs headers — they are secrets, and a member is never handed one."""
        config = self._config_of(team)
        entry = None if config is None else config.member(member)
        if config is None or config.telemetry is None or entry is None:
            return {}, {}
        point = runtime_info(entry.runtime).own_telemetry
        try:
            settings = export_settings(config.telemetry, self._environ)
        except TelemetryConfigInvalid:
            return {}, {}
        if point is None or not config.telemetry.runtimes:
            return {}, {}
        if settings.headers:
            log.info("telemetry_runtime_not_pointed", team=team, member=member,
                     reason="the collector takes headers, which are never a member's")
            return {}, {}
        return point(_collector(settings), {"teamctl.team": team, "teamctl.member": member,
                                            "teamctl.runtime": entry.runtime},
                     settings.include_content)

    def tools(self, team: str, member: str) -> ToolLog:
        """Where ``member``'s runtime reports its tool calls (``LaunchSpec.tools``): journaled
        for every team, exported with the attempt for a team with ``[telemetry]``."""
        return self._tools.log(team, member)

    def checked(self, ran: CheckRan) -> None:
        """A task's gate or integration check ran (the board's and the merge queue's hook):
        journaled against the turn ``ran.by`` has in flight (an integration check: the
        task's last gate's), exported with it. Never waits."""
        if len(self._checks) >= _PENDING_MAX:
            self._lost += 1
            return
        turn = None if ran.by is None else self._turn_of(ran.team, ran.by)
        self._checks.append(CheckRow(ran, turn))
        self._wake.set()

    def ended(self, delivery: Delivery) -> None:
        """An attempt of ``delivery`` ended (the mailbox's hook): export it soon. Never waits;
        a team without ``[telemetry]`` costs a lookup."""
        config = self._config_of(delivery.team)
        if config is None or config.telemetry is None:
            return
        if len(self._pending) >= _PENDING_MAX:
            self._lost += 1
            return
        self._pending.append((delivery.team, delivery.message_id, delivery.member))
        self._wake.set()

    async def run(self) -> None:
        """Export what ended, as it ends; sample the gauges; log drops once a minute. Runs
        until cancelled."""
        while True:
            with anyio.move_on_after(DROP_LOG_INTERVAL) as waited:
                await self._wake.wait()
            self._wake = anyio.Event()
            ended = bool(self._pending)
            try:
                if ended:
                    await anyio.sleep(self._delays.batch)  # the turns ending now share one read
                await self.write_recorded()
                if self._pending:  # the ended attempts, and those a check was added to
                    await self._export_pending()
            except Exception:  # a bug here never ends the daemon, nor a turn
                log.exception("telemetry_export_failed")
            if self._pipelines and (ended or waited.cancelled_caught):
                self._gauges = await self._sample()
            self._log_drops()

    async def close(self, timeout: float) -> None:
        """Send what is queued, each exporter within ``timeout`` (shielded)."""
        with anyio.CancelScope(shield=True):
            for pipeline in self._pipelines.values():
                await anyio.to_thread.run_sync(pipeline.close, timeout)

    async def write_recorded(self) -> None:
        """The tool calls reported and the checks that ran so far, journaled now (also before
        ``teamctl trace`` reads: what a turn that has ended reported is in its trace); a
        check's attempt exported again (its new span: a check may end after its turn)."""
        rows = self._tools.take()
        if rows:
            await self._journal.write_tools(rows)
        checks, self._checks = self._checks, []
        if checks:
            for team, message_id, member in await self._journal.write_checks(checks):
                config = self._config_of(team)
                if config is not None and config.telemetry is not None:
                    self._pending.append((team, message_id, member))

    async def _export_pending(self) -> None:
        """Every ended attempt waiting, its message's rows read in one journal call."""
        pending = list(dict.fromkeys(self._pending))
        self._pending.clear()
        found = await self._journal.messages_rows([message_id for _, message_id, _ in pending])
        for team, message_id, member in pending:
            rows = found.get(message_id)
            if rows is not None:
                await self._export(team, rows, member)

    async def _export(self, team: str, rows: TraceRows, member: str) -> None:
        config = self._config_of(team)
        if config is None or config.telemetry is None:
            return
        try:
            settings = export_settings(config.telemetry, self._environ)
            pipeline = await self._pipeline(settings)
        except TelemetryConfigInvalid as exc:  # refused at launch; the environment changed
            log.warning(exc.code, team=team, where=exc.details.get("where"), error=exc.message)
            return
        doc = build_trace(rows, rooted=False)
        spans = [s for s in _ended(doc.spans, member) if s.span_id not in self._sent]
        for span in spans:
            self._sent[span.span_id] = None
        while len(self._sent) > _SENT_MAX:
            self._sent.popitem(last=False)
        for span in spans:
            if span.kind == "attempt":
                pipeline.turn_ended(span)
        content = _content(rows, settings.include_content)
        pipeline.offer(doc.trace_id, [(s, content.get(s.span_id, {})) for s in spans])

    async def _pipeline(self, settings: ExportSettings) -> Pipeline:
        """The exporter of ``settings``, made the first time (the SDK imported then, off the
        loop)."""
        found = self._pipelines.get(settings)
        if found is None:
            found = await anyio.to_thread.run_sync(_new_pipeline, settings,
                                                    lambda: self._gauges, self._delays)
            self._pipelines[settings] = found
            log.info("telemetry_exporter_started", endpoint=settings.shown,
                     include_content=settings.include_content)
        return found

    def _log_drops(self) -> None:
        """``telemetry_spans_dropped`` with the count since the last line, at most once a
        minute."""
        dropped, now = self.dropped, self._clock()
        if dropped == self._logged_drops:
            return
        if self._last_drop_log is not None and now - self._last_drop_log < DROP_LOG_INTERVAL:
            return
        log.warning("telemetry_spans_dropped", dropped=dropped - self._logged_drops,
                    total=dropped)
        self._logged_drops, self._last_drop_log = dropped, now


def _collector(settings: ExportSettings) -> Collector:
    """Where a member's CLI sends: its traces and metrics where teamctl's go, by the same
    protocols; its events (OTLP logs, which teamctl sends none of) with its traces — over
    OTLP/HTTP at ``/v1/logs`` beside ``/v1/traces`` (a traces URL of another path: its
    origin's ``/v1/logs``)."""
    traces = OtlpTarget(settings.traces_protocol, settings.traces_url)
    logs = traces
    if traces.protocol != "grpc":
        base = traces.url.removesuffix("/v1/traces")
        if base == traces.url:
            parts = urlsplit(traces.url)
            base = f"{parts.scheme}://{parts.netloc}"
        logs = OtlpTarget(traces.protocol, f"{base}/v1/logs")
    return Collector(traces, OtlpTarget(settings.metrics_protocol, settings.metrics_url), logs)


def _new_pipeline(settings: ExportSettings, gauges: Callable[[], Gauges],
                  delays: Delays) -> Pipeline:
    from orchestrator.daemon.telemetry._export import Pipeline

    return Pipeline(settings, gauges=gauges, export_delay=delays.export,
                    metric_interval=delays.metrics)


def _ended(spans: list[SpanDoc], member: str) -> list[SpanDoc]:
    """What has ended of a delivery to ``member``: its ended attempts, the approvals they
    waited on, the tool calls they made and the checks of the tasks they completed, and the
    delivery once it has ended (the caller leaves out what it sent)."""
    mine = [s for s in spans if s.member == member]
    ended = {s.span_id for s in mine if s.kind == "attempt" and s.end is not None}
    return [s for s in mine if s.span_id in ended
            or (s.kind in _CHILDREN and s.parent_id in ended)
            or (s.kind == "delivery" and s.outcome in _TERMINAL)]


def _content(rows: TraceRows, include: bool) -> dict[str, dict[str, Any]]:
    """Per span id, its content attributes — only with ``include_content``, redacted."""
    if not include:
        return {}
    from orchestrator.daemon.telemetry._model import delivery_span_id, tool_span_id
    from orchestrator.ids import span_id

    found: dict[str, dict[str, Any]] = {}
    texts = {m["id"]: m["text"] or "" for m in rows.messages}
    for d in rows.deliveries:
        found[delivery_span_id(d["message_id"], d["member"])] = {
            "teamctl.message.text": _shown(texts.get(d["message_id"], "")),
            **({"teamctl.reply": _shown(d["reply"])} if d["reply"] else {})}
    for p in rows.approvals:
        found[span_id("approval", p["id"])] = {"teamctl.approval.summary": _shown(p["summary"])}
    for t in rows.tools:
        if t["arguments"] is not None:
            found[tool_span_id(t["message_id"], t["member"], t["call_id"])] = {
                "teamctl.tool.arguments": _shown(t["arguments"])}
    return found


def _shown(text: str) -> str:
    return redact(text)[:_CONTENT_CHARS]
