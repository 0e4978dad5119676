"""The operations the control API exposes, over the supervisor, the mailbox and the journal.

This is where a team name is resolved (``--team`` may be omitted when one team runs), a team
is launched (journaled, then its members started) and stopped (mailboxes first, then members in
reverse start order).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.attachments.planner import Planner, Target
from orchestrator.config import TeamConfig
from orchestrator.costs.prices import load_prices
from orchestrator.daemon import worktrees
from orchestrator.errors import (
    AmbiguousTeam,
    MemberHeld,
    MemberUnavailable,
    NotFound,
    TeamAlreadyRunning,
    TeamctlError,
    UsageError,
    unwrap_group,
)
from orchestrator.redaction import add_secrets, secret_name
from orchestrator.wire import (
    BudgetDoc,
    DiffDoc,
    DryRunPlan,
    ExportDoc,
    ExportedMember,
    ExportedMessage,
    HistoryDoc,
    KeptWorktree,
    PriceRow,
    PricesDoc,
    SendResult,
    Spend,
    StatusDoc,
    TeamStatus,
    ThreadDoc,
    UsageDoc,
    UsageRow,
    WorktreeInfo,
    WorktreesDoc,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.contracts import Capabilities, Description
    from orchestrator.daemon.describe import Descriptions
    from orchestrator.daemon.ledger import By, Ledger
    from orchestrator.daemon.mailbox import Mailbox
    from orchestrator.daemon.store import AsyncStore, Delivery, Origin
    from orchestrator.daemon.supervisor import MemberState, Supervisor

__all__ = ["Teams"]


async def _first(events: list[anyio.Event]) -> None:
    """Wait until any of ``events`` is set."""
    async with anyio.create_task_group() as tg:
        async def one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(one, event)


def _hold_text(ledger: Ledger, team: str, member: str) -> str | None:
    hold = ledger.hold(team, member)
    return None if hold is None else hold.describe()

log = structlog.get_logger("teamctl.teams")

_SETTLE_MARGIN = 5.0


class Teams:
    def __init__(self, store: AsyncStore, supervisor: Supervisor, mailbox: Mailbox,
                 planner: Planner, capabilities: Mapping[str, Capabilities], *,
                 worktree_root: Path, ledger: Ledger | None = None,
                 descriptions: Descriptions | None = None) -> None:
        self._worktree_root = worktree_root
        self._descriptions = descriptions
        self._ledger = ledger
        self._prune_lock = anyio.Lock()
        self._store = store
        self._supervisor = supervisor
        self._mailbox = mailbox
        self._planner = planner
        self._capabilities = capabilities
        self._running: dict[str, TeamConfig] = {}
        self._resumed: set[str] = set()  # teams this daemon resumed from the journal

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, team: str | None) -> TeamConfig:
        """The running team named ``team``, or the only running team."""
        if team is None:
            if len(self._running) == 1:
                return next(iter(self._running.values()))
            if not self._running:
                raise NotFound("running team", "(any)", [])
            raise AmbiguousTeam(list(self._running))
        if team not in self._running:
            raise NotFound("running team", team, list(self._running))
        return self._running[team]

    def resolve_member(self, team: str | None, member: str) -> tuple[TeamConfig, str]:
        config = self.resolve(team)
        if config.member(member) is None:
            raise NotFound("member", member, [m.name for m in config.members])
        return config, member

    async def _resolve_any(self, team: str | None) -> str:
        """For history: a running team, else any team the journal knows."""
        if team is None or team in self._running:
            return self.resolve(team).name
        known = [t.name for t in await self._store.teams()]
        if team not in known:
            raise NotFound("team", team, known)
        return team

    # -- operations ---------------------------------------------------------------------------

    async def launch(self, config: TeamConfig, file: str, *, wait: bool,
                     timeout: float | None) -> TeamStatus:
        """Journal the team and start its members. A team that already runs from the same
        definition (e.g. resumed by a restarted daemon) is reported, not refused; one that
        runs from a different definition is refused with the differences."""
        running = self._running.get(config.name)
        if running is not None:
            differences = _differences(running, config)
            if differences:
                raise TeamAlreadyRunning(config.name, differences)
            if wait:
                await self._settle(config, timeout)
            status = await self._team_status(config.name)
            return status.model_copy(update={"already_running": True,
                                             "resumed": config.name in self._resumed})
        if self._descriptions is not None:  # a describer that cannot see: refused first
            self._descriptions.check(config, file)
        if self._ledger is not None:  # an unenforceable budget is refused before anything
            await self._ledger.configure(config)
        workdirs = await self._worktrees(config)  # before anything is journaled or started
        await self._store.save_team(config.name, file, config.model_dump(mode="json"),
                                    [(m.name, m.runtime) for m in config.members])
        self._start(config, workdirs)
        log.info("team_launched", team=config.name, members=len(config.members), file=file)
        if wait:
            await self._settle(config, timeout)
        return await self._team_status(config.name)

    async def _settle(self, config: TeamConfig, timeout: float | None) -> None:
        limit = timeout or max(m.start_timeout for m in config.members) + _SETTLE_MARGIN
        await self._supervisor.wait_settled(config.name, limit)

    async def _worktrees(self, config: TeamConfig) -> dict[str, Path]:
        """Each ``worktree = true`` member's worktree (made, or reused from the journal), and
        the member's workdir inside it."""
        known = {w.member: w for w in await self._store.worktrees(config.name)}
        workdirs: dict[str, Path] = {}
        for member in config.members:
            if not config.member_worktree(member):
                continue
            workdir = config.member_workdir(member)
            tree = await anyio.to_thread.run_sync(
                worktrees.create, self._worktree_root, config.name, member.name, workdir,
                config.member_base(member), known.get(member.name))
            if tree is not known.get(member.name):
                await self._store.save_worktree(tree)
                log.info("worktree_created", team=config.name, member=member.name,
                         path=str(tree.path), branch=tree.branch, base=tree.base)
            workdirs[member.name] = await anyio.to_thread.run_sync(worktrees.workdir_in, tree,
                                                                   workdir)
        return workdirs

    def _start(self, config: TeamConfig, workdirs: Mapping[str, Path]) -> None:
        for member in config.members:  # never shown anywhere, whatever their shape
            add_secrets(value for key, value in member.env.items() if secret_name(key))
        self._running[config.name] = config
        self._supervisor.start_team(config, workdirs)
        for member in config.members:
            self._mailbox.open_member(config.name, member.name)

    async def resume_desired(self) -> list[str]:
        """On daemon start: launch again the teams the journal says should run."""
        names = []
        for record in await self._store.teams(desired="running"):
            config = TeamConfig.model_validate(record.config)
            try:
                if self._ledger is not None:
                    await self._ledger.configure(config)
                workdirs = await self._worktrees(config)
            except TeamctlError as exc:
                log.error("team_resume_failed", team=config.name, code=exc.code,
                          error=exc.message)
                continue
            self._start(config, workdirs)
            self._resumed.add(config.name)
            names.append(config.name)
            log.info("team_resumed", team=config.name)
        return names

    async def stop(self, team: str | None) -> list[str]:
        """Stop one team, or (``team`` None) every team in reverse launch order."""
        names = [self.resolve(team).name] if team else list(reversed(self._running))
        for name in names:
            await self._halt(name)
            await self._store.set_team_desired(name, "stopped")
            log.info("team_stopped", team=name)
        return names

    async def shutdown(self) -> None:
        """Daemon exit (SIGTERM): stop members, keep the teams' desired state."""
        for name in list(reversed(self._running)):
            await self._halt(name)

    async def _halt(self, name: str) -> None:
        """Mailboxes first (an in-flight turn goes back to the queue), then the members in
        reverse start order."""
        await self._mailbox.close_team(name)
        await self._supervisor.stop_team(name)
        self._running.pop(name, None)
        self._resumed.discard(name)

    async def status(self, team: str | None) -> StatusDoc:
        names = [self.resolve(team).name] if team else list(self._running)
        return StatusDoc(teams=[await self._team_status(name) for name in names])

    async def _team_status(self, team: str) -> TeamStatus:
        queued = await self._store.queued_counts(team)
        members = [state.snapshot(queued.get(state.name, 0))
                   for state in self._supervisor.members(team)]
        ledger = self._ledger
        if ledger is None:
            return TeamStatus(name=team, members=members)
        members = [m.model_copy(update={"spend": self._spend(team, m.name),
                                        "hold": _hold_text(ledger, team, m.name)})
                   for m in members]
        return TeamStatus(name=team, members=members, spend=self._spend(team, None))

    def _spend(self, team: str, member: str | None) -> Spend:
        assert self._ledger is not None
        key = (team, member or "")
        spent, budget = self._ledger.spent(key), self._ledger.budget(team, member)
        return Spend(cost_usd=round(spent.cost_usd, 6), cost_unknown=spent.unknown,
                     tokens=spent.tokens.total, budget_usd=budget.usd,
                     budget_tokens=budget.tokens)

    # -- costs and budgets (docs/costs.md) ------------------------------------------------------

    def _accounts(self) -> Ledger:
        if self._ledger is None:
            raise UsageError("this daemon keeps no ledger")
        return self._ledger

    async def usage(self, team: str | None, by: By) -> UsageDoc:
        name = None if team is None else await self._resolve_any(team)
        rows = [UsageRow(team=r["team"], group=str(r["key"] or "(unknown)"), turns=r["turns"],
                         input_tokens=r["i"] or 0, cached_input_tokens=r["c"] or 0,
                         output_tokens=r["o"] or 0, reasoning_output_tokens=r["r"] or 0,
                         cost_usd=round(r["usd"] or 0.0, 6), cost_unknown=r["unknown"] or 0)
                for r in await self._accounts().usage(name, by)]
        return UsageDoc(by=by, rows=rows, total_usd=round(sum(r.cost_usd for r in rows), 6),
                        total_tokens=sum(r.input_tokens + r.output_tokens for r in rows))

    def prices(self) -> PricesDoc:
        table = load_prices()
        return PricesDoc(checked=table.checked, sources=table.sources, models=[
            PriceRow(model=model, input=p.input, cached_input=p.cached_input, output=p.output,
                     source=p.source) for model, p in table.items()])

    async def budget(self, team: str | None, member: str | None,
                     **change: float | int | bool | None) -> BudgetDoc:
        """Change (or, with no change, show) a member's budget — ``member`` None: the team's.
        Raising it releases a member held by it; its queue goes on."""
        config = self.resolve(team)
        if member is not None:
            config, member = self.resolve_member(config.name, member)
        ledger = self._accounts()
        if any(value not in (None, False) for value in change.values()):
            await ledger.set_budget(config.name, member, **change)  # type: ignore[arg-type]
        return BudgetDoc(team=config.name, member=member,
                         spend=self._spend(config.name, member),
                         hold=None if member is None else _hold_text(ledger, config.name,
                                                                     member))

    async def send(self, team: str | None, member: str, text: str, *, wait: bool,
                   timeout: float, attachments: Sequence[str] = (),
                   dry_run: bool = False, origin: Origin | None = None
                   ) -> SendResult | DryRunPlan:
        """Plan the attachments (refusing the whole message on any failure), then journal it;
        with ``dry_run``, only plan. ``origin``: a teammate's message (the router's)."""
        config, member = self.resolve_member(team, member)
        planned, made = await self._plan(config, member, text, attachments, dry_run=dry_run)
        if dry_run:
            return DryRunPlan(team=config.name, member=member,
                              attachments=[p.to_wire() for p in planned])
        message_id = await self._mailbox.send(config.name, member, text, planned, origin)
        if made and self._descriptions is not None:  # described images: their side calls
            spec = config.member(member)
            assert spec is not None
            await self._descriptions.charge(config.name, spec, message_id, made)
        if not wait:
            return SendResult(ok=True, id=message_id, team=config.name, member=member)
        delivery = await self._wait_reply(config.name, member, message_id, timeout)
        message = delivery.to_wire(planned)
        return SendResult(ok=delivery.state == "answered", team=config.name, member=member,
                          **message.model_dump(exclude={"attachments", "error", "to"}),
                          attachments=message.attachments, error=message.error)

    async def _wait_reply(self, team: str, member: str, message_id: str,
                          timeout: float) -> Delivery:
        """The delivery's outcome — or MemberUnavailable as soon as the member is ``fatal`` or
        ``stopped`` (the message stays queued: it is delivered after a restart)."""
        outcome: list[Delivery] = []
        with unwrap_group():
            async with anyio.create_task_group() as tg:
                async def wait() -> None:
                    outcome.append(await self._mailbox.wait_outcome(
                        message_id, member, timeout, just_sent=True))
                    tg.cancel_scope.cancel()

                tg.start_soon(wait)
                await self._until_unavailable(team, member, message_id)
                tg.cancel_scope.cancel()
        return outcome[0]

    async def _until_unavailable(self, team: str, member: str, message_id: str) -> None:
        """Return never while the member can still deliver; raise once it cannot (fatal,
        stopped, or held by a budget or a rate limit)."""
        while True:
            state = self._supervisor.member(team, member)
            changed = [state.changed()]
            if state.launch in ("fatal", "stopped"):
                raise MemberUnavailable(member, state.launch, state.error, message_id)
            if self._ledger is not None:
                changed.append(self._ledger.hold_changed())
                hold = self._ledger.hold(team, member)
                if hold is not None and await self._still_queued(message_id, member):
                    raise MemberHeld(member, hold.describe(), message_id,
                                     budget=hold.kind == "budget")
            await _first(changed)

    async def _still_queued(self, message_id: str, member: str) -> bool:
        """Whether the message waits in the queue (its outcome, once known, wins)."""
        delivery = await self._store.delivery(message_id, member)
        return delivery is not None and delivery.state == "queued"

    async def _plan(self, config: TeamConfig, member: str, text: str,
                    paths: Sequence[str], *, dry_run: bool = False
                    ) -> tuple[list[PlannedAttachment], list[Description]]:
        """The message's attachments, planned (refused whole on any failure); and the side
        calls describing them made (``describe_with``)."""
        if not paths:
            return [], []
        spec = config.member(member)
        assert spec is not None
        target = Target(config.name, member, spec.runtime, spec.model, spec.vision,
                        self._capabilities[spec.runtime])
        try:
            made: list[Description] = []
            if spec.describe_with is not None and self._descriptions is not None:
                described = await self._descriptions.plan(
                    config, spec, text, [Path(p) for p in paths], dry_run=dry_run)
                planned, made = described.planned, described.made
            else:
                planned = await self._planner.plan(target, text, [Path(p) for p in paths])
        except AttachmentRefused as exc:
            log.warning("attachments_refused", team=config.name, member=member,
                        codes=[f.code for f in exc.failures], attachments=len(paths),
                        diagnostics=[f.diagnostic for f in exc.failures if f.diagnostic])
            raise
        entry = self._planner.vision(target)
        log.info("attachments_planned", team=config.name, member=member,
                 runtime=spec.runtime, model=spec.model, vision_source=entry.source,
                 variants=[{"mime": p.variant.mime, "width": p.variant.width,
                            "height": p.variant.height, "bytes": p.variant.bytes,
                            "sha256": p.variant.sha256} for p in planned])
        return planned, made

    async def history(self, team: str | None, member: str, *, limit: int = 50,
                      before: str | None = None) -> HistoryDoc:
        """One page of a member's messages: the newest ``limit`` before ``before``, oldest
        first; ``before`` in the answer names the page before this one (None: no more)."""
        name = await self._resolve_any(team)
        rows, more = await self._store.history(name, member, limit=limit, before=before)
        if not rows and name in self._running and self._running[name].member(member) is None:
            raise NotFound("member", member, [m.name for m in self._running[name].members])
        attachments = await self._store.attachments_of([d.message_id for d in rows], member)
        return HistoryDoc(team=name, member=member,
                          messages=[d.to_wire(attachments[d.message_id]) for d in rows],
                          before=rows[0].message_id if more and rows else None)

    async def export(self, team: str | None, member: str | None) -> ExportDoc:
        """Whole conversations (one member's, or with ``member`` None every member's) with
        each attachment's metadata; the CLI inlines the bytes from the artifact store."""
        name = await self._resolve_any(team)
        members = await self._members_of(name)
        if member is not None:
            if member not in members:
                raise NotFound("member", member, list(members))
            members = {member: members[member]}
        exported = []
        for who, (runtime, model) in members.items():
            rows, _ = await self._store.history(name, who)
            attachments = await self._store.attachments_of([d.message_id for d in rows], who)
            messages = [ExportedMessage.model_validate(
                d.to_wire(attachments[d.message_id]).model_dump()) for d in rows]
            exported.append(ExportedMember(name=who, runtime=runtime, model=model,
                                           messages=messages))
        return ExportDoc(team=name, exported_at=datetime.now(UTC).isoformat(
            timespec="seconds"), members=exported)

    async def _members_of(self, team: str) -> dict[str, tuple[str | None, str | None]]:
        """Each member of ``team`` (running, or as the journal last saw its file): its runtime
        and model."""
        if team in self._running:
            return {m.name: (m.runtime, m.model) for m in self._running[team].members}
        record = next(t for t in await self._store.teams()
                      if t.name == team)
        return {str(m.get("name")): (m.get("runtime"), m.get("model"))
                for m in record.config.get("members", []) if isinstance(m, dict)}

    # -- worktrees ----------------------------------------------------------------------------

    async def worktrees(self, team: str | None, *, prune: bool) -> WorktreesDoc:
        """Every member worktree the journal knows (of ``team``, or all); with ``prune``,
        remove those that lose nothing (clean, merged or pushed, member not running) — under a
        lock, saying why each other one is kept."""
        async with self._prune_lock:
            trees = await self._store.worktrees(team)
            pruned: list[str] = []
            kept: list[KeptWorktree] = []
            if prune:
                for tree in trees:
                    running = tree.team in self._running
                    try:  # one worktree git cannot read is kept; the others are still pruned
                        reason = await anyio.to_thread.run_sync(
                            functools.partial(worktrees.prune_one, tree, running=running))
                    except TeamctlError as exc:
                        reason = f"it could not be checked ({exc.message})"
                    if reason is None:
                        await self._store.forget_worktree(tree.team, tree.member)
                        pruned.append(f"{tree.team}/{tree.member}")
                        log.info("worktree_pruned", team=tree.team, member=tree.member)
                    else:
                        kept.append(KeptWorktree(team=tree.team, member=tree.member,
                                                 reason=reason))
                trees = await self._store.worktrees(team)
            infos = [WorktreeInfo.model_validate({
                **(await anyio.to_thread.run_sync(worktrees.inspect, t)),
                "running": t.team in self._running}) for t in trees]
        return WorktreesDoc(worktrees=infos, pruned=pruned, kept=kept)

    async def diff(self, team: str | None, member: str, *, stat: bool) -> DiffDoc:
        name = await self._resolve_any(team)
        tree = next((t for t in await self._store.worktrees(name)
                     if t.member == member), None)
        if tree is None:
            raise NotFound("member worktree", member, [
                t.member for t in await self._store.worktrees(name)])
        text = await anyio.to_thread.run_sync(functools.partial(worktrees.diff, tree, stat=stat))
        return DiffDoc(team=name, member=member, base=tree.base, stat=stat, text=text)

    async def thread(self, message_id: str) -> ThreadDoc:
        """The chain ``message_id`` belongs to: who → whom, depth, state, reply, in order."""
        rows = await self._store.chain(message_id)
        if not rows:
            raise NotFound("message", message_id, [])
        return ThreadDoc(chain_id=rows[0].origin.chain_id or message_id,
                         messages=[d.to_wire() for d in rows])

    def running(self, team: str) -> TeamConfig | None:
        """The running team named ``team`` (None if it does not run)."""
        return self._running.get(team)

    async def restart(self, team: str | None, member: str) -> TeamStatus:
        config, member = self.resolve_member(team, member)
        state: MemberState = await self._supervisor.restart_member(config.name, member)
        log.info("member_restart_requested", team=config.name, member=member)
        await self._supervisor.wait_settled_member(state, state.config.start_timeout
                                                   + _SETTLE_MARGIN)
        return await self._team_status(config.name)


def _differences(running: TeamConfig, wanted: TeamConfig) -> list[str]:
    """What differs between the running team and a file launched again (member names and
    keys only: values may be secrets)."""
    if running == wanted:
        return []
    old = {m.name: m for m in running.members}
    new = {m.name: m for m in wanted.members}
    found = []
    if added := [n for n in new if n not in old]:
        found.append("members added: " + ", ".join(added))
    if removed := [n for n in old if n not in new]:
        found.append("members removed: " + ", ".join(removed))
    for name in (n for n in new if n in old):
        a, b = old[name].model_dump(), new[name].model_dump()
        if keys := [k for k in b if a.get(k) != b[k]]:
            found.append(f"{name}: {', '.join(keys)} changed")
    if running.team != wanted.team:
        keys = [k for k, v in wanted.team.model_dump().items()
                if running.team.model_dump().get(k) != v]
        found.append(f"[team] {', '.join(keys)} changed")
    if [m.name for m in running.members] != [m.name for m in wanted.members] and not found:
        found.append("the members' order changed")
    return found
