"""The team's board in the journal: tables ``tasks``, ``task_deps`` (task → the tasks it waits
on, both of one team) and ``task_events`` (each task's lifetime), and their reads.

``MIGRATIONS`` holds the tables' migration (12); the writes live in ``_writes`` (create,
dependencies, transitions) and ``_claims`` (claims, leases), the async way in is
``board.Board``. A pending task is *shown* ready when every dependency is done, else blocked,
with what blocks it (a failed or cancelled dependency said so: it never clears by itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orchestrator.errors import TaskNotFound
from orchestrator.ids import trace_id
from orchestrator.protocol.board import TaskDoc, TaskEventDoc, TaskListDoc, TaskShowDoc, TaskState

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from orchestrator.daemon.journal import Journal, Migrations

__all__ = ["MIGRATIONS", "SCHEMA", "add_event", "blockers", "current", "details", "held",
           "listing", "load", "rows_where", "shown", "task_doc"]

# no ";" inside the statements: the migration runner splits on it. No CHECK on the event
# kinds: the next phases add kinds (offered, gate) without rebuilding the table.
SCHEMA = """
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    role TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN
        ('pending', 'in_progress', 'review', 'done', 'failed', 'cancelled')),
    owner TEXT,
    owner_epoch INTEGER,
    owner_left_at REAL,
    lease_until REAL,
    created_by TEXT NOT NULL,
    evidence TEXT,
    summary TEXT,
    check_command TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX tasks_by_status ON tasks (team, status, priority DESC, id);
CREATE INDEX tasks_by_owner ON tasks (team, owner, status);
CREATE INDEX tasks_by_lease ON tasks (lease_until) WHERE lease_until IS NOT NULL;
CREATE TABLE task_deps (
    task INTEGER NOT NULL REFERENCES tasks(id),
    blocked_by INTEGER NOT NULL REFERENCES tasks(id),
    PRIMARY KEY (task, blocked_by),
    CHECK (task <> blocked_by)
);
CREATE INDEX task_deps_by_blocker ON task_deps (blocked_by);
CREATE TABLE task_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task INTEGER NOT NULL REFERENCES tasks(id),
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    kind TEXT NOT NULL,
    note TEXT
);
CREATE INDEX task_events_by_task ON task_events (task, id)"""
MIGRATIONS: Migrations = {12: SCHEMA}

# an unfinished dependency of the task ``t``
_BLOCKER = ("SELECT 1 FROM task_deps d JOIN tasks b ON b.id = d.blocked_by "
            "WHERE d.task = t.id AND b.status <> 'done'")
_STATE_WHERE = {
    "ready": f"t.status = 'pending' AND NOT EXISTS ({_BLOCKER})",
    "blocked": f"t.status = 'pending' AND EXISTS ({_BLOCKER})",
}


def load(db: sqlite3.Connection, task_id: int, team: str | None) -> sqlite3.Row:
    """The task's row (of ``team``, when given); TaskNotFound otherwise."""
    row: sqlite3.Row | None = db.execute("SELECT * FROM tasks WHERE id = ?",
                                         (task_id,)).fetchone()
    if row is None or (team is not None and row["team"] != team):
        raise TaskNotFound(task_id, team)
    return row


def blockers(db: sqlite3.Connection, task_ids: Sequence[int]) -> dict[int, list[tuple[int, str]]]:
    """Each task's unfinished dependencies: (id, status), by id."""
    found: dict[int, list[tuple[int, str]]] = {t: [] for t in task_ids}
    if not task_ids:
        return found
    rows = db.execute(
        "SELECT d.task, b.id, b.status FROM task_deps d JOIN tasks b ON b.id = d.blocked_by "
        "WHERE d.task BETWEEN ? AND ? AND b.status <> 'done' ORDER BY d.task, b.id",
        (min(task_ids), max(task_ids))).fetchall()
    for task, blocker, status in rows:
        if task in found:
            found[task].append((blocker, status))
    return found


def shown(status: str, blocked_by: list[tuple[int, str]]) -> tuple[TaskState, str | None]:
    """What a task is shown as, and what blocks it in words."""
    if status != "pending":
        return status, None  # type: ignore[return-value]  # the CHECK holds the values
    if not blocked_by:
        return "ready", None
    parts = [f"a {s} task T{b}" if s in ("failed", "cancelled") else f"T{b} ({s})"
             for b, s in blocked_by]
    return "blocked", "blocked by " + ", ".join(parts)


def task_doc(row: sqlite3.Row, blocked_by: list[tuple[int, str]]) -> TaskDoc:
    state, blocked = shown(row["status"], blocked_by)
    return TaskDoc(
        id=row["id"], team=row["team"], title=row["title"], body=row["body"],
        role=row["role"], priority=row["priority"], state=state,
        owner=row["owner"], epoch=row["owner_epoch"], lease_until=row["lease_until"],
        blocked_by=[b for b, _ in blocked_by], blocked=blocked, check=row["check_command"],
        created_by=row["created_by"], summary=row["summary"], evidence=row["evidence"],
        created_at=row["created_at"], updated_at=row["updated_at"])


def current(db: sqlite3.Connection, task_id: int) -> TaskDoc:
    """The task as it is now (inside the transaction that changed it)."""
    return task_doc(load(db, task_id, None), blockers(db, [task_id])[task_id])


def add_event(db: sqlite3.Connection, task_id: int, at: float, actor: str, kind: str,
              note: str | None = None) -> None:
    db.execute("INSERT INTO task_events (task, at, actor, kind, note) VALUES (?, ?, ?, ?, ?)",
               (task_id, at, actor, kind, note))


def listing(journal: Journal, team: str, *, state: str | None, owner: str | None,
            role: str | None, after_id: int, limit: int) -> TaskListDoc:
    """One page of the team's tasks (id order, after ``after_id``) and how many match."""
    clauses, args = ["t.team = ?"], [team]
    if state in _STATE_WHERE:
        clauses.append(_STATE_WHERE[state])
    elif state is not None:
        clauses.append("t.status = ?")
        args.append(state)
    for column, value in (("owner", owner), ("role", role)):
        if value is not None:
            clauses.append(f"t.{column} = ?")
            args.append(value)
    where = " AND ".join(clauses)
    db = journal.connection
    total = db.execute(f"SELECT count(*) FROM tasks t WHERE {where}", args).fetchone()[0]
    rows = db.execute(f"SELECT t.* FROM tasks t WHERE {where} AND t.id > ? ORDER BY t.id "
                      "LIMIT ?", [*args, after_id, limit + 1]).fetchall()
    page = rows[:limit]
    blocked = blockers(db, [r["id"] for r in page])
    return TaskListDoc(team=team, tasks=[task_doc(r, blocked[r["id"]]) for r in page],
                       total=total, next_after=page[-1]["id"] if len(rows) > limit else None)


def details(journal: Journal, task_id: int, team: str | None) -> TaskShowDoc:
    """The task, what it waits on, what waits on it, and its lifetime."""
    db = journal.connection
    task = task_doc(load(db, task_id, team), blockers(db, [task_id])[task_id])
    column = _ids(db, "SELECT blocked_by FROM task_deps WHERE task = ? ORDER BY 1", task_id)
    dependents = _ids(db, "SELECT task FROM task_deps WHERE blocked_by = ? ORDER BY 1", task_id)
    events = [TaskEventDoc(at=r["at"], actor=r["actor"], kind=r["kind"], note=r["note"])
              for r in db.execute("SELECT at, actor, kind, note FROM task_events WHERE task = ? "
                                  "ORDER BY id", (task_id,))]
    chains = db.execute("SELECT chain_id FROM messages WHERE task_id = ? GROUP BY chain_id "
                        "ORDER BY MIN(seq)", (task_id,)).fetchall()
    return TaskShowDoc(task=task, depends_on=column, dependents=dependents, events=events,
                       traces=[trace_id(str(r["chain_id"])) for r in chains])


def held(journal: Journal, team: str) -> dict[str, str]:
    """Each member's current tasks (in progress or in review), as ``teamctl status`` shows
    them: "T3 title" (more than one: joined by "; "), "(silent: it ignored a reminder)" after
    one whose owner ignored teamctl's reminder (board/_silence.py)."""
    found: dict[str, list[str]] = {}
    for row in journal.connection.execute(
            f"SELECT owner, id, title, status, {_IGNORED} AS ignored FROM tasks t WHERE "
            "team = ? AND owner IS NOT NULL AND status IN ('in_progress', 'review') ORDER BY id",
            (team,)):
        review = " (review)" if row["status"] == "review" else ""
        silent = " (silent: it ignored a reminder)" if row["ignored"] else ""
        found.setdefault(row["owner"], []).append(f"T{row['id']} {row['title']}{review}"
                                                  f"{silent}")
    return {owner: "; ".join(tasks) for owner, tasks in found.items()}


# the owner ignored teamctl's reminder (board/_silence.py) and said nothing on the board since
_IGNORED = ("EXISTS (SELECT 1 FROM task_events r WHERE r.task = t.id AND r.kind = "
            "'reminder_ignored' AND NOT EXISTS (SELECT 1 FROM task_events l WHERE "
            "l.task = t.id AND l.id > r.id AND l.actor = t.owner))")


def _ids(db: sqlite3.Connection, sql: str, task_id: int) -> list[int]:
    return [int(r[0]) for r in db.execute(sql, (task_id,))]


def rows_where(db: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[sqlite3.Row]:
    return list(db.execute(f"SELECT * FROM tasks WHERE {sql} ORDER BY id", args))
