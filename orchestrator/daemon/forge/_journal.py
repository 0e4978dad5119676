"""The forge's records in the journal (migration 23; docs/forge.md): ``forge_issues`` — each
issue taken as a task, by the forge-wide id of the issue (recorded in the transaction that
made the task: an issue becomes a task once, across restarts), with the digest of the text
the task holds (an edit is noticed by it), whether the issue was seen closed, and the last
state of the task written back to the issue (``write_back``: claimed, review, done)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

    from orchestrator.daemon.journal import Journal, Migrations

__all__ = ["MIGRATIONS", "Taken", "closed", "edited", "record", "set_told", "taken", "told"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE forge_issues (
    team TEXT NOT NULL,
    repo TEXT NOT NULL,
    issue_id INTEGER NOT NULL,
    number INTEGER NOT NULL,
    task INTEGER NOT NULL,
    digest TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    told TEXT,
    taken_at REAL NOT NULL,
    PRIMARY KEY (team, repo, issue_id)
)"""
MIGRATIONS: Migrations = {23: SCHEMA}


@dataclass(frozen=True)
class Taken:
    """An issue the team took: its number, its task, the digest of its text, closed or not."""

    issue_id: int
    number: int
    task: int
    digest: str
    closed: bool


def taken(journal: Journal, team: str, repo: str) -> dict[int, Taken]:
    """The issues ``team`` took from ``repo``, by issue id."""
    rows = journal.connection.execute(
        "SELECT issue_id, number, task, digest, closed FROM forge_issues "
        "WHERE team = ? AND repo = ?", (team, repo)).fetchall()
    return {r["issue_id"]: Taken(r["issue_id"], r["number"], r["task"], r["digest"],
                                 bool(r["closed"])) for r in rows}


def record(db: sqlite3.Connection, team: str, repo: str, *, issue_id: int, number: int,
           task: int, digest: str, now: float) -> None:
    """The issue taken as ``task`` (inside the transaction that made the task)."""
    db.execute("INSERT INTO forge_issues (team, repo, issue_id, number, task, digest, "
               "taken_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
               (team, repo, issue_id, number, task, digest, now))


def edited(db: sqlite3.Connection, team: str, repo: str, issue_id: int, digest: str) -> None:
    db.execute("UPDATE forge_issues SET digest = ? WHERE team = ? AND repo = ? AND "
               "issue_id = ?", (digest, team, repo, issue_id))


def closed(journal: Journal, team: str, repo: str, issue_id: int) -> None:
    with journal.transaction() as db:
        db.execute("UPDATE forge_issues SET closed = 1 WHERE team = ? AND repo = ? AND "
                   "issue_id = ?", (team, repo, issue_id))


def told(journal: Journal, team: str, repo: str) -> list[tuple[int, int, str | None]]:
    """Each open issue's number, task and what was last written back to it."""
    return [(r["number"], r["task"], r["told"]) for r in journal.connection.execute(
        "SELECT number, task, told FROM forge_issues WHERE team = ? AND repo = ? AND "
        "closed = 0 ORDER BY number", (team, repo))]


def set_told(journal: Journal, team: str, repo: str, task: int, state: str) -> None:
    with journal.transaction() as db:
        db.execute("UPDATE forge_issues SET told = ? WHERE team = ? AND repo = ? AND "
                   "task = ?", (state, team, repo, task))
