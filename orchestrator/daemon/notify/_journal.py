"""The notifier's tables in the journal (migration 15; docs/notify.md): the action tokens'
nonces already used (``notify_used_nonces``: a token is applied once, across daemon restarts
too) and, per response topic, the last message id read (``notify_cursors``: a resumed
subscription goes on from there, so what was posted while the daemon or the server was down is
read once). ``NotifyJournal`` is the typed async way in, through the journal's writer thread.

A used nonce is kept ``NONCE_KEEP`` seconds — past any token's expiry (``action_ttl`` is at
most 7 days), after which its token is refused as expired anyway — and dropped at the next use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.daemon.journal import AsyncJournal, Journal, Migrations
    from orchestrator.daemon.notify._tokens import Action

__all__ = ["MIGRATIONS", "NONCE_KEEP", "NotifyJournal"]

NONCE_KEEP = 8 * 86400.0

# no ";" inside the statements: the migration runner splits on it
SCHEMA = """
CREATE TABLE notify_used_nonces (
    nonce TEXT PRIMARY KEY,
    item TEXT NOT NULL,
    decision TEXT NOT NULL,
    used_at REAL NOT NULL
);
CREATE INDEX notify_used_nonces_by_time ON notify_used_nonces (used_at);
CREATE TABLE notify_cursors (
    topic TEXT PRIMARY KEY,
    last_id TEXT NOT NULL
)
"""
MIGRATIONS: Migrations = {15: SCHEMA}


def _use(journal: Journal, nonce: str, item: str, decision: str, now: float) -> bool:
    with journal.transaction() as db:
        db.execute("DELETE FROM notify_used_nonces WHERE used_at < ?", (now - NONCE_KEEP,))
        added = db.execute("INSERT OR IGNORE INTO notify_used_nonces VALUES (?, ?, ?, ?)",
                           (nonce, item, decision, now)).rowcount
    return bool(added)


def _cursor(journal: Journal, topic: str) -> str | None:
    row = journal.connection.execute("SELECT last_id FROM notify_cursors WHERE topic = ?",
                                     (topic,)).fetchone()
    return None if row is None else str(row["last_id"])


def _set_cursor(journal: Journal, topic: str, last_id: str) -> None:
    # not fsynced: a cursor a power loss rolls back re-reads a few messages, whose nonces are
    # used already (each answers "already decided")
    with journal.transaction(durable=False) as db:
        db.execute("INSERT OR REPLACE INTO notify_cursors VALUES (?, ?)", (topic, last_id))


class NotifyJournal:
    """The used nonces and the response topics' cursors, over the daemon's journal."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def use(self, action: Action, now: float) -> bool:
        """Record the action's nonce as used; False when it was used before (a replay)."""
        return await self._journal.run(_use, action.nonce, action.item, action.decision, now)

    async def cursor(self, topic: str) -> str | None:
        return await self._journal.run(_cursor, topic)

    async def set_cursor(self, topic: str, last_id: str) -> None:
        await self._journal.run(_set_cursor, topic, last_id)
