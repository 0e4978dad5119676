"""Messages to members, as the control API and the router send them: planned (attachments,
described images), journaled, waited for; and read back (history, export, threads)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.documents import DocumentRules
from orchestrator.attachments.failures import AttachmentRefused
from orchestrator.attachments.intake import Original
from orchestrator.attachments.planner import Planner, Target
from orchestrator.errors import MemberHeld, MemberUnavailable, NotFound, unwrap_group
from orchestrator.protocol.export import ExportDoc, ExportedMember, ExportedMessage
from orchestrator.protocol.messages import DryRunPlan, HistoryDoc, SendResult, ThreadDoc

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.config import TeamConfig
    from orchestrator.contracts import Capabilities, Description
    from orchestrator.daemon.describe import Descriptions
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.mailbox._service import Mailbox
    from orchestrator.daemon.members import Supervisor
    from orchestrator.daemon.queue import AsyncStore, Delivery, Origin
    from orchestrator.daemon.roster import Roster

__all__ = ["Messages"]

log = structlog.get_logger("teamctl.teams")


async def _first(events: list[anyio.Event]) -> None:
    """Wait until any of ``events`` is set."""
    async with anyio.create_task_group() as tg:
        async def one(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(one, event)



class Messages:
    def __init__(self, roster: Roster, store: AsyncStore, supervisor: Supervisor,
                 mailbox: Mailbox, planner: Planner, capabilities: Mapping[str, Capabilities],
                 *, ledger: Ledger, descriptions: Descriptions) -> None:
        self._roster = roster
        self._store = store
        self._supervisor = supervisor
        self._mailbox = mailbox
        self._planner = planner
        self._capabilities = capabilities
        self._ledger = ledger
        self._descriptions = descriptions

    async def send(self, team: str | None, member: str, text: str, *, wait: bool,
                   timeout: float, attachments: Sequence[str | Original] = (),
                   dry_run: bool = False, origin: Origin | None = None
                   ) -> SendResult | DryRunPlan:
        """Plan the attachments (refusing the whole message on any failure), then journal it;
        with ``dry_run``, only plan. ``origin``: a teammate's message (the router's), whose
        attachments come already read in its view (``Original``: never a path to open)."""
        config, member = self._roster.resolve_member(team, member)
        planned_at = time.time() if attachments else None  # the trace's planning span
        planned, made = await self._plan(config, member, text, attachments, dry_run=dry_run)
        if dry_run:
            return DryRunPlan(team=config.name, member=member,
                              attachments=[p.to_wire() for p in planned])
        notes = self._resuming(config.name, member)  # before its queue is poked
        notes += self._held(config.name, member, operator=origin is None)
        notes += [f"warning: {p.name_warning}" for p in planned if p.name_warning]
        message_id = await self._mailbox.send(config.name, member, text, planned, origin,
                                              planned_at=planned_at)
        if made:  # described images: their side calls
            spec = config.member(member)
            assert spec is not None
            await self._descriptions.charge(config.name, spec, message_id, made)
        if not wait:
            return SendResult(ok=True, id=message_id, team=config.name, member=member,
                              notes=notes)
        delivery = await self._wait_reply(config.name, member, message_id, timeout)
        message = delivery.to_wire(planned)
        return SendResult(ok=delivery.state == "answered", team=config.name, member=member,
                          **message.model_dump(exclude={"attachments", "error", "to",
                                                        "notes"}),
                          attachments=message.attachments, error=message.error,
                          notes=[*notes, *message.notes])

    def _held(self, team: str, member: str, *, operator: bool) -> list[str]:
        """The receipt's word when the member's account holds its turns (docs/costs.md,
        "Quota windows"): ``held: claude:operator five-hour window until 15:34``. The
        operator's own message passes a reserve pause: nothing to say then."""
        hold = self._ledger.hold(team, member)
        if hold is None or hold.kind == "budget" or (hold.operator_only and operator):
            return []
        return [hold.describe()]

    def _resuming(self, team: str, member: str) -> list[str]:
        """The receipt's word when the member is asleep (``pause_after``, ``max_running``) or
        waking, or waits for memory (``memory_reserve``): its message waits journaled until it
        is up."""
        state = self._supervisor.member(team, member)
        if state.launch == "waiting" and state.waiting is not None:
            return [f"{member} is {state.waiting}; the message waits in the journal until it "
                    "starts"]
        if state.launch != "asleep" and not state.waking:
            return []
        where = f" on {state.host.name}" if state.host.name else ""
        since = "" if state.asleep_since is None else \
            " since " + time.strftime("%H:%M:%S", time.localtime(state.asleep_since))
        why = f" ({state.waiting})" if state.waiting else ""
        return [f"resuming: {member} was asleep{where}{since}; the message waits in the "
                f"journal until it is up{why}"]

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
            changed.append(self._ledger.hold_changed())
            hold = self._ledger.hold(team, member)
            # the operator's own message goes past a reserve pause: wait for its answer
            if hold is not None and not hold.operator_only and \
                    await self._still_queued(message_id, member):
                raise MemberHeld(member, hold.describe(), message_id,
                                 budget=hold.kind == "budget")
            await _first(changed)

    async def _still_queued(self, message_id: str, member: str) -> bool:
        """Whether the message waits in the queue (its outcome, once known, wins)."""
        delivery = await self._store.delivery(message_id, member)
        return delivery is not None and delivery.state == "queued"

    async def _plan(self, config: TeamConfig, member: str, text: str,
                    paths: Sequence[str | Original], *, dry_run: bool = False
                    ) -> tuple[list[PlannedAttachment], list[Description]]:
        """The message's attachments, planned (refused whole on any failure); and the side
        calls describing them made (``describe_with``)."""
        if not paths:
            return [], []
        spec = config.member(member)
        assert spec is not None
        target = Target(config.name, member, spec.runtime, spec.model, spec.vision,
                        self._capabilities[spec.runtime], DocumentRules(
                            spec.documents, spec.document_pages.native,
                            spec.document_pages.rendered))
        sources = [p if isinstance(p, Original) else Path(p) for p in paths]
        try:
            made: list[Description] = []
            if spec.describe_with is not None:
                described = await self._descriptions.plan(
                    config, spec, text, sources, dry_run=dry_run)
                planned, made = described.planned, described.made
            else:
                planned = await self._planner.plan(target, text, sources)
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
                            "sha256": p.variant.sha256, "route": p.route, "pages": p.pages,
                            "page_images": len(p.page_variants)} for p in planned])
        return planned, made

    async def history(self, team: str | None, member: str, *, limit: int = 50,
                      before: str | None = None) -> HistoryDoc:
        """One page of a member's messages: the newest ``limit`` before ``before``, oldest
        first; ``before`` in the answer names the page before this one (None: no more)."""
        name = await self._roster.resolve_any(team, member)
        rows, more = await self._store.history(name, member, limit=limit, before=before)
        running = self._roster.teams.get(name)
        if not rows and running is not None and running.member(member) is None:
            raise NotFound("member", member, [m.name for m in running.members])
        attachments = await self._store.attachments_of([d.message_id for d in rows], member)
        return HistoryDoc(team=name, member=member,
                          messages=[d.to_wire(attachments[d.message_id]) for d in rows],
                          before=rows[0].message_id if more and rows else None)

    async def export(self, team: str | None, member: str | None) -> ExportDoc:
        """Whole conversations (one member's, or with ``member`` None every member's) with
        each attachment's metadata; the CLI inlines the bytes from the artifact store."""
        name = await self._roster.resolve_any(team, member)
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
        if team in self._roster.teams:
            return {m.name: (m.runtime, m.model) for m in self._roster.teams[team].members}
        record = next(t for t in await self._store.teams()
                      if t.name == team)
        return {str(m.get("name")): (m.get("runtime"), m.get("model"))
                for m in record.config.get("members", []) if isinstance(m, dict)}

    async def thread(self, message_id: str) -> ThreadDoc:
        """The chain ``message_id`` belongs to: who → whom, depth, state, reply, in order."""
        rows = await self._store.chain(message_id)
        if not rows:
            raise NotFound("message", message_id, [])
        return ThreadDoc(chain_id=rows[0].origin.chain_id or message_id,
                         messages=[d.to_wire() for d in rows])
