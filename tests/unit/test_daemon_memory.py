"""What the daemon holds (docs/dev/performance.md, "The daemon's memory"): its heap
(orchestrator/daemon/heap.py) — glibc takes the arena cap and the trim, the trim runs once the
change feed went still after a change, never while the daemon is idle. (Its models, built when
first used rather than when imported, are checked in a fresh interpreter:
tests/integration/test_fresh_imports.py.)"""

from __future__ import annotations

import anyio
import pytest

from orchestrator.daemon import heap
from orchestrator.daemon.changes import Changes
from tests.support.settle import all_blocked

pytestmark = pytest.mark.anyio


def test_glibc_takes_the_arena_cap_and_the_trim() -> None:
    """This machine's libc is glibc: both calls exist and succeed (on musl both are no-ops)."""
    assert heap.cap_arenas()
    heap.trim()  # 1 or 0 (nothing to give back): either way, no error


async def test_a_burst_of_changes_is_trimmed_once_after_it_goes_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    trimmed = anyio.Event()
    changes = Changes()

    def trim() -> bool:
        trims.append(changes.version)
        trimmed.set()
        return True

    monkeypatch.setattr(heap, "trim", trim)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            # the quiet's length is no margin: the burst below is bumped without a yield
            tg.start_soon(heap.trim_when_quiet, changes, 0.01)
            await all_blocked()
            assert trims == []  # idle from the start: nothing runs
            changes.bump()
            await all_blocked()  # woken: waiting out the quiet
            for _ in range(4):  # more of the burst, no yield between: seen at its next look
                changes.bump()
            await trimmed.wait()
            assert trims == [5]  # once, after the last change of the burst
            trimmed = anyio.Event()
            changes.bump()
            await trimmed.wait()
            assert trims == [5, 6]  # and again after the next change
            tg.cancel_scope.cancel()
