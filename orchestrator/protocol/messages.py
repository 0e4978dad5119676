"""Messages (``send``, ``history``, ``thread``): a message and its attachments (each variant
sent, the original's facts), a send's result or its dry run's plan, and their params.
"""

from typing import Any, Literal

from pydantic import Field

from orchestrator.limits import MAX_ATTACHMENTS, MAX_PAGE_ROWS, MAX_WAIT_SECONDS, ULID_PATTERN
from orchestrator.protocol.common import OPERATOR, DeliveryState, Doc, MemberParams, Params, TaskRef

__all__ = [
    "AttachmentRef", "DeliveryError", "DryRunPlan", "HistoryDoc", "HistoryParams",
    "MessageDoc", "Original", "PlannedDoc", "SendParams", "SendResult", "ThreadDoc",
    "ThreadParams", "VariantDoc",
]


class VariantDoc(Doc):
    purpose: str
    mime: str
    width: int
    height: int
    bytes: int
    sha256: str = Field(description="sha256 of the exact bytes that would be sent")
    cli_transform: str | None = Field(
        default=None, description="what the member's CLI would do to them before the API "
        "sees them; null: the API receives exactly this sha256")


class AttachmentRef(Doc):
    """An attachment as journaled with a message: the variant that is (or was) sent."""

    name: str
    number: int = Field(default=1, description="its [Image #N] in the message's text")
    sha256: str
    mime: str
    width: int
    height: int
    bytes: int | None = None
    original_sha256: str
    described_by: str | None = Field(
        default=None, description="'runtime:model' of the describer when the member received "
        "a description in place of the image (describe_with)")
    description: str | None = None
    cli_transform: str | None = Field(
        default=None, description="what the member's CLI does to these bytes before the API "
        "sees them ('re-encoded by the CLI to …'); null: the API receives exactly this sha256")
    kind: Literal["image", "document", "text"] = "image"
    route: Literal["native", "pages", "text"] | None = Field(
        default=None, description="documents: how it reached the member — native (the file "
        "itself), pages (rendered page images and the text), text (the text alone)")
    pages: int | None = Field(default=None, description="a PDF's page count")
    page_variants: list[VariantDoc] = Field(
        default=[], description="the rendered pages sent as images (route pages), in order")
    name_warning: str | None = Field(
        default=None, description="its name claims another kind than its bytes, which decide "
        "what is sent: 'notes.png holds text: sent as text' (null: they agree)")


class DeliveryError(Doc):
    code: str
    message: str | None
    retryable: bool


class MessageDoc(Doc):
    """One message to one member, with its delivery state."""

    id: str
    text: str
    state: DeliveryState
    reply: str | None
    attempts: int
    attachments: list[AttachmentRef] = []
    error: DeliveryError | None
    notes: list[str] = Field(default=[], description="what the runtime refused in the turn; "
                             "'teamctl: …' notes say what teamctl did (a cut turn continued)")
    sender: str = Field(default=OPERATOR, description="'operator', 'teamctl' (what teamctl "
                        "itself sent: a task handed over, a gate's result, a review asked) or "
                        "the teammate who sent it")
    to: str | None = Field(default=None, description="the member it is for")
    kind: Literal["message", "reply"] = "message"
    chain_id: str | None = None
    depth: int = Field(default=0, description="teammate hops from the operator's message")
    reply_to: str | None = None
    task_id: TaskRef | None = Field(default=None, description="the board's task it belongs "
                                    "to (T3)")
    created_at: str | None = Field(default=None, description="when it was journaled (UTC)")
    updated_at: str | None = Field(default=None, description="its delivery's last change (UTC)")
    usage: dict[str, Any] | None = Field(
        default=None, description="what the message's turns used (every attempt): "
        "input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens, cost_usd "
        "(null: unknown), estimated (a turn cut before its runtime's own figure)")


class HistoryDoc(Doc):
    """``teamctl history --json``: one page, oldest first; ``before`` names the page before."""

    team: str
    member: str
    messages: list[MessageDoc]
    before: str | None = None


class SendResult(Doc):
    """``teamctl send --json``: the message id; with ``--wait`` also its outcome and the
    attachments that were sent."""

    ok: bool
    id: str
    team: str
    member: str
    text: str | None = None
    state: DeliveryState | None = None
    reply: str | None = None
    attempts: int | None = None
    attachments: list[AttachmentRef] = []
    error: DeliveryError | None = None
    notes: list[str] = []
    sender: str = "operator"
    kind: Literal["message", "reply"] = "message"
    chain_id: str | None = None
    depth: int = 0
    reply_to: str | None = None
    task_id: TaskRef | None = None
    created_at: str | None = None
    updated_at: str | None = None
    usage: dict[str, Any] | None = None


class Original(Doc):
    sha256: str
    mime: str
    bytes: int


class PlannedDoc(Doc):
    name: str
    number: int = Field(default=1, description="its [Image #N] in the message's text")
    original: Original
    variants: list[VariantDoc]
    warnings: list[str] = []
    described_by: str | None = Field(
        default=None, description="the member is text-only and opted in: the image would be "
        "described by this 'runtime:model', and the description sent in its place")
    description_cached: bool | None = Field(
        default=None, description="whether that description is already known (no side call)")
    kind: Literal["image", "document", "text"] = "image"
    route: Literal["native", "pages", "text"] | None = None
    pages: int | None = None


class DryRunPlan(Doc):
    """``teamctl send --dry-run --json``: what would be sent."""

    ok: Literal[True] = True
    team: str | None = None
    member: str | None = None
    attachments: list[PlannedDoc]


class ThreadDoc(Doc):
    """``teamctl thread ID --json``: the chain the message belongs to, in order."""

    chain_id: str
    messages: list[MessageDoc]


class SendParams(MemberParams):
    text: str
    attachments: list[str] = Field(default=[], max_length=MAX_ATTACHMENTS)
    wait: bool = False
    dry_run: bool = False
    timeout: float = Field(default=600.0, gt=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False)


class HistoryParams(MemberParams):
    limit: int = Field(default=50, ge=1, le=MAX_PAGE_ROWS)
    before: str | None = Field(default=None, pattern=ULID_PATTERN)


class ThreadParams(Params):
    id: str = Field(pattern=ULID_PATTERN)
