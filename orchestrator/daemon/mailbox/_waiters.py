"""The ``--wait`` side of the mailbox: every wait for a message's outcome, and what wakes it.

A waiter wakes when its delivery settles (``answered`` or ``failed``), and at once with a
``StoreError`` when the journal could not record the delivery's progress (the delivery goes
on; its outcome is written later). The journal-write time of each message sent through this
daemon is kept until it is sent, for the latency figure on ``delivery_sent``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import ReplyTimeout, StoreError

if TYPE_CHECKING:
    from orchestrator.daemon.mailbox._hooks import MailboxHooks
    from orchestrator.daemon.queue import AsyncStore, Delivery

__all__ = ["Waiters"]

log = structlog.get_logger("teamctl.mailbox")


class Waiters:
    """The waits in progress by message id, the journal trouble they are told of, and the
    journal-write time of messages not yet sent."""

    def __init__(self, store: AsyncStore, hooks: MailboxHooks) -> None:
        self._store = store
        self._hooks = hooks
        # every --wait in progress, by message id (each removes its own event when it ends)
        self._waiters: defaultdict[str, list[anyio.Event]] = defaultdict(list)
        # journal writes that failed for a message in flight: its waiters are told at once
        self._trouble: dict[str, StoreError] = {}
        # journal-write start time of messages sent through this daemon (for the latency figure
        # on delivery_sent: journal write → line on the member's stdin)
        self._journaled_at: dict[str, float] = {}
        self._durable_at: dict[str, float] = {}

    @property
    def waiting(self) -> int:
        """How many waits are in progress (for leak checks)."""
        return sum(len(events) for events in self._waiters.values())

    @property
    def events(self) -> dict[str, list[anyio.Event]]:
        """The waits' events by message id (for leak checks)."""
        return self._waiters

    @property
    def journaled_at(self) -> dict[str, float]:
        """The journal-write time of messages not yet sent (for leak checks)."""
        return self._journaled_at

    def journaled(self, message_id: str, started: float) -> None:
        """``message_id`` was journaled (durable now); its write started at ``started``
        (perf_counter)."""
        self._journaled_at[message_id] = started
        self._durable_at[message_id] = time.perf_counter()

    def sent_latency_ms(self, message_id: str) -> tuple[float, float] | None:
        """Milliseconds from the message's journal write until now, and from the moment it was
        durable (the write's fsync done) until now (None: not sent through this daemon, or
        already counted)."""
        started = self._journaled_at.pop(message_id, None)
        durable = self._durable_at.pop(message_id, None)
        if started is None or durable is None:
            return None
        now = time.perf_counter()
        return (now - started) * 1000, (now - durable) * 1000

    async def wait(self, message_id: str, member: str, timeout: float, *,
                   just_sent: bool = False) -> Delivery:
        """Wait until the delivery is answered or failed; ReplyTimeout after ``timeout``;
        StoreError at once if the journal could not record the delivery's progress.
        ``just_sent``: the caller journaled it a moment ago, so it cannot be settled yet (one
        journal read fewer on the hot path)."""
        event = anyio.Event()
        events = self._waiters[message_id]
        events.append(event)
        settled: Delivery | None = None
        try:
            with anyio.move_on_after(timeout):
                while True:
                    self._raise_trouble(message_id, member)
                    if not just_sent:
                        delivery = await self._store.delivery(message_id, member)
                        if delivery is None or delivery.terminal:
                            settled = delivery
                            break
                    just_sent = False
                    await event.wait()
                    events.remove(event)
                    event = anyio.Event()
                    events.append(event)
        finally:
            events.remove(event)
            if not events:
                self._waiters.pop(message_id, None)
        return await self._outcome(message_id, member, timeout, settled)

    async def _outcome(self, message_id: str, member: str, timeout: float,
                       settled: Delivery | None) -> Delivery:
        """The delivery as it ended (``settled``: as the wait last read it — terminal, not
        read again), or ReplyTimeout."""
        self._raise_trouble(message_id, member)
        delivery = settled or await self._store.delivery(message_id, member)
        assert delivery is not None
        if not delivery.terminal:
            raise ReplyTimeout(message_id, delivery.state, timeout, team=delivery.team,
                               member=delivery.member)
        return delivery

    def _raise_trouble(self, message_id: str, member: str) -> None:
        trouble = self._trouble.get(message_id)
        if trouble is not None:
            raise StoreError(
                f"the journal could not record the delivery of {message_id} ({trouble.message});"
                " the delivery goes on and its outcome is written once the journal is writable "
                f"again: follow it with 'teamctl history {member}'")

    def unrecorded(self, delivery: Delivery, exc: StoreError) -> None:
        """The journal refused a write for ``delivery``: its waiters are told at once."""
        first = delivery.message_id not in self._trouble
        self._trouble[delivery.message_id] = exc
        if first:
            log.error("delivery_unrecorded", team=delivery.team, member=delivery.member,
                      message_id=delivery.message_id, code=exc.code, error=exc.message)
            self._wake(delivery.message_id)

    def recorded(self, delivery: Delivery) -> None:
        """The journal took ``delivery``'s outcome (late, if it had refused a write)."""
        if self._trouble.pop(delivery.message_id, None) is not None:
            log.info("delivery_recorded_late", team=delivery.team, member=delivery.member,
                     message_id=delivery.message_id)

    def settle(self, message_id: str) -> None:
        """The delivery ended (answered or failed): wake its waiters."""
        self._journaled_at.pop(message_id, None)
        self._durable_at.pop(message_id, None)
        self._wake(message_id)

    def _wake(self, message_id: str) -> None:
        for event in self._waiters.get(message_id, ()):
            event.set()
        self._hooks.changed()
