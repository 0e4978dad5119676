"""Claims and leases on the board: who holds a task, and for how long after it died.

A claim is one journal transaction (``BEGIN IMMEDIATE`` through the one writer): it reads the
task, checks it is ready, unowned, of the member's role and within the member's
``max_tasks``, and takes it — so of 50 members racing for one task exactly one wins and the
others are refused naming the winner.

Leases follow liveness, not the model: a task is held by a member's *launch* (its epoch).
When that process ends, the task is kept ``grace`` seconds for the member's next launch
(``owner_exited``, then ``owner_started`` adopts it), after which ``expire`` releases it to
pending with a note. A daemon that starts treats every task in progress as its owner having
just exited (``daemon_started``): the daemon killed mid-claim never leaves a task held by a
process that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.daemon.board._journal import add_event, blockers, current, load, rows_where
from orchestrator.daemon.board._writes import refuse_unless

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Collection

    from orchestrator.daemon.journal import Journal
    from orchestrator.protocol.board import TaskDoc

__all__ = ["Claimant", "claim", "daemon_started", "expire", "lease_due", "owner_exited",
           "owner_started", "take"]

_READY = ("NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks b ON b.id = d.blocked_by "
          "WHERE d.task = tasks.id AND b.status <> 'done')")


@dataclass(frozen=True)
class Claimant:
    """The member that claims: its launch, its roles, how many tasks it may hold at once."""

    team: str
    member: str
    epoch: int
    roles: Collection[str]
    max_tasks: int = 1


def claim(journal: Journal, who: Claimant, task_id: int | None, now: float) -> TaskDoc:
    """Take task ``task_id`` — or, none given, the next ready task of the member's role
    (priority first, then age) — for ``who``; TaskRefused says why not."""
    with journal.transaction() as db:
        return take(db, who, task_id, now)


def take(db: sqlite3.Connection, who: Claimant, task_id: int | None, now: float, *,
         cooled_since: float | None = None, kind: str = "claimed") -> TaskDoc:
    """The claim inside its transaction (``claim``'s; an offer's, which skips the tasks
    ``who`` released after ``cooled_since`` and records the event as ``kind``)."""
    row = _next(db, who, cooled_since) if task_id is None else load(db, task_id, who.team)
    if row["status"] == "in_progress" and row["owner"] == who.member:
        return current(db, row["id"])  # already its own: a repeated claim changes nothing
    _check(db, row, who)
    held = db.execute("SELECT count(*) FROM tasks WHERE team = ? AND owner = ? AND "
                      "status = 'in_progress'", (who.team, who.member)).fetchone()[0]
    refuse_unless(held < who.max_tasks, "task_limit",
                  f"{who.member} already holds {held} task(s) in progress (max_tasks = "
                  f"{who.max_tasks}): complete or release one first", row["id"],
                  retryable=True)
    db.execute("UPDATE tasks SET status = 'in_progress', owner = ?, owner_epoch = ?, "
               "owner_left_at = NULL, lease_until = NULL, updated_at = ? WHERE id = ?",
               (who.member, who.epoch, now, row["id"]))
    add_event(db, row["id"], now, who.member if kind == "claimed" else "teamctl", kind,
              f"launch {who.epoch}" if kind == "claimed" else f"to {who.member}'s launch "
              f"{who.epoch}")
    return current(db, row["id"])


# a task the member released itself after a time: not offered to it again before its cooldown
_RELEASED = ("NOT EXISTS (SELECT 1 FROM task_events e WHERE e.task = tasks.id AND "
             "e.kind = 'released' AND e.actor = ? AND e.at > ?)")


def _next(db: sqlite3.Connection, who: Claimant, cooled_since: float | None) -> sqlite3.Row:
    roles = sorted(who.roles)
    marks = ", ".join("?" * len(roles))
    role = f"(role IS NULL OR role IN ({marks}))" if roles else "role IS NULL"
    cool, cool_args = ("", ()) if cooled_since is None else \
        (f" AND {_RELEASED}", (who.member, cooled_since))
    row: sqlite3.Row | None = db.execute(
        f"SELECT * FROM tasks WHERE team = ? AND status = 'pending' AND "
        f"(owner IS NULL OR owner = ?) AND {role} AND {_READY}{cool} "
        "ORDER BY priority DESC, id LIMIT 1",
        (who.team, who.member, *roles, *cool_args)).fetchone()
    if row is None:
        of = f" of role {', '.join(roles)}" if roles else " without a role"
        refuse_unless(False, "task_none_ready", f"no ready task{of} for {who.member} in team "
                      f"{who.team}", None, retryable=True)
    assert row is not None
    return row


def _check(db: sqlite3.Connection, row: sqlite3.Row, who: Claimant) -> None:
    """Refuse a task that is not ready, held (or kept) for another, or of another role."""
    task_id, owner, status = row["id"], row["owner"], row["status"]
    refuse_unless(status in ("pending", "in_progress"), "task_state",
                  f"T{task_id} is {status}: only a pending task can be claimed", task_id)
    if owner is not None and owner != who.member:
        how = "holds it" if status == "in_progress" else "is assigned it"
        refuse_unless(False, "task_owned", f"T{task_id} is taken: {owner} {how}", task_id,
                      owner=owner)
    role = row["role"]
    refuse_unless(role is None or role in who.roles, "task_role",
                  f"T{task_id} is for role {role!r}; {who.member} is "
                  f"{_roles(who.roles)}", task_id, role=role)
    waiting = blockers(db, [task_id])[task_id]
    refuse_unless(not waiting, "task_not_ready",
                  f"T{task_id} is not ready: it waits on " + ", ".join(
                      f"T{b} ({s})" for b, s in waiting), task_id, retryable=True,
                  blocked_by=[b for b, _ in waiting])


def _roles(roles: Collection[str]) -> str:
    return "of role " + ", ".join(sorted(roles)) if roles else "of no role"


def owner_exited(journal: Journal, team: str, member: str, epoch: int, *, grace: float,
                 now: float) -> list[int]:
    """The member's launch ``epoch`` ended: its tasks in progress are kept ``grace`` seconds
    for its next launch. The ids kept."""
    with journal.transaction() as db:
        rows = rows_where(db, "team = ? AND owner = ? AND owner_epoch = ? AND status = "
                          "'in_progress' AND lease_until IS NULL", (team, member, epoch))
        db.executemany("UPDATE tasks SET owner_left_at = ?, lease_until = ? WHERE id = ?",
                       [(now, now + grace, r["id"]) for r in rows])
        return [r["id"] for r in rows]


def owner_started(journal: Journal, team: str, member: str, epoch: int, *,
                  now: float) -> list[int]:
    """The member's launch ``epoch`` is up: it adopts its tasks whose lease has not run out
    (those that have are released first). The ids adopted."""
    with journal.transaction() as db:
        _expire(db, now)
        rows = rows_where(db, "team = ? AND owner = ? AND status = 'in_progress' AND "
                          "(owner_epoch IS NULL OR owner_epoch <> ? OR lease_until IS NOT NULL)",
                          (team, member, epoch))
        for row in rows:
            db.execute("UPDATE tasks SET owner_epoch = ?, owner_left_at = NULL, "
                       "lease_until = NULL, updated_at = ? WHERE id = ?", (epoch, now, row["id"]))
            add_event(db, row["id"], now, member, "adopted",
                      f"kept for {member}'s launch {epoch}")
        return [r["id"] for r in rows]


def lease_due(journal: Journal, now: float) -> bool:
    """Whether a lease has run out (a read: the periodic check writes nothing when not)."""
    return journal.connection.execute(
        "SELECT 1 FROM tasks WHERE lease_until IS NOT NULL AND lease_until <= ? LIMIT 1",
        (now,)).fetchone() is not None


def next_lease(journal: Journal) -> float | None:
    """When the first lease runs out (None: no task is held for a dead owner)."""
    row = journal.connection.execute(
        "SELECT MIN(lease_until) FROM tasks WHERE lease_until IS NOT NULL").fetchone()
    return None if row is None or row[0] is None else float(row[0])


def expire(journal: Journal, now: float) -> list[int]:
    """Release every task whose lease ran out to pending, with a note. The ids released."""
    with journal.transaction() as db:
        return _expire(db, now)


def _expire(db: sqlite3.Connection, now: float) -> list[int]:
    rows = rows_where(db, "status = 'in_progress' AND lease_until IS NOT NULL AND "
                      "lease_until <= ?", (now,))
    for row in rows:
        grace = row["lease_until"] - (row["owner_left_at"] or row["lease_until"])
        db.execute("UPDATE tasks SET status = 'pending', owner = NULL, owner_epoch = NULL, "
                   "owner_left_at = NULL, lease_until = NULL, updated_at = ? WHERE id = ?",
                   (now, row["id"]))
        add_event(db, row["id"], now, "teamctl", "lapsed",
                  f"released: T{row['id']}'s owner {row['owner']} died and did not come back "
                  f"within {grace:g} s")
    return [r["id"] for r in rows]


def daemon_started(journal: Journal, *, grace: float, now: float) -> list[int]:
    """Every task in progress lost its owner's process with the daemon that ran it: each is
    kept ``grace`` seconds for its owner's next launch (a lease already running keeps its
    own end). The ids leased."""
    with journal.transaction() as db:
        rows = rows_where(db, "status = 'in_progress' AND lease_until IS NULL", ())
        db.executemany("UPDATE tasks SET owner_left_at = ?, lease_until = ? WHERE id = ?",
                       [(now, now + grace, r["id"]) for r in rows])
        return [r["id"] for r in rows]
