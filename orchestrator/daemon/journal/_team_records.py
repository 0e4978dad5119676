"""The teams the daemon launched and their members, in the journal (tables ``teams`` and
``members``, migration 1): the launched config, whether the team should run (a restarted
daemon relaunches those), and each member's runtime session id (resumed on relaunch, kept
while the member's runtime stays the same)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.daemon.journal._engine import AsyncJournal, Migrations

if TYPE_CHECKING:
    from orchestrator.daemon.journal._engine import Journal

__all__ = ["MIGRATIONS", "Desired", "TeamJournal", "TeamRecord"]

Desired = Literal["running", "stopped"]

MIGRATIONS: Migrations = {
    1: """
    CREATE TABLE teams (
        name TEXT PRIMARY KEY,
        file TEXT NOT NULL,
        config_json TEXT NOT NULL,
        desired TEXT NOT NULL CHECK (desired IN ('running', 'stopped')),
        launched_at REAL NOT NULL,
        launch_seq INTEGER NOT NULL
    );
    CREATE TABLE members (
        team TEXT NOT NULL REFERENCES teams(name) ON DELETE CASCADE,
        name TEXT NOT NULL,
        runtime TEXT NOT NULL,
        session_id TEXT,
        PRIMARY KEY (team, name)
    );
    """,
}


@dataclass(frozen=True)
class TeamRecord:
    name: str
    file: str
    config: dict[str, Any]
    desired: Desired


def save_team(journal: Journal, name: str, file: str, config: dict[str, Any],
              members: list[tuple[str, str]]) -> None:
    """Register (or re-register) a team as running; keep session ids of kept members."""
    now = time.time()
    with journal.transaction() as db:
        seq = db.execute("SELECT COALESCE(MAX(launch_seq), 0) + 1 FROM teams").fetchone()[0]
        db.execute(
            "INSERT INTO teams (name, file, config_json, desired, launched_at, launch_seq) "
            "VALUES (?, ?, ?, 'running', ?, ?) ON CONFLICT(name) DO UPDATE SET "
            "file=excluded.file, config_json=excluded.config_json, desired='running', "
            "launched_at=excluded.launched_at, launch_seq=excluded.launch_seq",
            (name, file, json.dumps(config), now, seq),
        )
        names = [m for m, _ in members]
        db.execute(
            f"DELETE FROM members WHERE team = ? AND name NOT IN "
            f"({','.join('?' * len(names))})", (name, *names),
        )
        for member, runtime in members:
            db.execute(
                "INSERT INTO members (team, name, runtime) VALUES (?, ?, ?) "
                "ON CONFLICT(team, name) DO UPDATE SET runtime=excluded.runtime, "
                "session_id=CASE WHEN members.runtime = excluded.runtime "
                "THEN members.session_id END",
                (name, member, runtime),
            )


def set_team_config(journal: Journal, name: str, config: dict[str, Any]) -> None:
    """The running team's file as it now applies (a relaunch that changed only what applies
    live: ``memory_reserve``); its launch order and members stay."""
    with journal.transaction() as db:
        db.execute("UPDATE teams SET config_json = ? WHERE name = ?", (json.dumps(config), name))


def set_team_desired(journal: Journal, name: str, desired: Desired) -> None:
    with journal.transaction() as db:
        db.execute("UPDATE teams SET desired = ? WHERE name = ?", (desired, name))


def teams(journal: Journal, *, desired: Desired | None = None) -> list[TeamRecord]:
    sql = "SELECT name, file, config_json, desired FROM teams"
    args: tuple[Any, ...] = ()
    if desired:
        sql, args = sql + " WHERE desired = ?", (desired,)
    rows = journal.connection.execute(sql + " ORDER BY launch_seq", args).fetchall()
    return [TeamRecord(r["name"], r["file"], json.loads(r["config_json"]), r["desired"])
            for r in rows]


def session_id(journal: Journal, team: str, member: str) -> str | None:
    row = journal.connection.execute(
        "SELECT session_id FROM members WHERE team = ? AND name = ?", (team, member)
    ).fetchone()
    return None if row is None else row["session_id"]


def set_session_id(journal: Journal, team: str, member: str, session: str | None) -> None:
    with journal.transaction() as db:
        db.execute("UPDATE members SET session_id = ? WHERE team = ? AND name = ?",
                   (session, team, member))


class TeamJournal(AsyncJournal):
    """The teams' and members' typed async methods (part of the daemon's ``AsyncStore``)."""

    async def save_team(self, name: str, file: str, config: dict[str, Any],
                        members: list[tuple[str, str]]) -> None:
        await self.run(save_team, name, file, config, members)

    async def set_team_config(self, name: str, config: dict[str, Any]) -> None:
        await self.run(set_team_config, name, config)

    async def set_team_desired(self, name: str, desired: Desired) -> None:
        await self.run(set_team_desired, name, desired)

    async def teams(self, *, desired: Desired | None = None) -> list[TeamRecord]:
        return await self.run(teams, desired=desired)

    async def session_id(self, team: str, member: str) -> str | None:
        return await self.run(session_id, team, member)

    async def set_session_id(self, team: str, member: str, session: str | None) -> None:
        await self.run(set_session_id, team, member, session)
