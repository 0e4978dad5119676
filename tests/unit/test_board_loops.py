"""The board's two sleeping loops (daemon/board/_leases.py, daemon/board/_offers.py) against a
journal that refuses: each logs the failure, tries again, and sleeps again once it could read —
neither ends (a lapsed lease or a cooled task would never be seen again) nor spins."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.board import Leases, Offers
from tests.support.settle import all_blocked

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio


class _Board:
    """The board as the lease loop sees it: a clock, and an expiry the journal refuses once."""

    def __init__(self) -> None:
        self.refusals = 1
        self.expired = anyio.Event()
        self.calls = 0

    def clock(self) -> float:
        return 1000.0

    async def expire(self, now: float) -> list[int]:
        self.calls += 1
        if self.refusals:
            self.refusals -= 1
            raise OSError(28, "No space left on device")
        self.expired.set()
        return [7]

    async def next_lease(self) -> float | None:
        return None  # nothing else is held: the loop sleeps until a lease starts


async def test_the_lease_check_survives_a_refusing_journal_then_sleeps() -> None:
    board = _Board()
    leases = Leases(board, teams=None)  # type: ignore[arg-type]
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(leases.expire_loop, 0.01)
            with anyio.fail_after(10):
                await board.expired.wait()
            await all_blocked()  # asleep: no lease is held
            tg.cancel_scope.cancel()
    assert [e["event"] for e in logs].count("lease_check_failed") == 1
    assert board.calls == 2, "tried again after the refusal, then slept (no spin)"


class _Racing(_Board):
    """A journal whose read of the next lease end, in flight, misses a lease that starts
    meanwhile: ``next_lease`` is held until the lease is kept, then answers what it read
    before (nothing held)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 0
        self.reading = anyio.Event()
        self.kept = anyio.Event()
        self.leases: list[float] = []
        self.released = anyio.Event()

    async def expire(self, now: float) -> list[int]:
        if self.leases and min(self.leases) <= now:
            self.leases.clear()
            self.released.set()
            return [7]
        return []

    async def next_lease(self) -> float | None:
        held = min(self.leases, default=None)
        if not self.reading.is_set():  # the first look: it read, then the lease starts
            self.reading.set()
            await self.kept.wait()
        return held

    async def owner_exited(self, team: str, member: str, epoch: int, *, grace: float,
                           now: float) -> list[int]:
        self.leases.append(now + grace)
        return [7]


class _GraceZero:
    """The team's ``task_grace = 0``: a dead owner's task is released at once."""

    def running(self, team: str) -> Any:
        return SimpleNamespace(board=SimpleNamespace(task_grace=0.0))


async def test_a_lease_that_starts_while_the_check_reads_is_not_lost() -> None:
    """A member died (its task kept for a grace of 0) while the lease check was reading the
    next lease end: the check wrote back what it had read before — no lease — over the one the
    death had set, and slept forever; the task was never released (a unit test failed on it
    once in ~40 runs). Now the start of a lease makes the check read the journal again."""
    board = _Racing()
    leases = Leases(board, _GraceZero())  # type: ignore[arg-type]
    state = SimpleNamespace(team="web", name="a", epoch=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(leases.expire_loop, 0.01)
        with anyio.fail_after(10):
            await board.reading.wait()  # the check is reading
            await leases.exited(state)  # type: ignore[arg-type]  # the lease starts
            board.kept.set()  # the read in flight answers what it read before
            await board.released.wait()
        tg.cancel_scope.cancel()


class _Journal:
    def __init__(self) -> None:
        self.reads = 0
        self.read = anyio.Event()

    async def run(self, call: Any, *args: Any) -> list[tuple[str, float]]:
        self.reads += 1
        self.read.set()
        self.read = anyio.Event()
        if self.reads == 1:
            raise OSError(5, "Input/output error")
        return []


class _Teams:
    def running(self, team: str) -> None:
        return None

    def names(self) -> list[str]:
        return []


async def test_the_cooldown_loop_survives_a_refusing_journal_and_reads_again_on_a_change(
        ) -> None:
    journal, board = _Journal(), _Board()
    offers = Offers(journal, board, _Teams(), supervisor=None,  # type: ignore[arg-type]
                    poke=lambda team, member: None, held=lambda team, member: False)
    with capture_logs() as logs, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(offers.cooldown_loop, 0.01)
            while journal.reads < 2:  # the first read refused, the next one within interval
                await journal.read.wait()
            await all_blocked()  # nothing cools: asleep until a change
            assert journal.reads == 2
            offers.poke(None)  # the board changed (a release may have started a cooldown)
            await journal.read.wait()
            tg.cancel_scope.cancel()
    assert journal.reads == 3
    assert [e["event"] for e in logs].count("cooldown_check_failed") == 1
