"""A delivery's progress into the journal: ``sent``, then ``answered`` or a failed attempt.

The journal may become unwritable in the middle of a delivery (a full disk): the turn goes on,
whoever waits on the message is told at once (``StoreError``), and the outcome is written as
soon as the journal takes it again — the member's queue waits meanwhile, so no row is left
behind in ``prepared`` by a running daemon (and a daemon that dies meanwhile re-queues it on
start). An outcome once known is never dropped by a stop (its write is shielded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio
import structlog

from orchestrator.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from orchestrator.contracts import TurnResult
    from orchestrator.daemon.mailbox._hooks import MailboxHooks
    from orchestrator.daemon.mailbox._waiters import Waiters
    from orchestrator.daemon.queue import AsyncStore, Delivery
    from orchestrator.errors import TeamctlError
    from orchestrator.ports import RuntimeProcess
    from orchestrator.protocol.common import DeliveryState

__all__ = ["DeliveryRecords"]

log = structlog.get_logger("teamctl.mailbox")

_WRITE_RETRY_FIRST, _WRITE_RETRY_MAX = 0.5, 5.0  # an outcome waiting for the journal


class DeliveryRecords:
    """Journal writes of a delivery's attempts, retried while the journal refuses them; the
    waiters hear of each (``waiters``) and the live view of each move (``hooks``)."""

    def __init__(self, store: AsyncStore, waiters: Waiters, hooks: MailboxHooks) -> None:
        self._store = store
        self._waiters = waiters
        self._hooks = hooks

    async def handed(self, delivery: Delivery, process: RuntimeProcess) -> None:
        """The session the turn is about to be written to, journaled before the write (see
        ``Store.mark_handed``); a journal that cannot record it does not stop the turn."""
        if process.session_id is None:  # learnt during the turn (codex exec): with ``sent``
            return
        try:
            await self._store.mark_handed(delivery.message_id, delivery.member,
                                          process.session_id)
        except StoreError as exc:
            self._waiters.unrecorded(delivery, exc)

    async def sent(self, delivery: Delivery, process: RuntimeProcess) -> None:
        """``prepared → sent``, with the session it went to. A journal that cannot record it
        does not stop the turn (the outcome is written later)."""
        message_id, member = delivery.message_id, delivery.member
        latency = self._waiters.sent_latency_ms(message_id)
        try:
            await self._store.mark_sent(message_id, member, process.session_id)
        except StoreError as exc:
            self._waiters.unrecorded(delivery, exc)
        self._hooks.changed()
        log.info("delivery_sent", team=delivery.team, member=member, message_id=message_id,
                 attempt=delivery.attempts + 1,
                 journal_to_stdin_ms=None if latency is None else round(latency[0], 3),
                 durable_to_stdin_ms=None if latency is None else round(latency[1], 3))

    async def answered(self, delivery: Delivery, result: TurnResult) -> None:
        """``sent → answered`` with the reply, however long the journal takes; its waiters
        are woken."""
        message_id, member = delivery.message_id, delivery.member
        await self._persist(delivery, lambda: self._store.mark_answered(
            message_id, member, result.reply, result.notes))
        log.info("delivery_answered", team=delivery.team, member=member,
                 message_id=message_id, reply_chars=len(result.reply))
        self._waiters.settle(message_id)
        self._hooks.ended(delivery)

    async def failed(self, delivery: Delivery, exc: TeamctlError, *, requeue: bool,
                     held: bool = False, cut_on: RuntimeProcess | None = None
                     ) -> DeliveryState | Literal["missing"]:
        """Record a failed attempt; ``cut_on``: the process a re-queued attempt was cut on
        (its session id is journaled). Returns the delivery's state after it (``queued``:
        it goes again; ``missing``: no such row)."""
        state: DeliveryState | Literal["missing"] = "missing"

        async def write() -> None:
            nonlocal state
            state = await self._store.mark_failed(
                delivery.message_id, delivery.member, code=exc.code, message=exc.message,
                retryable=exc.retryable, requeue=requeue, held=held,
                session=None if cut_on is None else cut_on.session_id)

        await self._persist(delivery, write)
        log.warning("delivery_failed", team=delivery.team, member=delivery.member,
                    message_id=delivery.message_id, code=exc.code, error=exc.message,
                    retryable=exc.retryable, state=state, attempt=delivery.attempts + 1)
        if state != "queued":
            self._waiters.settle(delivery.message_id)
        self._hooks.ended(delivery)
        return state

    async def stopped(self, delivery: Delivery, process: RuntimeProcess) -> None:
        """The member was stopped during the attempt: back to the queue (shielded, once)."""
        with anyio.CancelScope(shield=True):
            await self._store.mark_failed(
                delivery.message_id, delivery.member, code="member_stopped",
                message="the member was stopped during this delivery", retryable=True,
                requeue=True, session=process.session_id)
        self._hooks.ended(delivery)

    async def _persist(self, delivery: Delivery, write: Callable[[], Awaitable[object]]) -> None:
        """Write a delivery's outcome, waiting for the journal as long as it takes (its waiters
        are told at once); shielded: an outcome once known is never dropped by a stop."""
        delay = _WRITE_RETRY_FIRST
        with anyio.CancelScope(shield=True):
            while True:
                try:
                    await write()
                    break
                except StoreError as exc:
                    self._waiters.unrecorded(delivery, exc)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, _WRITE_RETRY_MAX)
        self._waiters.recorded(delivery)
