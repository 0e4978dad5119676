"""A delivery — one message to one member — as the journal keeps it and the mailbox moves it:
``queued → prepared → sent → answered | failed`` (``blocked``: refused before it was sent),
where its message came from (``Origin``), its wire form (``MessageDoc``), and its rows in the
journal (``_store`` owns the tables)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from orchestrator.attachments.normalize import Limits
from orchestrator.attachments.variants import PlannedAttachment, PlannedVariant
from orchestrator.protocol.common import OPERATOR, TEAMCTL, DeliveryState
from orchestrator.protocol.messages import DeliveryError, MessageDoc

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "ATTACHMENT_COLUMNS",
    "DELIVERY_COLUMNS",
    "MAX_ATTEMPTS",
    "TERMINAL_STATES",
    "AttemptStamp",
    "Delivery",
    "DeliveryState",
    "MessageKind",
    "Origin",
    "attachment_of",
    "attachment_row",
    "delivery_of",
]

MAX_ATTEMPTS = 3
TERMINAL_STATES: frozenset[DeliveryState] = frozenset({"answered", "failed", "blocked"})
MessageKind = Literal["message", "reply"]


@dataclass(frozen=True)
class AttemptStamp:
    """What an attempt ran on, journaled with its claim (``turn_attempts``): the member's
    launch number and its runtime and model."""

    epoch: int | None = None
    runtime: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Origin:
    """Where a message comes from: the operator (sender None, depth 0), teamctl itself (sender
    None and a task: the board's words — a task handed over, a gate's result, a review asked)
    or a teammate — a message it sent, or the reply routed back to it — and the chain it
    belongs to."""

    sender: str | None = None
    kind: MessageKind = "message"
    chain_id: str | None = None
    depth: int = 0
    reply_to: str | None = None
    # the sender's turn in flight when it sent this (its message id; None: the operator, a
    # routed reply, a message sent between turns): a redelivered turn's repeat is found by it
    delivery: str | None = None
    # the board's task it belongs to: the one its sender held in progress, or the task a
    # board message (an offer, a gate's output) is about (docs/board.md)
    task_id: int | None = None

    @property
    def shown_sender(self) -> str:
        """Who it is from, as every output names it: the teammate, ``teamctl`` or
        ``operator`` (what teamctl sent was shown as the operator's: issue 45)."""
        if self.sender is not None:
            return self.sender
        return TEAMCTL if self.task_id is not None else OPERATOR


@dataclass(frozen=True)
class Delivery:
    message_id: str
    team: str
    member: str
    text: str
    state: DeliveryState
    attempts: int
    reply: str | None
    error_code: str | None
    error_message: str | None
    retryable: bool | None
    notes: tuple[str, ...] = ()
    origin: Origin = Origin()
    usage: dict[str, Any] | None = None
    created_at: float | None = None  # the message's, journaled by send
    updated_at: float | None = None  # the delivery's last change
    # the runtime session the message (or its continuation) last reached the member on; None:
    # no attempt reached the runtime yet (or it had no session then)
    sent_session: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_wire(self, attachments: list[PlannedAttachment] | None = None) -> MessageDoc:
        error = None
        if self.error_code:
            error = DeliveryError(code=self.error_code, message=self.error_message,
                                  retryable=bool(self.retryable))
        return MessageDoc(
            id=self.message_id, text=self.text, state=self.state,
            reply=self.reply, attempts=self.attempts, error=error, notes=list(self.notes),
            attachments=[a.to_ref() for a in attachments or []],
            sender=self.origin.shown_sender, to=self.member, kind=self.origin.kind,
            chain_id=self.origin.chain_id, depth=self.origin.depth,
            reply_to=self.origin.reply_to, usage=self.usage, task_id=self.origin.task_id,
            created_at=_iso(self.created_at), updated_at=_iso(self.updated_at))


def _iso(when: float | None) -> str | None:
    return None if when is None else (
        datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds"))


# -- the journal's rows -------------------------------------------------------------------

DELIVERY_COLUMNS = (
    "d.message_id, d.team, d.member, m.text, d.state, d.attempts, d.reply, d.error_code, "
    "d.error_message, d.retryable, d.notes, m.sender, m.kind, m.chain_id, m.depth, m.reply_to, "
    "d.usage, m.created_at, d.updated_at, d.sent_session, m.origin_delivery, m.task_id"
)
ATTACHMENT_COLUMNS = (
    "message_id, member, position, name, original_sha256, original_mime, original_bytes, "
    "variant_id, purpose, limits, sha256, mime, width, height, bytes, described_by, description, "
    "kind, route, pages, page_variants"
)


def attachment_row(message_id: str, member: str, p: PlannedAttachment) -> tuple[Any, ...]:
    v = p.variant
    pages = json.dumps([_variant_json(page) for page in p.page_variants]) if (
        p.page_variants) else None
    return (message_id, member, p.position, p.name, p.original_sha256, p.original_mime,
            p.original_bytes, v.variant_id, v.purpose, v.limits.to_json(), v.sha256, v.mime,
            v.width, v.height, v.bytes, p.described_by, p.description,
            None if p.kind == "image" else p.kind, p.route, p.pages, pages)


def attachment_of(row: sqlite3.Row) -> PlannedAttachment:
    variant = PlannedVariant(row["variant_id"], row["purpose"], row["sha256"], row["mime"],
                             row["width"], row["height"], row["bytes"],
                             Limits.from_json(row["limits"]))
    pages = tuple(_variant_of(page) for page in json.loads(row["page_variants"] or "[]"))
    return PlannedAttachment(row["position"], row["name"], row["original_sha256"],
                             row["original_mime"], row["original_bytes"], variant,
                             described_by=row["described_by"], description=row["description"],
                             kind=row["kind"] or "image", route=row["route"],
                             pages=row["pages"], page_variants=pages)


def _variant_json(v: PlannedVariant) -> list[Any]:
    return [v.variant_id, v.purpose, v.sha256, v.mime, v.width, v.height, v.bytes,
            v.limits.to_json()]


def _variant_of(fields: list[Any]) -> PlannedVariant:
    variant_id, purpose, sha256, mime, width, height, size, limits = fields
    return PlannedVariant(str(variant_id), str(purpose), str(sha256), str(mime), int(width),
                          int(height), int(size), Limits.from_json(str(limits)))


def delivery_of(row: sqlite3.Row) -> Delivery:
    retryable = row["retryable"]
    return Delivery(
        row["message_id"], row["team"], row["member"], row["text"], row["state"],
        row["attempts"], row["reply"], row["error_code"], row["error_message"],
        None if retryable is None else bool(retryable),
        tuple(json.loads(row["notes"])) if row["notes"] else (),
        Origin(row["sender"], row["kind"], row["chain_id"], row["depth"], row["reply_to"],
               row["origin_delivery"], row["task_id"]),
        json.loads(row["usage"]) if row["usage"] else None,
        row["created_at"], row["updated_at"], row["sent_session"],
    )
