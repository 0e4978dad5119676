"""The supervisor: one task per member that starts its runtime process, waits for readiness,
watches liveness, restarts it by policy, and stops it with the stop ladder.

It owns three state axes (DESIGN §3) — launch (``state.LaunchState``, moved along its table),
liveness, readiness (a function of the launch) — and never reads delivery state. The mailbox
borrows a ready process through ``turn_slot``, which is what makes a member ``busy``.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TypeVar

import anyio
import structlog

from orchestrator.daemon.members._lifecycle import Gate, Lifecycle, Observer, SessionStore, Sleep
from orchestrator.daemon.members._liveness import Probes
from orchestrator.daemon.members._running_cap import Holding, RunningCap
from orchestrator.daemon.members.state import TRANSITIONS, LaunchState, MemberState
from orchestrator.errors import NotFound
from orchestrator.processes import process_tree

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import TaskGroup

    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.daemon.members._ceilings import Ceilings
    from orchestrator.daemon.members._launch import LaunchFactory
    from orchestrator.ports import Runtime, RuntimeProcess

__all__ = ["Supervisor", "recycle_reason"]


log = structlog.get_logger("teamctl.supervisor")

T = TypeVar("T")
Claim = Callable[[], Awaitable[tuple[str, T] | None]]

# A member's process tree is measured after each turn; within this many seconds of a full scan
# of /proc only new processes are read (a full scan per finished turn was half the daemon's
# time under a 100-member fan-out, issue 26).
_PROCESS_TABLE_AGE = 5.0
# ... and every member's check within this many seconds of a listing of /proc shares it: under a
# 100-member fan-out, twenty checks a second each listing /proc cost a fifth of the daemon's
# CPU; a child born within the last second is counted at the member's next check instead
# (never more than the member's recycle_check_interval: 0 measures a fresh listing every turn).
_PROCESS_TABLE_REUSE = 1.0


class Supervisor:
    """Starts, watches, restarts and stops the members of every running team."""

    def __init__(self, runtimes: Mapping[str, Runtime], tg: TaskGroup, *,
                 launches: LaunchFactory, save_session: SessionStore, gate: Gate,
                 clock: Callable[[], float] = time.monotonic, sleep: Sleep = anyio.sleep,
                 on_change: Callable[[], None] | None = None,
                 on_launch: Sequence[Observer] = (), on_exit: Sequence[Observer] = (),
                 ceilings: Ceilings,
                 holding: Holding = lambda team: _nothing_held()) -> None:
        """``launches`` builds each launch (and says where a member runs); ``gate``: what each
        start passes before its runtime opens (memory admission); ``clock`` and
        ``sleep`` drive the restart policy's window and backoff (a test passes a manual clock
        whose sleep advances it); ``on_launch``/``on_exit``: observers of each launch that
        came up and each that ended (the board's leases); ``ceilings``: each start held to
        its member's ceiling (its cgroup); ``holding``: a team's members holding a task on
        its board (``max_running`` starts and wakes them first)."""
        self._launches = launches
        self._on_change = on_change
        self._tg = tg
        self._teams: dict[str, list[MemberState]] = {}
        self._by_name: dict[tuple[str, str], MemberState] = {}  # (team, member) → its state
        self._running = RunningCap(members=self.members, holding=holding)
        self._life = Lifecycle(launches.home, runtimes, launches, save_session=save_session,
                               clock=clock, sleep=sleep, is_current=self._is_current,
                               probes=Probes(tg), ceilings=ceilings, running=self._running,
                               gate=gate)
        self.on_launch: list[Observer] = self._life.on_launch
        self.on_exit: list[Observer] = self._life.on_exit
        self.on_launch.extend(on_launch)
        self.on_exit.extend(on_exit)

    # -- queries ------------------------------------------------------------------------------

    def by_token(self, token: str) -> MemberState | None:
        """The member whose current launch holds ``token`` (an old launch's token: None)."""
        for states in self._teams.values():
            for state in states:
                if state.token is not None and secrets.compare_digest(state.token, token):
                    return state
        return None

    def members(self, team: str) -> list[MemberState]:
        return list(self._teams.get(team, []))

    def member(self, team: str, name: str) -> MemberState:
        state = self._by_name.get((team, name))
        if state is not None:
            return state
        raise NotFound("member", name, [m.name for m in self._teams.get(team, [])])

    # -- lifecycle ----------------------------------------------------------------------------

    def start_team(self, team: TeamConfig, workdirs: Mapping[str, Path] | None = None
                   ) -> list[MemberState]:
        """Start every member (in file order) in its workdir (``workdirs``: those in a
        worktree); returns at once."""
        placed = [(m, *self._launches.place(team, m, workdirs or {})) for m in team.members]
        states = [MemberState(team.name, team.resolved(m), workdir, host=host)
                  for m, workdir, host in placed]
        for old in self._teams.get(team.name, []):
            self._by_name.pop((team.name, old.name), None)
        self._teams[team.name] = states
        self._by_name.update(((team.name, s.name), s) for s in states)
        self._running.place(team.name, team.team.max_running)
        for state in states:
            self._spawn(state)
        return states

    async def wait_settled(self, team: str, timeout: float) -> None:
        """Wait until each member of ``team`` is ready, has failed its first start, or waits
        for memory (one admitted meanwhile is waited for again: it is starting)."""
        with anyio.move_on_after(timeout):
            while unsettled := [s for s in self.members(team)
                                if not s.waiters.settled.is_set()]:
                await unsettled[0].waiters.settled.wait()

    def settled(self, team: str) -> bool:
        """Whether each member of ``team`` is ready, has failed its first start, or waits
        for memory."""
        return all(s.waiters.settled.is_set() for s in self.members(team))

    async def wait_settled_member(self, state: MemberState, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            await state.waiters.settled.wait()

    async def stop_team(self, team: str) -> None:
        """Stop members in reverse start order, each with the stop ladder."""
        for state in reversed(self._teams.get(team, [])):
            await self._stop_member(state)
        for host in {id(s.host): s.host for s in self._teams.get(team, [])}.values():
            await host.close()  # e.g. its ControlMaster: nothing of ours stays on the host
        for state in self._teams.pop(team, []):
            self._by_name.pop((team, state.name), None)
        self._running.forget(team)

    async def restart_member(self, team: str, name: str) -> MemberState:
        """Stop the member if it runs, clear its restart history (and ``fatal``), start it."""
        old = self.member(team, name)
        await self._stop_member(old)
        fresh = MemberState(team, old.member, old.workdir, restarts=old.restarts + 1,
                            epoch=old.epoch, last_exit=old.last_exit, host=old.host)
        members = self._teams[team]
        members[members.index(old)] = fresh
        self._by_name[(team, name)] = fresh
        old.notify()
        self._spawn(fresh)
        return fresh

    @asynccontextmanager
    async def turn_slot(self, team: str, name: str, claim: Claim[T], *,
                        worth_waking: Callable[[], Awaitable[bool]] | None = None
                        ) -> AsyncIterator[tuple[RuntimeProcess, T] | None]:
        """Wait until the member is ready, ``claim`` its next turn (its label — the message id,
        kept for the incident report if the process dies in it — and what to deliver), then
        mark it busy and lend its process for that one turn; None when there was nothing to
        claim. The member only reads ``busy`` once a turn was claimed: an idle member whose
        queue looks for work (after every ready and every turn) stays ``ready``.

        Waits without a deadline (messages wait in the journal while a member is down, or
        while a liveness probe is out: a frozen process is never handed a turn the probe is
        about to prove lost); cancelling the wait is safe. One caller per member (its
        mailbox queue). The claim carries the process's epoch (bound to every event logged
        during the turn); the turn's end is applied only if that epoch is still current.

        An asleep member is woken by this wait only when ``worth_waking`` says it has work (a
        message queued, a task to hand over, and no hold); else None, as for an empty claim.
        """
        while True:
            state = self.member(team, name)
            changed = state.changed()
            if state.readiness == "ready" and not state.slot.probing:
                break
            wanted = state.waiters.wanted
            if wanted is not None:  # asleep: this turn wakes it, if there is one
                if worth_waking is not None and not await worth_waking():
                    yield None
                    return
                wanted.set()
            state.slot.after_probe = state.slot.probing
            await changed.wait()
        process, epoch, slot = state.process, state.epoch, state.slot
        assert process is not None  # ready: its process is up
        slot.claiming = True  # not busy yet: an idle member reads "ready" while it claims
        try:
            claimed = await claim()
        finally:
            slot.claiming = False
            self._running.looked(state)  # one woken for a turn is claiming it
        if claimed is None:
            yield None
            return
        message_id, work = claimed
        slot.turn, slot.busy = message_id, True
        slot.started += 1
        state.notify()
        try:
            with structlog.contextvars.bound_contextvars(epoch=epoch):
                yield process, work
        finally:
            if self._is_current(state, epoch):
                self._turn_ended(state, process)
                if process.session_id != state.session_id:  # e.g. Codex's first thread.started
                    with anyio.CancelScope(shield=True):
                        await self._life.record_session(state, process.session_id)
            else:  # its process was replaced meanwhile: nothing of it reaches the new one
                log.warning("stale_event_ignored", team=team, member=name, what="turn_end",
                            epoch=epoch, current=self.member(team, name).epoch,
                            message_id=message_id, session_id=process.session_id)

    def _is_current(self, state: MemberState, epoch: int) -> bool:
        """Whether ``epoch`` is the launch ``state`` runs now, and ``state`` the member's."""
        return state.epoch == epoch and self._by_name.get((state.team, state.name)) is state

    @staticmethod
    def _turn_ended(state: MemberState, process: RuntimeProcess) -> None:
        slot = state.slot
        slot.busy = False
        slot.on_process += 1
        if process.usable:  # a dead process keeps its cut turn for the incident report
            slot.turn = None
            reason = _hygiene(state, process)
            if state.launch_state is LaunchState.DRAINING:  # asked for during the turn
                state.move(LaunchState.RECYCLING, reason or state.why or "asked")
            elif reason is not None and state.launch_state is LaunchState.RUNNING:
                state.move(LaunchState.RECYCLING, reason)
        state.notify()

    def recycle_member(self, team: str, name: str, reason: str) -> None:
        """Restart the member's process as hygiene (not a crash): now if it is idle, after
        its turn if one is in flight (e.g. its budget changed: Claude's backstop is an
        argument of the process)."""
        state = self.member(team, name)
        if state.process is None or not state.process.usable \
                or state.launch_state is not LaunchState.RUNNING:
            return
        state.move(LaunchState.DRAINING if state.slot.busy else LaunchState.RECYCLING, reason)
        state.notify()

    # -- the member task ----------------------------------------------------------------------

    def _spawn(self, state: MemberState) -> None:
        state.on_change = functools.partial(self._changed, state)
        self._tg.start_soon(self._life.run, state, name=f"member {state.team}/{state.name}")

    def _changed(self, state: MemberState) -> None:
        """Something of ``state`` others can see changed: the running cap looks (is it idle?),
        then the live view's change feed."""
        self._running.seen(state)
        if self._on_change is not None:
            self._on_change()

    async def _stop_member(self, state: MemberState) -> None:
        if state.process is not None and LaunchState.STOPPING in \
                TRANSITIONS[state.launch_state]:
            state.move(LaunchState.STOPPING, "stop asked")
        state.notify()
        if state.scope is not None:
            state.scope.cancel()
        await state.waiters.done.wait()

async def _nothing_held() -> Collection[str]:
    """No board: no member holds a task."""
    return ()


def _hygiene(state: MemberState, process: RuntimeProcess) -> str | None:
    """Why its process should be recycled after this turn (its tree measured at most every
    ``recycle_check_interval``), or None."""
    now = time.monotonic()
    interval = state.config.recycle_check_interval
    measure = now - state.tree_measured_at >= interval
    if measure:
        state.tree_measured_at = now
    return recycle_reason(state.config, process.pid if measure else None, state.slot.on_process,
                          table_age=_PROCESS_TABLE_AGE,
                          table_reuse=min(_PROCESS_TABLE_REUSE, interval))


def recycle_reason(config: MemberConfig, pid: int | None, turns: int, *,
                   table_age: float = 0.0, table_reuse: float = 0.0) -> str | None:
    """Why a long-lived member process should be recycled now (hygiene, not a crash), or
    None: ``recycle_turns`` turns served, or it and its descendants above ``recycle_rss_mb``
    or ``recycle_children`` (a runtime with no process between turns: turns only).
    ``table_age``: how long ago a full scan of /proc may be (new processes are always read);
    ``table_reuse``: how old a listing of /proc may be and still serve this check as it is."""
    if config.recycle_turns and turns >= config.recycle_turns:
        return f"{turns} turns (recycle_turns = {config.recycle_turns})"
    if pid is None or not (config.recycle_rss_mb or config.recycle_children):
        return None
    tree = process_tree(pid, max_age=table_age, reuse=table_reuse)
    if tree is None:
        return None
    rss_mb = tree.rss_bytes / 2**20
    if config.recycle_rss_mb and rss_mb > config.recycle_rss_mb:
        return f"{rss_mb:.0f} MiB resident (recycle_rss_mb = {config.recycle_rss_mb})"
    if config.recycle_children and tree.children > config.recycle_children:
        return (f"{tree.children} child processes (recycle_children = "
                f"{config.recycle_children})")
    return None
