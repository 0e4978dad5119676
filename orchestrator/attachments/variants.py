"""A planned attachment and its variant (what the journal records and the runtimes receive),
and ``derive``: the one function that makes a variant from an original — at planning time, and
again at delivery time when an artifact must be rebuilt (the encoding is deterministic)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from orchestrator.attachments.cli_rules import cli_transform
from orchestrator.attachments.markers import label as marker_label
from orchestrator.attachments.names import name_warning
from orchestrator.attachments.normalize import Limits, decode, make_variant
from orchestrator.protocol.messages import AttachmentRef, Original, PlannedDoc, VariantDoc

if TYPE_CHECKING:
    from orchestrator.attachments.sniff import Format, Kind

__all__ = ["PlannedAttachment", "PlannedVariant", "Route", "derive"]

Route = Literal["native", "pages", "text"]  # how a document reaches a member


@dataclass(frozen=True)
class PlannedVariant:
    variant_id: str
    purpose: str
    sha256: str
    mime: str
    width: int
    height: int
    bytes: int
    limits: Limits

    @property
    def cli_transform(self) -> str | None:
        """What the member's CLI does to these bytes before the API sees them; None: it
        passes them through, so the API receives exactly this sha256."""
        return cli_transform(self.purpose, self.mime, self.width, self.height, self.bytes,
                             self.limits)

    def to_wire(self) -> VariantDoc:
        return VariantDoc(purpose=self.purpose, mime=self.mime, width=self.width,
                               height=self.height, bytes=self.bytes, sha256=self.sha256,
                               cli_transform=self.cli_transform)


@dataclass(frozen=True)
class PlannedAttachment:
    position: int
    name: str
    original_sha256: str
    original_mime: str
    original_bytes: int
    variant: PlannedVariant
    warnings: tuple[str, ...] = field(default=())
    # delivered as a description (``describe_with``): who described it ("runtime:model") and
    # what it said; the variant is then the one made for the describer
    described_by: str | None = None
    description: str | None = None
    # a document (docs/documents.md): its kind ("document": a PDF, "text"), the route it takes
    # to this member (native | pages | text), a PDF's page count, and the rendered pages (the
    # ``variant`` is then the document itself when native, else its page-marked text)
    kind: Kind = "image"
    route: Route | None = None
    pages: int | None = None
    page_variants: tuple[PlannedVariant, ...] = ()

    @property
    def number(self) -> int:
        """Its ``[Image #N]`` (``[Doc #N]``)."""
        return self.position + 1

    @property
    def label(self) -> str:
        return marker_label(self.kind, self.number)

    @property
    def name_warning(self) -> str | None:
        """``notes.png holds text: sent as text`` when its name claims another kind than its
        bytes (``names``): what the dry-run and the receipt say."""
        return name_warning(self.name, self.kind, self.original_mime)

    def with_description(self, describer: str, text: str | None) -> PlannedAttachment:
        return replace(self, described_by=describer, description=text)

    def to_wire(self) -> PlannedDoc:
        """The dry-run plan of this attachment."""
        return PlannedDoc(
            name=self.name, number=self.number, original=Original(
                sha256=self.original_sha256, mime=self.original_mime,
                bytes=self.original_bytes),
            variants=[self.variant.to_wire(), *(v.to_wire() for v in self.page_variants)],
            warnings=[w for w in (self.name_warning,) if w] + list(self.warnings),
            kind=self.kind, route=self.route, pages=self.pages,
            described_by=self.described_by,
            description_cached=None if self.described_by is None
            else self.description is not None)

    def to_ref(self) -> AttachmentRef:
        """The attachment as journaled with its message (history, send --wait)."""
        v = self.variant
        return AttachmentRef(name=self.name, number=self.number, sha256=v.sha256,
                                  mime=v.mime, width=v.width, height=v.height,
                                  bytes=v.bytes, original_sha256=self.original_sha256,
                                  described_by=self.described_by,
                                  description=self.description,
                                  cli_transform=v.cli_transform, kind=self.kind,
                                  route=self.route, pages=self.pages,
                                  page_variants=[p.to_wire() for p in self.page_variants],
                                  name_warning=self.name_warning)


def derive(data: bytes, fmt: Format, name: str, purpose: str,
            limits: Limits) -> tuple[PlannedVariant, tuple[str, ...], bytes]:
    decoded = decode(data, fmt, name, limits=limits)
    made = make_variant(data, decoded, purpose, limits, name)
    attachment_id = hashlib.sha256(data).hexdigest()
    planned = PlannedVariant(made.variant_id(attachment_id), purpose, made.sha256, made.mime,
                             made.width, made.height, len(made.data), limits)
    return planned, tuple(decoded.warnings), made.data
