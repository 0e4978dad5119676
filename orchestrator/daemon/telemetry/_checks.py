"""A task's gate (board/_gate.py) and the merge queue's integration check (land/) as spans of
the turn that made the task done (docs/telemetry.md, "The trace").

The board and the merge queue tell ``CheckRan`` (never a wait); telemetry keeps it with the
turn the completing member had in flight and writes it in its next journal call (``write``).
The gate is a child of the attempt that called ``task_complete``; an integration check, which
runs after that turn, is a child of the attempt of the task's last gate. A check no turn had in
flight and no earlier gate placed (the operator's ``teamctl task complete``) is a child of the
last attempt at a message about the task (its hand-over); a task no turn ever worked on has
its checks in no trace. Telemetry's table
(``task_checks``, in migration 26 beside ``tool_calls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.journal import Journal

__all__ = ["SCHEMA", "CheckRan", "CheckRow", "write_checks"]

SCHEMA = """
CREATE TABLE task_checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    message_id TEXT NOT NULL,
    member TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    outcome TEXT NOT NULL
);
CREATE INDEX task_checks_by_message ON task_checks (message_id);
CREATE INDEX task_checks_by_task ON task_checks (task_id, id)
"""


# the last attempt at a message about the task (its hand-over, a notice): where a check no
# turn had in flight (the operator's ``task complete``) and no earlier gate placed goes
_LAST_TASK_TURN = (
    "SELECT a.message_id, a.member, a.ordinal FROM turn_attempts a JOIN messages m ON "
    "m.id = a.message_id WHERE m.task_id = ? AND a.team = ? "
    "ORDER BY a.claimed_at DESC, a.ordinal DESC LIMIT 1")


@dataclass(frozen=True)
class CheckRan:
    """A gate (``kind`` "gate") or an integration check ("integration") of task ``task``:
    when it ran, how it ended (passed, failed, refused), and who completed the task (``by``:
    the member whose turn it was in; None: the merge queue's, after that turn)."""

    team: str
    task: int
    kind: str
    started_at: float
    ended_at: float
    outcome: str
    by: str | None = None


@dataclass(frozen=True)
class CheckRow:
    ran: CheckRan
    message_id: str | None  # the turn ``ran.by`` had in flight


def write_checks(journal: Journal, rows: list[CheckRow]) -> list[tuple[str, str, str]]:
    """``rows`` (a check whose turn is not known is left out), in one transaction; the
    (team, message, member) of each written — their deliveries' spans to export again."""
    written = []
    with journal.transaction(durable=False) as db:
        for row in rows:
            ran = row.ran
            if row.message_id is not None and ran.by is not None:
                found = db.execute("SELECT ?, ?, MAX(ordinal) FROM turn_attempts WHERE "
                                   "message_id = ? AND member = ?",
                                   (row.message_id, ran.by, row.message_id, ran.by)).fetchone()
            else:
                found = db.execute("SELECT message_id, member, ordinal FROM task_checks "
                                   "WHERE task_id = ? AND team = ? ORDER BY id DESC LIMIT 1",
                                   (ran.task, ran.team)).fetchone() \
                    or db.execute(_LAST_TASK_TURN, (ran.task, ran.team)).fetchone()
            if found is None or found[2] is None:
                continue
            db.execute("INSERT INTO task_checks (team, task_id, kind, message_id, member, "
                       "ordinal, started_at, ended_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, "
                       "?, ?)", (ran.team, ran.task, ran.kind, found[0], found[1], found[2],
                                 ran.started_at, ran.ended_at, ran.outcome))
            written.append((ran.team, str(found[0]), str(found[1])))
    return written
