"""How much is pushed, and when (docs/notify.md): at most ``max_per_minute`` pushes in any
60 s — items, digests and the receipts of actions alike —, the last slot of a full minute kept
for one digest of everything over the limit (1,000 items at once are ``max_per_minute - 1``
pushes and one digest, not 1,000 buzzes); and quiet
hours, during which pushes go out silent (ntfy priority 1: no sound, no vibration, still
answerable) and alerts wait for one digest when they end.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from orchestrator.notify_config import quiet_minutes

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Backoff", "Plan", "RateWindow", "in_quiet_hours"]

WINDOW = 60.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class Backoff:
    """Reconnect delays: ``first``, doubling up to ``most``; ``read_timeout``: a stream
    silent this long is dead (ntfy sends a keepalive every 45 s)."""

    first: float = 1.0
    most: float = 60.0
    read_timeout: float = 120.0
    request_timeout: float = 10.0


@dataclass(frozen=True)
class Plan(Generic[_T]):
    """``single``: pushed one by one; ``digest``: in one digest push (empty: none)."""

    single: list[_T] = field(default_factory=list)
    digest: list[_T] = field(default_factory=list)


class RateWindow:
    """The pushes of the last ``WINDOW`` seconds (a sliding window)."""

    def __init__(self, max_per_minute: int, *, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.limit = max_per_minute
        self._clock = clock
        self._sent: deque[float] = deque()

    def room(self) -> int:
        """Pushes the window takes now."""
        now = self._clock()
        while self._sent and self._sent[0] <= now - WINDOW:
            self._sent.popleft()
        return self.limit - len(self._sent)

    def plan(self, new: Sequence[_T]) -> Plan[_T]:
        """What of ``new`` goes now: all of it while it fits, else the room but one, and the
        rest in one digest; nothing when the window is full (``free_in`` says when)."""
        room = self.room()
        if room <= 0 or not new:
            return Plan()
        if len(new) <= room:
            return Plan(list(new))
        return Plan(list(new[: room - 1]), list(new[room - 1:]))

    def sent(self) -> None:
        self._sent.append(self._clock())

    def free_in(self) -> float:
        """Seconds until a slot frees (0: one is free)."""
        if self.room() > 0:
            return 0.0
        return max(self._sent[0] + WINDOW - self._clock(), 0.0)


def in_quiet_hours(spec: str | None, now: float) -> bool:
    """Whether local time ``now`` falls in ``spec`` (``"22:00-07:00"``: across midnight)."""
    if spec is None:
        return False
    start, end = quiet_minutes(spec)
    local = time.localtime(now)
    minute = local.tm_hour * 60 + local.tm_min
    return start <= minute < end if start <= end else minute >= start or minute < end
