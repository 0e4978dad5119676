"""Telemetry: one trace per piece of work (docs/telemetry.md).

The face of the package. The trace is read from the journal alone — its messages, their
deliveries and attempts (``turn_attempts``, migration 24), what each used, the approvals
each waited on — so ``teamctl trace`` needs no collector:

- ``_journal``: ``TraceJournal``, the rows of one conversation (read, never written here);
- ``_model``: ``build_trace``, the spans from those rows, their ids derived from the
  journal's (``orchestrator.ids``);
- ``_api``: ``TraceApi``, the ``trace`` control method;
- ``_tools``: ``ToolRecorder``, the tool calls the runtimes report, journaled against their
  attempt (``tool_calls``, ``MIGRATIONS``: 26);
- ``_checks``: ``CheckRan``, a task's gate or integration check, journaled against the turn
  that completed the task (``task_checks``, migration 26);
- ``_service``: ``Telemetry``, each ended attempt of a team with ``[telemetry]`` exported
  as spans (and metrics) by ``_export``'s ``Pipeline`` — the OpenTelemetry SDK behind a
  bounded queue, imported only when a team has ``[telemetry]``.
"""

from __future__ import annotations

from orchestrator.daemon.telemetry._api import TraceApi
from orchestrator.daemon.telemetry._checks import CheckRan
from orchestrator.daemon.telemetry._journal import TraceJournal, TraceRows
from orchestrator.daemon.telemetry._model import (
    attempt_span_id,
    build_trace,
    delivery_span_id,
    tool_span_id,
)
from orchestrator.daemon.telemetry._service import DELAYS, DROP_LOG_INTERVAL, Delays, Telemetry
from orchestrator.daemon.telemetry._tools import MIGRATIONS

__all__ = ["DELAYS", "DROP_LOG_INTERVAL", "MIGRATIONS", "CheckRan", "Delays", "Telemetry",
           "TraceApi", "TraceJournal", "TraceRows", "attempt_span_id", "build_trace",
           "delivery_span_id", "tool_span_id"]
