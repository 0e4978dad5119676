"""The mailbox: a journaled FIFO per member, delivered one turn at a time.

``send`` journals a message with its deliveries (``queued``) before returning its id. A loop
per member takes the oldest queued delivery, borrows the member's ready process from the
supervisor, and walks the delivery through ``prepared → sent → answered | failed`` (DESIGN §3,
§4). A turn cut by the member's exit (or a stuck turn) goes back to ``queued`` until its
attempts are used up; an error the runtime reports for the turn (an API error) ends ``failed``
with that error. The mailbox never writes launch, liveness or readiness.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.failures import AttachmentError
from orchestrator.contracts import PreparedPart, TextPart, Turn
from orchestrator.errors import ReplyTimeout, RuntimeExited, RuntimeStuck, TeamctlError
from orchestrator.ids import new_ulid

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from orchestrator.attachments.planner import PlannedAttachment, Planner
    from orchestrator.store import AsyncStore, Delivery
    from orchestrator.supervisor import Supervisor
    from runtimes.base import RuntimeProcess

__all__ = ["Mailbox"]

log = structlog.get_logger("teamctl.mailbox")

_RETRY_DELAY = 1.0  # after an unexpected error in a queue loop


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

    def __init__(self, store: AsyncStore, supervisor: Supervisor, planner: Planner,
                 tg: TaskGroup) -> None:
        self._store = store
        self._planner = planner
        self._supervisor = supervisor
        self._tg = tg
        self._queues: dict[tuple[str, str], _Queue] = {}
        self._waiters: dict[str, anyio.Event] = {}
        # journal-write start time of messages sent through this daemon (for the latency figure
        # on delivery_sent: journal write → line on the member's stdin)
        self._journaled_at: dict[str, float] = {}

    def open_member(self, team: str, member: str) -> None:
        """Start delivering the member's queue (once)."""
        key = (team, member)
        if key not in self._queues:
            queue = self._queues[key] = _Queue()
            self._tg.start_soon(self._run_queue, team, member, queue,
                                name=f"mailbox {team}/{member}")

    async def close_team(self, team: str) -> None:
        """Stop delivering to a team's members; an in-flight turn goes back to the queue."""
        for key in [k for k in self._queues if k[0] == team]:
            queue = self._queues.pop(key)
            queue.scope.cancel()
            await queue.done.wait()

    async def send(self, team: str, member: str, text: str,
                   attachments: list[PlannedAttachment] | None = None) -> str:
        """Journal a message (with its planned attachments) for ``member``; return its id once
        it is durable."""
        message_id = new_ulid()
        started = time.perf_counter()
        await self._store.call(self._store.sync.add_message, message_id, team, text,
                               [member], {member: attachments or []})
        self._journaled_at[message_id] = started
        log.info("message_queued", team=team, member=member, message_id=message_id,
                 text_chars=len(text), attachments=len(attachments or []),
                 attachment_bytes=sum(a.variant.bytes for a in attachments or []))
        queue = self._queues.get((team, member))
        if queue is not None:
            queue.poke()
        return message_id

    async def wait_outcome(self, message_id: str, member: str, timeout: float, *,
                           just_sent: bool = False) -> Delivery:
        """Wait until the delivery is answered or failed; ReplyTimeout after ``timeout``.
        ``just_sent``: the caller journaled it a moment ago, so it cannot be settled yet (one
        journal read fewer on the hot path)."""
        event = self._waiters.setdefault(message_id, anyio.Event())
        with anyio.move_on_after(timeout):
            while True:
                if not just_sent:
                    delivery = await self._store.call(self._store.sync.delivery, message_id,
                                                      member)
                    if delivery is None or delivery.terminal:
                        break
                just_sent = False
                await event.wait()
                event = self._waiters.setdefault(message_id, anyio.Event())
        delivery = await self._store.call(self._store.sync.delivery, message_id, member)
        assert delivery is not None
        if not delivery.terminal:
            raise ReplyTimeout(message_id, delivery.state, timeout)
        return delivery

    # -- delivery ---------------------------------------------------------------------------

    async def _run_queue(self, team: str, member: str, queue: _Queue) -> None:
        """Deliver the member's queue, oldest first, one turn at a time: borrow the member's
        ready process, claim the next delivery, run its turn; idle when the queue is empty."""
        try:
            with queue.scope:
                while True:
                    try:
                        claimed = await self._next_turn(team, member)
                    except Exception:  # e.g. the journal is unwritable: retry, never die
                        log.exception("mailbox_error", team=team, member=member)
                        await anyio.sleep(_RETRY_DELAY)
                        continue
                    if not claimed:
                        await queue.idle()
        finally:
            queue.done.set()

    async def _next_turn(self, team: str, member: str) -> bool:
        """Borrow the member's ready process, claim its next delivery and run it; False when
        the queue was empty."""
        async with self._supervisor.turn_slot(team, member) as process:
            claimed = await self._store.call(self._store.sync.claim_next, team, member)
            if claimed is None:
                return False
            await self._deliver_safely(process, *claimed)
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
            error = TeamctlError(f"internal error while delivering: {type(exc).__name__}; "
                                 "see 'teamctl logs'")
            error.code = "internal_error"
            with anyio.CancelScope(shield=True):
                try:
                    await self._fail(delivery, error, requeue=False)
                except Exception:
                    log.exception("delivery_crash_unrecorded", message_id=delivery.message_id)

    async def _deliver(self, process: RuntimeProcess, delivery: Delivery,
                       planned: list[PlannedAttachment]) -> None:
        """Walk one claimed (``prepared``) delivery through its turn on ``process``."""
        team, member, message_id = delivery.team, delivery.member, delivery.message_id
        store, db = self._store, self._store.sync
        self._supervisor.mark_turn(team, member, message_id)
        try:
            turn = await self._prepare(delivery, planned)
        except AttachmentError as exc:
            await self._fail(delivery, exc, requeue=exc.retryable)
            return

        async def on_sent() -> None:
            started = self._journaled_at.pop(message_id, None)
            latency = None if started is None else (time.perf_counter() - started) * 1000
            await store.call(db.mark_sent, message_id, member)
            log.info("delivery_sent", team=team, member=member, message_id=message_id,
                     attempt=delivery.attempts + 1,
                     journal_to_stdin_ms=None if latency is None else round(latency, 3))

        try:
            result = await process.run_turn(turn, on_sent=on_sent)
        except (RuntimeExited, RuntimeStuck) as exc:
            await self._fail(delivery, exc, requeue=True)
        except TeamctlError as exc:
            await self._fail(delivery, exc, requeue=False)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await store.call(db.mark_failed, message_id, member,
                                 code="member_stopped",
                                 message="the member was stopped during this delivery",
                                 retryable=True, requeue=True)
            raise
        else:
            await store.call(db.mark_answered, message_id, member, result.reply)
            log.info("delivery_answered", team=team, member=member, message_id=message_id,
                     reply_chars=len(result.reply))
            self._settle(message_id)

    async def _prepare(self, delivery: Delivery, planned: list[PlannedAttachment]) -> Turn:
        """The turn's parts: the text, then each image variant read back (checksum verified,
        rebuilt from the original if its artifact is gone)."""
        images = [await self._planner.load(p.original_sha256, p.variant) for p in planned]
        parts: list[PreparedPart] = [TextPart(delivery.text)] if delivery.text else []
        return Turn(delivery.message_id, (*parts, *images))

    async def _fail(self, delivery: Delivery, exc: TeamctlError, *, requeue: bool) -> None:
        state = await self._store.call(
            self._store.sync.mark_failed, delivery.message_id, delivery.member,
            code=exc.code, message=exc.message, retryable=exc.retryable, requeue=requeue,
        )
        log.warning("delivery_failed", team=delivery.team, member=delivery.member,
                    message_id=delivery.message_id, code=exc.code, error=exc.message,
                    retryable=exc.retryable, state=state, attempt=delivery.attempts + 1)
        if state != "queued":
            self._settle(delivery.message_id)

    def _settle(self, message_id: str) -> None:
        event = self._waiters.pop(message_id, None)
        if event is not None:
            event.set()
