"""A member as the daemon sees it: one launch state, moved only along its transition table.

A member's launch is one ``LaunchState`` — never a set of flags that together mean one. Every
move goes through ``MemberState.move``: a move the table (``TRANSITIONS``) has no arrow for is
refused (``TransitionRefused``, a bug), and each one is logged once, here, as ``member_state``
``from → to (why)``. The table, as a reviewer reads it::

    pending        → starting | asleep                    (asleep: past max_running at launch)
    starting       → waiting | running | backoff | fatal | stopped
    waking         → waiting | running | backoff | fatal | stopped   (starting after its sleep)
    waiting        → starting | waking                    (its memory fits: admission)
    running        → draining | recycling | falling_asleep | stopping | backoff | fatal | stopped
    draining       → recycling | stopping | backoff | fatal | stopped   (recycle after its turn)
    recycling      → starting | stopping
    falling_asleep → asleep | starting | stopping     (starting: its place would not suspend)
    asleep         → waking
    backoff        → starting
    stopping       → stopped
    fatal          → stopped
    (every state but stopped and fatal) → fatal | stopped   (a bug caught; a stop)

The socket shows the coarser word (``protocol.teams.Launch``: ``waking`` shows as starting;
draining, recycling and falling_asleep as running; ``asleep`` and ``waiting`` as themselves).
Readiness is a function of the launch state, the process and the turn slot (``readiness``),
never stored.

This module is below every other module of ``members/``: it imports none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.errors import TransitionRefused
from orchestrator.protocol.teams import LastExit, MemberStatus

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from orchestrator.config import MemberConfig, ResolvedMember
    from orchestrator.contracts import Host
    from orchestrator.daemon.approvals import MemberApprover
    from orchestrator.ports import RuntimeProcess
    from orchestrator.protocol.teams import Launch, Liveness, Readiness

__all__ = ["TRANSITIONS", "LaunchState", "MemberState", "TurnSlot", "Waiters", "readiness"]

log = structlog.get_logger("teamctl.supervisor")


class LaunchState(StrEnum):
    """Where a member's launch is (the table above says how it moves)."""

    PENDING = "pending"  # not started yet
    STARTING = "starting"  # its process is being started (a launch, a restart, a recycle)
    WAKING = "waking"  # started again (its session resumed) by a turn that wanted it asleep
    WAITING = "waiting"  # its start waits until its memory fits (``waiting`` says why)
    RUNNING = "running"  # its process is up
    DRAINING = "draining"  # up, busy; recycled as soon as its turn ends
    RECYCLING = "recycling"  # its idle process is being stopped to start afresh (hygiene)
    FALLING_ASLEEP = "falling_asleep"  # its idle process is being stopped to sleep
    ASLEEP = "asleep"  # no process (its session kept) until a turn wants it (members/_sleep.py)
    BACKOFF = "backoff"  # its process exited; started again after the policy's delay
    STOPPING = "stopping"  # a stop was asked while its process ran
    STOPPED = "stopped"  # stopped, or exited and not to be restarted
    FATAL = "fatal"  # gave up (a crash loop, no login, a bug): ``teamctl restart`` only


_S = LaunchState
_ENDS = frozenset({_S.FATAL, _S.STOPPED})  # a bug caught, or a stop: from any live state
TRANSITIONS: Mapping[LaunchState, frozenset[LaunchState]] = {
    _S.PENDING: frozenset({_S.STARTING, _S.ASLEEP}) | _ENDS,
    _S.STARTING: frozenset({_S.WAITING, _S.RUNNING, _S.BACKOFF}) | _ENDS,
    _S.WAKING: frozenset({_S.WAITING, _S.RUNNING, _S.BACKOFF}) | _ENDS,
    _S.WAITING: frozenset({_S.STARTING, _S.WAKING}) | _ENDS,
    _S.RUNNING: frozenset({_S.DRAINING, _S.RECYCLING, _S.FALLING_ASLEEP, _S.STOPPING,
                           _S.BACKOFF}) | _ENDS,
    _S.DRAINING: frozenset({_S.RECYCLING, _S.STOPPING, _S.BACKOFF}) | _ENDS,
    _S.RECYCLING: frozenset({_S.STARTING, _S.STOPPING}) | _ENDS,
    _S.FALLING_ASLEEP: frozenset({_S.ASLEEP, _S.STARTING, _S.STOPPING}) | _ENDS,
    _S.ASLEEP: frozenset({_S.WAKING}) | _ENDS,
    _S.BACKOFF: frozenset({_S.STARTING}) | _ENDS,
    _S.STOPPING: _ENDS,
    _S.FATAL: frozenset({_S.STOPPED}),
    _S.STOPPED: frozenset(),
}

# the word the socket shows for each (``protocol.teams.Launch``: coarser than the states)
_SHOWN: Mapping[LaunchState, Launch] = {
    _S.PENDING: "pending", _S.STARTING: "starting", _S.WAKING: "starting",
    _S.WAITING: "waiting",
    _S.RUNNING: "running", _S.DRAINING: "running", _S.RECYCLING: "running",
    _S.FALLING_ASLEEP: "running", _S.ASLEEP: "asleep", _S.BACKOFF: "backoff",
    _S.STOPPING: "stopping", _S.STOPPED: "stopped", _S.FATAL: "fatal",
}
# a process in these states may be handed a turn (draining: only the one it serves)
_SERVING = frozenset({_S.RUNNING, _S.DRAINING})


@dataclass(eq=False)
class TurnSlot:
    """The member's one turn at a time, and the probe that shares its process."""

    busy: bool = False  # a turn was claimed and is in flight
    turn: str | None = None  # the message id of the turn in flight (for incident reports)
    claiming: bool = False  # its queue is claiming a turn on its ready process: not idle
    probing: bool = False  # a liveness probe is out: no turn is claimed until it answers
    after_probe: bool = False  # a turn waits for the probe's end (``probe_over`` wakes it)
    started: int = 0  # turns started, ever (a probe's verdict is void once one started)
    on_process: int = 0  # turns on the current process, for ``recycle_turns``


@dataclass(eq=False)
class Waiters:
    """What others wait on: a change, the first start settled, the task's end, and — while
    asleep — the first turn that wants it (``wanted``)."""

    settled: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    wanted: anyio.Event | None = None
    changed: anyio.Event | None = None  # made when first waited on (most changes: none)


def readiness(state: MemberState) -> Readiness:
    """Ready when its launch serves turns on a usable process and no turn is in flight."""
    process = state.process
    if process is None or not process.usable or state.launch_state not in _SERVING:
        return "not_ready"
    return "busy" if state.slot.busy else "ready"


@dataclass(eq=False)
class MemberState:
    """One member as the supervisor sees it: identity, launch state, turn slot, waiters."""

    team: str
    member: ResolvedMember  # its team file entry with the team's defaults applied
    workdir: str
    host: Host = field(kw_only=True)  # where it runs (this machine's, or another one's)
    liveness: Liveness = "unknown"
    why: str | None = None  # why its launch state was last moved (``member_state``)
    pid: int | None = None
    restarts: int = 0
    # its launch number: +1 at each start of its process (restart, recycle, teamctl restart);
    # what a turn or a probe of an older epoch reports is ignored (``Supervisor._is_current``)
    epoch: int = 0
    last_exit: dict[str, Any] | None = None
    session_id: str | None = None
    error: str | None = None
    note: str | None = None
    asleep_since: float | None = None  # the wall time it fell asleep (None: not asleep)
    # why its start waits, shown as its activity: "waiting for a running slot (max_running =
    # 10)", "waiting for memory (needs ~300 MiB; 1.1 GiB free above the 2 GiB reserve)"
    waiting: str | None = None
    # set when this launch's runtime listed teamctl's MCP tools (member.tools_listed)
    mcp_listed: anyio.Event | None = None
    tree_measured_at: float = float("-inf")  # when its process tree was last measured
    recycles: int = 0
    token: str | None = None  # this launch's MCP token: acts as this member only
    approver: MemberApprover | None = None  # this launch's, for the "ask" profile
    on_change: Callable[[], None] | None = None  # the live view's change feed
    process: RuntimeProcess | None = None
    started_at: float = 0.0
    scope: anyio.CancelScope | None = None
    slot: TurnSlot = field(default_factory=TurnSlot)
    waiters: Waiters = field(default_factory=Waiters)
    _launch: LaunchState = LaunchState.PENDING

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def config(self) -> MemberConfig:
        return self.member.config

    @property
    def launch_state(self) -> LaunchState:
        return self._launch

    @property
    def launch(self) -> Launch:
        """The launch as the socket shows it (``wire.Launch``)."""
        return _SHOWN[self._launch]

    @property
    def waking(self) -> bool:
        """Started again by a turn after its sleep, not yet ready."""
        return self._launch is LaunchState.WAKING

    @property
    def readiness(self) -> Readiness:
        return readiness(self)

    def move(self, to: LaunchState, why: str) -> None:
        """Move the launch to ``to`` along the table, logged once as ``from → to (why)``;
        a move the table has no arrow for raises ``TransitionRefused`` (nothing moves)."""
        was = self._launch
        if to not in TRANSITIONS[was]:
            raise TransitionRefused(self.team, self.name, was, to, why)
        self._launch, self.why = to, why
        log.info("member_state", team=self.team, member=self.name, why=why,
                 **{"from": was.value, "to": to.value})

    def changed(self) -> anyio.Event:
        if self.waiters.changed is None:
            self.waiters.changed = anyio.Event()
        return self.waiters.changed

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
        self.slot.probing = False
        if self.slot.after_probe:
            self.slot.after_probe = False
            self.wake()

    def wake(self) -> None:
        """Wake this member's waiters only, not the live view's change feed (``notify``
        does both; ``probe_over`` wakes only a turn that waited for a probe)."""
        if self.waiters.changed is not None:
            self.waiters.changed.set()
            self.waiters.changed = None

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
        activity = process.activity if process is not None else self.waiting
        if activity is None and self.asleep_since is not None:
            activity = "asleep since " + time.strftime("%H:%M:%S",
                                                       time.localtime(self.asleep_since))
        if self.approver is not None and self.approver.waiting_on is not None:
            activity = f"waiting for approval {self.approver.waiting_on}"
        return MemberStatus(
            name=self.name, host=self.host.name, sandbox=self.member.sandbox_shown,
            ceiling=None if self.member.ceiling is None else self.member.ceiling.shown(),
            runtime=self.config.runtime, model=self.config.model,
            pid=process.pid if process is not None else self.pid, launch=self.launch,
            liveness=self.live, activity=activity,
            readiness=self.readiness, restarts=self.restarts, recycles=self.recycles,
            epoch=self.epoch,
            session_id=self.session_id,
            last_exit=None if last is None else LastExit(code=last["code"], at=last["at"],
                                                         reason=last.get("reason")),
            error=self.error, note=self.note, waiting=self.waiting, queued=queued,
            asleep_since=self.asleep_since,
            turn=self.slot.turn if self.slot.busy else None)
