"""One counter that every state change bumps — a member's axes, a delivery, an approval — so
the live view's event stream waits on a change instead of polling the journal."""

from __future__ import annotations

import anyio

__all__ = ["Changes"]


class Changes:
    def __init__(self) -> None:
        self.version = 0
        self._event: anyio.Event | None = None  # made when first waited on: most bumps have
        # no waiter (no live view open), and a fresh Event per bump was a cost of every message

    def bump(self) -> None:
        self.version += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, after: int, timeout: float) -> int:
        """The version once it is past ``after`` (or the current one after ``timeout``)."""
        with anyio.move_on_after(timeout):
            while self.version <= after:
                if self._event is None:
                    self._event = anyio.Event()
                await self._event.wait()
        return self.version
