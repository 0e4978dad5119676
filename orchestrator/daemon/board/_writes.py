"""The board's writes other than claims and leases (``_claims``): a task created, its
dependencies changed (a cycle refused and named), and its transitions — assigned, updated,
released, completed, failed, cancelled. Each is one journal transaction that re-reads the task
first, so it acts on the task as it is, never as a caller last saw it.

Who may: a member acts on what it owns; ``Actor.privileged`` (the operator, a lead) on any
task, and only it assigns; a task's creator may also change its dependencies and cancel it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.daemon.board._journal import add_event, blockers, current, load
from orchestrator.errors import TaskCycle, TaskInvalid, TaskRefused
from orchestrator.limits import MAX_TASK_DEPS

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Sequence

    from orchestrator.daemon.journal import Journal
    from orchestrator.protocol.board import TaskDoc

__all__ = ["OPERATOR", "TEAMCTL", "Actor", "Assignee", "NewTask", "Outcome", "Verdict", "assign",
           "change_deps", "completable", "create", "finish", "note", "refuse_unless", "release",
           "reopen", "rewrite", "update"]

Verdict = Literal["done", "review", "in_progress"]  # where the gate sends a completed task
Outcome = Verdict | Literal["failed", "cancelled"]


@dataclass(frozen=True)
class Actor:
    """Who acts: a member (by name), or the operator; ``privileged``: the operator or a lead."""

    name: str
    privileged: bool = False


OPERATOR = Actor("operator", privileged=True)
TEAMCTL = Actor("teamctl", privileged=True)  # teamctl's own moves: the merge queue's


@dataclass(frozen=True)
class NewTask:
    team: str
    title: str
    body: str
    role: str | None
    priority: int
    blocked_by: tuple[int, ...]
    check: str | None


@dataclass(frozen=True)
class Assignee:
    """A member a task is handed to, and its launch (None: no process runs it now, so its
    lease starts at once — a task never waits under a member that is not there)."""

    member: str
    epoch: int | None


def create(journal: Journal, task: NewTask, by: Actor, now: float,
           assignee: Assignee | None, grace: float,
           then: Callable[[sqlite3.Connection, TaskDoc], None] | None = None) -> TaskDoc:
    """Insert the task (its dependencies must be tasks of its team) and, when given, assign
    it — one transaction, with ``then``: the caller's own rows about the new task (the
    forge's record of the issue it came from: made exactly when the task is)."""
    with journal.transaction() as db:
        for blocker in task.blocked_by:
            load(db, blocker, task.team)
        task_id = db.execute(
            "INSERT INTO tasks (team, title, body, role, priority, status, created_by, "
            "check_command, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
            (task.team, task.title, task.body, task.role, task.priority, by.name, task.check,
             now, now)).lastrowid
        assert task_id is not None
        db.executemany("INSERT OR IGNORE INTO task_deps (task, blocked_by) VALUES (?, ?)",
                       [(task_id, b) for b in task.blocked_by])
        add_event(db, task_id, now, by.name, "created",
                  _deps_note(task.blocked_by, ()) if task.blocked_by else None)
        if assignee is not None:
            _assign(db, load(db, task_id, None), assignee, by, now, grace)
        doc = current(db, task_id)
        if then is not None:
            then(db, doc)
        return doc


def rewrite(db: sqlite3.Connection, task_id: int, *, body: str, note: str,
            now: float) -> TaskDoc:
    """A task's body replaced by teamctl (the issue it came from was edited), with the event
    (``edited``), inside the caller's transaction; a settled task keeps its body."""
    row = load(db, task_id, None)
    if row["status"] in ("done", "failed", "cancelled"):
        return current(db, task_id)
    db.execute("UPDATE tasks SET body = ?, updated_at = ? WHERE id = ?", (body, now, task_id))
    add_event(db, task_id, now, TEAMCTL.name, "edited", note)
    return current(db, task_id)


def change_deps(journal: Journal, task_id: int, team: str | None, by: Actor,
                add: Sequence[int], remove: Sequence[int], now: float) -> TaskDoc:
    """Add and remove what the task waits on; an edge that would close a cycle is refused,
    naming the cycle (a depth-first walk inside the transaction)."""
    with journal.transaction() as db:
        row = load(db, task_id, team)
        refuse_unless(by.privileged or by.name == row["created_by"], "task_forbidden",
                      f"only the operator, a lead or its creator changes what T{task_id} "
                      "waits on", task_id)
        for blocker in add:
            load(db, blocker, row["team"])
            path = _path(db, blocker, task_id)
            if path:
                raise TaskCycle([task_id, *path])
            db.execute("INSERT OR IGNORE INTO task_deps (task, blocked_by) VALUES (?, ?)",
                       (task_id, blocker))
        db.executemany("DELETE FROM task_deps WHERE task = ? AND blocked_by = ?",
                       [(task_id, b) for b in remove])
        count = db.execute("SELECT count(*) FROM task_deps WHERE task = ?",
                           (task_id,)).fetchone()[0]
        if count > MAX_TASK_DEPS:
            raise TaskInvalid(f"T{task_id} would wait on {count} tasks; at most "
                              f"{MAX_TASK_DEPS}")
        add_event(db, task_id, now, by.name, "deps", _deps_note(add, remove))
        _touch(db, task_id, now)
        return current(db, task_id)


def _path(db: sqlite3.Connection, start: int, goal: int) -> list[int]:
    """A chain of waits from ``start`` to ``goal`` ([start, …, goal]), or [] if none."""
    parents: dict[int, int | None] = {start: None}
    stack = [start]
    while stack:
        node = stack.pop()
        if node == goal:
            chain = [node]
            while (parent := parents[chain[-1]]) is not None:
                chain.append(parent)
            return chain[::-1]
        for (nxt,) in db.execute("SELECT blocked_by FROM task_deps WHERE task = ?", (node,)):
            if nxt not in parents:
                parents[nxt] = node
                stack.append(nxt)
    return []


def assign(journal: Journal, task_id: int, team: str | None, assignee: Assignee, by: Actor,
           now: float, grace: float) -> TaskDoc:
    with journal.transaction() as db:
        row = load(db, task_id, team)
        refuse_unless(by.privileged, "task_forbidden",
                      f"only the operator or a lead assigns tasks (T{task_id})", task_id)
        _assign(db, row, assignee, by, now, grace)
        return current(db, task_id)


def _assign(db: sqlite3.Connection, row: sqlite3.Row, assignee: Assignee, by: Actor,
            now: float, grace: float) -> None:
    """A ready task goes in progress under the member; a blocked one stays pending, kept for
    it (it claims it once ready)."""
    task_id = row["id"]
    _require(row, ("pending", "in_progress", "failed"), "assigned")
    ready = not blockers(db, [task_id])[task_id]
    status = "in_progress" if ready or row["status"] == "in_progress" else "pending"
    leased = status == "in_progress" and assignee.epoch is None
    db.execute("UPDATE tasks SET status = ?, owner = ?, owner_epoch = ?, owner_left_at = ?, "
               "lease_until = ?, updated_at = ? WHERE id = ?",
               (status, assignee.member, assignee.epoch if status == "in_progress" else None,
                now if leased else None, now + grace if leased else None, now, task_id))
    was = f" (was {row['owner']}'s)" if row["owner"] and row["owner"] != assignee.member else ""
    waits = "" if status == "in_progress" else ", kept for it until ready"
    add_event(db, task_id, now, by.name, "assigned", f"to {assignee.member}{was}{waits}")


def update(journal: Journal, task_id: int, team: str | None, by: Actor, note: str,
           now: float) -> TaskDoc:
    with journal.transaction() as db:
        row = _owned(load(db, task_id, team), by, "update")
        _require(row, ("in_progress", "review"), "updated")
        add_event(db, task_id, now, by.name, "updated", note)
        _touch(db, task_id, now)
        return current(db, task_id)


def release(journal: Journal, task_id: int, team: str | None, by: Actor, reason: str | None,
            now: float) -> TaskDoc:
    """Back to pending, nobody's (an assigned task waiting for readiness too)."""
    with journal.transaction() as db:
        row = _owned(load(db, task_id, team), by, "release")
        _require(row, ("in_progress", "review", "pending"), "released")
        refuse_unless(row["owner"] is not None, "task_state",
                      f"T{task_id} is held by nobody: nothing to release", task_id)
        db.execute("UPDATE tasks SET status = 'pending', owner = NULL, owner_epoch = NULL, "
                   "owner_left_at = NULL, lease_until = NULL, updated_at = ? WHERE id = ?",
                   (now, task_id))
        add_event(db, task_id, now, by.name, "released", reason)
        return current(db, task_id)


def finish(journal: Journal, task_id: int, team: str | None, by: Actor, *,
           status: Outcome, note: str | None,
           summary: str | None = None, evidence: str | None = None, now: float) -> TaskDoc:
    """Complete (done, or review / kept in progress as the gate said), fail or cancel."""
    kind = {"done": "completed", "review": "review", "in_progress": "gate",
            "failed": "failed", "cancelled": "cancelled"}[status]
    with journal.transaction() as db:
        row = load(db, task_id, team)
        if status == "cancelled":
            refuse_unless(by.privileged or by.name == row["created_by"], "task_forbidden",
                          f"only the operator, a lead or its creator cancels T{task_id}",
                          task_id)
            _require(row, ("pending", "in_progress", "review", "failed"), "cancelled")
        else:
            _owned(row, by, "complete" if kind != "failed" else "fail")
            _require(row, ("in_progress", "review"), kind)
        db.execute("UPDATE tasks SET status = ?, summary = coalesce(?, summary), "
                   "evidence = coalesce(?, evidence), lease_until = NULL, "
                   "owner_left_at = NULL, updated_at = ? WHERE id = ?",
                   (status, summary, evidence, now, task_id))
        add_event(db, task_id, now, by.name, kind, note)
        return current(db, task_id)


def reopen(db: sqlite3.Connection, task_id: int, *, to: Literal["in_progress", "failed"],
           epoch: int | None, note: str, now: float, grace: float) -> TaskDoc:
    """A done task that did not land (docs/land.md): back in progress under its owner (its
    launch ``epoch``; None: no process of it runs, so its lease starts at once), or failed —
    the operator's to decide — with the event (``integration``), inside the caller's
    transaction."""
    row = load(db, task_id, None)
    _require(row, ("done",), "sent back")
    if to == "failed" or row["owner"] is None:
        db.execute("UPDATE tasks SET status = 'failed', lease_until = NULL, "
                   "owner_left_at = NULL, updated_at = ? WHERE id = ?", (now, task_id))
    else:
        leased = epoch is None
        db.execute("UPDATE tasks SET status = 'in_progress', owner_epoch = ?, "
                   "owner_left_at = ?, lease_until = ?, updated_at = ? WHERE id = ?",
                   (epoch, now if leased else None, now + grace if leased else None, now,
                    task_id))
    add_event(db, task_id, now, TEAMCTL.name, "integration", note)
    return current(db, task_id)


def note(journal: Journal, task_id: int, *, kind: str, note: str, now: float,
         actor: str = TEAMCTL.name) -> None:
    """An event in the task's lifetime (the merge queue's: queued, landed...)."""
    with journal.transaction() as db:
        load(db, task_id, None)
        add_event(db, task_id, now, actor, kind, note)
        _touch(db, task_id, now)


def completable(journal: Journal, task_id: int, team: str | None, by: Actor) -> TaskDoc:
    """The task, if ``by`` may complete it now (checked again when it does)."""
    row = _owned(load(journal.connection, task_id, team), by, "complete")
    _require(row, ("in_progress", "review"), "completed")
    return current(journal.connection, task_id)


def _owned(row: sqlite3.Row, by: Actor, action: str) -> sqlite3.Row:
    """The row, if ``by`` may act on it as its owner."""
    if not by.privileged and row["owner"] != by.name:
        held = f"held by {row['owner']}" if row["owner"] else "held by nobody"
        raise TaskRefused("task_not_owner", f"T{row['id']} is {held}, not {by.name}: only its "
                          f"owner, a lead or the operator may {action} it", task_id=row["id"],
                          owner=row["owner"])
    return row


def _require(row: sqlite3.Row, statuses: tuple[str, ...], done: str) -> None:
    refuse_unless(row["status"] in statuses, "task_state",
                  f"T{row['id']} is {row['status']}: it cannot be {done} "
                  f"(only a task {' or '.join(statuses)})", row["id"])


def refuse_unless(ok: bool, code: str, message: str, task_id: int | None, *,
                  retryable: bool = False, **details: Any) -> None:
    if not ok:
        raise TaskRefused(code, message, task_id=task_id, retryable=retryable, **details)


def _touch(db: sqlite3.Connection, task_id: int, now: float) -> None:
    db.execute("UPDATE tasks SET updated_at = ? WHERE id = ?", (now, task_id))


def _deps_note(add: Sequence[int], remove: Sequence[int]) -> str:
    return " ".join([*(f"+T{t}" for t in add), *(f"-T{t}" for t in remove)]) or "unchanged"
