"""The per-member queue runners: one task per member delivering its queue, one turn at a time.

A runner borrows the member's ready process from the supervisor (``turn_slot``), claims the
oldest queued delivery (unless the ledger holds the member; past its account's quota reserve,
the oldest of the operator's own) and hands both to ``deliver``; it
idles when the queue is empty until poked (a message sent, a hold released). An error in the
loop itself (the journal unwritable) is retried with a doubling delay, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.queue import AttemptStamp

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from anyio.abc import TaskGroup

    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.members import Supervisor
    from orchestrator.daemon.queue import AsyncStore, Delivery
    from orchestrator.ports import RuntimeProcess

    Deliver = Callable[[RuntimeProcess, Delivery, list[PlannedAttachment]], Awaitable[None]]

__all__ = ["Queues"]

log = structlog.get_logger("teamctl.mailbox")

_RETRY_DELAY, _RETRY_DELAY_MAX = 1.0, 30.0  # after an error in a queue loop (journal down)


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


class Queues:
    """A runner per open member, in ``tg``; ``deliver`` runs each claimed delivery's turn."""

    def __init__(self, store: AsyncStore, supervisor: Supervisor, tg: TaskGroup,
                 deliver: Deliver, *, ledger: Ledger,
                 on_idle: Callable[[str, str], Awaitable[bool]]) -> None:
        self._store = store
        self._supervisor = supervisor
        self._tg = tg
        self._deliver = deliver
        self._ledger = ledger
        self._queues: dict[tuple[str, str], _Queue] = {}
        # the member is ready, not held, and its queue is empty: it may journal work for it
        # (the board's offer) and say so (True: look at the queue again)
        self._on_idle = on_idle

    def open_member(self, team: str, member: str) -> None:
        """Start delivering the member's queue (once)."""
        key = (team, member)
        if key not in self._queues:
            queue = self._queues[key] = _Queue()
            self._tg.start_soon(self._run_queue, team, member, queue,
                                name=f"mailbox {team}/{member}")

    def poke(self, team: str, member: str) -> None:
        """Look at the member's queue again (a message sent, a hold released)."""
        queue = self._queues.get((team, member))
        if queue is not None:
            queue.poke()

    async def close_team(self, team: str) -> list[tuple[str, str]]:
        """Stop the team's runners (an in-flight turn goes back to the queue); the members
        whose runner was stopped."""
        closed = [k for k in self._queues if k[0] == team]
        for key in closed:
            queue = self._queues.pop(key)
            queue.scope.cancel()
            await queue.done.wait()
        return closed

    async def _run_queue(self, team: str, member: str, queue: _Queue) -> None:
        """Deliver the member's queue, oldest first, one turn at a time; idle when it is
        empty."""
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

    def _stamp(self, team: str, member: str) -> AttemptStamp:
        """What a turn claimed now runs on: the member's launch, runtime and model."""
        state = self._supervisor.member(team, member)
        return AttemptStamp(state.epoch, state.config.runtime, state.config.model)

    async def _next_turn(self, team: str, member: str) -> bool:
        """Borrow the member's ready process, claim its next delivery and run it; False when
        the queue was empty."""
        async def claim() -> tuple[str, tuple[Delivery, list[PlannedAttachment]]] | None:
            hold = self._ledger.gate(team, member, claiming=True)
            if hold is not None and not hold.operator_only:
                return None  # held (a budget, its account's window): its release pokes it
            # past its account's reserve, only the operator's own messages go
            stamp = self._stamp(team, member)
            claimed = await self._store.claim_next(team, member, stamp=stamp,
                                                   operator_only=hold is not None)
            if claimed is None and hold is None and await self._on_idle(team, member):
                claimed = await self._store.claim_next(team, member, stamp=stamp)
            if claimed is None and hold is None:
                self._ledger.idle(team, member)  # nothing to send (a probe goes on)
            return None if claimed is None else (claimed[0].message_id, claimed)

        async def worth_waking() -> bool:
            """An asleep member is woken for work only: a queued message it is not held
            from, or a task the board hands it now."""
            if self._ledger.gate(team, member) is not None:
                return False
            if (await self._store.queued_counts(team)).get(member):
                return True
            return await self._on_idle(team, member)

        async with self._supervisor.turn_slot(team, member, claim,
                                              worth_waking=worth_waking) as slot:
            if slot is None:
                return False
            process, (delivery, planned) = slot
            await self._deliver(process, delivery, planned)
            return True
