"""A member's own methods (``member.*``, called by its MCP server with its token): the receipt of
a message it sent, its team's card, a message's status, the ack of its tools listed.
"""

from typing import Literal

from pydantic import Field

from orchestrator.limits import MAX_ATTACHMENTS, ULID_PATTERN
from orchestrator.protocol.common import DeliveryState, Doc, TokenParams
from orchestrator.protocol.teams import Launch, Readiness

__all__ = [
    "MemberCard", "MemberSendParams", "MemberStatusParams", "MessageStatus", "Receipt",
    "TeamCard", "ToolsListedAck", "receipt_of",
]


class ToolsListedAck(Doc):
    """``member.tools_listed``: the daemon took note that this launch's runtime listed
    teamctl's MCP tools."""

    ok: bool = True


class Receipt(Doc):
    """``send_message``'s answer: queued, not delivered."""

    id: str
    to: str
    depth: int
    text: str


class MemberCard(Doc):
    name: str
    runtime: str
    model: str | None
    sees_images: bool | None
    images_described: str | None = Field(
        default=None, description="'runtime:model' describing the images sent to this "
        "text-only member (describe_with)")
    launch: Launch
    readiness: Readiness
    you: bool


class TeamCard(Doc):
    """``list_team``'s answer."""

    team: str
    members: list[MemberCard]


class MessageStatus(Doc):
    """``message_status``'s answer."""

    id: str
    to: str
    state: DeliveryState
    reply: str | None
    error: str | None
    receipt: Literal["queued", "read", "answered", "failed"] = Field(
        default="queued", description="queued (waiting for the recipient), read (the "
        "recipient's turn that carries it began), answered, or failed")


def receipt_of(state: DeliveryState) -> Literal["queued", "read", "answered", "failed"]:
    """A delivery's state as the sender's receipt says it: ``sent`` is read — the turn
    carrying the message began on the recipient's process."""
    shown: dict[DeliveryState, Literal["queued", "read", "answered", "failed"]] = {
        "queued": "queued", "prepared": "queued", "sent": "read", "answered": "answered",
        "failed": "failed", "blocked": "failed"}
    return shown[state]


# the params of the messaging tools: each tool's inputSchema is its model's JSON schema without
# the token (daemon/mcp/_schema.py), so these descriptions are what the model reads
class MemberSendParams(TokenParams):
    to: str = Field(max_length=200, description="the teammate's name")
    text: str = Field(max_length=200_000, description="the message")
    attachments: list[str] = Field(
        default=[], max_length=MAX_ATTACHMENTS,
        description="paths of files you can read yourself, in your workdir (or a directory "
        "your sandbox shows you or the operator granted; elsewhere, e.g. /tmp, is refused: "
        "copy the file into your workdir) — images, PDFs, UTF-8 text — sent with the "
        "message; the text may name them [Image #1], [Doc #2]… in this order (one "
        "numbering; the word says the kind)")


class MemberStatusParams(TokenParams):
    id: str = Field(pattern=ULID_PATTERN, description="the message id")
