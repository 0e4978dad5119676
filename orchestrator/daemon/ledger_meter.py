"""The ``Meter`` one member's runtime gets (``LaunchSpec.meter``): the ledger as that member's
runtime sees it. Accounting never breaks the runtime's reader: a reading that fails is logged
and the turn goes on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.contracts import UsageReading
    from orchestrator.daemon.ledger import Ledger

__all__ = ["MemberMeter"]

log = structlog.get_logger("teamctl.ledger")


@dataclass(eq=False)
class MemberMeter:
    """The ``Meter`` one member's runtime gets (``LaunchSpec.meter``)."""

    ledger: Ledger
    team: str
    member: str
    model: str | None

    def reading(self, message_id: str, reading: UsageReading) -> bool:
        try:
            return self.ledger.observe(self.team, self.member, message_id, reading, self.model)
        except Exception:  # accounting never breaks the runtime's reader (the turn goes on)
            log.exception("usage_reading_failed", team=self.team, member=self.member,
                          message_id=message_id)
            return False

    def on_stop(self, message_id: str, stop: Callable[[], None]) -> None:
        self.ledger.on_stop(self.team, self.member, message_id, stop)

    def rate_limited(self, until: float | None, message: str) -> None:
        self.ledger.rate_limited(self.team, self.member, until, message)

    def counted(self, counter: str) -> float:
        known = self.ledger.counter(self.team, self.member, counter)
        return 0.0 if known is None or known.cost_usd is None else known.cost_usd
