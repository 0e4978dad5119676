"""Liveness is proven, not assumed (docs/dev/architecture.md): an idle member answers a probe on
its runtime's cheapest real channel within a deadline, or it is killed for the restart policy
to bring back.

The probes are the daemon's whole idle work, so they are done in rounds: every idle member of
one ``(liveness_interval, liveness_deadline)`` is probed in the same turn of the event loop by
one task, each probe written without an await (``RuntimeProcess.send_probe``) and its answer
counted by a callback from the member's own read loop — no task, timer or cancel scope per
member (bench_scale: 100 idle members, docs/dev/performance.md). A runtime whose probe must be
awaited (OpenCode's HTTP request), or a member on another host (its SSH master or its pod is
asked too), is probed in a task of the round's own, as before.
"""

from __future__ import annotations

import asyncio
import math
import time
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.errors import TeamctlError
from orchestrator.processes import process_stopped

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from anyio.abc import TaskGroup

    from orchestrator.daemon.members.state import MemberState
    from orchestrator.ports import RuntimeProcess

__all__ = ["Probes", "next_tick"]

log = structlog.get_logger("teamctl.supervisor")


class _Watched:
    """One launch of a member while its process runs: probed each round while idle."""

    __slots__ = ("epoch", "is_current", "judged", "late", "process", "state", "turns")

    def __init__(self, state: MemberState, process: RuntimeProcess, epoch: int,
                 is_current: Callable[[MemberState, int], bool]) -> None:
        self.state, self.process, self.epoch = state, process, epoch
        self.is_current = is_current
        self.judged = False  # found unresponsive (killed), or its epoch went: not probed again
        self.late = False  # not answered within half the deadline (this round)
        self.turns = 0

    @property
    def due(self) -> bool:
        """Idle and usable: a busy member is not probed (its turn's idle watchdog covers it)."""
        return not self.judged and not self.state.slot.busy and self.process.usable


class Probes:
    """The daemon's liveness probes: ``watching`` a member's launch while its process runs;
    one task per ``(interval, deadline)`` runs the rounds while any member has it."""

    def __init__(self, tg: TaskGroup) -> None:
        self._tg = tg
        self._groups: dict[tuple[float, float], set[_Watched]] = {}

    @contextmanager
    def watching(self, state: MemberState, process: RuntimeProcess, epoch: int,
                 is_current: Callable[[MemberState, int], bool]) -> Iterator[None]:
        """While the block runs, ``process`` (launch ``epoch``) is probed every
        ``liveness_interval`` while idle; one that does not answer within
        ``liveness_deadline`` (frozen, SIGSTOPped, deadlocked, a wedged SSH master) is
        ``unresponsive``: killed, so the restart policy brings it back; its queue waits and
        goes to the new process. ``is_current``: whether ``epoch`` is still the member's
        launch (a stale probe's verdict is ignored)."""
        key = (state.config.liveness_interval, state.config.liveness_deadline)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = set()
            self._tg.start_soon(self._rounds, key, group, name=f"liveness {key[0]:g}s")
        watched = _Watched(state, process, epoch, is_current)
        group.add(watched)
        try:
            yield
        finally:
            group.discard(watched)
            watched.judged = True  # a round that holds it lets it be

    async def _rounds(self, key: tuple[float, float], group: set[_Watched]) -> None:
        interval, deadline = key
        # started from the first member's task: its bound epoch is not the round's (every
        # event below names its member's own launch)
        structlog.contextvars.clear_contextvars()
        try:
            while group:
                await anyio.sleep_until(next_tick(anyio.current_time(), interval))
                try:
                    await probe_round([w for w in group if w.due], deadline)
                except Exception:  # a bug here must not take the daemon down
                    log.exception("liveness_round_failed", interval=interval,
                                  members=len(group))
        finally:
            if self._groups.get(key) is group:
                del self._groups[key]


def next_tick(now: float, interval: float) -> float:
    """The next multiple of ``interval`` on the loop's clock: members that became idle at
    different moments are probed at the same instant (one round), never now and at most one
    interval later."""
    return (math.floor(now / interval) + 1) * interval


async def probe_round(due: list[_Watched], deadline: float) -> None:
    """Probe ``due`` at once: those whose probe can be written now in this task, the rest
    each in a task; an answer past half the deadline is logged (late), and so is the late
    answer that still came in time (recovered); no answer within ``deadline``: judged."""
    waiting: set[_Watched] = set()
    all_in = anyio.Event()
    started = time.monotonic()
    sending = True

    def answered(watched: _Watched) -> None:
        if watched not in waiting:  # the round is over for it
            return
        waiting.discard(watched)
        watched.state.probe_over()
        if watched.late:
            log.info("member_probe_recovered", team=watched.state.team,
                     member=watched.state.name, epoch=watched.epoch, pid=watched.process.pid,
                     seconds=round(time.monotonic() - started, 3))
        if not waiting and not sending:
            all_in.set()

    async with anyio.create_task_group() as tg:
        forget: list[Callable[[], None]] = []
        for watched in due:
            watched.late = False
            watched.turns = watched.state.slot.started
            watched.state.slot.probing = True
            sent = None
            if watched.state.host.name is None:  # this machine: nothing else to ask
                waiting.add(watched)
                try:
                    sent = watched.process.send_probe(partial(answered, watched))
                except Exception:  # an adapter's bug: its probe is awaited instead
                    log.exception("member_probe_failed", team=watched.state.team,
                                  member=watched.state.name, epoch=watched.epoch)
                if sent is None:
                    waiting.discard(watched)
            if sent is None:
                tg.start_soon(_awaited, watched, deadline)
            else:
                forget.append(sent)
        sending = False
        if waiting:
            with anyio.move_on_after(deadline / 2):
                await all_in.wait()
        if waiting:
            for watched in waiting:
                watched.late = True
                log.warning("member_probe_late", team=watched.state.team,
                            member=watched.state.name, epoch=watched.epoch,
                            pid=watched.process.pid, waited=round(deadline / 2, 3),
                            deadline=deadline)
            with anyio.move_on_after(deadline - deadline / 2):
                await all_in.wait()
        for drop in forget:
            drop()
        for watched in list(waiting):
            waiting.discard(watched)
            _judge(watched, deadline, answered=False)


async def _awaited(watched: _Watched, deadline: float) -> None:
    """One member's probe, awaited: its runtime's, then the way to its host."""
    with structlog.contextvars.bound_contextvars(epoch=watched.epoch):  # the runtime's logs
        answered = await _prove(watched.state, watched.process, watched.epoch, deadline)
    _judge(watched, deadline, answered=answered)


def _judge(watched: _Watched, deadline: float, *, answered: bool) -> None:
    """The probe's verdict: answered, or the member became busy (a turn's watchdog covers it)
    or is gone: nothing; else ``unresponsive`` and killed."""
    state, process = watched.state, watched.process
    state.probe_over()
    if answered or watched.judged or state.slot.busy or state.slot.started != watched.turns:
        return
    watched.judged = True
    if not watched.is_current(state, watched.epoch):
        log.warning("stale_event_ignored", team=state.team, member=state.name,
                    what="probe_unanswered", epoch=watched.epoch, current=state.epoch)
        return
    state.liveness = "unresponsive"
    state.notify()
    log.warning("member_unresponsive", team=state.team, member=state.name,
                epoch=watched.epoch, pid=process.pid, deadline=deadline,
                interval=state.config.liveness_interval, stopped=process_stopped(process.pid))
    process.kill()


async def _prove(state: MemberState, process: RuntimeProcess, epoch: int,
                 deadline: float) -> bool:
    """One awaited probe within ``deadline``; an answer past half of it is logged (late), and
    so is the late answer that still came in time (recovered). The late warning is a timer
    callback, not a task."""
    started = time.monotonic()
    late = False

    def warn_late() -> None:
        nonlocal late
        late = True
        log.warning("member_probe_late", team=state.team, member=state.name, epoch=epoch,
                    pid=process.pid, waited=round(deadline / 2, 3), deadline=deadline)

    answered = False
    async with _timer(deadline / 2, warn_late):
        with anyio.move_on_after(deadline):
            answered = await _answers(state, process, epoch, deadline)
    if answered and late:
        log.info("member_probe_recovered", team=state.team, member=state.name, epoch=epoch,
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


async def _answers(state: MemberState, process: RuntimeProcess, epoch: int,
                   deadline: float) -> bool:
    """The runtime answered its probe, and the way to its host too (an SSH member's master)."""
    try:
        return await process.probe(deadline) and await state.host.answers(deadline)
    except TeamctlError as exc:  # a runtime's probe should say False; never end the watch
        log.warning("member_probe_failed", team=state.team, member=state.name, epoch=epoch,
                    code=exc.code, error=exc.message)
        return False
