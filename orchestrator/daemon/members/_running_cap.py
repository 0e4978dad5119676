"""``max_running``: at most N of a team's members' processes live at once (docs/scaling.md,
"At most N running").

A member holds a *running slot* from its start until it falls asleep or its life ends; a
restart or a recycle keeps it (its process comes back at once). At a launch the first N
members by rank start — the lead, then the members holding a task, then the team file's
order — and the others begin asleep, never started: their first message starts them
(members/_sleep.py). A member a turn wants (woken, or restarted by the operator) takes a free
slot; past the cap, the longest-idle running member — no turn in flight, not claiming one, and
not one just woken whose queue has not claimed the turn that woke it yet — is put to sleep for
it, and when none can be (every one is busy) it waits, its activity saying so: ``waiting for a
running slot (max_running = 10)``. Waiters are served by rank, then in the order they came.

What it knows of a member it reads from the member's own state (its launch, its turn slot),
told of every change by the supervisor (``seen``); the board's tasks through ``holding``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.members._sleep import fall_asleep
from orchestrator.daemon.members.state import LaunchState

if TYPE_CHECKING:
    from orchestrator.daemon.members.state import MemberState

__all__ = ["Holding", "RunningCap"]

log = structlog.get_logger("teamctl.supervisor")

# the team's members holding a task on its board (the board's, late-bound: built after)
Holding = Callable[[str], Awaitable[Collection[str]]]
# still on its way to sleep, for the cap: its slot is about to be freed
_FALLING = frozenset({LaunchState.FALLING_ASLEEP, LaunchState.ASLEEP})
_seq = itertools.count()


@dataclass(eq=False)
class _Waiter:
    name: str
    rank: tuple[bool, bool]  # (not the lead, holds no task): False first
    seq: int = field(default_factory=lambda: next(_seq))

    @property
    def order(self) -> tuple[bool, bool, int]:
        return (*self.rank, self.seq)


@dataclass(eq=False)
class _Team:
    """One team's slots under its cap."""

    limit: int
    holders: set[str] = field(default_factory=set)  # members holding a running slot
    idle_since: dict[str, float] = field(default_factory=dict)  # running and idle since
    waiting: list[_Waiter] = field(default_factory=list)
    falling: set[str] = field(default_factory=set)  # falling asleep: slot not freed yet
    # started for a turn that wants them, their queue not looked at yet: never put to sleep
    # before it has (two waiters would take each other's slot for ever, serving nothing)
    woken: set[str] = field(default_factory=set)
    first: frozenset[str] | None = None  # who starts at the launch (None: not ranked yet)
    ranking: anyio.Lock = field(default_factory=anyio.Lock)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def bump(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class RunningCap:
    """Each capped team's running slots (``place``d when it starts); a team without
    ``max_running`` is not in it, and its members take no slot."""

    def __init__(self, *, members: Callable[[str], list[MemberState]], holding: Holding,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``members``: a team's members now (the supervisor's roster); ``holding``: the
        team's members holding a task; ``clock``: for how long a member has been idle."""
        self._members = members
        self._holding = holding
        self._clock = clock
        self._teams: dict[str, _Team] = {}

    def place(self, team: str, limit: int | None) -> None:
        """The team starts with ``limit`` (None: no cap)."""
        self._teams.pop(team, None)
        if limit is not None:
            self._teams[team] = _Team(limit)

    def forget(self, team: str) -> None:
        """The team stopped."""
        self._teams.pop(team, None)

    def seen(self, state: MemberState) -> None:
        """Something of ``state`` changed (the supervisor tells of each): whether it is idle,
        whether it falls asleep (its slot soon free), or is back from falling asleep (its place
        would not suspend); a waiter looks again."""
        team = self._teams.get(state.team)
        if team is None:
            return
        if state.process is None or state.slot.busy or state.slot.claiming:
            team.idle_since.pop(state.name, None)
        else:
            team.idle_since.setdefault(state.name, self._clock())
        if state.launch_state is LaunchState.FALLING_ASLEEP and state.name in team.holders:
            team.falling.add(state.name)  # its own pause_after: its slot is about to be free
        elif state.name in team.falling and state.launch_state not in _FALLING:
            team.falling.discard(state.name)
        if team.waiting:
            team.bump()

    def looked(self, state: MemberState) -> None:
        """The member's queue claimed its next turn, or found none: a member woken for it
        may be put to sleep again from now on."""
        team = self._teams.get(state.team)
        if team is not None and state.name in team.woken:
            team.woken.discard(state.name)
            self.seen(state)

    @asynccontextmanager
    async def slot(self, state: MemberState) -> AsyncIterator[str | None]:
        """Hold a running slot while the block runs: yields None, or why the member is not
        started (past the cap at its launch: it sleeps until its first message). Waits (with
        no deadline: a turn waits in the journal meanwhile) for a member that a turn wants;
        cancelling the wait is safe."""
        team = self._teams.get(state.team)
        if team is None:
            yield None
            return
        refused = await self._take(team, state)
        try:
            yield refused
        finally:
            if refused is None:
                self._release(team, state.name)

    async def _take(self, team: _Team, state: MemberState) -> str | None:
        # woken by a turn, or started again by ``teamctl restart`` (a fresh state that counts
        # the restart); else its team's launch (or the daemon's resume of it)
        wanted = state.waking or state.epoch > 0 or state.restarts > 0
        if wanted:
            await self._wait(team, state)
            return None
        if state.name in await self._first(team, state.team) and len(team.holders) < team.limit:
            team.holders.add(state.name)
            return None
        return f"past max_running = {team.limit} at the launch"

    async def _first(self, team: _Team, team_name: str) -> frozenset[str]:
        """Who starts at the team's launch: the first ``limit`` by rank."""
        async with team.ranking:
            if team.first is None:
                held = await self._held(team_name)
                ranked = sorted(enumerate(self._members(team_name)),
                                key=lambda pair: (*_rank(pair[1], held), pair[0]))
                team.first = frozenset(s.name for _, s in ranked[:team.limit])
            return team.first

    async def _held(self, team: str) -> Collection[str]:
        try:
            return await self._holding(team)
        except Exception:  # the journal refused the read: rank without the board
            log.exception("running_cap_board_unread", team=team)
            return ()

    async def _wait(self, team: _Team, state: MemberState) -> None:
        """Until a slot is this member's: free, or freed by putting the longest-idle running
        member to sleep; waiters by rank, then in the order they came."""
        waiter = _Waiter(state.name, _rank(state, await self._held(state.team)))
        team.waiting.append(waiter)
        try:
            while True:
                changed = team.changed
                free = team.limit - len(team.holders)
                ahead = sorted(team.waiting, key=lambda w: w.order)
                if waiter in ahead[:max(free, 0)]:
                    team.holders.add(state.name)
                    if state.waking:  # its queue's runner waits in turn_slot: it will look
                        team.woken.add(state.name)
                    return
                self._make_room(team, state, len(ahead) - free - len(team.falling))
                served = ahead.index(waiter) < free + len(team.falling)  # once one is asleep
                self._say_waiting(state, None if served else
                                  f"waiting for a running slot (max_running = {team.limit})")
                await changed.wait()
        finally:
            team.waiting.remove(waiter)
            if state.waiting is not None:
                state.waiting = None
                state.notify()

    def _make_room(self, team: _Team, state: MemberState, needed: int) -> None:
        """Put up to ``needed`` idle running members to sleep, the longest idle first."""
        idle = sorted((since, name) for name, since in team.idle_since.items()
                      if name in team.holders and name not in team.falling | team.woken)
        by_name = {s.name: s for s in self._members(state.team)}
        for _, name in idle:
            if needed <= 0:
                return
            member = by_name.get(name)
            if member is not None and fall_asleep(
                    member, f"its running slot given to {state.name} "
                            f"(max_running = {team.limit})"):
                team.falling.add(name)
                needed -= 1

    @staticmethod
    def _say_waiting(state: MemberState, text: str | None) -> None:
        """Its activity says it waits (None: a member is falling asleep for it)."""
        if state.waiting != text:
            state.waiting = text
            if text is not None:
                log.info("member_waiting", team=state.team, member=state.name, why=text)
            state.notify()

    @staticmethod
    def _release(team: _Team, member: str) -> None:
        team.holders.discard(member)
        team.falling.discard(member)
        team.woken.discard(member)
        team.idle_since.pop(member, None)
        team.bump()


def _rank(state: MemberState, held: Collection[str]) -> tuple[bool, bool]:
    """The lead first, then the members holding a task."""
    return (not state.config.lead, state.name not in held)
