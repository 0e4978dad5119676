"""``all_blocked()``: wait until every other task of the test's loop waits on something;
``until(check)``: wait until a condition holds that work in a thread may settle;
``member_until(core, name, predicate)``: wait on a member's own change events until its state
holds (an in-process core's member; no polling).

``anyio.wait_all_tasks_blocked`` means the same, but on asyncio it looks, and while any task is
runnable — a task just started always is — it sleeps 0.1 s before it looks again: a tenth of a
second for each call, nearly always (the unit layer called it ~40 times a run: 4 s of waiting).
This looks again after every pass of the loop instead (a zero sleep lets each runnable task run
to its next await), then every 2 ms while a task is still runnable — work handed to a thread
counts as a wait, as in anyio. On trio, trio's own exact check (its scheduler knows).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import anyio
import sniffio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from orchestrator.daemon.core import Core
    from orchestrator.daemon.members.state import MemberState

__all__ = ["all_blocked", "member_until", "until"]

_PASSES = 8  # loop passes before the 2 ms looks (a chain of wake-ups settles within a few)


async def all_blocked(deadline: float = 10.0) -> None:
    """Return once no other task of the loop is runnable; TimeoutError after ``deadline``."""
    if sniffio.current_async_library() == "trio":
        import trio.testing

        with anyio.fail_after(deadline):
            await trio.testing.wait_all_tasks_blocked()
        return
    this = asyncio.current_task()
    passes = 0
    with anyio.fail_after(deadline):
        while True:
            await asyncio.sleep(0 if passes < _PASSES else 0.002)
            passes += 1
            if all(_waiting(task) for task in asyncio.all_tasks() if task is not this):
                return


def _waiting(task: asyncio.Task[object]) -> bool:
    waiter = getattr(task, "_fut_waiter", None)  # what anyio's own check reads
    return waiter is not None and not waiter.done()


async def until(check: Callable[[], Awaitable[bool]], deadline: float = 10.0) -> None:
    """Return once ``check()`` is true, looked at after each pass of the loop and then every
    2 ms (a journal write in a thread ends when it ends: no task of the loop says so);
    TimeoutError after ``deadline``."""
    passes = 0
    with anyio.fail_after(deadline):
        while not await check():
            await anyio.sleep(0 if passes < _PASSES else 0.002)
            passes += 1


async def member_until(core: Core, name: str, predicate: Callable[[MemberState], bool], *,
                       team: str = "web", deadline: float = 10.0) -> MemberState:
    """Member ``name`` of ``team`` once ``predicate`` holds of its state, awaited on its own
    change events; TimeoutError after ``deadline``."""
    with anyio.fail_after(deadline):
        while True:
            state = core.supervisor.member(team, name)
            changed = state.changed()
            if predicate(state):
                return state
            await changed.wait()
