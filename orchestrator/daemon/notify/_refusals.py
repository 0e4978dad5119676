"""Posts to the response topic that apply nothing, counted (docs/notify.md, "Threat model").

Anyone who has seen one notification's button knows the response topic (its URL names it) and
can post there as fast as the ntfy server takes posts. Answering each refused post with a push
turned that into a flood of the operator's phone, and spent the server's per-topic limits that
the real notifications need. So a refused post is never answered: it is counted by cause, and
the counts are logged as one ``notify_posts_refused`` event at most once an ``interval`` (a
minute by default). The post's text is never logged: it is whatever the poster chose.

Causes: ``not_an_action`` (no teamctl token), ``bad_signature`` (a token not signed with the
operator's key: forged or tampered), ``expired`` (a signed token past its expiry),
``other_team`` (a signed token for another team: that team's notifier reads the same topic and
answers it), ``replay`` (a signed token whose nonce was used already).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal

import anyio
import structlog

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["REFUSED_LOG_INTERVAL", "Refusal", "RefusalTally"]

log = structlog.get_logger("teamctl.notify")

Refusal = Literal["not_an_action", "bad_signature", "expired", "other_team", "replay"]
REFUSED_LOG_INTERVAL = 60.0


class RefusalTally:
    """One team's refused posts since the last ``notify_posts_refused`` event."""

    def __init__(self, team: str, *, interval: float = REFUSED_LOG_INTERVAL,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep) -> None:
        self.team = team
        self.interval = interval
        self._sleep = sleep
        self._counts: Counter[Refusal] = Counter()
        self._counted = anyio.Event()

    def count(self, why: Refusal) -> None:
        """One refused post (nothing is logged or sent now)."""
        self._counts[why] += 1
        self._counted.set()

    def flush(self) -> None:
        """Log the counts held, if any, as one event, and start counting afresh."""
        if not self._counts:
            return
        counts, self._counts = dict(self._counts), Counter()
        self._counted = anyio.Event()
        log.warning("notify_posts_refused", team=self.team, refused=sum(counts.values()),
                    by_cause=counts, interval=self.interval)

    async def run(self) -> None:
        """Log the counts once an ``interval`` while posts are refused, until cancelled (what
        is held then is logged on the way out). An idle tally is not woken."""
        try:
            while True:
                await self._counted.wait()
                await self._sleep(self.interval)
                self.flush()
        finally:
            self.flush()
