"""The board's two sleeping loops (daemon/board_leases.py, daemon/board_offers.py) against a
journal that refuses: each logs the failure, tries again, and sleeps again once it could read —
neither ends (a lapsed lease or a cooled task would never be seen again) nor spins."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from orchestrator.daemon.board_leases import Leases
from orchestrator.daemon.board_offers import Offers
from tests.settle import all_blocked

pytestmark = pytest.mark.anyio


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
