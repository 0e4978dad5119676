"""Admission: a member of this machine starts (or wakes) only when its expected footprint fits
in the memory left above its team's ``memory_reserve`` (docs/scaling.md, "Starts that fit").

The lifecycle asks ``admit`` before it builds and opens a member's launch. What fits starts
at once; what does not waits in one line for the whole machine — the lead, then members
holding a task, then the rest, each in launch order — and the line is looked at again when a
member stops, when a team's reserve changes (a relaunch), and every ``poll_interval`` while
anyone waits. A member admitted *holds* what it will take and has not taken yet: its whole
footprint until it is up (at most its ``start_timeout``), then what its process tree has not
reached yet of it while that tree still grows (at most ``SETTLE`` seconds: a CLI grows after
its handshake) — so members admitted together never count the same free memory twice. A
member on another host (SSH, a pod: ``HostProfile.local_memory`` false) is not this
machine's to admit: it starts at once.

While members of this machine run, each one's process tree is measured when it is ready and
every ``sample_interval``; its peak is journaled (``Footprints``), which is what the next
launch of its kind expects.
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import structlog

from orchestrator.ceilings import shown_size
from orchestrator.daemon.admission._decision import Verdict, behind, decide, line_order
from orchestrator.daemon.admission._footprints import Kind, kind_of
from orchestrator.errors import MemoryReserveTooLarge
from orchestrator.processes import process_tree

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.admission._footprints import Footprints
    from orchestrator.daemon.admission._memory import HostMemory, MemorySource
    from orchestrator.daemon.members import MemberState

__all__ = ["POLL_INTERVAL", "SAMPLE_INTERVAL", "Admission", "tree_rss"]

log = structlog.get_logger("teamctl.admission")

POLL_INTERVAL = 2.0  # how often memory is read again while a member waits
SAMPLE_INTERVAL = 30.0  # how often a running member's process tree is measured
# a member up holds what it has not taken yet of its footprint while its tree still grows (a
# CLI grows after it answers its handshake: Claude Code's node heap, its MCP servers) — at
# most this long; a tree that did not grow over _FLAT seconds has settled below it
SETTLE = 60.0
_FLAT = 1.0
_GROWTH = 1.1  # a peak is journaled again once it grew by a tenth since it last was
_TABLE_AGE, _TABLE_REUSE = 5.0, 1.0  # as the supervisor's tree measures (processes.py)
_LAST = (2**31, 0)  # a member whose team was never configured stands last

Key = tuple[str, str]  # (team, member)


def tree_rss(pid: int) -> int | None:
    """The resident bytes of ``pid`` and its descendants (None: no such process)."""
    tree = process_tree(pid, max_age=_TABLE_AGE, reuse=_TABLE_REUSE)
    return None if tree is None else tree.rss_bytes


@dataclass(eq=False)
class _Waiting:
    """A member in the line."""

    state: MemberState
    kind: Kind
    needs_bytes: int
    learned: bool
    told: Callable[[str], None]  # status's text, each time it changes
    admitted: anyio.Event = field(default_factory=anyio.Event)
    why: str | None = None
    since: float = 0.0

    @property
    def key(self) -> Key:
        return self.state.team, self.state.name


@dataclass(eq=False)
class _Hold:
    """What an admitted member will take and has not taken yet: its footprint, until it is
    up; then what its process tree has not reached yet of it (``running``, last measured at
    ``looked_at``)."""

    needs_bytes: int
    until: float
    running: _Running | None = None
    looked_at: float = 0.0

    @property
    def bytes(self) -> int:
        taken = self.running.peak_bytes if self.running is not None else 0
        return max(self.needs_bytes - taken, 0)


@dataclass(eq=False)
class _Running:
    """A running member whose footprint is being learned: one launch of its process."""

    state: MemberState
    pid: int
    kind: Kind
    launch: str = field(default_factory=lambda: uuid.uuid4().hex)
    peak_bytes: int = 0
    now_bytes: int = 0  # at its last measure
    written_bytes: int = 0


class Admission:
    """The line of members waiting for memory, and what their kinds are learned to take."""

    def __init__(self, footprints: Footprints, memory: MemorySource, *,
                 holds_task: Callable[[str], Awaitable[Mapping[str, str]]],
                 poll_interval: float = POLL_INTERVAL,
                 sample_interval: float = SAMPLE_INTERVAL,
                 measure: Callable[[int], int | None] = tree_rss,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``memory``: where MemAvailable and PSI are read; ``holds_task(team)``: each member's
        current task, by member (the board's: who goes first); ``measure(pid)``: a process
        tree's resident bytes (a test's fake pids measure nothing)."""
        self._footprints = footprints
        self._memory = memory
        self._holds_task = holds_task
        self._poll_interval = poll_interval
        self._sample_interval = sample_interval
        self._measure = measure
        self._clock = clock
        self._reserves: dict[str, int] = {}  # by team
        self._team_order: dict[str, int] = {}  # the running teams, in launch order
        self._teams = itertools.count()
        self._launched: dict[Key, tuple[int, int]] = {}  # its team's launch, its place in it
        self._line: list[_Waiting] = []
        self._holds: dict[Key, _Hold] = {}  # admitted members' footprints not taken yet
        self._running: dict[Key, _Running] = {}
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._unreadable_told = False

    # -- teams --------------------------------------------------------------------------------

    def check(self, config: TeamConfig) -> None:
        """Refuse a team whose reserve leaves a member of this machine no room even on an empty
        machine (``memory_reserve_too_large``): it would wait for ever."""
        memory = self._memory.read()
        if memory is None:
            return
        reserve = config.team.memory_reserve_bytes
        for member in config.members:
            resolved = config.resolved(member)
            if resolved.ssh_host or resolved.kubernetes:  # another machine's memory
                continue
            kind = kind_of(member, sandboxed=resolved.sandbox != "none")
            needs, _ = self._footprints.expected(kind)
            if reserve + needs > memory.total_bytes:
                raise MemoryReserveTooLarge(config.name, config.team.memory_reserve,
                                            member.name, shown_size(needs),
                                            shown_size(memory.total_bytes))

    def configure(self, config: TeamConfig) -> None:
        """The team's reserve and its members' places in the line (again at a relaunch that
        changed the reserve: the line is looked at at once)."""
        team = config.name
        order = self._team_order.setdefault(team, next(self._teams))
        self._reserves[team] = config.team.memory_reserve_bytes
        self._launched.update({(team, m.name): (order, i) for i, m in enumerate(config.members)})
        self._poke()

    def forget(self, team: str) -> None:
        """The team stopped: its reserve and places go, and the line is looked at again."""
        self._reserves.pop(team, None)
        self._team_order.pop(team, None)
        for key in [k for k in self._launched if k[0] == team]:
            del self._launched[key]
            self._holds.pop(key, None)
        self._poke()

    # -- members ------------------------------------------------------------------------------

    async def admit(self, state: MemberState, told: Callable[[str], None]) -> None:
        """Return once the member's process may start: at once when it fits (or runs on
        another host), else when its turn in the line comes and it fits. ``told(text)`` is
        called while it waits (status's ``waiting for memory (…)``, again when that changes).
        Cancelling the wait (the member stopped) takes it out of the line."""
        profile = state.host.profile
        if not profile.local_memory:
            return
        kind = kind_of(state.config, sandboxed=profile.confines_processes)
        needs, learned = self._footprints.expected(kind)
        entry = _Waiting(state, kind, needs, learned, told, since=self._clock())
        self._holds.pop(entry.key, None)  # its earlier launch's, if it never came up
        self._line.append(entry)
        try:
            # members started together (a launch) all join the line before it is looked at:
            # each member's task reaches here before its first wait, in the team file's order
            await anyio.lowlevel.checkpoint()
            await self._round()
            if not entry.admitted.is_set():
                self._poke()  # the loop polls while anyone waits
                await entry.admitted.wait()
        finally:
            self._line.remove(entry)

    async def launched(self, state: MemberState) -> None:
        """The member is up (an observer of the lifecycle): its footprint is measured from
        now on, and its hold shrinks to what its process tree has not taken yet of it (gone
        once taken, or ``SETTLE`` seconds on)."""
        key = (state.team, state.name)
        earlier = self._running.pop(key, None)  # e.g. a launch that was paused
        hold = self._holds.get(key)  # kept while it is measured: a look meanwhile counts it
        running = None
        if state.host.profile.local_memory and state.pid is not None:
            kind = kind_of(state.config, sandboxed=state.host.profile.confines_processes)
            running = self._running[key] = _Running(state, state.pid, kind)
        if hold is not None and running is not None and self._measured(running):
            hold.running, hold.until, hold.looked_at = running, self._clock() + SETTLE, \
                self._clock()
        elif hold is not None:
            del self._holds[key]
        self._poke()
        if earlier is not None:
            await self._keep(earlier, final=True)
        if running is not None:
            await self._sample(running)

    async def exited(self, state: MemberState) -> None:
        """The member's process ended (an observer of the lifecycle): its peak is journaled,
        and the line is looked at again — memory was freed."""
        key = (state.team, state.name)
        self._holds.pop(key, None)
        running = self._running.pop(key, None)
        if running is not None:
            await self._keep(running, final=True)
        self._poke()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Look at the line every ``poll_interval`` while anyone waits (or when poked), and
        measure running members every ``sample_interval``; an idle daemon sleeps."""
        next_sample = self._clock() + self._sample_interval
        while True:
            now = self._clock()
            until = min(now + self._poll_interval if self._line else math.inf,
                        next_sample if self._running else math.inf)
            with anyio.move_on_after(max(until - now, 0.0)):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()
            try:
                if self._line:
                    await self._round()
                if self._running and self._clock() >= next_sample:
                    for running in list(self._running.values()):
                        await self._sample(running)
            except Exception:  # a bug here must not take the daemon down: next pass retries
                log.exception("admission_pass_failed")
            if not self._running or self._clock() >= next_sample:
                next_sample = self._clock() + self._sample_interval

    def _poke(self) -> None:
        self._wake.set()

    async def _round(self) -> None:
        """Admit, in the line's order, each waiting member that fits; stop at the first that
        does not (no one starts ahead of it) and tell the rest why they wait."""
        async with self._lock:
            waiting = [e for e in self._line if not e.admitted.is_set()]
            if not waiting:
                return
            memory = self._memory.read()
            if memory is None:  # no way to know: nobody is kept from starting
                self._tell_unreadable()
                for entry in waiting:
                    entry.admitted.set()
                return
            starting = self._starting_bytes()
            first: _Waiting | None = None
            for entry in await self._ordered(waiting):
                verdict = self._verdict(entry, memory, starting)
                if first is None and verdict.fits:
                    self._admit(entry, verdict, memory, starting)
                    starting += entry.needs_bytes
                    continue
                if first is not None:
                    verdict = behind(verdict, first.state.name)
                first = first or entry
                self._wait(entry, verdict)

    def _verdict(self, entry: _Waiting, memory: HostMemory, starting: int) -> Verdict:
        reserve = self._reserves.get(entry.state.team, 0)
        return decide(memory, needs_bytes=entry.needs_bytes, reserve_bytes=reserve,
                      starting_bytes=starting)

    def _starting_bytes(self) -> int:
        """What members admitted will take and have not taken yet: a member up is measured
        again; a hold is dropped once taken, or past its time (a start that never came up:
        its ``start_timeout``; one up: ``SETTLE``)."""
        now = self._clock()
        for key, hold in list(self._holds.items()):
            running, over = hold.running, hold.until <= now
            if running is not None and not over:
                over = self._running.get(key) is not running  # ended, or a new launch
                if not over and hold.bytes and now - hold.looked_at >= _FLAT:
                    was = running.now_bytes
                    # gone, or it stopped growing below its footprint: it settled
                    over = not self._measured(running) or running.now_bytes <= was
                    hold.looked_at = now
            if over or not hold.bytes:
                del self._holds[key]
        return sum(hold.bytes for hold in self._holds.values())

    async def _ordered(self, waiting: list[_Waiting]) -> list[_Waiting]:
        if len(waiting) == 1:
            return waiting
        holding: dict[str, Mapping[str, str]] = {}
        for team in {e.state.team for e in waiting}:
            try:
                holding[team] = await self._holds_task(team)
            except Exception:  # the board unreadable: launch order alone
                log.exception("admission_tasks_unreadable", team=team)
                holding[team] = {}
        return sorted(waiting, key=lambda e: line_order(
            lead=e.state.config.lead, holds_task=e.state.name in holding[e.state.team],
            launched=self._launched.get(e.key, _LAST)))

    def _admit(self, entry: _Waiting, verdict: Verdict, memory: HostMemory,
               starting: int) -> None:
        state = entry.state
        self._holds[entry.key] = _Hold(entry.needs_bytes,
                                       self._clock() + state.config.start_timeout)
        log.info("member_admitted", team=state.team, member=state.name, kind=entry.kind.kind,
                 needs_bytes=entry.needs_bytes, learned=entry.learned,
                 available_bytes=memory.available_bytes, starting_bytes=starting,
                 reserve_bytes=self._reserves.get(state.team, 0), pressure=memory.pressure,
                 waited=round(self._clock() - entry.since, 3) if entry.why else 0.0,
                 why=verdict.why)
        entry.admitted.set()

    def _wait(self, entry: _Waiting, verdict: Verdict) -> None:
        if verdict.why == entry.why:
            return
        if entry.why is None:
            state = entry.state
            log.warning("member_waiting_for_memory", team=state.team, member=state.name,
                        kind=entry.kind.kind, needs_bytes=entry.needs_bytes,
                        learned=entry.learned, why=verdict.why)
        entry.why = verdict.why
        entry.told(verdict.why)

    def _tell_unreadable(self) -> None:
        if not self._unreadable_told:
            self._unreadable_told = True
            log.warning("admission_memory_unreadable", meminfo=str(self._memory.meminfo),
                        effect="members start without a memory check")

    # -- footprints ---------------------------------------------------------------------------

    async def _sample(self, running: _Running) -> None:
        """Measure one running member's tree; a member whose process is gone (or replaced)
        is journaled one last time and no longer followed."""
        if not self._measured(running):
            key = (running.state.team, running.state.name)
            if self._running.get(key) is running:
                del self._running[key]
            await self._keep(running, final=True)
            return
        await self._keep(running, final=False)

    def _measured(self, running: _Running) -> bool:
        """Measure its tree now (its peak kept); False when its process is gone or is no
        longer the member's (the pid the kernel may give another process is never read)."""
        rss = self._measure(running.pid) if running.state.pid == running.pid else None
        if rss is None:
            return False
        running.now_bytes, running.peak_bytes = rss, max(running.peak_bytes, rss)
        return True

    async def _keep(self, running: _Running, *, final: bool) -> None:
        """Journal the launch's peak when it is new, grew by a tenth, or (``final``) grew at
        all since it was last written."""
        peak, written = running.peak_bytes, running.written_bytes
        if peak <= written or not peak or (not final and written and peak < written * _GROWTH):
            return
        try:
            await self._footprints.record(running.launch, running.kind, peak)
        except Exception:  # a footprint not learned is a default kept: never a member's end
            log.exception("footprint_not_journaled", team=running.state.team,
                          member=running.state.name)
            return
        running.written_bytes = peak
        log.info("member_footprint", team=running.state.team, member=running.state.name,
                 kind=running.kind.kind, place=running.kind.place, peak_bytes=peak)
