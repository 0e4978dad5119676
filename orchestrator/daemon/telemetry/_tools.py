"""The tool calls the runtimes report inside a turn (Claude's ``tool_use``, Codex's items,
OpenCode's tool parts, ACP's ``tool_call``), journaled against the turn's attempt so that
each is a child span of it (docs/telemetry.md, "The trace").

An adapter tells ``ToolRecorder.log(team, member)`` (the ``ToolLog`` of ``LaunchSpec.tools``)
what it saw — never a wait: the recorder keeps what changed in memory and telemetry's task
writes it in one journal call (``write``). A call's arguments are kept redacted and cut; they
leave the daemon only with ``include_content``. The table is telemetry's (``tool_calls``,
migration 26); a call's attempt is the delivery's newest when it is first written.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.daemon.telemetry._checks import SCHEMA as CHECKS_SCHEMA
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.contracts import ToolLog, ToolStatus
    from orchestrator.daemon.journal import Journal, Migrations

__all__ = ["MIGRATIONS", "ToolRecorder", "ToolRow", "write_tools"]

SCHEMA = """
CREATE TABLE tool_calls (
    message_id TEXT NOT NULL,
    member TEXT NOT NULL,
    call_id TEXT NOT NULL,
    ordinal INTEGER,
    team TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    PRIMARY KEY (message_id, member, call_id)
)
"""
# each tool call a runtime reported in a turn, and each task's gate and integration check
# (issue 51): child spans of their attempt
MIGRATIONS: Migrations = {26: f"{SCHEMA};{CHECKS_SCHEMA}"}

_NAME_CHARS = 200
_ARGUMENT_CHARS = 4096
_PENDING_MAX = 10_000  # rows waiting for their write (past it: dropped, counted)
_KNOWN_MAX = 20_000  # calls remembered (started, ended) — the oldest forgotten first
_TERMINAL = frozenset({"completed", "failed"})


@dataclass(frozen=True)
class ToolRow:
    """One write: a call first seen (its row), or its end."""

    team: str
    member: str
    message_id: str
    call_id: str
    name: str
    status: str
    arguments: str | None
    at: float
    ended: bool


class ToolRecorder:
    """What the runtimes said of their tool calls, waiting for ``take``. ``wake``: called
    when there is something to write."""

    def __init__(self, wake: Callable[[], None], *,
                 clock: Callable[[], float] = time.time) -> None:
        self._wake = wake
        self._clock = clock
        self._pending: list[ToolRow] = []
        self._known: OrderedDict[tuple[str, str, str, str], bool] = OrderedDict()  # → ended
        self.dropped = 0

    def log(self, team: str, member: str) -> ToolLog:
        """``member``'s record, as its runtime sees it (``LaunchSpec.tools``)."""
        return _MemberLog(self, team, member)

    def record(self, team: str, member: str, message_id: str, call_id: str, name: str,
               status: ToolStatus, arguments: object) -> None:
        key = (team, member, message_id, call_id)
        ended = self._known.get(key)
        terminal = status in _TERMINAL
        if ended or (ended is not None and not terminal):
            return  # a repeat: nothing new
        if len(self._pending) >= _PENDING_MAX:
            self.dropped += 1
            return
        self._known[key] = terminal
        self._known.move_to_end(key)
        while len(self._known) > _KNOWN_MAX:
            self._known.popitem(last=False)
        self._pending.append(ToolRow(
            team, member, message_id, call_id[:_NAME_CHARS], name[:_NAME_CHARS], status,
            None if ended is not None else _arguments(arguments), self._clock(), terminal))
        self._wake()

    def take(self) -> list[ToolRow]:
        """What waits to be written, now the caller's."""
        taken, self._pending = self._pending, []
        return taken


class _MemberLog:
    """One member's ``ToolLog``."""

    def __init__(self, recorder: ToolRecorder, team: str, member: str) -> None:
        self._recorder, self._team, self._member = recorder, team, member

    def tool(self, message_id: str, call_id: str, name: str, status: ToolStatus,
             arguments: object = None) -> None:
        self._recorder.record(self._team, self._member, message_id, call_id, name, status,
                              arguments)


def _arguments(arguments: object) -> str | None:
    if arguments is None:
        return None
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
    return redact(text)[:_ARGUMENT_CHARS]


# a call first seen: its attempt is the delivery's newest; a repeat of it (written twice
# across a restart of the adapter's stream) keeps its first start and attempt
_UPSERT = ("INSERT INTO tool_calls (message_id, member, call_id, ordinal, team, name, "
           "arguments, status, started_at, ended_at) VALUES (?, ?, ?, (SELECT MAX(ordinal) "
           "FROM turn_attempts WHERE message_id = ? AND member = ?), ?, ?, ?, ?, ?, ?) "
           "ON CONFLICT (message_id, member, call_id) DO UPDATE SET status = excluded.status, "
           "ended_at = excluded.ended_at WHERE tool_calls.ended_at IS NULL")


def write_tools(journal: Journal, rows: list[ToolRow]) -> None:
    """``rows`` in one transaction (no fsync: a tool call lost to a crash loses a span)."""
    with journal.transaction(durable=False) as db:
        db.executemany(_UPSERT, [
            (r.message_id, r.member, r.call_id, r.message_id, r.member, r.team, r.name,
             r.arguments, r.status, r.at, r.at if r.ended else None) for r in rows])
