"""The pull requests in the journal (migration 25; docs/forge.md): ``forge_pulls`` — one row per
task that has (or is to have) a pull request: the commit to push and the one last pushed, the
pull request's number once GitHub gave one, its state, how many of its heads failed CI — and
``forge_pull_teams``, the last merge-queue entry a team's pull requests were made from.

What makes a daemon killed anywhere safe: a landed task becomes a row by reading the merge
queue's own journal (each landed entry after ``since_entry``), in the transaction that moves
``since_entry`` on — so a landing is neither lost nor taken twice; the push is of a fixed
commit to the task's own branch (again is the same); a pull request is looked up by its head
branch before one is opened (one opened whose number was not recorded is found, not doubled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import sqlite3

    from orchestrator.daemon.journal import Journal, Migrations

__all__ = ["MIGRATIONS", "PullRow", "PullState", "active", "needing_you", "of_task", "of_team",
           "since", "started", "update", "want"]

PullState = Literal["pending", "open", "merged", "closed", "needs_you"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE forge_pulls (
    team TEXT NOT NULL,
    repo TEXT NOT NULL,
    task INTEGER NOT NULL,
    branch TEXT NOT NULL,
    source TEXT NOT NULL,
    commit_sha TEXT NOT NULL,
    pushed TEXT,
    issue INTEGER,
    number INTEGER,
    url TEXT,
    state TEXT NOT NULL CHECK (state IN ('pending', 'open', 'merged', 'closed', 'needs_you')),
    ready INTEGER NOT NULL DEFAULT 0,
    failed_heads INTEGER NOT NULL DEFAULT 0,
    failed_head TEXT,
    note TEXT,
    at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (team, repo, task)
);
CREATE TABLE forge_pull_teams (
    team TEXT NOT NULL,
    repo TEXT NOT NULL,
    since_entry INTEGER NOT NULL,
    PRIMARY KEY (team, repo)
)"""
MIGRATIONS: Migrations = {25: SCHEMA}
_FIELDS = {"pushed", "number", "url", "state", "ready", "failed_heads", "failed_head", "note"}


@dataclass(frozen=True)
class PullRow:
    """A task's pull request as the journal holds it (``number`` None: not opened yet)."""

    team: str
    repo: str
    task: int
    branch: str
    source: str
    commit: str
    pushed: str | None
    issue: int | None
    number: int | None
    url: str | None
    state: PullState
    ready: bool
    failed_heads: int
    failed_head: str | None
    note: str | None


def _row(r: sqlite3.Row) -> PullRow:
    return PullRow(r["team"], r["repo"], r["task"], r["branch"], r["source"], r["commit_sha"],
                   r["pushed"], r["issue"], r["number"], r["url"], r["state"], bool(r["ready"]),
                   r["failed_heads"], r["failed_head"], r["note"])


def started(journal: Journal, team: str, repo: str, last_entry: int) -> None:
    """The team's pull requests start after ``last_entry`` (kept if they started before)."""
    with journal.transaction() as db:
        db.execute("INSERT OR IGNORE INTO forge_pull_teams VALUES (?, ?, ?)",
                   (team, repo, last_entry))


def since(journal: Journal, team: str, repo: str) -> int | None:
    row = journal.connection.execute("SELECT since_entry FROM forge_pull_teams WHERE team = ? "
                                     "AND repo = ?", (team, repo)).fetchone()
    return None if row is None else int(row["since_entry"])


def want(journal: Journal, team: str, repo: str, *, task: int, branch: str, source: str,
         commit: str, now: float, entry: int | None = None) -> PullRow:
    """The task's pull request is to show ``commit``: a new row, or the row's commit moved on
    (a merged or closed one starts a new pull request; one that needed the operator starts
    its CI rounds again); ``entry``: the landing it came from (``since_entry`` moves on)."""
    with journal.transaction() as db:
        issue = db.execute("SELECT number FROM forge_issues WHERE team = ? AND repo = ? AND "
                           "task = ?", (team, repo, task)).fetchone()
        db.execute(
            "INSERT INTO forge_pulls (team, repo, task, branch, source, commit_sha, issue, "
            "state, at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) "
            "ON CONFLICT (team, repo, task) DO UPDATE SET commit_sha = excluded.commit_sha, "
            "source = excluded.source, updated_at = excluded.updated_at, "
            "number = CASE WHEN state IN ('merged', 'closed') THEN NULL ELSE number END, "
            "url = CASE WHEN state IN ('merged', 'closed') THEN NULL ELSE url END, "
            "ready = CASE WHEN state IN ('merged', 'closed') THEN 0 ELSE ready END, "
            "failed_heads = CASE WHEN state IN ('open', 'pending') THEN failed_heads ELSE 0 END, "
            "state = CASE WHEN state = 'open' THEN 'open' ELSE 'pending' END "
            "WHERE commit_sha != excluded.commit_sha OR state IN ('merged', 'closed')",
            (team, repo, task, branch, source, commit, None if issue is None else issue[0],
             now, now))
        if entry is not None:
            db.execute("UPDATE forge_pull_teams SET since_entry = max(since_entry, ?) WHERE "
                       "team = ? AND repo = ?", (entry, team, repo))
        return _row(db.execute("SELECT * FROM forge_pulls WHERE team = ? AND repo = ? AND "
                               "task = ?", (team, repo, task)).fetchone())


def update(journal: Journal, /, team: str, repo: str, task: int, now: float,
           **fields: Any) -> None:
    """The row's ``fields`` set (pushed, number, url, state, ready, failed_heads,
    failed_head, note)."""
    assert set(fields) <= _FIELDS, fields
    sets = ", ".join(f"{k} = ?" for k in fields)
    with journal.transaction() as db:
        db.execute(f"UPDATE forge_pulls SET {sets}, updated_at = ? WHERE team = ? AND "
                   "repo = ? AND task = ?", (*fields.values(), now, team, repo, task))


def active(journal: Journal, team: str, repo: str) -> list[PullRow]:
    """The rows still followed: to push or open, or open (oldest first, at most 500)."""
    return [_row(r) for r in journal.connection.execute(
        "SELECT * FROM forge_pulls WHERE team = ? AND repo = ? AND state IN ('pending', "
        "'open') ORDER BY at LIMIT 500", (team, repo))]


def of_task(journal: Journal, team: str, repo: str, task: int) -> PullRow | None:
    """The task's pull request (None: it has none, and is to have none yet)."""
    row = journal.connection.execute("SELECT * FROM forge_pulls WHERE team = ? AND repo = ? "
                                     "AND task = ?", (team, repo, task)).fetchone()
    return None if row is None else _row(row)


def of_team(journal: Journal, team: str, repo: str) -> list[PullRow]:
    """Every row of the team (newest first, at most 100): what status shows."""
    return [_row(r) for r in journal.connection.execute(
        "SELECT * FROM forge_pulls WHERE team = ? AND repo = ? ORDER BY updated_at DESC "
        "LIMIT 100", (team, repo))]


def needing_you(journal: Journal, team: str) -> list[PullRow]:
    """The team's pull requests that wait on the operator: CI failed past ``ci_retries``
    (their task still failed), or a push refused for lack of rights (tried again each poll)."""
    return [_row(r) for r in journal.connection.execute(
        "SELECT p.* FROM forge_pulls p JOIN tasks t ON t.id = p.task WHERE p.team = ? AND "
        "((p.state = 'needs_you' AND t.status = 'failed') OR (p.state IN ('pending', 'open') "
        "AND p.note LIKE 'forge_push_refused:%')) ORDER BY p.updated_at LIMIT 1000", (team,))]
