"""Bounded NDJSON framing: lines out of arbitrary chunks, JSON lines into a pipe.

A line longer than the limit is a typed protocol error, never an unbounded buffer. Blank lines
and lines that are not JSON objects are noise: skipped (the caller may log them). A line that
starts like a JSON object but does not parse is corrupt: a ProtocolError.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from anyio import BrokenResourceError, ClosedResourceError, EndOfStream

from orchestrator.contracts import LineTooLong, ProtocolError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import ByteReceiveStream

__all__ = ["LINE_LIMIT_BYTES", "decode_line", "encode_line", "iter_lines"]

LINE_LIMIT_BYTES = 16 * 1024 * 1024
_CHUNK_BYTES = 64 * 1024


async def iter_lines(
    stream: ByteReceiveStream, *, limit_bytes: int = LINE_LIMIT_BYTES
) -> AsyncIterator[bytes]:
    """Yield newline-terminated lines (without the newline); flush a trailing partial line at EOF.

    Raises LineTooLong as soon as a line grows past ``limit_bytes``. Cancelling the iteration
    loses at most the partial line in the buffer.
    """
    buffer = bytearray()
    scanned = 0
    while True:
        try:
            chunk = await stream.receive(_CHUNK_BYTES)
        except (EndOfStream, ClosedResourceError, BrokenResourceError):
            break
        buffer += chunk
        while (newline := buffer.find(b"\n", scanned)) >= 0:
            yield bytes(buffer[:newline])
            del buffer[: newline + 1]
            scanned = 0
        scanned = len(buffer)
        if len(buffer) > limit_bytes:
            raise LineTooLong(limit_bytes)
    if buffer:
        yield bytes(buffer)


def decode_line(line: bytes) -> dict[str, Any] | None:
    """A JSON object, or None for noise (blank or non-JSON); ProtocolError if corrupt."""
    text = line.strip()
    if not text.startswith(b"{"):
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"corrupt JSON line ({len(line)} bytes): {exc}") from exc
    if not isinstance(value, dict):
        raise ProtocolError(f"a JSON line that is not an object ({type(value).__name__})")
    return value


def encode_line(obj: dict[str, Any]) -> bytes:
    """One compact JSON line (valid by construction: json.dumps never emits a raw newline)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
