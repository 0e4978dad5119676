"""The merge queue in the journal (migration 21; docs/land.md): ``land_entries`` — one row per
attempt to land a task's commits, in queue order — ``land_teams`` (a team's queue paused) and
``land_snapshots`` (what a task in review will land: its owner's commit when it went to
review). ``LandJournal`` is the typed async way in, through the journal's writer.

What makes a daemon killed mid-integration safe: an entry is ``running`` with its ``phase``
(merging → checking → landing) and, from checking on, the commit the branch would move to
(``result``) — written before the branch is moved, which is a compare-and-swap from ``onto``.
A daemon that starts finds each running entry: if the branch holds ``result`` it landed (the
move happened, its record did not), otherwise it is queued again, whole. So the branch is only
ever at a commit whose check passed, and nothing lands twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.protocol.land import EntryPhase, EntryState, QueueEntryDoc

if TYPE_CHECKING:
    import sqlite3

    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations

__all__ = ["MIGRATIONS", "RECENT", "LandJournal", "NewEntry"]

RECENT = 20  # ended entries a queue shows

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE land_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team TEXT NOT NULL,
    task INTEGER NOT NULL,
    title TEXT NOT NULL,
    owner TEXT NOT NULL,
    source TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    branch TEXT NOT NULL,
    repo TEXT NOT NULL,
    base TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN
        ('queued', 'running', 'landed', 'sent_back', 'needs_you')),
    phase TEXT CHECK (phase IN ('merging', 'checking', 'landing')),
    onto TEXT,
    result TEXT,
    note TEXT,
    queued_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    check_seconds REAL
);
CREATE INDEX land_entries_by_state ON land_entries (team, state, id);
CREATE INDEX land_entries_by_task ON land_entries (task, id);
CREATE TABLE land_teams (
    team TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE land_snapshots (
    task INTEGER PRIMARY KEY,
    commit_sha TEXT NOT NULL,
    committed INTEGER NOT NULL,
    at REAL NOT NULL
)"""
MIGRATIONS: Migrations = {21: SCHEMA}

_ACTIVE = ("queued", "running")


@dataclass(frozen=True)
class NewEntry:
    """A task's commits entering the queue: where they are (the owner's branch and commit,
    the repository's common dir) and the base a new integration branch starts from."""

    team: str
    task: int
    title: str
    owner: str
    source: str
    commit: str
    branch: str  # the integration branch it lands on
    repo: str
    base: str


def _doc(row: sqlite3.Row) -> QueueEntryDoc:
    return QueueEntryDoc(
        id=row["id"], team=row["team"], task=row["task"], title=row["title"],
        owner=row["owner"], source=row["source"], commit=row["commit_sha"], branch=row["branch"],
        attempt=row["attempt"], state=row["state"], phase=row["phase"], onto=row["onto"],
        result=row["result"], note=row["note"], queued_at=row["queued_at"],
        started_at=row["started_at"], finished_at=row["finished_at"],
        check_seconds=row["check_seconds"])


def _attempt(db: sqlite3.Connection, task: int) -> int:
    """The task's next attempt: one more than the entries sent back since it last landed or
    reached the operator."""
    rows = db.execute("SELECT state FROM land_entries WHERE task = ? ORDER BY id DESC LIMIT 1000",
                      (task,)).fetchall()
    count = 0
    for row in rows:
        if row["state"] != "sent_back":
            break
        count += 1
    return count + 1


def _enqueue(journal: Journal, entry: NewEntry, now: float) -> tuple[QueueEntryDoc, bool]:
    """The entry added — or the one already queued or running for the task (False)."""
    with journal.transaction() as db:
        found = db.execute("SELECT * FROM land_entries WHERE task = ? AND state IN "
                           "('queued', 'running') ORDER BY id LIMIT 1", (entry.task,)).fetchone()
        if found is not None:
            return _doc(found), False
        entry_id = db.execute(
            "INSERT INTO land_entries (team, task, title, owner, source, commit_sha, branch, repo, "
            "base, attempt, state, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
            (entry.team, entry.task, entry.title, entry.owner, entry.source, entry.commit,
             entry.branch, entry.repo, entry.base, _attempt(db, entry.task), now)).lastrowid
        return _doc(db.execute("SELECT * FROM land_entries WHERE id = ?",
                               (entry_id,)).fetchone()), True


def _next(journal: Journal, team: str) -> tuple[QueueEntryDoc, str, str] | None:
    """The team's oldest queued entry (none while its queue is paused), with its repository
    and base."""
    db = journal.connection
    if _paused(journal, team):
        return None
    row = db.execute("SELECT * FROM land_entries WHERE team = ? AND state = 'queued' "
                     "ORDER BY id LIMIT 1", (team,)).fetchone()
    return None if row is None else (_doc(row), row["repo"], row["base"])


def _move(journal: Journal, /, entry_id: int, state: EntryState, *, phase: EntryPhase | None,
          durable: bool = True, **fields: Any) -> QueueEntryDoc:
    """The entry's state (and phase) set, with ``fields`` (onto, result, note, started_at,
    finished_at, check_seconds)."""
    allowed = {"onto", "result", "note", "started_at", "finished_at", "check_seconds"}
    assert set(fields) <= allowed, fields
    sets = ", ".join(f"{k} = ?" for k in fields)
    with journal.transaction(durable=durable) as db:
        db.execute(f"UPDATE land_entries SET state = ?, phase = ?{', ' if sets else ''}{sets} "
                   "WHERE id = ?", (state, phase, *fields.values(), entry_id))
        return _doc(db.execute("SELECT * FROM land_entries WHERE id = ?",
                               (entry_id,)).fetchone())


def _running(journal: Journal) -> list[tuple[QueueEntryDoc, str]]:
    rows = journal.connection.execute(
        "SELECT * FROM land_entries WHERE state = 'running' ORDER BY id").fetchall()
    return [(_doc(r), r["repo"]) for r in rows]


def _teams_waiting(journal: Journal) -> list[str]:
    return [r[0] for r in journal.connection.execute(
        "SELECT DISTINCT team FROM land_entries WHERE state = 'queued' ORDER BY team")]


def _paused(journal: Journal, team: str) -> bool:
    row = journal.connection.execute("SELECT paused FROM land_teams WHERE team = ?",
                                     (team,)).fetchone()
    return bool(row and row["paused"])


def _set_paused(journal: Journal, team: str, paused: bool) -> None:
    with journal.transaction() as db:
        db.execute("INSERT INTO land_teams (team, paused) VALUES (?, ?) ON CONFLICT (team) "
                   "DO UPDATE SET paused = excluded.paused", (team, int(paused)))


def _listing(journal: Journal, team: str) -> tuple[list[QueueEntryDoc], QueueEntryDoc | None,
                                                    list[QueueEntryDoc], bool]:
    db = journal.connection
    waiting = [_doc(r) for r in db.execute(
        "SELECT * FROM land_entries WHERE team = ? AND state = 'queued' ORDER BY id LIMIT 1000",
        (team,))]
    running = db.execute("SELECT * FROM land_entries WHERE team = ? AND state = 'running' "
                         "ORDER BY id LIMIT 1", (team,)).fetchone()
    recent = [_doc(r) for r in db.execute(
        "SELECT * FROM land_entries WHERE team = ? AND state NOT IN ('queued', 'running') "
        "ORDER BY id DESC LIMIT ?", (team, RECENT))]
    return waiting, None if running is None else _doc(running), recent, _paused(journal, team)


def _needs_you(journal: Journal, team: str) -> list[QueueEntryDoc]:
    """The team's entries that reached the operator and are still their task's newest."""
    return [_doc(r) for r in journal.connection.execute(
        "SELECT * FROM land_entries e WHERE team = ? AND state = 'needs_you' AND id = "
        "(SELECT max(id) FROM land_entries WHERE task = e.task) ORDER BY id LIMIT 1000",
        (team,))]


def _keep_snapshot(journal: Journal, task: int, commit: str, committed: bool,
                   now: float) -> None:
    with journal.transaction() as db:
        db.execute("INSERT OR REPLACE INTO land_snapshots VALUES (?, ?, ?, ?)",
                   (task, commit, int(committed), now))


def _take_snapshot(journal: Journal, task: int) -> tuple[str, bool] | None:
    with journal.transaction() as db:
        row = db.execute("SELECT commit_sha, committed FROM land_snapshots WHERE task = ?",
                         (task,)).fetchone()
        db.execute("DELETE FROM land_snapshots WHERE task = ?", (task,))
    return None if row is None else (row["commit_sha"], bool(row["committed"]))


def _last_id(journal: Journal) -> int:
    row = journal.connection.execute("SELECT max(id) FROM land_entries").fetchone()
    return int(row[0] or 0)


def _landed_after(journal: Journal, team: str, after: int) -> list[tuple[int, int, str, str]]:
    return [(r["id"], r["task"], r["commit_sha"], r["repo"]) for r in journal.connection.execute(
        "SELECT id, task, commit_sha, repo FROM land_entries WHERE team = ? AND id > ? AND "
        "state = 'landed' ORDER BY id LIMIT 500", (team, after))]


def _of_task(journal: Journal, task: int) -> list[QueueEntryDoc]:
    return [_doc(r) for r in journal.connection.execute(
        "SELECT * FROM land_entries WHERE task = ? ORDER BY id DESC LIMIT 100", (task,))]


class LandJournal:
    """The queue's typed async methods over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def enqueue(self, entry: NewEntry, now: float) -> tuple[QueueEntryDoc, bool]:
        return await self._journal.run(_enqueue, entry, now)

    async def next(self, team: str) -> tuple[QueueEntryDoc, str, str] | None:
        return await self._journal.run(_next, team)

    async def move(self, entry_id: int, state: EntryState, *, phase: EntryPhase | None,
                   durable: bool = True, **fields: Any) -> QueueEntryDoc:
        return await self._journal.run(_move, entry_id, state, phase=phase, durable=durable,
                                       **fields)

    async def running(self) -> list[tuple[QueueEntryDoc, str]]:
        """Every entry left running (a daemon that died), with its repository."""
        return await self._journal.run(_running)

    async def teams_waiting(self) -> list[str]:
        return await self._journal.run(_teams_waiting)

    async def set_paused(self, team: str, paused: bool) -> None:
        await self._journal.run(_set_paused, team, paused)

    async def listing(self, team: str) -> tuple[list[QueueEntryDoc], QueueEntryDoc | None,
                                                 list[QueueEntryDoc], bool]:
        return await self._journal.run(_listing, team)

    async def needs_you(self, team: str) -> list[QueueEntryDoc]:
        return await self._journal.run(_needs_you, team)

    async def keep_snapshot(self, task: int, commit: str, committed: bool, now: float) -> None:
        """What a task in review will land (its owner's commit when its check passed)."""
        await self._journal.run(_keep_snapshot, task, commit, committed, now)

    async def take_snapshot(self, task: int) -> tuple[str, bool] | None:
        """The commit kept for the task when it went to review (then forgotten), if any."""
        return await self._journal.run(_take_snapshot, task)

    async def last_id(self) -> int:
        """The newest entry's id (0: none yet)."""
        return await self._journal.run(_last_id)

    async def landed_after(self, team: str, after: int) -> list[tuple[int, int, str, str]]:
        """The team's entries after ``after`` that landed, oldest first (at most 500): each
        id, task, the owner's commit and the repository's common dir."""
        return await self._journal.run(_landed_after, team, after)

    async def of_task(self, task: int) -> list[QueueEntryDoc]:
        """The task's entries, newest first (at most 100)."""
        return await self._journal.run(_of_task, task)
