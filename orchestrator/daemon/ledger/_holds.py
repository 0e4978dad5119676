"""Holds (docs/costs.md): a member over a budget is *held* — its queue stays queued until
``teamctl budget`` raises the limit. (A spent rate-limit window holds every member of its
account: the quota's, ``daemon.quota``; the ledger's gate shows both as a ``Hold``.) Every
change of a hold sets the ``changed`` event (``send --wait`` on a held member returns at once),
and a release wakes the member's queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import anyio
import structlog

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["Hold", "Holds"]

log = structlog.get_logger("teamctl.ledger")


@dataclass(frozen=True)
class Hold:
    """Why a member's queue is held: ``budget`` (until the operator raises it),
    ``rate_limit`` (its account's window is spent, or probed by another member: until
    ``until``, epoch seconds) or ``reserve`` (its account's window is past the reserve kept
    for the top priority: ``operator_only``, the operator's own messages still go)."""

    kind: Literal["budget", "rate_limit", "reserve"]
    reason: str
    until: float | None = None
    operator_only: bool = False

    def describe(self) -> str:
        return self.reason


class Holds:
    """The held members of every running team. ``on_release(team, member)``: a member was
    released; ``on_change()``: a member was held or released."""

    def __init__(self, *, on_release: Callable[[str, str], None],
                 on_change: Callable[[], None]) -> None:
        self._on_release = on_release
        self._on_change = on_change
        self._holds: dict[tuple[str, str], Hold] = {}
        self._event = anyio.Event()  # set (and replaced) whenever a hold changes

    def hold(self, team: str, member: str) -> Hold | None:
        return self._holds.get((team, member))

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

    def changed(self) -> anyio.Event:
        """An event set at the next change of any hold."""
        return self._event

    def touched(self) -> None:
        """A hold kept elsewhere (the quota's) changed: wake whoever waits on ``changed``."""
        self._changed()

    def _changed(self) -> None:
        self._event.set()
        self._event = anyio.Event()
