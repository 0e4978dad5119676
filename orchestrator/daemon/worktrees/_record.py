"""A member's worktree as teamctl records it — the journal's ``worktrees`` table — and the
places git works at, from that record alone (never from a file the member can write)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.daemon.journal import AsyncJournal, Migrations
from orchestrator.errors import WorktreeError
from orchestrator.git_run import GitPlace

if TYPE_CHECKING:
    from orchestrator.daemon.journal import Journal

__all__ = ["MIGRATIONS", "Worktree", "WorktreeJournal", "branch_name", "legacy_branch_name"]


def branch_name(team: str, member: str) -> str:
    """A member's branch: ``teamctl/<team>/<member>/work``. Its loose ref is the only file of
    a directory of its own (``refs/heads/teamctl/<team>/<member>/``), which a sandboxed member
    may write — a file its teammates' refs shared a directory with could not be kept from
    them (docs/security.md, "Git is part of the boundary")."""
    return f"teamctl/{team}/{member}/work"


def legacy_branch_name(team: str, member: str) -> str:
    """The branch a worktree made before that was on (renamed at its next launch)."""
    return f"teamctl/{team}/{member}"


@dataclass(frozen=True)
class Worktree:
    team: str
    member: str
    path: Path
    branch: str
    base: str  # the ref it was made from, as given ("HEAD" or ``base``)
    base_commit: str  # what that ref was when the worktree was made
    repo: Path  # the operator's checkout it was made from (its top level)
    # the repository's git dir shared by its worktrees, and this worktree's own admin dir
    # under it, as found when the worktree was made (None: a record older than schema 17,
    # filled in at its next use)
    common_dir: Path | None = None
    admin_dir: Path | None = None

    def place(self) -> GitPlace:
        """Git in this worktree: its admin dir, the common dir, its files."""
        return GitPlace(self._admin(), self._common(), self.path)

    def repository(self) -> GitPlace:
        """Git in the repository itself (its common dir: the operator's HEAD and branches)."""
        return GitPlace(self._common(), self._common())

    def _common(self) -> Path:
        if self.common_dir is None:
            raise WorktreeError(self.member, "its worktree's record names no git dir",
                                "launch its team again (the record is completed then)")
        return self.common_dir

    def _admin(self) -> Path:
        if self.admin_dir is None:
            raise WorktreeError(self.member, "its worktree's record names no admin dir",
                                "launch its team again (the record is completed then)")
        return self.admin_dir


MIGRATIONS: Migrations = {
    3: """
    CREATE TABLE worktrees (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        path TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        repo TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (team, member)
    );
    """,
    17: """
    ALTER TABLE worktrees ADD COLUMN common_dir TEXT;
    ALTER TABLE worktrees ADD COLUMN admin_dir TEXT
    """,
}


def _save(journal: Journal, tree: Worktree) -> None:
    with journal.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO worktrees (team, member, path, branch, base, "
            "base_commit, repo, common_dir, admin_dir, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tree.team, tree.member, str(tree.path), tree.branch, tree.base,
             tree.base_commit, str(tree.repo), _text(tree.common_dir), _text(tree.admin_dir),
             time.time()))


def _recorded(journal: Journal, team: str | None) -> list[Worktree]:
    sql = ("SELECT team, member, path, branch, base, base_commit, repo, common_dir, "
           "admin_dir FROM worktrees")
    rows = journal.connection.execute(
        sql + (" WHERE team = ?" if team else "") + " ORDER BY team, created_at",
        (team,) if team else ()).fetchall()
    return [Worktree(r["team"], r["member"], Path(r["path"]), r["branch"], r["base"],
                     r["base_commit"], Path(r["repo"]), _path(r["common_dir"]),
                     _path(r["admin_dir"])) for r in rows]


def _forget(journal: Journal, team: str, member: str) -> None:
    with journal.transaction() as db:
        db.execute("DELETE FROM worktrees WHERE team = ? AND member = ?", (team, member))


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


class WorktreeJournal(AsyncJournal):
    """The worktrees' typed async methods (part of the daemon's ``AsyncStore``)."""

    async def save_worktree(self, tree: Worktree) -> None:
        await self.run(_save, tree)

    async def worktrees(self, team: str | None = None) -> list[Worktree]:
        """The recorded worktrees (of ``team``; all when None), by team, oldest first."""
        return await self.run(_recorded, team)

    async def forget_worktree(self, team: str, member: str) -> None:
        await self.run(_forget, team, member)
