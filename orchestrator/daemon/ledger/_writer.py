"""Charges into the journal (docs/costs.md): one settled charge is one transaction (its usage
row, the message's running usage, the counters' new baselines). A journal that refuses one (a
full disk) gets it again, in order, from a background writer with a growing wait, as a
delivery's outcome is — the totals in memory hold the budget meanwhile, and the member goes
on. Only a daemon stopped while the journal still refuses them loses charges (``usage_lost``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from orchestrator.daemon.ledger._charge import Charge, CounterValue
    from orchestrator.daemon.ledger._journal import LedgerJournal

    # what LedgerJournal.record takes: team, member, runtime, message_id, charge, counters, at
    _Write = tuple[str, str, str, str, Charge, dict[str, CounterValue], float]

__all__ = ["WRITE_RETRY", "ChargeWriter"]

log = structlog.get_logger("teamctl.ledger")

WRITE_RETRY = (0.5, 5.0)  # a charge the journal refused: first retry, longest wait (doubling)


class ChargeWriter:
    """Writes charges to the journal in order; those it refused, again in the background."""

    def __init__(self, journal: LedgerJournal, tg: TaskGroup, *,
                 clock: Callable[[], float] = time.time,
                 write_retry: tuple[float, float] = WRITE_RETRY) -> None:
        self._journal = journal
        self._tg = tg
        self._clock = clock
        self._write_retry = write_retry
        self._unwritten: list[_Write] = []  # charges the journal refused, in order
        self._writing = False

    async def write(self, team: str, member: str, runtime: str, message_id: str,
                    charge: Charge, counters: dict[str, CounterValue]) -> None:
        """Journal one charge now, or — the journal refusing it, or earlier ones still
        unwritten — queue it for the background writer. Never raises ``StoreError``."""
        write = (team, member, runtime, message_id, charge, counters, self._clock())
        if not self._unwritten:
            try:
                await self._journal.record(*write)
                return
            except StoreError as exc:
                log.error("usage_unrecorded", team=team, member=member, message_id=message_id,
                          error=exc.message, charge=charge.as_dict(), retry=True)
        self._unwritten.append(write)
        if not self._writing:
            self._writing = True
            self._tg.start_soon(self._write_unwritten, name="ledger: unwritten charges")

    async def _write_unwritten(self) -> None:
        """Retry the oldest refused charge, the wait doubling up to the longest, until none
        is left (cancelled at daemon stop: what is left is logged as lost)."""
        delay, longest = self._write_retry
        try:
            while self._unwritten:
                await anyio.sleep(delay)
                write = self._unwritten[0]
                try:
                    await self._journal.record(*write)
                except StoreError:
                    delay = min(delay * 2, longest)
                    continue
                self._unwritten.pop(0)
                delay = self._write_retry[0]
                log.info("usage_recorded_late", team=write[0], member=write[1],
                         message_id=write[3])
        finally:
            self._writing = False
            if self._unwritten:  # the daemon stops with the journal still refusing them
                log.error("usage_lost", charges=len(self._unwritten))
