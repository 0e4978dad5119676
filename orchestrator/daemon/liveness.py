"""Liveness is proven, not assumed (docs/architecture.md): an idle member answers a probe on
its runtime's cheapest real channel within a deadline, or it is killed for the restart policy
to bring back."""

from __future__ import annotations

import asyncio
import math
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import TeamctlError
from orchestrator.processes import process_stopped

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from orchestrator.contracts import Host
    from orchestrator.daemon.supervisor import MemberState
    from orchestrator.ports import RuntimeProcess

__all__ = ["next_tick", "probe_loop"]

log = structlog.get_logger("teamctl.supervisor")


async def probe_loop(state: MemberState, process: RuntimeProcess, epoch: int,
                     is_current: Callable[[MemberState, int], bool]) -> None:
    """Every ``liveness_interval``, an idle member proves it is alive: its runtime's
    cheapest real channel (Claude's ``mcp_status`` control request, the app-server's
    ``thread/read``, OpenCode's ``GET /session/status``) and, on an SSH host, the master
    (``ssh -O check``) answer within ``liveness_deadline``. One that does not (frozen,
    SIGSTOPped, deadlocked, a wedged master) is ``unresponsive``: killed, so the restart
    policy brings it back; its queue waits and goes to the new process. A busy member
    is not probed (its turn's idle watchdog covers it). ``is_current``: whether ``epoch`` is
    still the member's launch (a stale probe's verdict is ignored)."""
    interval, deadline = state.config.liveness_interval, state.config.liveness_deadline
    while True:
        await anyio.sleep_until(next_tick(anyio.current_time(), interval))
        if state.busy or not process.usable:
            continue
        turns = state.turns_started
        state.probing = True
        try:
            answered = await _prove(state, process, deadline)
        finally:
            state.probing = False
            state.wake()  # a turn waiting for the probe goes on; status is unchanged
        if answered or state.busy or state.turns_started != turns:
            continue
        if not is_current(state, epoch):
            log.warning("stale_event_ignored", team=state.team, member=state.name,
                        what="probe_unanswered", epoch=epoch, current=state.epoch)
            return
        state.liveness = "unresponsive"
        state.notify()
        log.warning("member_unresponsive", team=state.team, member=state.name,
                    pid=process.pid, deadline=deadline, interval=interval,
                    stopped=process_stopped(process.pid))
        process.kill()
        return


def next_tick(now: float, interval: float) -> float:
    """The next multiple of ``interval`` on the loop's clock: members of one interval are
    probed in the same turn of the event loop, not each on a timer of its own — the loop
    wakes once per tick, not once per member (idle CPU with 100 members, bench_scale)."""
    return (math.floor(now / interval) + 1) * interval


async def _prove(state: MemberState, process: RuntimeProcess, deadline: float) -> bool:
    """One probe within ``deadline``; an answer past half of it is logged (late), and
    so is the late answer that still came in time (recovered). The late warning is a timer
    callback, not a task: a probe per idle member per interval is the daemon's whole idle
    work, and a task group per probe was most of it (bench_scale's idle CPU)."""
    started = time.monotonic()
    late = False

    def warn_late() -> None:
        nonlocal late
        late = True
        log.warning("member_probe_late", team=state.team, member=state.name,
                    pid=process.pid, waited=round(deadline / 2, 3), deadline=deadline)

    answered = False
    async with _timer(deadline / 2, warn_late):
        with anyio.move_on_after(deadline):
            answered = await _answers(process, state.host, deadline)
    if answered and late:
        log.info("member_probe_recovered", team=state.team, member=state.name,
                 pid=process.pid, seconds=round(time.monotonic() - started, 3))
    return answered


@asynccontextmanager
async def _timer(delay: float, callback: Callable[[], None]) -> AsyncIterator[None]:
    """``callback`` after ``delay`` unless the block ended first: a timer handle of the
    asyncio loop the daemon runs on; a task on another backend (the core's tests run on
    trio too)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio
        loop = None
    if loop is not None:
        handle = loop.call_later(delay, callback)
        try:
            yield
        finally:
            handle.cancel()
        return

    async def fire() -> None:
        await anyio.sleep(delay)
        callback()

    async with anyio.create_task_group() as tg:
        tg.start_soon(fire)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def _answers(process: RuntimeProcess, host: Host, deadline: float) -> bool:
    """The runtime answered its probe, and the way to its host too (an SSH member's master)."""
    try:
        return await process.probe(deadline) and await host.answers(deadline)
    except TeamctlError as exc:  # a runtime's probe should say False; never end the watch
        log.warning("member_probe_failed", code=exc.code, error=exc.message)
        return False
