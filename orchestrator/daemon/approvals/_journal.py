"""The approvals queue's table in the journal (``approvals``, migration 7; the rules of
``approve --always`` are ``kept_rules``'): each request journaled with its state ``pending →
approved | denied | answered | expired``, its redacted summary (whole: never cut), the sha256
of the exact request the runtime asked (migration 16) and the answer it got. A request's
columns are written by the insert only: nothing here updates them, so an id names one request
for good. ``ApprovalJournal`` is the typed async way in (``approvals.Approvals`` is the
service)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ApprovalSettled

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations
    from orchestrator.protocol.approvals import ApprovalState

__all__ = ["MAX_PENDING_PER_MEMBER", "MIGRATIONS", "ApprovalJournal", "expire_pending",
           "flood_reason"]

MAX_PENDING_PER_MEMBER = 100
_COLUMNS = ("id, team, member, runtime, kind, tool, summary, questions, message_id, state, "
            "answer, reason, asked_at, settled_at, confirmed_at, seq, sha256")

MIGRATIONS: Migrations = {
    # what waits on the operator (the "ask" profile's requests and questions), and the rules
    # an "approve --always" left for later launches (replaced by kept_rules in 10)
    7: """
    CREATE TABLE approvals (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        runtime TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('permission', 'question')),
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        questions TEXT,
        message_id TEXT,
        state TEXT NOT NULL CHECK (state IN
            ('pending', 'approved', 'denied', 'answered', 'expired')),
        answer TEXT,
        reason TEXT,
        asked_at REAL NOT NULL,
        settled_at REAL,
        confirmed_at REAL
    );
    CREATE INDEX approvals_by_state ON approvals (state, seq);
    CREATE TABLE approval_rules (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        tool TEXT NOT NULL,
        pattern TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (team, member, tool, pattern)
    );
    """,
    # issue 44: the sha256 of the exact request the runtime asked (what a decision binds to);
    # NULL for a request journaled before
    16: "ALTER TABLE approvals ADD COLUMN sha256 TEXT",
}


def expire_pending(journal: Journal, reason: str, ids: Iterable[str] | None = None) -> list[str]:
    """Mark pending requests (all, or ``ids``) expired with ``reason``; the ids it changed."""
    with journal.transaction() as db:
        if ids is None:
            rows = db.execute("SELECT id FROM approvals WHERE state = 'pending'").fetchall()
            wanted = [r["id"] for r in rows]
        else:
            wanted = list(ids)
        changed = []
        for approval_id in wanted:
            cur = db.execute("UPDATE approvals SET state = 'expired', reason = ?, settled_at = ? "
                             "WHERE id = ? AND state = 'pending'",
                             (reason, time.time(), approval_id))
            if cur.rowcount:
                changed.append(approval_id)
    return changed


def _insert(journal: Journal, values: dict[str, Any]) -> ApprovalState:
    """Journal a request; a pending one only while fewer than ``MAX_PENDING_PER_MEMBER`` of
    its member wait (counted in the same transaction: a burst cannot overrun the bound), else
    it is denied at once. Returns the state it was journaled in."""
    with journal.transaction() as db:
        if values["state"] == "pending" and _count_pending(db, values["team"],
                                                           values["member"]) >= \
                MAX_PENDING_PER_MEMBER:
            values = {**values, "state": "denied", "settled_at": time.time(),
                      "answer": json.dumps({"decision": "deny", "by": "teamctl",
                                            "message": flood_reason()})}
        db.execute(
            "INSERT INTO approvals (id, team, member, runtime, kind, tool, summary, questions, "
            "message_id, state, answer, reason, asked_at, settled_at, sha256) VALUES (:id, "
            ":team, :member, :runtime, :kind, :tool, :summary, :questions, :message_id, :state, "
            ":answer, :reason, :asked_at, :settled_at, :sha256)", values)
        state: ApprovalState = values["state"]
        return state


def _settle(journal: Journal, approval_id: str, state: ApprovalState,
            answer: dict[str, Any]) -> None:
    with journal.transaction() as db:
        cur = db.execute("UPDATE approvals SET state = ?, answer = ?, settled_at = ? "
                         "WHERE id = ? AND state = 'pending'",
                         (state, json.dumps(answer, sort_keys=True), time.time(), approval_id))
        if not cur.rowcount:
            row = db.execute("SELECT state, reason FROM approvals WHERE id = ?",
                             (approval_id,)).fetchone()
            raise ApprovalSettled(approval_id, row["state"] if row else "gone",
                                  row["reason"] if row else None)


def _confirm(journal: Journal, approval_id: str) -> None:
    with journal.transaction(durable=False) as db:
        db.execute("UPDATE approvals SET confirmed_at = ? WHERE id = ? AND confirmed_at IS NULL",
                   (time.time(), approval_id))


def _get(journal: Journal, approval_id: str) -> Any:
    return journal.connection.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?",
                                      (approval_id,)).fetchone()


def _list(journal: Journal, team: str | None, everything: bool, after: int, limit: int,
          offset: int) -> tuple[list[Any], int, int]:
    """One page of the requests after ``after`` (oldest first), how many match in all, and
    the newest request's seq (where ``-f`` goes on from)."""
    where = "seq > ?"
    args: list[Any] = [after]
    if not everything:
        where += " AND state = 'pending'"
    if team is not None:
        where += " AND team = ?"
        args.append(team)
    db = journal.connection
    rows = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE {where} ORDER BY seq "
                      "LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
    total = db.execute(f"SELECT COUNT(*) FROM approvals WHERE {where}", args).fetchone()[0]
    head = db.execute("SELECT COALESCE(MAX(seq), 0) FROM approvals").fetchone()[0]
    return rows, int(total), int(head)


def flood_reason() -> str:
    return (f"more than {MAX_PENDING_PER_MEMBER} requests of this member wait already; "
            "answer those first")


def _count_pending(db: sqlite3.Connection, team: str, member: str) -> int:
    row = db.execute(
        "SELECT COUNT(*) AS n FROM approvals WHERE team = ? AND member = ? AND state = 'pending'",
        (team, member)).fetchone()
    return int(row["n"])


class ApprovalJournal:
    """The approvals table's typed async methods, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def insert(self, values: dict[str, Any]) -> ApprovalState:
        """Journal a request; the state it was journaled in (see ``_insert``)."""
        return await self._journal.run(_insert, values)

    async def settle(self, approval_id: str, state: ApprovalState,
                     answer: dict[str, Any]) -> None:
        await self._journal.run(_settle, approval_id, state, answer)

    async def confirm(self, approval_id: str) -> None:
        await self._journal.run(_confirm, approval_id)

    async def get(self, approval_id: str) -> Any:
        """The request's row, or None."""
        return await self._journal.run(_get, approval_id)

    async def page(self, team: str | None, everything: bool, after: int, limit: int,
                   offset: int) -> tuple[list[Any], int, int]:
        return await self._journal.run(_list, team, everything, after, limit, offset)

    async def expire(self, reason: str, ids: Iterable[str] | None = None) -> list[str]:
        return await self._journal.run(expire_pending, reason, ids)
