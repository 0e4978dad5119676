"""The quota's table in the journal (migration 22; docs/costs.md, "Quota windows"):
``quota_holds``, one row per held account — its window, the reset it waits for, why, whether
the runtime named that reset, and whether one member probes it now — so a daemon killed while
an account is held starts with it held until the same reset. ``QuotaJournal`` is the typed
async way in, through the journal's writer thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations

__all__ = ["MIGRATIONS", "HeldRow", "QuotaJournal"]

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE quota_holds (
    account TEXT PRIMARY KEY,
    window_name TEXT,
    until REAL NOT NULL,
    reason TEXT NOT NULL,
    named INTEGER NOT NULL,
    probing INTEGER NOT NULL,
    held_at REAL NOT NULL
)
"""
MIGRATIONS: Migrations = {22: SCHEMA}


@dataclass(frozen=True)
class HeldRow:
    """One held account as journaled."""

    account: str
    window: str | None
    until: float
    reason: str
    named: bool
    probing: bool
    held_at: float


def _held(journal: Journal) -> list[HeldRow]:
    rows = journal.connection.execute("SELECT * FROM quota_holds ORDER BY account").fetchall()
    return [HeldRow(r["account"], r["window_name"], r["until"], r["reason"], bool(r["named"]),
                    bool(r["probing"]), r["held_at"]) for r in rows]


def _put(journal: Journal, row: HeldRow) -> None:
    with journal.transaction() as db:  # fsynced: a hold outlives a kill -9
        db.execute("INSERT OR REPLACE INTO quota_holds VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (row.account, row.window, row.until, row.reason, int(row.named),
                    int(row.probing), row.held_at))


def _drop(journal: Journal, account: str) -> None:
    with journal.transaction() as db:
        db.execute("DELETE FROM quota_holds WHERE account = ?", (account,))


class QuotaJournal:
    """The held accounts, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def held(self) -> list[HeldRow]:
        return await self._journal.run(_held)

    async def put(self, row: HeldRow) -> None:
        await self._journal.run(_put, row)

    async def drop(self, account: str) -> None:
        await self._journal.run(_drop, account)
