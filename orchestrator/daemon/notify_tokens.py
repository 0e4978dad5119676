"""The action buttons' tokens (docs/notify.md): what a tap posts to the response topic.

A token is ``tc1.<payload>.<mac>``: the payload (base64url) is ``item|decision|expiry|nonce``
and the mac is HMAC-SHA256 over it with the operator's key (``notify.toml``). Anyone who
learns the response topic can post to it; only a token the daemon signed is applied, once,
before its expiry. The nonces used are journaled in ``notify.db`` (0600, beside the journal),
so a token replayed after a daemon restart is still refused. The table is this module's own
(a file of its own, not a migration of ``state.db``: it holds nothing the journal reads).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import anyio

from orchestrator.errors import StoreError, map_exceptions

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["Action", "Decision", "NonceJournal", "Signer", "TokenRefused"]

Decision = Literal["approve", "deny", "answer"]
_DECISIONS: tuple[Decision, ...] = ("approve", "deny", "answer")
PREFIX = "tc1"
MAX_TOKEN_CHARS = 400
NONCE_KEEP = 8 * 86400.0  # a used nonce is kept past any token's expiry (action_ttl ≤ 7 days)
_T = TypeVar("_T")


def _store_error(exc: BaseException) -> StoreError:
    return StoreError(f"notify.db could not be used ({exc}); check the disk and "
                      "TEAMCTL_HOME's permissions")


@dataclass(frozen=True)
class Action:
    """What a verified token asks: ``decision`` on ``item`` (``team/apv_…``, ``team/T12``)."""

    item: str
    decision: Decision
    expiry: float
    nonce: str


class TokenRefused(Exception):
    """A token that is applied nowhere; ``receipt`` is what the phone is told."""

    def __init__(self, receipt: str) -> None:
        super().__init__(receipt)
        self.receipt = receipt


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """Signs and verifies tokens with the operator's key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def sign(self, item: str, decision: Decision, expiry: float) -> str:
        """A new token (a fresh 128-bit nonce) for ``decision`` on ``item``."""
        if "|" in item:
            raise ValueError(f"an item id holds no '|': {item!r}")
        payload = f"{item}|{decision}|{int(expiry)}|{secrets.token_urlsafe(16)}".encode()
        return f"{PREFIX}.{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: str, now: float) -> Action:
        """The action a token asks; TokenRefused: malformed, a bad signature, or expired
        (checked in that order: nothing of an unsigned token is believed)."""
        parts = token.split(".")
        if len(token) > MAX_TOKEN_CHARS or len(parts) != 3 or parts[0] != PREFIX:
            raise TokenRefused("refused: not a teamctl action")
        try:
            payload, mac = _unb64(parts[1]), _unb64(parts[2])
        except (binascii.Error, ValueError):
            raise TokenRefused("refused: not a teamctl action") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise TokenRefused("refused: bad signature")
        item, decision, expiry, nonce = payload.decode().split("|")
        if decision not in _DECISIONS:
            raise TokenRefused("refused: not a teamctl action")
        action = Action(item, decision, float(expiry), nonce)
        if action.expiry <= now:
            raise TokenRefused("expired")
        return action


_SCHEMA = """
CREATE TABLE IF NOT EXISTS used_nonces (
    nonce TEXT PRIMARY KEY,
    item TEXT NOT NULL,
    decision TEXT NOT NULL,
    used_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS cursors (
    topic TEXT PRIMARY KEY,
    last_id TEXT NOT NULL
);
"""


class NonceJournal:
    """``notify.db``: the nonces already used (single use across restarts) and the response
    topic's last message id (where a resumed subscription goes on from)."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
        with map_exceptions({sqlite3.Error: _store_error}):
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        self._lock = anyio.Lock()

    async def use(self, action: Action, now: float) -> bool:
        """Record the nonce as used; False when it was used before (a replay)."""
        def insert() -> bool:
            try:
                with self._db:
                    self._db.execute("DELETE FROM used_nonces WHERE used_at < ?",
                                     (now - NONCE_KEEP,))
                    self._db.execute("INSERT INTO used_nonces VALUES (?, ?, ?, ?)",
                                     (action.nonce, action.item, action.decision, now))
            except sqlite3.IntegrityError:
                return False
            return True

        return await self._run(insert)

    async def cursor(self, topic: str) -> str | None:
        def read() -> str | None:
            row = self._db.execute("SELECT last_id FROM cursors WHERE topic = ?",
                                   (topic,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(read)

    async def set_cursor(self, topic: str, last_id: str) -> None:
        def write() -> None:
            with self._db:
                self._db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)",
                                 (topic, last_id))

        await self._run(write)

    async def _run(self, call: Callable[[], _T]) -> _T:
        async with self._lock:
            with map_exceptions({sqlite3.Error: _store_error}):
                return await anyio.to_thread.run_sync(call)

    def close(self) -> None:
        self._db.close()
