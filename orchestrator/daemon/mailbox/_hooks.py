"""The mailbox's hooks: who hears that a delivery was answered, that an attempt ended, and
that anything changed.

The composition root gives them when it builds the mailbox (the router routes teammates'
replies back; telemetry exports an ended attempt; the live view follows the change feed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from orchestrator.daemon.queue import Delivery

__all__ = ["MailboxHooks"]

log = structlog.get_logger("teamctl.mailbox")


@dataclass
class MailboxHooks:
    """``on_answered(delivery, reply)``: a delivery was answered (the router routes teammates'
    replies back); ``on_change()``: a delivery moved (the live view's change feed);
    ``on_ended(delivery)``: an attempt's end is journaled (telemetry: it must not block)."""

    on_answered: Callable[[Delivery, str], Awaitable[None]]
    on_change: Callable[[], None]
    on_ended: Callable[[Delivery], None] = field(default=lambda delivery: None)

    def changed(self) -> None:
        self.on_change()

    def ended(self, delivery: Delivery) -> None:
        """Tell ``on_ended``; a bug there never touches the delivery (it is logged)."""
        try:
            self.on_ended(delivery)
        except Exception:  # telemetry must never fail a turn
            log.exception("attempt_end_hook_failed", message_id=delivery.message_id)

    async def answered(self, delivery: Delivery, reply: str) -> None:
        """Tell ``on_answered``, shielded; a bug there never fails a delivery that was
        answered (it is logged)."""
        with anyio.CancelScope(shield=True):
            try:
                await self.on_answered(delivery, reply)
            except Exception:  # a routing bug must not fail a delivery that was answered
                log.exception("reply_routing_failed", message_id=delivery.message_id)
