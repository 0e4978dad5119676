"""The supervisor: one task per member that starts its runtime process, waits for readiness,
watches liveness, restarts it by policy, and stops it with the stop ladder.

It owns three state axes (DESIGN §3) — launch, liveness, readiness — and never reads delivery
state. The mailbox borrows a ready process through ``turn_slot``, which is what makes a member
``busy``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import structlog

from orchestrator.daemon.lifecycle import Lifecycle, Observer, SessionStore, Sleep
from orchestrator.daemon.liveness import Probes
from orchestrator.errors import NotFound
from orchestrator.processes import process_tree
from orchestrator.wire import LastExit, Launch, Liveness, MemberStatus, Readiness

if TYPE_CHECKING:
    from pathlib import Path

    from anyio.abc import TaskGroup

    from orchestrator.config import Login, MemberConfig, Permissions, TeamConfig
    from orchestrator.contracts import Host
    from orchestrator.daemon.approvals import MemberApprover
    from orchestrator.daemon.launch import LaunchFactory
    from orchestrator.ports import Runtime, RuntimeProcess

__all__ = ["MemberState", "Supervisor"]


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


@dataclass(eq=False)
class MemberState:
    """One member as the supervisor sees it."""

    team: str
    config: MemberConfig
    workdir: str
    login: Login = "operator"
    permissions: Permissions = "edit"
    sandbox: str | None = None  # "process, network on" (MemberStatus.sandbox); None: none
    launch: Launch = "pending"
    liveness: Liveness = "unknown"
    busy: bool = False
    pid: int | None = None
    restarts: int = 0
    # its launch number: +1 at each start of its process (restart, recycle, teamctl restart);
    # what a turn or a probe of an older epoch reports is ignored (``Supervisor._is_current``)
    epoch: int = 0
    probing: bool = False  # a liveness probe is out: no turn is claimed until it answers
    after_probe: bool = False  # a turn waits for the probe's end (``probe_over`` wakes it)
    last_exit: dict[str, Any] | None = None
    session_id: str | None = None
    error: str | None = None
    note: str | None = None
    turn: str | None = None  # the message id of the turn in flight (for incident reports)
    turns_started: int = 0
    process_turns: int = 0  # turns on the current process, for ``recycle_turns``
    recycle: str | None = None  # why the current process is being recycled
    recycle_after_turn: str | None = None  # a recycle asked for while a turn was in flight
    # why its idle process is being stopped to pause its place (the host's ``pause_after``);
    # while ``launch`` is "paused", ``wanted`` is set by the first turn that waits for it
    pause: str | None = None
    wanted: anyio.Event | None = None
    resuming: bool = False  # started again by a waiting turn after a pause, not yet ready
    claiming: bool = False  # its queue is claiming a turn on its ready process: not idle
    # set when this launch's runtime listed teamctl's MCP tools (member.tools_listed)
    mcp_listed: anyio.Event | None = None
    tree_measured_at: float = float("-inf")  # when its process tree was last measured
    recycles: int = 0
    token: str | None = None  # this launch's MCP token: acts as this member only
    host: Host = field(kw_only=True)  # where it runs (this machine's, or another one's)
    allow: list[str] = field(default_factory=list)  # the "ask" profile's pre-approved rules
    approver: MemberApprover | None = None  # this launch's, for the "ask" profile
    on_change: Callable[[], None] | None = None  # the live view's change feed
    process: RuntimeProcess | None = None
    started_at: float = 0.0
    settled: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    _changed: anyio.Event | None = None  # made when first waited on (most changes: none)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def readiness(self) -> Readiness:
        if self.process is None or not self.process.usable or self.recycle is not None \
                or self.pause is not None:
            return "not_ready"
        return "busy" if self.busy else "ready"

    def changed(self) -> anyio.Event:
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    def notify(self) -> None:
        """Something others can see changed: wake this member's waiters and tell the live
        view's change feed."""
        self.wake()
        if self.on_change is not None:
            self.on_change()

    def probe_over(self) -> None:
        """The probe is answered or given up: a turn that waited for it goes on. Only that
        turn's wait is woken — nothing anyone sees changed, and a hundred idle members'
        probes must not wake every member's watchers (nor redraw the live view)."""
        self.probing = False
        if self.after_probe:
            self.after_probe = False
            self.wake()

    def wake(self) -> None:
        """Wake this member's waiters only, not the live view's change feed (``notify``
        does both; ``probe_over`` wakes only a turn that waited for a probe)."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    @property
    def live(self) -> Liveness:
        """Liveness now: the process's own evidence (its pid, or e.g. heartbeats) decides;
        ``unresponsive`` (a probe went unanswered) stays until a new process is up."""
        if self.liveness != "unresponsive" and self.process is not None \
                and not self.process.healthy:
            return "dead"
        return self.liveness

    def snapshot(self, queued: int = 0) -> MemberStatus:
        process = self.process
        last = self.last_exit
        activity = process.activity if process is not None else None
        if self.approver is not None and self.approver.waiting_on is not None:
            activity = f"waiting for approval {self.approver.waiting_on}"
        return MemberStatus(
            name=self.name, host=self.host.name, sandbox=self.sandbox,
            runtime=self.config.runtime, model=self.config.model,
            pid=process.pid if process is not None else self.pid, launch=self.launch,
            liveness=self.live, activity=activity,
            readiness=self.readiness, restarts=self.restarts, recycles=self.recycles,
            epoch=self.epoch,
            session_id=self.session_id,
            last_exit=None if last is None else LastExit(code=last["code"], at=last["at"]),
            error=self.error, note=self.note, queued=queued,
            turn=self.turn if self.busy else None)


class Supervisor:
    """Starts, watches, restarts and stops the members of every running team."""

    def __init__(self, runtimes: Mapping[str, Runtime], tg: TaskGroup, *,
                 launches: LaunchFactory, save_session: SessionStore,
                 clock: Callable[[], float] = time.monotonic, sleep: Sleep = anyio.sleep,
                 on_change: Callable[[], None] | None = None) -> None:
        """``launches`` builds each launch (and says where a member runs); ``clock`` and
        ``sleep`` drive the restart policy's window and backoff (a test passes a manual clock
        whose sleep advances it)."""
        self._launches = launches
        self._on_change = on_change
        self._tg = tg
        self._teams: dict[str, list[MemberState]] = {}
        self._by_name: dict[tuple[str, str], MemberState] = {}  # (team, member) → its state
        self._life = Lifecycle(launches.home, runtimes, launches, save_session=save_session,
                               clock=clock, sleep=sleep, is_current=self._is_current,
                               probes=Probes(tg))
        # observers of each launch that came up and each that ended (the board's leases)
        self.on_launch: list[Observer] = self._life.on_launch
        self.on_exit: list[Observer] = self._life.on_exit

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
        states = [MemberState(team.name, m, workdir, login=team.member_login(m),
                              permissions=team.member_permissions(m),
                              allow=team.member_allow(m), host=host,
                              sandbox=None if team.member_sandbox(m) == "none" else
                              f"{team.member_sandbox(m)}, network {team.member_network(m)}")
                  for m, workdir, host in placed]
        for old in self._teams.get(team.name, []):
            self._by_name.pop((team.name, old.name), None)
        self._teams[team.name] = states
        self._by_name.update(((team.name, s.name), s) for s in states)
        for state in states:
            self._spawn(state)
        return states

    async def wait_settled(self, team: str, timeout: float) -> None:
        """Wait until each member of ``team`` is ready or has failed its first start."""
        with anyio.move_on_after(timeout):
            for state in self.members(team):
                await state.settled.wait()

    async def wait_settled_member(self, state: MemberState, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            await state.settled.wait()

    async def stop_team(self, team: str) -> None:
        """Stop members in reverse start order, each with the stop ladder."""
        for state in reversed(self._teams.get(team, [])):
            await self._stop_member(state)
        for host in {id(s.host): s.host for s in self._teams.get(team, [])}.values():
            await host.close()  # e.g. its ControlMaster: nothing of ours stays on the host
        for state in self._teams.pop(team, []):
            self._by_name.pop((team, state.name), None)

    async def restart_member(self, team: str, name: str) -> MemberState:
        """Stop the member if it runs, clear its restart history (and ``fatal``), start it."""
        old = self.member(team, name)
        await self._stop_member(old)
        fresh = MemberState(team, old.config, old.workdir, old.login, old.permissions,
                            restarts=old.restarts + 1, allow=old.allow, epoch=old.epoch,
                            last_exit=old.last_exit, host=old.host)
        members = self._teams[team]
        members[members.index(old)] = fresh
        self._by_name[(team, name)] = fresh
        old.notify()
        self._spawn(fresh)
        return fresh

    @asynccontextmanager
    async def turn_slot(self, team: str, name: str, claim: Claim[T]
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
        """
        while True:
            state = self.member(team, name)
            changed = state.changed()
            if state.process is not None and state.process.usable and not state.busy \
                    and state.recycle is None and state.pause is None and not state.probing:
                break
            if state.wanted is not None:  # paused: this turn resumes it
                state.wanted.set()
            state.after_probe = state.probing
            await changed.wait()
        process, epoch = state.process, state.epoch
        state.claiming = True  # not busy yet: an idle member reads "ready" while it claims
        try:
            claimed = await claim()
        finally:
            state.claiming = False
        if claimed is None:
            yield None
            return
        message_id, work = claimed
        state.turn = message_id
        state.busy = True
        state.turns_started += 1
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
        state.busy = False
        state.process_turns += 1
        if process.usable:  # a dead process keeps its cut turn for the incident report
            state.turn = None
            now = time.monotonic()
            measure = now - state.tree_measured_at >= state.config.recycle_check_interval
            if measure:
                state.tree_measured_at = now
            state.recycle = recycle_reason(state.config, process.pid if measure else None,
                                           state.process_turns,
                                           table_age=_PROCESS_TABLE_AGE,
                                           table_reuse=min(
                                               _PROCESS_TABLE_REUSE,
                                               state.config.recycle_check_interval)) \
                or state.recycle_after_turn
            state.recycle_after_turn = None
        state.notify()

    def recycle_member(self, team: str, name: str, reason: str) -> None:
        """Restart the member's process as hygiene (not a crash): now if it is idle, after
        its turn if one is in flight (e.g. its budget changed: Claude's backstop is an
        argument of the process)."""
        state = self.member(team, name)
        if state.process is None or not state.process.usable:
            return
        if state.busy:
            state.recycle_after_turn = reason
        else:
            state.recycle = reason
        state.notify()

    # -- the member task ----------------------------------------------------------------------

    def _spawn(self, state: MemberState) -> None:
        state.on_change = self._on_change
        self._tg.start_soon(self._life.run, state, name=f"member {state.team}/{state.name}")

    async def _stop_member(self, state: MemberState) -> None:
        state.launch = "stopping" if state.process else state.launch
        state.notify()
        if state.scope is not None:
            state.scope.cancel()
        await state.done.wait()

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
