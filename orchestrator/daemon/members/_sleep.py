"""Idle members asleep, on every host (docs/scaling.md, "Idle members asleep").

A member that served no turn for its ``pause_after`` seconds (its own key, else its Kubernetes
host's, else its team's), or one put to sleep to give its running slot to another
(``max_running``: members/_running_cap.py), *falls asleep*: its runtime is stopped with the
stop ladder as a planned stop — like a recycle, no restart counted, no backoff, not an exit —
and its session is kept. On a host that pauses its place (a pod) the place is suspended too.
It is ``asleep`` until a turn wants it (``Supervisor.turn_slot`` sets ``waiters.wanted``: a
message sent to it, a task handed over, a hold released — never a liveness probe, which only
a live process is sent); then it *wakes*: its runtime starts again on its recorded session
(Claude ``--resume``, Codex ``thread/resume`` or ``exec resume``, OpenCode's session, ACP
``session/load``), and the message, journaled all along, is delivered as to any member coming
up — once. A sleep is not an exit: the board keeps its tasks, and nothing alarms. A turn is
never cut: only a member with no turn in flight, and not claiming one, falls asleep.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.contracts import pausing
from orchestrator.daemon.members.state import LaunchState
from orchestrator.errors import HostUnavailable

if TYPE_CHECKING:
    from orchestrator.daemon.members.state import MemberState

__all__ = ["asleep", "doze", "fall_asleep", "idle_for", "suspend_place"]

log = structlog.get_logger("teamctl.supervisor")


async def idle_for(state: MemberState, after: float) -> str:
    """Return once the member has served no turn (nor claimed one) for ``after`` seconds:
    why it falls asleep."""
    slot = state.slot
    while True:
        changed = state.changed()
        if slot.busy:
            await changed.wait()
            continue
        turns = slot.started
        with anyio.move_on_after(after) as idle:
            while slot.started == turns and not slot.busy:
                await state.changed().wait()
        if idle.cancelled_caught and not slot.claiming and not slot.busy:
            return f"idle {after:g} s (pause_after)"


async def doze(state: MemberState, after: float) -> None:
    """While its process runs (the lifecycle's watch): put it to sleep once it has idled
    ``after`` seconds."""
    fall_asleep(state, await idle_for(state, after))


def fall_asleep(state: MemberState, why: str) -> bool:
    """Put a running, idle member to sleep (its watch leaves the runtime: the stop ladder
    runs); False when it is not running or not idle — a turn is never cut."""
    slot = state.slot
    if state.launch_state is not LaunchState.RUNNING or slot.busy or slot.claiming:
        return False
    state.move(LaunchState.FALLING_ASLEEP, why)
    state.notify()
    return True


async def suspend_place(state: MemberState) -> bool:
    """Its runtime has stopped for its sleep: suspend its place where its host pauses one (a
    pod). False when the place could not be suspended: logged, and the member is started
    again at once (its next idle spell tries again)."""
    place = pausing(state.host)
    if place is None:
        return True
    try:
        await place.suspend()
    except HostUnavailable as exc:
        log.warning("member_suspend_failed", team=state.team, member=state.name,
                    code=exc.code, error=exc.message)
        return False
    return True


async def asleep(state: MemberState, why: str) -> None:
    """Asleep — no process, its session kept — until a turn wants it; then ``waking``
    (the lifecycle starts it again on its session). ``why``: what put it to sleep."""
    state.move(LaunchState.ASLEEP, why)
    state.liveness = "unknown"  # no process to prove: neither alive nor dead
    state.asleep_since = time.time()
    state.note = f"asleep: {why}; its next message wakes it"
    state.waiters.wanted = wanted = anyio.Event()
    state.waiters.settled.set()  # a launch waits for no member asleep
    log.info("member_asleep", team=state.team, member=state.name, reason=why,
             host=state.host.name, session_id=state.session_id)
    state.notify()
    try:
        await wanted.wait()
    finally:
        state.waiters.wanted = None
    slept = time.time() - state.asleep_since
    state.move(LaunchState.WAKING, "a turn wants it")
    state.note = state.asleep_since = None
    log.info("member_waking", team=state.team, member=state.name, host=state.host.name,
             session_id=state.session_id, asleep_seconds=round(slept, 3))
    state.notify()
