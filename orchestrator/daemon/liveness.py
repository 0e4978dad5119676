"""Liveness is proven, not assumed (docs/architecture.md): an idle member answers a probe on
its runtime's cheapest real channel within a deadline, or it is killed for the restart policy
to bring back."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import TeamctlError
from orchestrator.processes import process_stopped

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.contracts import Host
    from orchestrator.daemon.supervisor import MemberState
    from orchestrator.ports import RuntimeProcess

__all__ = ["probe_loop"]

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
        await anyio.sleep(interval)
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


async def _prove(state: MemberState, process: RuntimeProcess, deadline: float) -> bool:
    """One probe within ``deadline``; an answer past half of it is logged (late), and
    so is the late answer that still came in time (recovered)."""
    started = time.monotonic()
    late = anyio.Event()

    async def warn_late() -> None:
        await anyio.sleep(deadline / 2)
        late.set()
        log.warning("member_probe_late", team=state.team, member=state.name,
                    pid=process.pid, waited=round(deadline / 2, 3), deadline=deadline)

    answered = False
    with anyio.move_on_after(deadline):
        async with anyio.create_task_group() as tg:
            tg.start_soon(warn_late)
            answered = await _answers(process, state.host, deadline)
            tg.cancel_scope.cancel()
    if answered and late.is_set():
        log.info("member_probe_recovered", team=state.team, member=state.name,
                 pid=process.pid, seconds=round(time.monotonic() - started, 3))
    return answered


async def _answers(process: RuntimeProcess, host: Host, deadline: float) -> bool:
    """The runtime answered its probe, and the way to its host too (an SSH member's master)."""
    try:
        return await process.probe(deadline) and await host.answers(deadline)
    except TeamctlError as exc:  # a runtime's probe should say False; never end the watch
        log.warning("member_probe_failed", code=exc.code, error=exc.message)
        return False
