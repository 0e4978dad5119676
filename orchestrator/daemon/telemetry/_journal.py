"""What a trace is read from: the journal's rows of one conversation (its messages, their
deliveries and attempts, what each attempt used, the approvals its turns waited on, the tool
calls they made) — one read, in the writer thread. The tables are their owners' (queue,
ledger, approvals); this module only reads them, and writes telemetry's own (``tool_calls``,
``_tools``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.daemon.telemetry._checks import write_checks
from orchestrator.daemon.telemetry._tools import write_tools

if TYPE_CHECKING:
    from orchestrator.daemon.journal import AsyncJournal, Journal
    from orchestrator.daemon.telemetry._checks import CheckRow
    from orchestrator.daemon.telemetry._tools import ToolRow

__all__ = ["TraceJournal", "TraceRows"]

Row = dict[str, Any]


@dataclass(frozen=True)
class TraceRows:
    """One conversation's rows, each a dict of its columns."""

    chain_id: str
    messages: list[Row]
    deliveries: list[Row]
    attempts: list[Row]
    usage: list[Row]
    approvals: list[Row]
    tools: list[Row]
    checks: list[Row]


# ``{scope}``: the messages read — a whole chain (``chain_id = ?``) or one message (``id = ?``)
_MESSAGES = ("SELECT id, team, text, created_at, planned_at, sender, kind, reply_to, "
             "origin_delivery, origin_attempt, task_id FROM messages WHERE {scope} "
             "ORDER BY seq")
_IN = "message_id IN (SELECT id FROM messages WHERE {scope})"
_DELIVERIES = f"SELECT message_id, member, state, error_code, updated_at, reply FROM " \
              f"deliveries WHERE {_IN}"
# a reply's parent is the replier's last attempt on the message it answers: read those too
_ATTEMPTS = (f"SELECT * FROM turn_attempts WHERE {_IN} OR message_id IN (SELECT reply_to "
             "FROM messages WHERE {scope}) ORDER BY message_id, member, ordinal")
_USAGE = (f"SELECT message_id, member, model, input_tokens, cached_input_tokens, "
          f"output_tokens, reasoning_output_tokens, cost_usd, at FROM usage WHERE {_IN} "
          "ORDER BY seq")
_APPROVALS = (f"SELECT id, member, kind, tool, summary, state, asked_at, settled_at, "
              f"message_id FROM approvals WHERE {_IN} ORDER BY seq")

_TOOLS = (f"SELECT message_id, member, call_id, ordinal, name, arguments, status, started_at, "
          f"ended_at FROM tool_calls WHERE {_IN} ORDER BY started_at")

_CHECKS = f"SELECT * FROM task_checks WHERE {_IN} ORDER BY id"


def _rows(journal: Journal, message_id: str, *, whole_chain: bool = True) -> TraceRows | None:
    """The rows of the chain ``message_id`` belongs to (``whole_chain``), or of that one
    message (what one ended attempt exports)."""
    db = journal.connection
    found = db.execute("SELECT chain_id FROM messages WHERE id = ?", (message_id,)).fetchone()
    if found is None:
        return None
    chain = str(found["chain_id"] or message_id)
    scope, key = ("chain_id = ?", chain) if whole_chain else ("id = ?", message_id)

    def read(sql: str) -> list[Row]:
        query = sql.replace("{scope}", scope)
        return [dict(r) for r in db.execute(query, (key,) * query.count("?")).fetchall()]

    return TraceRows(chain, read(_MESSAGES), read(_DELIVERIES), read(_ATTEMPTS), read(_USAGE),
                     read(_APPROVALS), read(_TOOLS), read(_CHECKS))


def _each(journal: Journal, message_ids: list[str]) -> dict[str, TraceRows]:
    found = {}
    for message_id in message_ids:
        rows = _rows(journal, message_id, whole_chain=False)
        if rows is not None:
            found[message_id] = rows
    return found


class TraceJournal:
    """The trace's reads, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def rows(self, message_id: str) -> TraceRows | None:
        """The rows of the conversation ``message_id`` belongs to; None: no such message."""
        return await self._journal.run(_rows, message_id)

    async def messages_rows(self, message_ids: list[str]) -> dict[str, TraceRows]:
        """Each message's rows alone (and the attempts its parent is among), in one call."""
        return await self._journal.run(_each, message_ids)

    async def write_tools(self, rows: list[ToolRow]) -> None:
        """The tool calls the runtimes reported (``_tools``), in one call."""
        await self._journal.run(write_tools, rows)

    async def write_checks(self, rows: list[CheckRow]) -> list[tuple[str, str, str]]:
        """The gates and integration checks that ran (``_checks``), in one call."""
        return await self._journal.run(write_checks, rows)
