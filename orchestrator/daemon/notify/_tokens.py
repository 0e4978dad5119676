"""The action buttons' tokens (docs/notify.md): what a tap posts to the response topic.

A token is ``tc1.<payload>.<mac>``: the payload (base64url) is ``item|decision|expiry|nonce``
and the mac is HMAC-SHA256 over it with the operator's key (``notify.toml``). Anyone who
learns the response topic can post to it; only a token the daemon signed is applied, once,
before its expiry. The nonces used are journaled (``_journal``: a table of the
daemon's journal), so a token replayed after a daemon restart is still refused. A refused
token is counted, never answered (``_refusals``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from orchestrator.daemon.notify._refusals import Refusal

__all__ = ["Action", "Decision", "Signer", "TokenRefused"]

Decision = Literal["approve", "deny", "answer"]
_DECISIONS: tuple[Decision, ...] = ("approve", "deny", "answer")
PREFIX = "tc1"
MAX_TOKEN_CHARS = 400


@dataclass(frozen=True)
class Action:
    """What a verified token asks: ``decision`` on ``item`` (``team/apv_…``, ``team/T12``)."""

    item: str
    decision: Decision
    expiry: float
    nonce: str


class TokenRefused(Exception):
    """A post that is applied nowhere; ``why`` is its cause, counted (``_refusals``),
    never answered: the poster may be anyone who saw the response topic."""

    def __init__(self, why: Refusal) -> None:
        super().__init__(f"refused: {why.replace('_', ' ')}")
        self.why: Refusal = why


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
            raise TokenRefused("not_an_action")
        try:
            payload, mac = _unb64(parts[1]), _unb64(parts[2])
        except (binascii.Error, ValueError):
            raise TokenRefused("not_an_action") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise TokenRefused("bad_signature")
        item, decision, expiry, nonce = payload.decode().split("|")
        if decision not in _DECISIONS:
            raise TokenRefused("not_an_action")
        action = Action(item, decision, float(expiry), nonce)
        if action.expiry <= now:
            raise TokenRefused("expired")
        return action
