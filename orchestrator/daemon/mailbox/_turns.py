"""One claimed delivery through its turn: ``prepared → sent → answered | failed`` (a turn's
session journaled just before it is written: ``Store.mark_handed``).

The turn is the whole message (its text, then each image variant in ``[Image #N]`` marker
order), or a continuation when the member's process carries on the session an earlier attempt
reached and was cut on (docs/dev/architecture.md, "Effects once"). A turn cut by the member's exit
(or a stuck turn) goes back to ``queued`` until its attempts are used up; an error the runtime
reports for the turn (an API error) ends ``failed`` with that error; a budget holds the member,
a refused window its whole account, and the delivery is re-queued; a bug fails only that
delivery (``internal_error``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.attachments.documents import delivered_text
from orchestrator.attachments.failures import AttachmentError
from orchestrator.attachments.markers import place
from orchestrator.contracts import DocumentPart, DocumentText, PreparedPart, TextPart, Turn
from orchestrator.daemon.continuation import continuation, continued_note, continues
from orchestrator.daemon.describe import described_text
from orchestrator.errors import (
    InternalError,
    RuntimeExited,
    RuntimeStuck,
    SessionLost,
    TeamctlError,
    TurnHeld,
    unwrap_group,
)
from orchestrator.ids import traceparent

if TYPE_CHECKING:
    from orchestrator.attachments.loader import VariantLoader
    from orchestrator.attachments.variants import PlannedAttachment
    from orchestrator.contracts import TurnResult
    from orchestrator.daemon.ledger import Ledger
    from orchestrator.daemon.mailbox._hooks import MailboxHooks
    from orchestrator.daemon.mailbox._records import DeliveryRecords
    from orchestrator.daemon.queue import Delivery
    from orchestrator.ports import OnSent, RuntimeProcess

__all__ = ["TurnDelivery"]

log = structlog.get_logger("teamctl.mailbox")


class TurnDelivery:
    """Runs claimed deliveries' turns and records how each attempt ended."""

    def __init__(self, records: DeliveryRecords, loader: VariantLoader, hooks: MailboxHooks,
                 *, ledger: Ledger) -> None:
        self._records = records
        self._loader = loader
        self._hooks = hooks
        self._ledger = ledger
        # per member, the re-queued delivery whose attempt was cut, the process it ran on and
        # whether the turn reached it (``sent``): its next attempt continues there if that
        # process is still the member's
        self._cut_on: dict[tuple[str, str], tuple[str, RuntimeProcess, bool]] = {}

    def forget_member(self, team: str, member: str) -> None:
        """The member's queue was closed: no attempt continues on a process it was cut on."""
        self._cut_on.pop((team, member), None)

    async def deliver(self, process: RuntimeProcess, delivery: Delivery,
                      planned: list[PlannedAttachment]) -> None:
        """Walk one claimed (``prepared``) delivery through its turn on ``process``. A bug
        while delivering must not stop the queue (or the daemon): the delivery ends failed
        with ``internal_error`` and the next one goes on."""
        try:
            await self._deliver(process, delivery, planned)
        except Exception as exc:
            log.exception("delivery_crashed", team=delivery.team, member=delivery.member,
                          message_id=delivery.message_id)
            with anyio.CancelScope(shield=True):
                await self._fail(delivery, InternalError("delivering", exc), requeue=False)

    async def _deliver(self, process: RuntimeProcess, delivery: Delivery,
                       planned: list[PlannedAttachment]) -> None:
        try:
            turn = await self._turn(process, delivery, planned)
        except AttachmentError as exc:
            await self._fail(delivery, exc, requeue=exc.retryable)
            return
        reached: list[bool] = []  # the turn was written (``sent``) before any cut
        try:
            if not turn.continues:
                # its session journaled before it is written, so a daemon killed before
                # ``sent`` continues it rather than handing it again whole (its reminder
                # carries the text; its attachments go again: ``_turn``)
                await self._records.handed(delivery, process)
            result = await self._run(process, delivery, turn, reached)
        except TurnHeld as exc:  # the member (a refused window: its account) is held
            held = self._ledger.held(delivery.team, delivery.member, exc)
            await self._fail(delivery, held, requeue=True, held=True, cut_on=process,
                             reached=bool(reached))
        except SessionLost as exc:  # a continuation found its session gone: nothing was sent
            await self._fail(delivery, exc, requeue=True, held=True)
        except (RuntimeExited, RuntimeStuck) as exc:
            await self._fail(delivery, exc, requeue=True, cut_on=process, reached=bool(reached))
        except TeamctlError as exc:
            await self._fail(delivery, exc, requeue=False)
        except anyio.get_cancelled_exc_class():
            await self._records.stopped(delivery, process)
            raise
        else:
            if turn.continues:  # teamctl's words were answered, not the operator's
                result = replace(result, notes=(*result.notes, continued_note(delivery)))
            await self._records.answered(delivery, result)
            self._ledger.answered(delivery.team, delivery.member)
            await self._hooks.answered(delivery, result.reply)

    async def _run(self, process: RuntimeProcess, delivery: Delivery, turn: Turn,
                   reached: list[bool]) -> TurnResult:
        """The turn on ``process`` (``reached`` gets a value once it was written); the ledger
        settles what the attempt used, whatever its outcome."""
        async def sent() -> None:
            reached.append(True)
            await self._records.sent(delivery, process)

        try:
            return await _run_turn(process, turn, sent)
        finally:
            with anyio.CancelScope(shield=True):
                await self._ledger.settle(delivery.team, delivery.member, delivery.message_id)

    async def _fail(self, delivery: Delivery, exc: TeamctlError, *, requeue: bool,
                    held: bool = False, cut_on: RuntimeProcess | None = None,
                    reached: bool = False) -> None:
        """Record a failed attempt; ``cut_on``: the process a re-queued attempt was cut on
        (its next attempt may continue there), ``reached``: the turn was written to it."""
        state = await self._records.failed(delivery, exc, requeue=requeue, held=held,
                                           cut_on=cut_on)
        if state == "queued" and cut_on is not None:
            self._cut_on[(delivery.team, delivery.member)] = (delivery.message_id, cut_on,
                                                             reached)

    async def _turn(self, process: RuntimeProcess, delivery: Delivery,
                    planned: list[PlannedAttachment]) -> Turn:
        """What this attempt sends: a continuation when ``process`` carries on the session an
        earlier attempt reached and was cut on, else the whole message."""
        cut = self._cut_on.pop((delivery.team, delivery.member), None)
        if cut is not None and cut[0] != delivery.message_id:
            cut = None
        cut_on = None if cut is None else cut[1]
        # this attempt's span (``claim`` counted it in ``attempts``, after reading the row)
        context = traceparent(delivery.origin.chain_id or delivery.message_id,
                              delivery.message_id, delivery.member, delivery.attempts + 1)
        if continues(delivery, process, cut_on):
            log.info("delivery_continued", team=delivery.team, member=delivery.member,
                     message_id=delivery.message_id, session_id=delivery.sent_session,
                     cut=delivery.error_code, same_process=cut_on is process)
            again: tuple[PreparedPart, ...] = ()
            if planned and (cut is None or not cut[2]):
                # whether the cut turn reached the runtime is not known (the daemon stopped
                # between the write and ``sent``: a new daemon knows nothing of the cut) or it
                # did not: its attachments go again with the reminder, never lost
                again = await self._attachments(delivery, planned)
            return replace(continuation(delivery, again), traceparent=context)
        return replace(await self._prepare(delivery, planned), traceparent=context)

    async def _prepare(self, delivery: Delivery, planned: list[PlannedAttachment]) -> Turn:
        """The turn's parts: the text, then its attachments (``_attachments``)."""
        parts: list[PreparedPart] = [TextPart(delivery.text)] if delivery.text else []
        return Turn(delivery.message_id,
                    (*parts, *await self._attachments(delivery, planned)))

    async def _attachments(self, delivery: Delivery, planned: list[PlannedAttachment]
                           ) -> tuple[PreparedPart, ...]:
        """The parts after the text: each image variant read back (checksum verified, rebuilt
        from the original if its artifact is gone), in ``[Image #N]`` marker order; a document
        natively, or as its page images — its text after all of them."""
        by_position = {p.position: p for p in planned}
        attached: list[PreparedPart] = []
        texts: list[PreparedPart] = []
        for placement in place(delivery.text, len(planned)):
            attachment = by_position[placement.position]
            number, anchor = placement.position + 1, placement.anchor
            if attachment.kind != "image":
                document, text = await self._document(attachment, anchor)
                attached += document
                texts += text
                continue
            if attachment.described_by is not None:  # describe_with: the text in its place
                attached.append(TextPart(described_text(attachment.number,
                                                        attachment.described_by,
                                                        attachment.description or "")))
                continue
            image = await self._loader.load(attachment.original_sha256, attachment.variant)
            attached.append(replace(image, number=number, anchor=anchor))
        return (*attached, *texts)

    async def _document(self, attachment: PlannedAttachment, anchor: int | None
                        ) -> tuple[list[PreparedPart], list[PreparedPart]]:
        """A document's parts: natively one DocumentPart; else its page images (at its
        anchor) and, for the end of the turn, its text (docs/documents.md)."""
        data, pages = await self._loader.load_document(attachment)
        number = attachment.number
        if attachment.route == "native":
            return [DocumentPart(attachment.variant.mime, attachment.name,
                                 attachment.variant.sha256, data, attachment.pages, number,
                                 anchor)], []
        text = delivered_text(attachment.label, attachment.name, attachment.route or "text",
                              attachment.pages, len(pages), data.decode())
        original, path = await self._loader.original(attachment.original_sha256)
        return ([replace(image, number=number, anchor=anchor, page=page)
                 for page, image in enumerate(pages, 1)],
                [DocumentText(text, attachment.name, attachment.original_mime,
                              attachment.original_sha256, original, path)])


async def _run_turn(process: RuntimeProcess, turn: Turn, on_sent: OnSent) -> TurnResult:
    """``run_turn``, with an error from inside the runtime's task groups as itself."""
    with unwrap_group():
        return await process.run_turn(turn, on_sent=on_sent)
