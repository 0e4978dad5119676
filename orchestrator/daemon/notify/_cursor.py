"""A response topic's cursor (the last message id read), saved behind the reader.

The reader of the response topic moved its cursor by one journal write per message, in order,
and read the next message only once that write was done: a flood of posts (1,000 junk posts are
a few seconds of anyone's time) queued a thousand writes ahead of the one real Approve behind
them, and a slow disk made that wait a thousand times its latency. Only the newest id matters —
a cursor is where a restarted daemon resumes — so the reader now only says where it is
(``advance``, no wait), and one task writes the newest id whenever it moved: however many
messages arrive while a write is under way, the next write is one. At the end (``flush``, the
reader's stop) the newest id is written if it was not yet, so a clean restart re-reads nothing.

A write that fails (a full disk) is logged and tried again with the next id: the topic is still
read and acted on, and what a lost cursor costs is what a power loss costs (the cursor is not
fsynced either): a restart re-reads a few messages, whose nonces are used already.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import StoreError

if TYPE_CHECKING:
    from orchestrator.daemon.notify._journal import NotifyJournal

log = structlog.get_logger("teamctl.notify")

# the reader's stop waits at most this long for its last cursor (a hung disk: then a restart
# re-reads a few messages, as after a power loss)
FLUSH_WAIT = 5.0


class Cursor:
    """Where ``key``'s reader is, saved to ``nonces``' journal by ``run`` (a task)."""

    def __init__(self, nonces: NotifyJournal, key: str) -> None:
        self._nonces = nonces
        self._key = key
        self._newest: str | None = None
        self._saved: str | None = None
        self._moved = anyio.Event()
        self._writing = anyio.Lock()

    def advance(self, last_id: str) -> None:
        """The reader has read ``last_id``: saved by the next write."""
        self._newest = last_id
        self._moved.set()

    async def run(self) -> None:
        """Write the newest id each time it moved, one write at a time (for ever)."""
        while True:
            await self._moved.wait()
            self._moved = anyio.Event()
            await self._save()

    async def flush(self) -> None:
        """Write the newest id if it is not saved yet (the reader's stop: shielded, bounded)."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(FLUSH_WAIT):
            await self._save()

    async def _save(self) -> None:
        async with self._writing:
            newest = self._newest
            if newest is None or newest == self._saved:
                return
            try:
                await self._nonces.set_cursor(self._key, newest)
            except StoreError as exc:
                log.warning("notify_cursor_not_saved", topic=self._key, error=exc.message,
                            retry="with the next message")
                return
            self._saved = newest
