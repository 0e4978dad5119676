"""The mailbox: a journaled FIFO per member, delivered one turn at a time.

``send`` journals a message with its deliveries (``queued``) before returning its id. A loop
per member takes the oldest queued delivery, borrows the member's ready process from the
supervisor, and walks the delivery through ``prepared → sent → answered | failed`` (DESIGN §3,
§4). A turn cut by the member's exit (or a stuck turn) goes back to ``queued`` until its
attempts are used up; an error the runtime reports for the turn (an API error) ends ``failed``
with that error. The mailbox never writes launch, liveness or readiness.

The journal may become unwritable in the middle of a delivery (a full disk): the turn goes on,
whoever waits on the message is told at once (``StoreError``), and the outcome is written as
soon as the journal takes it again — the queue waits meanwhile, so no row is left behind in
``prepared`` by a running daemon (and a daemon that dies meanwhile re-queues it on start).

``Mailbox`` is the one object the core holds; each idea lives in its own module:
``_queues`` (a runner per member: claim, borrow the process, idle until poked),
``_turns`` (one delivery through its turn, whole or continued), ``_records``
(its progress into the journal, retried while the journal refuses it), ``_waiters``
(``send --wait``: the waits, and the journal trouble they are told of) and ``_hooks``
(``on_answered``, ``on_change``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import structlog

from orchestrator.daemon.mailbox._hooks import MailboxHooks
from orchestrator.daemon.mailbox._queues import Queues
from orchestrator.daemon.mailbox._records import DeliveryRecords
from orchestrator.daemon.mailbox._turns import TurnDelivery
from orchestrator.daemon.mailbox._waiters import Waiters
from orchestrator.daemon.queue import Origin
from orchestrator.ids import new_ulid

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import anyio
    from anyio.abc import TaskGroup

    from orchestrator.attachments.loader import VariantLoader
    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.members import Supervisor
    from orchestrator.daemon.queue import AsyncStore, Delivery

__all__ = ["Mailbox"]

log = structlog.get_logger("teamctl.mailbox")


class Mailbox:
    """Journaled per-member queues and the waiters for their outcomes.

    ``on_answered(delivery, reply)``: a delivery was answered (the router routes teammates'
    replies back); ``on_change()``: a delivery moved (the live view's change feed);
    ``on_idle(team, member)``: the member is ready, not held, its queue empty — the board may
    journal an offer for it (True: the queue is looked at again); ``on_ended(delivery)``: an
    attempt's end was journaled (telemetry exports it; it must not block)."""

    def __init__(self, store: AsyncStore, supervisor: Supervisor, loader: VariantLoader,
                 tg: TaskGroup, *, ledger: Ledger,
                 on_answered: Callable[[Delivery, str], Awaitable[None]],
                 on_change: Callable[[], None],
                 on_idle: Callable[[str, str], Awaitable[bool]],
                 on_ended: Callable[[Delivery], None] | None = None) -> None:
        self._store = store
        self._hooks = MailboxHooks(on_answered, on_change,
                                   *(() if on_ended is None else (on_ended,)))
        self._outcomes = Waiters(store, self._hooks)
        records = DeliveryRecords(store, self._outcomes, self._hooks)
        self._turns = TurnDelivery(records, loader, self._hooks, ledger=ledger)
        self._queues = Queues(store, supervisor, tg, self._turns.deliver, ledger=ledger,
                              on_idle=on_idle)

    def open_member(self, team: str, member: str) -> None:
        """Start delivering the member's queue (once)."""
        self._queues.open_member(team, member)

    def poke(self, team: str, member: str) -> None:
        """Look at the member's queue again (e.g. its hold was released)."""
        self._queues.poke(team, member)

    async def close_team(self, team: str) -> None:
        """Stop delivering to a team's members; an in-flight turn goes back to the queue."""
        for closed_team, member in await self._queues.close_team(team):
            self._turns.forget_member(closed_team, member)

    async def send(self, team: str, member: str, text: str,
                   attachments: list[PlannedAttachment] | None = None,
                   origin: Origin | None = None, task_id: int | None = None,
                   planned_at: float | None = None) -> str:
        """Journal a message (with its planned attachments and, from a teammate, its origin)
        for ``member``; return its id once it is durable. ``task_id``: the board's task it is
        about (an offer, a gate's output), shown with it in history and ``thread``;
        ``planned_at``: when planning its attachments began (the trace's span)."""
        if task_id is not None:
            origin = replace(origin or Origin(), task_id=task_id)
        message_id = new_ulid()
        started = time.perf_counter()
        await self._store.add_message(message_id, team, text, [member],
                                      {member: attachments or []}, origin, planned_at)
        self._outcomes.journaled(message_id, started)
        log.info("message_queued", team=team, member=member, message_id=message_id,
                 text_chars=len(text), attachments=len(attachments or []),
                 attachment_bytes=sum(a.variant.bytes for a in attachments or []))
        self._queues.poke(team, member)
        self._hooks.changed()
        return message_id

    @property
    def waiting(self) -> int:
        """How many ``wait_outcome`` calls are in progress (for leak checks)."""
        return self._outcomes.waiting

    @property
    def _waiters(self) -> dict[str, list[anyio.Event]]:
        """The waits in progress by message id (for leak checks)."""
        return self._outcomes.events

    @property
    def _journaled_at(self) -> dict[str, float]:
        """The journal-write time of messages not yet sent (for leak checks)."""
        return self._outcomes.journaled_at

    async def wait_outcome(self, message_id: str, member: str, timeout: float, *,
                           just_sent: bool = False) -> Delivery:
        """Wait until the delivery is answered or failed; ReplyTimeout after ``timeout``;
        StoreError at once if the journal could not record the delivery's progress.
        ``just_sent``: the caller journaled it a moment ago, so it cannot be settled yet (one
        journal read fewer on the hot path)."""
        return await self._outcomes.wait(message_id, member, timeout, just_sent=just_sent)
