"""Holds (docs/costs.md): a member over a budget is *held* — its queue stays queued until
``teamctl budget`` raises the limit; a runtime's rate limit holds the member until the reset
time it named, then releases it by itself. Every change of a hold sets the ``changed`` event
(``send --wait`` on a held member returns at once), and a release wakes the member's queue."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
import structlog

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

__all__ = ["RATE_LIMIT_DEFAULT_HOLD", "RATE_LIMIT_MAX_HOLD", "Hold", "Holds"]

log = structlog.get_logger("teamctl.ledger")

RATE_LIMIT_DEFAULT_HOLD = 300.0  # a limit that named no reset time
RATE_LIMIT_MAX_HOLD = 8 * 24 * 3600.0  # a reset time further out than this is not believed


@dataclass(frozen=True)
class Hold:
    """Why a member's queue is held: ``budget`` (until the operator raises it) or
    ``rate_limit`` (until ``until``, epoch seconds)."""

    kind: Literal["budget", "rate_limit"]
    reason: str
    until: float | None = None

    def describe(self) -> str:
        if self.kind == "rate_limit" and self.until is not None:
            return f"rate-limited until {time.strftime('%H:%M', time.localtime(self.until))}: " \
                   f"{self.reason}"
        return self.reason


class Holds:
    """The held members of every running team. ``on_release(team, member)``: a member was
    released; ``on_change()``: a member was held or released."""

    def __init__(self, tg: TaskGroup, *, clock: Callable[[], float],
                 on_release: Callable[[str, str], None], on_change: Callable[[], None]) -> None:
        self._tg = tg
        self._clock = clock
        self._on_release = on_release
        self._on_change = on_change
        self._holds: dict[tuple[str, str], Hold] = {}
        self._event = anyio.Event()  # set (and replaced) whenever a hold changes

    def hold(self, team: str, member: str) -> Hold | None:
        """The member's hold now (a rate limit past its reset time is released here)."""
        hold = self._holds.get((team, member))
        if hold is not None and hold.until is not None and hold.until <= self._clock():
            self.release(team, member)
            return None
        return hold

    def put(self, team: str, member: str, hold: Hold) -> Hold:
        """Hold the member (logged once per different hold)."""
        if self._holds.get((team, member)) != hold:
            self._holds[(team, member)] = hold
            self._changed()
            log.warning("member_held", team=team, member=member, hold=hold.kind,
                        reason=hold.reason, until=hold.until)
            self._on_change()
        return hold

    def release(self, team: str, member: str) -> None:
        hold = self._holds.pop((team, member), None)
        if hold is None:
            return
        log.info("member_released", team=team, member=member, hold=hold.kind)
        self._changed()
        self._on_release(team, member)
        self._on_change()

    def release_budget(self, team: str, members: list[str],
                       over: Callable[[str, str], str | None]) -> None:
        """Release each of ``members`` held for a budget that ``over`` says it is no longer
        at or past (a budget raised)."""
        for member in members:
            hold = self._holds.get((team, member))
            if hold is not None and hold.kind == "budget" and over(team, member) is None:
                self.release(team, member)

    def rate_limited(self, team: str, member: str, until: float | None, message: str) -> None:
        """Hold the member until ``until`` (a reset time that is missing, past or absurd:
        RATE_LIMIT_DEFAULT_HOLD / at most RATE_LIMIT_MAX_HOLD), then release it by itself."""
        now = self._clock()
        current = self._holds.get((team, member))
        limited = current if current is not None and current.kind == "rate_limit" else None
        if until is None or not math.isfinite(until) or until <= now:
            if limited is not None:
                return
            until = now + RATE_LIMIT_DEFAULT_HOLD
        until = min(until, now + RATE_LIMIT_MAX_HOLD)
        if limited is not None and abs((limited.until or 0) - until) < 1.0:
            return
        self.put(team, member, Hold("rate_limit", message[:300], until))
        self._tg.start_soon(self._release_at, team, member, until,
                            name=f"rate limit {team}/{member}")

    async def _release_at(self, team: str, member: str, until: float) -> None:
        await anyio.sleep(max(until - self._clock(), 0.0))
        hold = self._holds.get((team, member))
        if hold is not None and hold.kind == "rate_limit" and hold.until == until:
            self.release(team, member)

    def changed(self) -> anyio.Event:
        """An event set at the next change of any hold."""
        return self._event

    def _changed(self) -> None:
        self._event.set()
        self._event = anyio.Event()
