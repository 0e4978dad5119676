"""Pausing an idle member's place (a host's ``pause_after``: a pod's Sandbox, docs/scaling.md).

A member that served no turn for ``pause_after`` seconds has its runtime stopped (the stop
ladder, as a recycle: planned, not a restart, no backoff) and its host ``suspend``-ed: a
Sandbox scaled to nothing, its volume — the working tree, the runtime's session files — kept.
It is ``paused`` until a turn waits for it (``Supervisor.turn_slot`` sets ``wanted``: a
message sent to it, a hold released); then it starts again with its session resumed, and the
message, journaled all along, is delivered as to any member coming up. A pause is not an
exit: the board keeps its tasks (no exit is told), and nothing alarms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import HostUnavailable

if TYPE_CHECKING:
    from orchestrator.daemon.supervisor import MemberState

__all__ = ["idle_for", "paused"]

log = structlog.get_logger("teamctl.supervisor")


async def idle_for(state: MemberState, after: float) -> str:
    """Return once the member has served no turn (nor claimed one) for ``after`` seconds:
    why it is paused."""
    while True:
        changed = state.changed()
        if state.busy:
            await changed.wait()
            continue
        turns = state.turns_started
        with anyio.move_on_after(after) as idle:
            while state.turns_started == turns and not state.busy:
                await state.changed().wait()
        if idle.cancelled_caught and not state.claiming and not state.busy:
            return f"idle {after:g}s (pause_after)"


async def paused(state: MemberState) -> None:
    """Its runtime has stopped: pause its place, wait until a turn wants it, and let the
    lifecycle start it again. A place that could not be paused is logged and the member
    started again at once (its runtime stopped only; the next idle spell tries again)."""
    reason, state.pause = state.pause, None
    try:
        await state.host.suspend()
    except HostUnavailable as exc:
        log.warning("member_pause_failed", team=state.team, member=state.name,
                    code=exc.code, error=exc.message)
        return
    state.launch, state.liveness = "paused", "unknown"
    state.note = f"paused: {reason}; its next message resumes it"
    state.wanted = wanted = anyio.Event()
    log.info("member_paused", team=state.team, member=state.name, reason=reason,
             host=state.host.name, session_id=state.session_id)
    state.notify()
    try:
        await wanted.wait()
    finally:
        state.wanted = None
    state.resuming, state.note = True, None
    log.info("member_resuming", team=state.team, member=state.name, host=state.host.name)
