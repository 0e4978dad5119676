"""``export`` (``teamctl export``): a team's members and their messages with every attachment's
variants, as one document — and its params.
"""

from typing import Literal

from pydantic import Field

from orchestrator.limits import NAME_PATTERN
from orchestrator.protocol.common import Doc, TeamParams
from orchestrator.protocol.messages import AttachmentRef, MessageDoc, VariantDoc

__all__ = [
    "ExportDoc", "ExportParams", "ExportedAttachment", "ExportedMember", "ExportedMessage",
    "ExportedVariant",
]


class ExportedVariant(VariantDoc):
    """A document's rendered page in an export, its bytes inlined as its attachment's are."""

    data: str | None = Field(default=None, description="the page image's bytes, base64 (null "
                             "with --redact, or when the artifact is missing)")
    missing: bool = Field(default=False, description="the artifact is gone from the store, or "
                          "its bytes no longer match its sha256")


class ExportedAttachment(AttachmentRef):
    """An attachment in an export: its metadata, and the bytes that were sent, inlined (a
    document: the PDF or text sent natively, or its page-marked text and each page image)."""

    data: str | None = Field(
        default=None, description="the variant's bytes, base64 — the one place teamctl writes "
        "base64 (null with --redact, or when the artifact is missing)")
    missing: bool = Field(default=False, description="the artifact is gone from the store, or "
                          "its bytes no longer match its sha256")
    page_variants: list[ExportedVariant] = Field(  # type: ignore[assignment]
        default=[], description="the rendered pages sent as images (route pages), in order, "
        "each with its bytes")


class ExportedMessage(MessageDoc):
    attachments: list[ExportedAttachment] = []  # type: ignore[assignment]


class ExportedMember(Doc):
    name: str
    runtime: str | None = None
    model: str | None = None
    messages: list[ExportedMessage]


class ExportDoc(Doc):
    """``teamctl export``: whole conversations, standing alone (images inlined)."""

    format: Literal["teamctl-export"] = "teamctl-export"
    version: Literal[1] = 1
    team: str
    exported_at: str
    redacted: bool = Field(default=False, description="--redact: image bytes left out")
    members: list[ExportedMember]
    missing: list[str] = Field(default=[], description="sha256 of every image whose bytes "
                               "could not be inlined (its metadata is kept)")


class ExportParams(TeamParams):
    member: str | None = Field(default=None, pattern=NAME_PATTERN)  # None: every member
