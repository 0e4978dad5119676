"""The ``Meter`` one member's runtime gets (``LaunchSpec.meter``): the ledger as that member's
runtime sees it. Accounting never breaks the runtime's reader: a reading that fails is logged
and the turn goes on.

It sees the ledger through ``Metered`` — the calls a runtime's readings make — so the
ledger, which hands a meter to each launch, is above it and never imported by it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.contracts import UsageReading, WindowReading
    from orchestrator.daemon.ledger._charge import CounterValue

__all__ = ["MemberMeter", "Metered"]

log = structlog.get_logger("teamctl.ledger")


class Metered(Protocol):
    """The ledger as a meter reaches it (``ledger.Ledger``)."""

    def observe(self, team: str, member: str, message_id: str, reading: UsageReading,
                model: str | None) -> bool: ...

    def on_stop(self, team: str, member: str, message_id: str,
                stop: Callable[[], None]) -> None: ...

    def rate_limited(self, team: str, member: str, until: float | None,
                     message: str, *, window: str | None = None) -> None: ...

    def window(self, team: str, member: str, reading: WindowReading) -> None: ...

    def counter(self, team: str, member: str, counter: str) -> CounterValue | None: ...


@dataclass(eq=False)
class MemberMeter:
    """The ``Meter`` one member's runtime gets (``LaunchSpec.meter``)."""

    ledger: Metered
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

    def rate_limited(self, until: float | None, message: str, *,
                     window: str | None = None) -> None:
        self.ledger.rate_limited(self.team, self.member, until, message, window=window)

    def window(self, reading: WindowReading) -> None:
        try:
            self.ledger.window(self.team, self.member, reading)
        except Exception:  # the quota never breaks the runtime's reader (the turn goes on)
            log.exception("window_reading_failed", team=self.team, member=self.member)

    def counted(self, counter: str) -> float:
        known = self.ledger.counter(self.team, self.member, counter)
        return 0.0 if known is None or known.cost_usd is None else known.cost_usd
