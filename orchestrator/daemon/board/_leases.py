"""Leases follow liveness (docs/board.md): the supervisor's lifecycle tells the board when a
member's launch comes up and when its process ends, and a periodic check releases the tasks
whose owner did not come back within the team's ``[board] task_grace`` — at the first lease's
end, not on a timer: a daemon that holds no lease does not wake for them (idle CPU,
docs/dev/performance.md).

The supervisor knows nothing of the board: ``build_core`` gives it ``launched`` and
``exited`` as its launch observers, and runs ``expire_loop`` in the core's task group. The
board's calls take the time from here (the board's wall clock: leases are in the journal,
across daemons).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.board._service import DEFAULT_GRACE

if TYPE_CHECKING:
    from orchestrator.daemon.board._service import Board
    from orchestrator.daemon.members import MemberState
    from orchestrator.daemon.teams import Teams

__all__ = ["LEASE_CHECK_INTERVAL", "Leases"]

log = structlog.get_logger("teamctl.board")

LEASE_CHECK_INTERVAL = 1.0  # a lease is released at most this long after it ran out
_RETRY_MAX = 30.0  # the check's delay after errors (the journal unwritable), at most
_LONGEST_SLEEP = 60.0  # the wall clock may jump: a far lease end is looked at again this often


def _earliest(first: float | None, second: float | None) -> float | None:
    """The sooner of two lease ends, None meaning no lease."""
    ends = [end for end in (first, second) if end is not None]
    return min(ends) if ends else None


class Leases:
    """The board's half of the lifecycle: observers and the expiry loop."""

    def __init__(self, board: Board, teams: Teams) -> None:
        self._board = board
        self._teams = teams
        # when the first lease runs out, as last read from the journal: None, no lease is
        # held; -inf, not read yet. The check reads the journal only once one may be due —
        # an idle daemon does not wake its journal thread every second for nothing.
        self._due: float | None = -math.inf
        self._sooner = anyio.Event()  # set when a lease starts that ends before ``_due``
        self._started = 0  # leases started: a look in flight when one starts reads again

    def grace(self, team: str) -> float:
        """The team's ``task_grace`` (a team not running: the default)."""
        config = self._teams.running(team)
        return DEFAULT_GRACE if config is None else config.board.task_grace

    async def launched(self, state: MemberState) -> None:
        """A launch came up: it adopts its tasks still within their grace."""
        adopted = await self._board.owner_started(state.team, state.name, state.epoch,
                                                  now=self._board.clock())
        if adopted:
            log.info("tasks_adopted", team=state.team, member=state.name, epoch=state.epoch,
                     tasks=adopted)

    async def exited(self, state: MemberState) -> None:
        """A launch's process ended: its tasks are kept ``task_grace`` for the next one."""
        grace = self.grace(state.team)
        now = self._board.clock()
        kept = await self._board.owner_exited(state.team, state.name, state.epoch,
                                              grace=grace, now=now)
        if kept:
            self._started += 1
            if self._due is None or now + grace < self._due:
                self._due = now + grace
                self._sooner.set()
            log.info("tasks_kept", team=state.team, member=state.name, epoch=state.epoch,
                     tasks=kept, grace=grace)

    async def expire_once(self) -> list[int]:
        now = self._board.clock()
        if self._due is None or self._due > now:  # no lease held, or none due yet
            return []
        started = self._started
        lapsed = await self._board.expire(now)
        due = await self._board.next_lease()
        if self._started != started:
            # a lease started while the journal was read, which may not have seen it: what
            # that start set is kept (or the stale due that began this look, so the next
            # look reads again) — written back alone, the read's None (nothing held) left
            # the new lease waiting forever
            due = _earliest(due, self._due)
        self._due = due
        if lapsed:
            log.warning("tasks_lapsed", tasks=lapsed,
                        reason="their owner died and did not come back within the grace")
        return lapsed

    async def expire_loop(self, interval: float) -> None:
        """Release the tasks whose lease ran out, within ``interval`` of the first lease's
        end; sleep while no lease is held (woken when one starts). An error (the journal
        unwritable) is logged and retried later, never fatal."""
        retry: float | None = None
        while True:
            if retry is not None:
                wait = retry
            elif self._due is None:
                wait = math.inf
            else:  # never sooner than ``interval``: a due lease the check could not release
                # (a clock step back) is looked at again then, not in a loop
                wait = min(max(self._due - self._board.clock(), interval), _LONGEST_SLEEP)
            with anyio.move_on_after(wait):
                await self._sooner.wait()
            if self._sooner.is_set():
                self._sooner = anyio.Event()
            try:
                await self.expire_once()
                retry = None
            except Exception:  # the journal may refuse a write for a while: try again later
                retry = min(max(retry or interval, interval) * 2, _RETRY_MAX)
                log.exception("lease_check_failed", retry_in=retry)
