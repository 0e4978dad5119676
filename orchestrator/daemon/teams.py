"""The operations the control API exposes, over the supervisor, the mailbox and the journal.

This is where a team is launched (journaled, then its members started), resumed, restarted,
stopped (mailboxes first, then members in reverse start order) and shown. A file launched
again is compared with what the operator wrote — the team file as it was validated, kept
apart before any member starts — never with the running objects the runtimes were handed (a
Codex member's ``config`` tables gain the ``features.multi_agent`` teamctl derives).

The other audiences have their own modules, which ``Teams`` also answers for (the API and the
live view call it): messages (``messages``), costs and budgets (``accounts``), worktrees
(``worktree_ops``); the running teams by name are the ``roster``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from orchestrator.config import TeamConfig
from orchestrator.daemon.ledger import Accounts
from orchestrator.daemon.mailbox import Messages
from orchestrator.daemon.roster import Roster
from orchestrator.daemon.worktree_ops import WorktreeOps
from orchestrator.errors import TeamAlreadyRunning, TeamctlError
from orchestrator.protocol.teams import StatusDoc, TeamStatus
from orchestrator.redaction import add_secrets, secret_name

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence
    from pathlib import Path

    from orchestrator.attachments.planner import Planner
    from orchestrator.contracts import Capabilities
    from orchestrator.daemon.admission import Admission
    from orchestrator.daemon.describe import Descriptions
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.mailbox import Mailbox
    from orchestrator.daemon.members import MemberState, Supervisor
    from orchestrator.daemon.queue import AsyncStore
    from orchestrator.daemon.slots import Slots
    from orchestrator.daemon.worktrees import PlacedWorktrees
    from orchestrator.git_run import GitViews
    from orchestrator.protocol.teams import EgressStatus, ForgeStatusDoc

__all__ = ["Teams"]

log = structlog.get_logger("teamctl.teams")

_SETTLE_MARGIN = 5.0
_RESERVE_CHANGED = "[team] memory_reserve changed"
# a section of the validated file by the name the operator wrote it under
_SECTIONS = {"kubernetes_hosts": "hosts"}


async def _no_forge(_team: str) -> ForgeStatusDoc | None:
    """A core built without a forge service: no team has a forge loop."""
    return None


class Teams:
    def __init__(self, store: AsyncStore, supervisor: Supervisor, mailbox: Mailbox,
                 planner: Planner, capabilities: Mapping[str, Capabilities], *,
                 worktree_root: Path, ledger: Ledger, descriptions: Descriptions,
                 slots: Slots, placed: PlacedWorktrees | None = None,
                 git_views: GitViews | None = None,
                 launch_checks: Sequence[Callable[[TeamConfig], Awaitable[None] | None]] = (),
                 on_change: Callable[[], None],
                 tasks_of: Callable[[str], Awaitable[dict[str, str]]],
                 egress_of: Callable[[str, str], EgressStatus | None],
                 admission: Admission,
                 forge_of: Callable[[str], Awaitable[ForgeStatusDoc | None]] = _no_forge
                 ) -> None:
        """``on_change()``: the set of running teams changed (the change feed: the notify
        service follows it); ``tasks_of(team)``: each member's current task, by member (the
        board's); ``egress_of(team, member)``: a sandboxed member's egress proxy, allowed and
        denied (None: it has none); ``admission``: memory admission, told each team's
        ``memory_reserve``; ``forge_of(team)``: its forge's loop as status shows it."""
        self._admission = admission
        self._descriptions = descriptions
        self._launch_checks = tuple(launch_checks)  # each raises where the team cannot run
        self._ledger = ledger
        self._slots = slots
        self._store = store
        self._supervisor = supervisor
        self._mailbox = mailbox
        self._roster = roster = Roster(store)
        # each running team's file as the operator wrote it (validated, JSON): what a file
        # launched again is compared with, never handed to a runtime
        # each running team's file as written, for a relaunch's comparison: kept as its JSON
        # text (a 100-member team's dump held as objects was ~0.2 MiB of the daemon)
        self._written: dict[str, str] = {}
        self._worktree_ops = WorktreeOps(roster, store, root=worktree_root, placed=placed,
                                         views=git_views)
        self._accounts = Accounts(roster, ledger)
        self._messages = Messages(roster, store, supervisor, mailbox, planner, capabilities,
                                  ledger=ledger, descriptions=descriptions)
        # the other audiences' operations, answered here for the API and the live view
        self.send = self._messages.send
        self.history = self._messages.history
        self.export = self._messages.export
        self.thread = self._messages.thread
        self.usage = self._accounts.usage
        self.prices = self._accounts.prices
        self.budget = self._accounts.budget
        self.worktrees = self._worktree_ops.listed
        self.diff = self._worktree_ops.diff
        self.resolve = roster.resolve
        self.resolve_member = roster.resolve_member
        self._tasks_of = tasks_of
        self._on_change = on_change
        self._egress_of = egress_of
        self._forge_of = forge_of

    def running(self, team: str) -> TeamConfig | None:
        """The running team named ``team`` (None if it does not run)."""
        return self._roster.teams.get(team)

    def names(self) -> list[str]:
        """The running teams' names."""
        return list(self._roster.teams)

    async def launch(self, config: TeamConfig, file: str, *, wait: bool,
                     timeout: float | None) -> TeamStatus:
        """Journal the team and start its members. A team that already runs from the same
        definition (e.g. resumed by a restarted daemon) is reported, not refused; one that
        runs from a different definition is refused with the differences."""
        written = config.model_dump(mode="json")  # before anything is handed the config
        if config.name in self._roster.teams:
            differences = _differences(json.loads(self._written[config.name]), written)
            applied = []
            if differences == [_RESERVE_CHANGED]:  # applied to the running team
                await self._new_reserve(config, written)
                differences, applied = [], ["memory_reserve"]
            if differences:
                raise TeamAlreadyRunning(config.name, differences)
            status = await self._settled(config, timeout, wait=wait)
            return status.model_copy(update={"already_running": True, "applied": applied,
                                             "resumed": config.name in self._roster.resumed})
        for check in self._launch_checks:  # a [notify] that cannot start: refused first
            asking = check(config)  # (a ceiling on an SSH host asks the host)
            if asking is not None:
                await asking
        self._admission.check(config)  # a reserve no member of this machine fits under
        self._descriptions.check(config, file)  # a describer that cannot see: refused first
        await self._ledger.configure(config)  # an unenforceable budget: refused before anything
        await self._slots.assign(config)  # a range with nothing left: refused before anything
        try:
            workdirs = await self._worktree_ops.prepare(config)  # before anything is journaled
            await self._store.save_team(config.name, file, written,
                                        [(m.name, m.runtime) for m in config.members])
        except BaseException:
            self._slots.stopped(config.name)  # it does not run: its values may be taken back
            raise
        self._start(config, written, workdirs)
        log.info("team_launched", team=config.name, members=len(config.members), file=file)
        return await self._settled(config, timeout, wait=wait)

    async def _new_reserve(self, config: TeamConfig, written: dict[str, Any]) -> None:
        """A file launched again that changes ``[team] memory_reserve`` alone: the running
        team takes the new reserve (members waiting for memory are looked at again at once),
        journaled for a restarted daemon's resume."""
        running = self._roster.teams[config.name]
        self._admission.check(config)
        await self._store.set_team_config(config.name, written)
        self._written[config.name] = json.dumps(written)
        self._admission.configure(config)
        log.info("memory_reserve_changed", team=config.name,
                 was=running.team.memory_reserve, now=config.team.memory_reserve)

    async def _settled(self, config: TeamConfig, timeout: float | None, *,
                       wait: bool) -> TeamStatus:
        """The team's status — with ``wait``, once each member is ready, has failed, or
        waits for memory (within ``timeout``): one admitted while the status was read is
        waited for and the status read again."""
        limit = timeout or max(m.start_timeout for m in config.members) + _SETTLE_MARGIN
        deadline = anyio.current_time() + limit
        while True:
            if wait:
                await self._supervisor.wait_settled(config.name,
                                                    max(deadline - anyio.current_time(), 0.0))
            status = await self._team_status(config.name)
            if not wait or self._supervisor.settled(config.name) \
                    or anyio.current_time() >= deadline:
                return status

    def _start(self, config: TeamConfig, written: dict[str, Any],
               workdirs: Mapping[str, Path]) -> None:
        """Run the team; ``written``: its file as the operator wrote it (a relaunch's
        comparison)."""
        for member in config.members:  # never shown anywhere, whatever their shape
            add_secrets(value for key, value in member.env.items() if secret_name(key))
        self._written[config.name] = json.dumps(written)
        self._roster.teams[config.name] = config
        self._on_change()
        self._admission.configure(config)  # before any member asks it
        self._supervisor.start_team(config, workdirs)
        for member in config.members:
            self._mailbox.open_member(config.name, member.name)

    async def resume_desired(self) -> list[str]:
        """On daemon start: launch again the teams the journal says should run."""
        names = []
        for record in await self._store.teams(desired="running"):
            config = TeamConfig.model_validate(record.config)
            written = config.model_dump(mode="json")  # as a launch of the same file has it
            try:
                await self._ledger.configure(config)
                await self._slots.assign(config)
                workdirs = await self._worktree_ops.prepare(config)
            except TeamctlError as exc:
                self._slots.stopped(config.name)
                log.error("team_resume_failed", team=config.name, code=exc.code,
                          error=exc.message)
                continue
            self._start(config, written, workdirs)
            self._roster.resumed.add(config.name)
            names.append(config.name)
            log.info("team_resumed", team=config.name)
        return names

    async def stop(self, team: str | None) -> list[str]:
        """Stop one team, or (``team`` None) every team in reverse launch order."""
        names = [self._roster.resolve(team).name] if team else list(reversed(self._roster.teams))
        for name in names:
            await self._halt(name)
            await self._store.set_team_desired(name, "stopped")
            log.info("team_stopped", team=name)
        return names

    async def shutdown(self) -> None:
        """Daemon exit (SIGTERM): stop members, keep the teams' desired state."""
        for name in list(reversed(self._roster.teams)):
            await self._halt(name)

    async def _halt(self, name: str) -> None:
        """Mailboxes first (an in-flight turn goes back to the queue), then the members in
        reverse start order."""
        await self._mailbox.close_team(name)
        await self._supervisor.stop_team(name)
        self._admission.forget(name)
        self._roster.teams.pop(name, None)
        self._slots.stopped(name)
        self._written.pop(name, None)
        self._roster.resumed.discard(name)
        self._on_change()  # after the members' own: the team is gone now

    async def status(self, team: str | None) -> StatusDoc:
        names = [self._roster.resolve(team).name] if team else list(self._roster.teams)
        return StatusDoc(teams=[await self._team_status(name) for name in names])

    async def _team_status(self, team: str) -> TeamStatus:
        queued = await self._store.queued_counts(team)
        members = [state.snapshot(queued.get(state.name, 0))
                   for state in self._supervisor.members(team)]
        tasks = await self._tasks_of(team)
        members = [m.model_copy(update={"egress": self._egress_of(team, m.name),
                                        "task": tasks.get(m.name),
                                        "slots": self._slots.env_of(team, m.name)})
                   for m in members]
        accounts = self._accounts
        members = [m.model_copy(update={"spend": accounts.spend(team, m.name),
                                        "hold": accounts.hold(team, m.name),
                                        "account": accounts.account(team, m.name)})
                   for m in members]
        return TeamStatus(name=team, members=members, spend=accounts.spend(team, None),
                          forge=await self._forge_of(team))

    async def restart(self, team: str | None, member: str) -> TeamStatus:
        config, member = self._roster.resolve_member(team, member)
        state: MemberState = await self._supervisor.restart_member(config.name, member)
        log.info("member_restart_requested", team=config.name, member=member)
        await self._supervisor.wait_settled_member(state, state.config.start_timeout
                                                   + _SETTLE_MARGIN)
        return await self._team_status(config.name)


def _differences(running: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """What differs between the file the running team was launched from and a file launched
    again, both as the operator wrote them (validated, JSON): member names, keys and sections
    only — values may be secrets."""
    if running == wanted:
        return []
    old = {m["name"]: m for m in running["members"]}
    new = {m["name"]: m for m in wanted["members"]}
    found = []
    if added := [n for n in new if n not in old]:
        found.append("members added: " + ", ".join(added))
    if removed := [n for n in old if n not in new]:
        found.append("members removed: " + ", ".join(removed))
    found += [f"{name}: {', '.join(keys)} changed" for name in new if name in old
              if (keys := _changed_keys(old[name], new[name]))]
    if keys := _changed_keys(running["team"], wanted["team"]):
        found.append(f"[team] {', '.join(keys)} changed")
    sections = {_SECTIONS.get(k, k) for k in _changed_keys(running, wanted)}
    found += [f"[{section}] changed" for section in sorted(sections - {"team", "members"})]
    if [m["name"] for m in running["members"]] != [m["name"] for m in wanted["members"]] \
            and not found:
        found.append("the members' order changed")
    return found


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The keys whose values differ between two tables of a team file (in the file's order)."""
    keys = [*new, *(k for k in old if k not in new)]
    return [k for k in keys if old.get(k) != new.get(k)]
