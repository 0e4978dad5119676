"""One counter that every state change bumps — a member's axes, a delivery, an approval — so
the live view's event stream waits on a change instead of polling the journal."""

from __future__ import annotations

import anyio

__all__ = ["Changes"]


class Changes:
    def __init__(self) -> None:
        self.version = 0
        self._event = anyio.Event()

    def bump(self) -> None:
        self.version += 1
        self._event.set()
        self._event = anyio.Event()

    async def wait(self, after: int, timeout: float) -> int:
        """The version once it is past ``after`` (or the current one after ``timeout``)."""
        with anyio.move_on_after(timeout):
            while self.version <= after:
                await self._event.wait()
        return self.version
