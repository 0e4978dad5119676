"""Message ids: ULIDs (time-ordered, 26 Crockford base32 characters)."""

from __future__ import annotations

import os
import time

__all__ = ["new_ulid"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_ulid(now_s: float | None = None) -> str:
    """A new ULID: 48 bits of milliseconds since the epoch, then 80 random bits."""
    millis = int((time.time() if now_s is None else now_s) * 1000)
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))
