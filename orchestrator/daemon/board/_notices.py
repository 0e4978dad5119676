"""Events bound to a task, never dropped (docs/board.md, "Events bound to the task"): the table
``task_notices`` (migration 21) — each event about a task that someone must act on (a gate's
result, a review's verdict or ask, the merge queue's result; next, the forge's CI and
reviews) journaled against the *task*, with the source id that makes it once, and where it
was delivered.

A notice goes to the task's **current** owner (or to the member it names, a reviewer), as a
message journaled in the same transaction as the notice — so a notice is delivered exactly
when its message is in that member's queue, which the mailbox delivers at least once (an
owner asleep is woken by it, one that crashed reads it after its restart). A task that has no
owner when the event comes keeps the notice waiting; whoever takes the task next is told
(``deliver_waiting``), never the member that released it. A second event with the same
source id is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.daemon.board._journal import details, load
from orchestrator.ids import new_ulid
from orchestrator.protocol.board import TaskNoticeDoc

if TYPE_CHECKING:
    import sqlite3

    from orchestrator.daemon.journal import Journal, Migrations
    from orchestrator.protocol.board import TaskShowDoc

__all__ = ["MIGRATIONS", "Notice", "Told", "known", "notices_of", "shown", "tell", "waiting"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE task_notices (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task INTEGER NOT NULL REFERENCES tasks(id),
    source TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    at REAL NOT NULL,
    member TEXT,
    message_id TEXT,
    delivered_at REAL
);
CREATE INDEX task_notices_by_task ON task_notices (task, id)"""
MIGRATIONS: Migrations = {21: SCHEMA}

MAX_NOTICES_SHOWN = 200


@dataclass(frozen=True)
class Notice:
    """An event about a task: its source id (the same id: the same event, told once), its
    kind, what the member reads, and to whom (None: the task's owner at the time)."""

    source: str
    kind: str
    text: str
    to: str | None = None


@dataclass(frozen=True)
class Told:
    """Where a notice went: the member and the message (None: it waits for an owner)."""

    team: str
    task: int
    member: str | None
    message_id: str | None
    text: str


def tell(db: sqlite3.Connection, task_id: int, notice: Notice, now: float) -> Told | None:
    """The notice journaled (None: its source was told before) and, if the task has someone
    to tell, the message's id for the caller to journal in this transaction."""
    if db.execute("SELECT 1 FROM task_notices WHERE source = ?", (notice.source,)).fetchone():
        return None
    row = load(db, task_id, None)
    member = notice.to or row["owner"]
    message_id = None if member is None else new_ulid()
    db.execute("INSERT INTO task_notices (task, source, kind, text, at, member, message_id, "
               "delivered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (task_id, notice.source, notice.kind, notice.text, now, member, message_id,
                None if member is None else now))
    return Told(row["team"], task_id, member, message_id, notice.text)


def known(journal: Journal, source: str) -> bool:
    """Whether an event with this source id was journaled (told, or waiting for an owner)."""
    return journal.connection.execute("SELECT 1 FROM task_notices WHERE source = ?",
                                      (source,)).fetchone() is not None


def waiting(db: sqlite3.Connection, task_id: int, now: float) -> Told | None:
    """The task's notices that waited for an owner, now given to its owner in one message
    (its id for the caller to journal in this transaction); None while it has no owner or
    nothing waits."""
    row = load(db, task_id, None)
    if row["owner"] is None:
        return None
    rows = db.execute("SELECT id, text FROM task_notices WHERE task = ? AND member IS NULL "
                      "ORDER BY id LIMIT 100", (task_id,)).fetchall()
    if not rows:
        return None
    message_id = new_ulid()
    db.executemany("UPDATE task_notices SET member = ?, message_id = ?, delivered_at = ? "
                   "WHERE id = ?", [(row["owner"], message_id, now, r["id"]) for r in rows])
    text = (f"teamctl: while nobody held task T{task_id}, this came about it:\n\n"
            + "\n\n---\n\n".join(r["text"] for r in rows))
    return Told(row["team"], task_id, row["owner"], message_id, text)


def notices_of(db: sqlite3.Connection, task_id: int) -> list[TaskNoticeDoc]:
    """The task's notices, oldest first, with their message's delivery state (at most 200)."""
    rows = db.execute(
        "SELECT n.at, n.source, n.kind, n.member, n.message_id, d.state FROM task_notices n "
        "LEFT JOIN deliveries d ON d.message_id = n.message_id AND d.member = n.member "
        "WHERE n.task = ? ORDER BY n.id LIMIT ?", (task_id, MAX_NOTICES_SHOWN)).fetchall()
    return [TaskNoticeDoc(at=r["at"], source=r["source"], kind=r["kind"], member=r["member"],
                          message_id=r["message_id"],
                          delivery=r["state"] if r["member"] else "waiting for an owner")
            for r in rows]


def shown(journal: Journal, task_id: int, team: str | None) -> TaskShowDoc:
    """The task's page (``_journal.details``) with its notices."""
    page = details(journal, task_id, team)
    return page.model_copy(update={"notices": notices_of(journal.connection, task_id)})
