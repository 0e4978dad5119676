"""Traces (``teamctl trace``): one piece of work as spans — who asked whom, each delivery and
each attempt at its turn, the operator's approvals it waited on, the tool calls it made —
read from the journal alone (docs/telemetry.md)."""

from typing import Literal

from pydantic import Field

from orchestrator.limits import ULID_PATTERN
from orchestrator.protocol.common import Doc, Params

__all__ = ["SpanDoc", "SpanKind", "SpanTokens", "TraceDoc", "TraceParams"]

SpanKind = Literal["delivery", "plan", "attempt", "approval", "tool", "gate", "check"]


class SpanTokens(Doc):
    input: int = 0
    cached_input: int = 0
    output: int = 0
    reasoning_output: int = 0


class SpanDoc(Doc):
    """One span: a delivery (a message to one member, queued until it ended), an attempt at
    its turn (claimed until it ended), an approval its turn waited on, a tool call the
    runtime reported in it, or the gate (``gate``) and the merge queue's integration check
    (``check``) of the task that turn completed."""

    span_id: str = Field(description="16 hex digits, derived from the journal's ids")
    parent_id: str | None = Field(description="the span it is a child of; null: the root")
    kind: SpanKind
    name: str = Field(description="what it is, as a collector shows it: 'deliver to "
                      "reviewer', 'turn reviewer #2', 'approval Write', 'tool Bash'")
    team: str
    member: str
    sender: str = Field(description="who asked: operator, teamctl or a teammate")
    message_id: str
    attempt: int | None = Field(default=None, description="an attempt's ordinal (1, 2, …)")
    epoch: int | None = Field(default=None, description="the member's launch it ran on")
    runtime: str | None = None
    model: str | None = None
    start: float = Field(description="epoch seconds")
    end: float | None = Field(description="epoch seconds; null: not ended (or unknown)")
    duration_ms: float | None = None
    outcome: str | None = Field(description="answered, failed, requeued, held, "
                                "daemon_restarted, queued, sent…; an approval's state; a tool "
                                "call's completed, failed, running or unfinished; a gate's or "
                                "check's passed, failed or refused")
    error_code: str | None = None
    sent_at: float | None = Field(default=None, description="an attempt's: the turn "
                                  "reached the runtime")
    tokens: SpanTokens | None = Field(default=None, description="what the turn used")
    cost_usd: float | None = Field(default=None, description="null: unknown or none")
    task_id: int | None = Field(default=None, description="the board's task it belongs to")
    text: str | None = Field(default=None, description="the message's first line, at most "
                             "80 characters (a delivery's)")


class TraceDoc(Doc):
    """``teamctl trace MSG-ID --json``: the trace the message belongs to, every span in
    start order (a parent before its children)."""

    trace_id: str = Field(description="32 hex digits, derived from the chain id")
    chain_id: str = Field(description="the first message of the conversation")
    spans: list[SpanDoc]
    cost_usd: float = Field(description="the sum of the attempts' known costs")
    tokens: SpanTokens


class TraceParams(Params):
    id: str = Field(pattern=ULID_PATTERN)
