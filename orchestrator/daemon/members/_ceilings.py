"""The governor of members' ceilings (docs/operations.md, "A ceiling per teammate").

A member with ``memory_max``, ``memory_high``, ``cpu_weight`` or ``pids_max`` runs — its
runtime, its tools, its MCP server, its sandbox — in a cgroup of its own under teamctl's
(``orchestrator.cgroups``: v2 or v1, whichever its machine offers), never the daemon's:

- ``check`` (a launch check): a ceiling nothing can hold is refused before anything starts
  (``resource_limits_unavailable``, naming what to enable) — a cgroup made and removed proves
  it, here or, for a member on an SSH host, there (``contracts.CgroupsThere``: the host's
  remote side makes it; a host that cannot be reached now is asked again at the start); one
  in a pod is its container's resources (its host holds them: ``HostProfile.holds_ceiling``),
  where ``pids_max`` cannot go;
- ``contain`` (around each start of the member's process, the lifecycle's one call): the
  cgroup made with the limits — here, the member's host told to start its processes inside
  (``contracts.CgroupHost``), or there, by its host —; when the process has ended, what the
  kernel did there is read — an OOM kill is ``member_memory_exceeded`` with the peak, and
  ``exceeded`` says why the process ended —, what it left running is killed, and the cgroup
  removed.

What a dead daemon left in this home's cgroups here (a process the orphan reaper did not find,
the empty cgroups) is stopped and removed when the first is made; on a host, a member's next
start empties what an earlier one left in its cgroup.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.ceilings import refused_elsewhere, shown_size
from orchestrator.cgroups import CgroupError, Cgroups, Group
from orchestrator.contracts import CgroupClosed, cgroup_host, cgroups_there
from orchestrator.errors import MemberStartFailed, ResourceLimitsUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from orchestrator.ceilings import Ceiling
    from orchestrator.config import MemberConfig, TeamConfig
    from orchestrator.contracts import CgroupHost, CgroupsThere
    from orchestrator.daemon.members._launch import HostFactory
    from orchestrator.daemon.members.state import MemberState

__all__ = ["Ceilings", "Contained"]

log = structlog.get_logger("teamctl.ceilings")

EMPTY_DEADLINE = 5.0  # what a member left in its cgroup is gone by then (SIGKILL), or it stays
_EMPTY_POLL = 0.02


class Ceilings:
    """Every member's cgroup, made under ``teamctl-<home id>`` in its machine's hierarchies."""

    def __init__(self, cgroups: Cgroups, home_id: Callable[[], str], *,
                 hosts: HostFactory) -> None:
        """``home_id``: this home's id (asked once, when a ceiling is first held): two
        teamctl homes' members never share teamctl's group; ``hosts``: a member's host as
        the launch check asks it (built without its sandbox: nothing of a start made)."""
        self._cgroups = cgroups
        self._home_id = home_id
        self._hosts = hosts
        self._name: str | None = None
        self._swept = False
        self._proved: set[frozenset[str]] = set()  # controllers a made cgroup proved here

    @property
    def name(self) -> str:
        """teamctl's group's name, ``teamctl-<home id>``: here and on every host."""
        if self._name is None:
            self._name = f"teamctl-{self._home_id()}"
        return self._name

    @property
    def top(self) -> str:
        """teamctl's group here; what a dead daemon left in it is stopped and removed when
        it is first named (``Cgroups.sweep``)."""
        if not self._swept:
            self._swept = True
            swept, killed = self._cgroups.sweep(self.name)
            if killed:
                log.warning("cgroup_orphans_stopped", pids=sorted(killed))
            if swept:
                log.info("cgroups_swept", paths=[str(p) for p in swept])
        return self.name

    async def check(self, config: TeamConfig) -> None:
        """A launch check: each member's ceiling can be held where it runs, else
        ResourceLimitsUnavailable naming the member, its keys and what to enable."""
        asked: dict[tuple[str | None, frozenset[str]], str | None] = {}  # host's answers
        for member in config.members:
            resolved = config.resolved(member)
            ceiling = resolved.ceiling
            if ceiling is None:
                continue
            refused = refused_elsewhere(ceiling, in_pod=resolved.kubernetes is not None)
            if refused is not None:
                raise ResourceLimitsUnavailable(member.name, *refused)
            if resolved.kubernetes is not None:
                continue
            if resolved.ssh_host is not None:
                await self._check_there(config, member, ceiling, asked)
                continue
            if ceiling.controllers in self._proved:
                continue
            problem = await anyio.to_thread.run_sync(  # named (and swept) on the loop
                self._cgroups.probe, ceiling.controllers, self.top)
            if problem is not None:
                raise ResourceLimitsUnavailable(member.name, ceiling.keys, problem)
            self._proved.add(ceiling.controllers)

    async def _check_there(self, config: TeamConfig, member: MemberConfig, ceiling: Ceiling,
                           asked: dict[tuple[str | None, frozenset[str]], str | None]) -> None:
        """A member on another machine: its host makes a cgroup there and removes it (once
        per host and controllers in a launch). A host that cannot be asked now (down, its
        key unknown...) is left to the start, which asks again and fails typed."""
        host = self._hosts(config, member)
        there = cgroups_there(host)
        if there is None:
            raise ResourceLimitsUnavailable(member.name, ceiling.keys,
                                            f"its host {host.name} makes no cgroup")
        key = (host.name, ceiling.controllers)
        if key not in asked:
            try:
                asked[key] = await there.cgroup_problem(ceiling.controllers, self.name)
            except MemberStartFailed as exc:
                log.warning("ceiling_check_deferred", team=config.name, member=member.name,
                            host=host.name, code=exc.code, error=exc.message[:300])
                asked[key] = None
        problem = asked[key]
        if problem is not None:
            raise ResourceLimitsUnavailable(member.name, ceiling.keys, problem)

    def contain(self, state: MemberState) -> Contained:
        """One start of ``state``'s process held to its ceiling (an async context manager)."""
        return Contained(self, state)

    async def make(self, state: MemberState, ceiling: Ceiling) -> Group:
        name = f"{state.team}.{state.name}"
        top = self.top  # named (and swept, the first time) on the loop: never two sweeps
        try:
            return await anyio.to_thread.run_sync(
                lambda: self._cgroups.make(ceiling.controllers, top, name, ceiling))
        except CgroupError as exc:
            raise ResourceLimitsUnavailable(state.name, ceiling.keys, str(exc)) from None

    async def close(self, state: MemberState, group: Group, ceiling: Ceiling) -> str | None:
        """After the process ended: what the kernel did in its cgroup here, what it left
        killed, the cgroup removed (``report``)."""
        cgroups = self._cgroups
        verdict = await anyio.to_thread.run_sync(lambda: cgroups.verdict(group))
        found = left = await anyio.to_thread.run_sync(lambda: cgroups.pids(group))
        if left:
            await anyio.to_thread.run_sync(lambda: cgroups.kill(group))
            deadline = time.monotonic() + EMPTY_DEADLINE
            while left and time.monotonic() < deadline:
                await anyio.sleep(_EMPTY_POLL)
                left = await anyio.to_thread.run_sync(lambda: cgroups.pids(group))
        top = self.top
        removed = await anyio.to_thread.run_sync(lambda: cgroups.remove(group, top))
        return report(state, ceiling, CgroupClosed(verdict.oom_kills, verdict.peak,
                                                   tuple(sorted(found)), removed,
                                                   str(group.paths[0])))


def report(state: MemberState, ceiling: Ceiling, closed: CgroupClosed) -> str | None:
    """What a member's cgroup saw once its process ended, logged — an OOM kill is
    ``member_memory_exceeded`` with the peak; what it left running, ``member_cgroup_leftovers``;
    a cgroup something in it outlived the deadline in, ``member_cgroup_busy`` — and why the
    process ended, if its memory did it (None: it did not)."""
    where: dict[str, Any] = {"team": state.team, "member": state.name, "cgroup": closed.where}
    if state.host.name is not None:
        where["host"] = state.host.name
    if closed.left:
        log.info("member_cgroup_leftovers", **where, pids=list(closed.left))
    if not closed.removed:
        log.warning("member_cgroup_busy", **where, pids=list(closed.left))
    if not closed.oom_kills:
        return None
    peak = "unknown" if closed.peak is None else shown_size(closed.peak)
    what = "the machine's memory ran out (it has no memory_max)" \
        if ceiling.memory_max is None else f"memory_max {shown_size(ceiling.memory_max)} exceeded"
    log.warning("member_memory_exceeded", **where, memory_max=ceiling.memory_max,
                peak=closed.peak, peak_shown=peak, oom_kills=closed.oom_kills)
    return (f"{what}: the kernel's OOM killer ended {closed.oom_kills} "
            f"process{'es' if closed.oom_kills > 1 else ''} in its cgroup (peak {peak})")


class Contained:
    """One start of a member's process in its cgroup (none without a ceiling, or where its
    host holds it). ``exceeded``, once left: why the process ended, if its memory did it."""

    def __init__(self, ceilings: Ceilings, state: MemberState) -> None:
        self._ceilings = ceilings
        self._state = state
        self._group: Group | None = None
        self._starts: CgroupHost | None = None  # its host, as the one that enters cgroups
        self._there: CgroupsThere | None = None  # its host, as the one that makes its cgroup
        self.exceeded: str | None = None

    async def __aenter__(self) -> Contained:
        state, ceiling = self._state, self._state.member.ceiling
        if ceiling is None or state.host.profile.holds_ceiling:
            return self
        there = cgroups_there(state.host)
        if there is not None:  # on its host: made there, entered by the start there
            await there.make_cgroup(self._ceilings.name, f"{state.team}.{state.name}", ceiling)
            self._there = there
            return self
        starts = cgroup_host(state.host)
        if starts is None:
            raise ResourceLimitsUnavailable(state.name, ceiling.keys, "its host cannot start "
                                            "it in a cgroup")
        self._group = await self._ceilings.make(state, ceiling)
        self._starts = starts
        starts.enter_cgroups(self._group.procs)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> Any:
        state, ceiling = self._state, self._state.member.ceiling
        if ceiling is None:
            return None
        with anyio.CancelScope(shield=True):
            try:
                if self._there is not None:
                    closed = await self._there.close_cgroup(EMPTY_DEADLINE)
                    if closed is not None:
                        self.exceeded = report(state, ceiling, closed)
                elif self._group is not None and self._starts is not None:
                    self._starts.enter_cgroups(())
                    self.exceeded = await self._ceilings.close(state, self._group, ceiling)
            except (OSError, MemberStartFailed) as exc:  # the member's end, never the daemon's
                log.error("member_cgroup_close_failed", team=state.team, member=state.name,
                          host=state.host.name, code=getattr(exc, "code", None),
                          error=str(getattr(exc, "reason", exc))[:300])
        return None
