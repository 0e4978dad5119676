"""Message ids: ULIDs (time-ordered, 26 Crockford base32 characters); and the trace ids a
piece of work has, derived from them (docs/telemetry.md).

A trace id is derived from a conversation's chain id (its first message), a span id from the
journal's ids of what the span is (a delivery: message and member; an attempt: its ordinal
too), so the journal alone gives the same ids every time it is read — a re-delivery is a
second attempt span of the same trace, never a second trace, and ``teamctl trace`` names the
very ids a collector received.
"""

from __future__ import annotations

import hashlib
import os
import time

__all__ = ["new_ulid", "span_id", "trace_id", "traceparent"]

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


def trace_id(chain_id: str) -> str:
    """The W3C trace id (32 hex digits, never all zeros) of the conversation ``chain_id``."""
    return _derived("trace", chain_id, size=16)


def span_id(*parts: str | int) -> str:
    """The W3C span id (16 hex digits, never all zeros) of what ``parts`` names: ``("delivery",
    message_id, member)``, ``("attempt", message_id, member, ordinal)``, ``("approval", id)``,
    ``("tool", message_id, member, call_id)``."""
    return _derived("span", *parts, size=8)


def traceparent(chain_id: str, message_id: str, member: str, ordinal: int) -> str:
    """The W3C ``traceparent`` of attempt ``ordinal`` of ``message_id`` to ``member`` in the
    trace of conversation ``chain_id`` (sampled): the ids ``teamctl trace`` gives that span."""
    return f"00-{trace_id(chain_id)}-{span_id('attempt', message_id, member, ordinal)}-01"


def _derived(kind: str, *parts: str | int, size: int) -> str:
    digest = hashlib.sha256("\x1f".join(["teamctl", kind, *map(str, parts)]).encode())
    value = digest.digest()[:size]
    return (value if any(value) else b"\x00" * (size - 1) + b"\x01").hex()
