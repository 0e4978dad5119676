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
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.markers import place
from orchestrator.contracts import PreparedPart, TextPart, Turn
from orchestrator.daemon.continuation import continuation, continues
from orchestrator.daemon.describe import described_text
from orchestrator.errors import (
    BudgetReached,
    InternalError,
    RateLimited,
    ReplyTimeout,
    RuntimeExited,
    RuntimeStuck,
    SessionLost,
    StoreError,
    TeamctlError,
    TurnHeld,
    unwrap_group,
)
from orchestrator.ids import new_ulid

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from orchestrator.attachments.loader import VariantLoader
    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.contracts import TurnResult
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.store import AsyncStore, Delivery, Origin
    from orchestrator.daemon.supervisor import Supervisor
    from orchestrator.ports import OnSent, RuntimeProcess

__all__ = ["Mailbox"]

log = structlog.get_logger("teamctl.mailbox")

_RETRY_DELAY, _RETRY_DELAY_MAX = 1.0, 30.0  # after an error in a queue loop (journal down)
_WRITE_RETRY_FIRST, _WRITE_RETRY_MAX = 0.5, 5.0  # an outcome waiting for the journal


@dataclass(eq=False)
class _Queue:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    wake: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)

    def poke(self) -> None:
        self.wake.set()

    async def idle(self) -> None:
        await self.wake.wait()
        self.wake = anyio.Event()


class Mailbox:
    """Journaled per-member queues and the waiters for their outcomes."""

    def __init__(self, store: AsyncStore, supervisor: Supervisor, loader: VariantLoader,
                 tg: TaskGroup, *, ledger: Ledger | None = None) -> None:
        self._store = store
        self._ledger = ledger
        self._loader = loader
        self._supervisor = supervisor
        self._tg = tg
        self._queues: dict[tuple[str, str], _Queue] = {}
        # called once a delivery is answered (the router routes teammates' replies back)
        self.on_answered: Callable[[Delivery, str], Awaitable[None]] | None = None
        self.on_change: Callable[[], None] | None = None  # the live view's change feed
        # every --wait in progress, by message id (each removes its own event when it ends)
        self._waiters: defaultdict[str, list[anyio.Event]] = defaultdict(list)
        # journal writes that failed for a message in flight: its waiters are told at once
        self._trouble: dict[str, StoreError] = {}
        # journal-write start time of messages sent through this daemon (for the latency figure
        # on delivery_sent: journal write → line on the member's stdin)
        self._journaled_at: dict[str, float] = {}
        # per member, the re-queued delivery whose attempt was cut and the process it ran on:
        # its next attempt continues there if that process is still the member's
        self._cut_on: dict[tuple[str, str], tuple[str, RuntimeProcess]] = {}

    def open_member(self, team: str, member: str) -> None:
        """Start delivering the member's queue (once)."""
        key = (team, member)
        if key not in self._queues:
            queue = self._queues[key] = _Queue()
            self._tg.start_soon(self._run_queue, team, member, queue,
                                name=f"mailbox {team}/{member}")

    def poke(self, team: str, member: str) -> None:
        """Look at the member's queue again (e.g. its hold was released)."""
        queue = self._queues.get((team, member))
        if queue is not None:
            queue.poke()

    async def close_team(self, team: str) -> None:
        """Stop delivering to a team's members; an in-flight turn goes back to the queue."""
        for key in [k for k in self._queues if k[0] == team]:
            queue = self._queues.pop(key)
            queue.scope.cancel()
            await queue.done.wait()
            self._cut_on.pop(key, None)

    async def send(self, team: str, member: str, text: str,
                   attachments: list[PlannedAttachment] | None = None,
                   origin: Origin | None = None) -> str:
        """Journal a message (with its planned attachments and, from a teammate, its origin)
        for ``member``; return its id once it is durable."""
        message_id = new_ulid()
        started = time.perf_counter()
        await self._store.add_message(message_id, team, text, [member],
                                      {member: attachments or []}, origin)
        self._journaled_at[message_id] = started
        log.info("message_queued", team=team, member=member, message_id=message_id,
                 text_chars=len(text), attachments=len(attachments or []),
                 attachment_bytes=sum(a.variant.bytes for a in attachments or []))
        queue = self._queues.get((team, member))
        if queue is not None:
            queue.poke()
        if self.on_change is not None:
            self.on_change()
        return message_id

    @property
    def waiting(self) -> int:
        """How many ``wait_outcome`` calls are in progress (for leak checks)."""
        return sum(len(events) for events in self._waiters.values())

    async def wait_outcome(self, message_id: str, member: str, timeout: float, *,
                           just_sent: bool = False) -> Delivery:
        """Wait until the delivery is answered or failed; ReplyTimeout after ``timeout``;
        StoreError at once if the journal could not record the delivery's progress.
        ``just_sent``: the caller journaled it a moment ago, so it cannot be settled yet (one
        journal read fewer on the hot path)."""
        event = anyio.Event()
        events = self._waiters[message_id]
        events.append(event)
        try:
            with anyio.move_on_after(timeout):
                while True:
                    self._raise_trouble(message_id)
                    if not just_sent:
                        delivery = await self._store.delivery(message_id, member)
                        if delivery is None or delivery.terminal:
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
        self._raise_trouble(message_id)
        delivery = await self._store.delivery(message_id, member)
        assert delivery is not None
        if not delivery.terminal:
            raise ReplyTimeout(message_id, delivery.state, timeout)
        return delivery

    def _raise_trouble(self, message_id: str) -> None:
        trouble = self._trouble.get(message_id)
        if trouble is not None:
            raise StoreError(
                f"the journal could not record the delivery of {message_id} ({trouble.message});"
                " the delivery goes on and its outcome is written once the journal is writable "
                "again: follow it with 'teamctl history'")

    # -- delivery ---------------------------------------------------------------------------

    async def _run_queue(self, team: str, member: str, queue: _Queue) -> None:
        """Deliver the member's queue, oldest first, one turn at a time: borrow the member's
        ready process, claim the next delivery, run its turn; idle when the queue is empty."""
        delay = _RETRY_DELAY
        try:
            with queue.scope:
                while True:
                    try:
                        claimed = await self._next_turn(team, member)
                    except Exception:  # e.g. the journal is unwritable: retry, never die
                        log.exception("mailbox_error", team=team, member=member,
                                      retry_in=delay)
                        await anyio.sleep(delay)
                        delay = min(delay * 2, _RETRY_DELAY_MAX)
                        continue
                    delay = _RETRY_DELAY
                    if not claimed:
                        await queue.idle()
        finally:
            queue.done.set()

    async def _next_turn(self, team: str, member: str) -> bool:
        """Borrow the member's ready process, claim its next delivery and run it; False when
        the queue was empty."""
        async def claim() -> tuple[str, tuple[Delivery, list[PlannedAttachment]]] | None:
            if self._ledger is not None and self._ledger.gate(team, member) is not None:
                return None  # held (a budget, a rate limit): its release pokes the queue
            claimed = await self._store.claim_next(team, member)
            return None if claimed is None else (claimed[0].message_id, claimed)

        async with self._supervisor.turn_slot(team, member, claim) as slot:
            if slot is None:
                return False
            process, (delivery, planned) = slot
            await self._deliver_safely(process, delivery, planned)
            return True

    async def _deliver_safely(self, process: RuntimeProcess, delivery: Delivery,
                              planned: list[PlannedAttachment]) -> None:
        """A bug while delivering one message must not stop the queue (or the daemon): the
        delivery ends failed with ``internal_error`` and the next one goes on."""
        try:
            await self._deliver(process, delivery, planned)
        except Exception as exc:
            log.exception("delivery_crashed", team=delivery.team, member=delivery.member,
                          message_id=delivery.message_id)
            with anyio.CancelScope(shield=True):
                await self._record_failure(delivery, InternalError("delivering", exc),
                                           requeue=False)

    async def _deliver(self, process: RuntimeProcess, delivery: Delivery,
                       planned: list[PlannedAttachment]) -> None:
        """Walk one claimed (``prepared``) delivery through its turn on ``process``."""
        team, member, message_id = delivery.team, delivery.member, delivery.message_id
        try:
            turn = await self._turn(process, delivery, planned)
        except AttachmentError as exc:
            await self._record_failure(delivery, exc, requeue=exc.retryable)
            return
        try:
            try:
                result = await _run_turn(process, turn, self._on_sent(delivery, process))
            finally:
                if self._ledger is not None:  # what the attempt used, whatever its outcome
                    with anyio.CancelScope(shield=True):
                        await self._ledger.settle(team, member, message_id)
        except TurnHeld as exc:
            if isinstance(exc, RateLimited) and self._ledger is not None:
                self._ledger.rate_limited(team, member, exc.until, exc.message)
            elif isinstance(exc, BudgetReached) and self._ledger is not None:
                self._ledger.hold_budget(team, member, exc.why)  # held until raised
            await self._record_failure(delivery, exc, requeue=True, held=True, cut_on=process)
        except SessionLost as exc:  # a continuation found its session gone: nothing was sent
            await self._record_failure(delivery, exc, requeue=True, held=True)
        except (RuntimeExited, RuntimeStuck) as exc:
            await self._record_failure(delivery, exc, requeue=True, cut_on=process)
        except TeamctlError as exc:
            await self._record_failure(delivery, exc, requeue=False)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._store.mark_failed(
                    message_id, member, code="member_stopped",
                    message="the member was stopped during this delivery", retryable=True,
                    requeue=True, session=process.session_id)
            raise
        else:
            await self._persist(delivery, lambda: self._store.mark_answered(
                message_id, member, result.reply, result.notes))
            log.info("delivery_answered", team=team, member=member, message_id=message_id,
                     reply_chars=len(result.reply))
            self._settle(message_id)
            if self.on_answered is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await self.on_answered(delivery, result.reply)
                    except Exception:  # a routing bug must not fail a delivery that was answered
                        log.exception("reply_routing_failed", message_id=message_id)

    async def _turn(self, process: RuntimeProcess, delivery: Delivery,
                    planned: list[PlannedAttachment]) -> Turn:
        """What this attempt sends: a continuation when ``process`` carries on the session an
        earlier attempt reached and was cut on, else the whole message."""
        cut = self._cut_on.pop((delivery.team, delivery.member), None)
        cut_on = cut[1] if cut is not None and cut[0] == delivery.message_id else None
        if continues(delivery, process, cut_on):
            log.info("delivery_continued", team=delivery.team, member=delivery.member,
                     message_id=delivery.message_id, session_id=delivery.sent_session,
                     cut=delivery.error_code, same_process=cut_on is process)
            return continuation(delivery)
        return await self._prepare(delivery, planned)

    def _on_sent(self, delivery: Delivery, process: RuntimeProcess) -> OnSent:
        """The runtime's "the transport took it" callback: ``prepared → sent``, with the
        session it went to. A journal that cannot record it does not stop the turn (the
        outcome is written later)."""
        message_id, member = delivery.message_id, delivery.member

        async def on_sent() -> None:
            started = self._journaled_at.pop(message_id, None)
            latency = None if started is None else (time.perf_counter() - started) * 1000
            try:
                await self._store.mark_sent(message_id, member, process.session_id)
            except StoreError as exc:
                self._journal_trouble(delivery, exc)
            if self.on_change is not None:
                self.on_change()
            log.info("delivery_sent", team=delivery.team, member=member, message_id=message_id,
                     attempt=delivery.attempts + 1,
                     journal_to_stdin_ms=None if latency is None else round(latency, 3))

        return on_sent

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
                    self._journal_trouble(delivery, exc)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, _WRITE_RETRY_MAX)
        if self._trouble.pop(delivery.message_id, None) is not None:
            log.info("delivery_recorded_late", team=delivery.team, member=delivery.member,
                     message_id=delivery.message_id)

    def _journal_trouble(self, delivery: Delivery, exc: StoreError) -> None:
        first = delivery.message_id not in self._trouble
        self._trouble[delivery.message_id] = exc
        if first:
            log.error("delivery_unrecorded", team=delivery.team, member=delivery.member,
                      message_id=delivery.message_id, code=exc.code, error=exc.message)
            self._wake(delivery.message_id)

    async def _prepare(self, delivery: Delivery, planned: list[PlannedAttachment]) -> Turn:
        """The turn's parts: the text, then each image variant read back (checksum verified,
        rebuilt from the original if its artifact is gone), in ``[Image #N]`` marker order."""
        by_position = {p.position: p for p in planned}
        images: list[PreparedPart] = []
        for placement in place(delivery.text, len(planned)):
            attachment = by_position[placement.position]
            if attachment.described_by is not None:  # describe_with: the text in its place
                images.append(TextPart(described_text(attachment.number,
                                                      attachment.described_by,
                                                      attachment.description or "")))
                continue
            image = await self._loader.load(attachment.original_sha256, attachment.variant)
            images.append(replace(image, number=placement.position + 1,
                                  anchor=placement.anchor))
        parts: list[PreparedPart] = [TextPart(delivery.text)] if delivery.text else []
        return Turn(delivery.message_id, (*parts, *images))

    async def _record_failure(self, delivery: Delivery, exc: TeamctlError, *,
                              requeue: bool, held: bool = False,
                              cut_on: RuntimeProcess | None = None) -> None:
        """Record a failed attempt; ``cut_on``: the process a re-queued attempt was cut on
        (its session id is journaled, and its next attempt may continue there)."""
        state = "missing"

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
            self._settle(delivery.message_id)
        elif cut_on is not None:
            self._cut_on[(delivery.team, delivery.member)] = (delivery.message_id, cut_on)

    def _settle(self, message_id: str) -> None:
        self._journaled_at.pop(message_id, None)
        self._wake(message_id)

    def _wake(self, message_id: str) -> None:
        for event in self._waiters.get(message_id, ()):
            event.set()
        if self.on_change is not None:
            self.on_change()


async def _run_turn(process: RuntimeProcess, turn: Turn, on_sent: OnSent) -> TurnResult:
    """``run_turn``, with an error from inside the runtime's task groups as itself."""
    with unwrap_group():
        return await process.run_turn(turn, on_sent=on_sent)
