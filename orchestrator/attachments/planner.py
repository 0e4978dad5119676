"""The gate and the planner: a message is sent whole, or refused before anything is sent.

(Delivery-time loading of the planned variants lives in ``loader``; the planned types and the
one function that derives a variant from an original, in ``variants``.)

Two questions, two sources (DESIGN §5.6): can the member's runtime *transport* carry images (the
adapter's Capabilities), and can the member's *model* see them (the vision catalog, or the
operator's ``vision`` override). Then each attachment goes through intake → sniff → decode →
variant → artifact store. Every failure of the message is collected and reported at once
(``AttachmentRefused``); the journal then references images by sha256 and MIME, never base64.

CPU and disk work runs in worker threads (at most ``workers`` at once), so the daemon's event
loop keeps answering ``status`` while screenshots are being normalized. A variant already made
for the same original bytes, purpose, limits and optimizer version is served from the store.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import anyio

from orchestrator.attachments.documents import (
    Derived,
    DocumentRules,
    Recipient,
    derive_document,
)
from orchestrator.attachments.failures import AttachmentError, AttachmentFailure, AttachmentRefused
from orchestrator.attachments.intake import Original, read_original
from orchestrator.attachments.markers import label, unknown_markers
from orchestrator.attachments.normalize import OPTIMIZER_VERSION, Limits
from orchestrator.attachments.sniff import SNIFF_BYTES, Format, sniff
from orchestrator.attachments.variants import PlannedAttachment, PlannedVariant, derive

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.attachments.artifacts import ArtifactStore
    from orchestrator.attachments.catalog import Catalog, VisionEntry
    from orchestrator.contracts import Capabilities

__all__ = ["Planner", "Target", "VariantCache"]

_BLOCK_OVERHEAD_BYTES = 160  # the JSON around one base64 image block
_ANY_ROUTE = DocumentRules()  # no ``documents`` key: teamctl chooses


@dataclass(frozen=True)
class Target:
    """Who a message is for, as far as attachments care."""

    team: str
    member: str
    runtime: str
    model: str | None
    vision: bool | None
    capabilities: Capabilities
    documents: DocumentRules = _ANY_ROUTE


class VariantCache(Protocol):
    async def get(self, original_sha256: str, purpose: str, limits: Limits,
                  optimizer: str) -> tuple[PlannedVariant, tuple[str, ...]] | None: ...

    async def put(self, original_sha256: str, original_mime: str, variant: PlannedVariant,
                  warnings: tuple[str, ...], optimizer: str) -> None: ...


@dataclass(frozen=True)
class _Read:
    original: Original
    sha256: str
    format: Format


class Planner:
    def __init__(self, artifacts: ArtifactStore, catalog: Catalog, cache: VariantCache, *,
                 workers: int = 2) -> None:
        self._artifacts = artifacts
        self._catalog = catalog
        self._cache = cache
        self._cpu = anyio.CapacityLimiter(workers)

    def vision(self, target: Target) -> VisionEntry:
        return self._catalog.lookup(target.runtime, target.model, operator_vision=target.vision)

    async def plan(self, target: Target, text: str,
                   paths: list[Path | Original]) -> list[PlannedAttachment]:
        """Plan every attachment for ``target``; AttachmentRefused with every failure. An
        attachment is a path the operator named, or an ``Original`` already read (a member's,
        read in its own view: daemon/members/_attachments.py)."""
        if not paths:
            return []
        entry = self.vision(target)
        failures: list[AttachmentFailure] = []
        reads: list[tuple[int, _Read]] = []
        for position, path in enumerate(paths):
            try:
                reads.append((position, await anyio.to_thread.run_sync(
                    self._read, path, limiter=self._cpu)))
            except AttachmentError as exc:
                failures.append(_failure(exc, path.name, target))
        kinds = {position: read.format.kind for position, read in reads}
        if any(kind == "image" for kind in kinds.values()):
            failures = self._gate(target, entry) + failures
        # an unreadable attachment's kind is unknown: its marker is not checked twice
        failures += _markers(target, text, [kinds.get(p, "image") for p in range(len(paths))])
        planned: list[PlannedAttachment] = []
        for position, read in reads:
            try:
                planned.append(await self._plan_one(position, read, target, entry))
            except AttachmentError as exc:
                failures.append(_failure(exc, read.original.name, target))
        failures += self._budget(target, text, planned)
        if failures:
            raise AttachmentRefused(failures)
        return planned

    def _gate(self, target: Target, entry: VisionEntry) -> list[AttachmentFailure]:
        failures = []
        caps = target.capabilities
        if not caps.image_input:
            failures.append(AttachmentFailure(
                "attachment_runtime_unsupported",
                f"the {target.runtime} runtime of member {target.member!r} cannot carry images; "
                "send the text alone", member=target.member))
        model = target.model or f"the {target.runtime} default model"
        if entry.image_input is False:
            failures.append(AttachmentFailure(
                "attachment_model_vision_unsupported",
                f"{model} (member {target.member!r}) cannot see images (source: {entry.source}); "
                "send the text alone, or give this member a vision model",
                member=target.member))
        elif entry.image_input is None:
            failures.append(AttachmentFailure(
                "attachment_model_vision_unknown",
                f"teamctl does not know whether {model} ({target.runtime}) can see images; if it "
                f"can, set vision = true on member {target.member!r} in the team file "
                "(vision = false if it cannot)", member=target.member))
        return failures

    def _budget(self, target: Target, text: str,
                planned: list[PlannedAttachment]) -> list[AttachmentFailure]:
        caps = target.capabilities
        if not caps.inline_base64 or caps.max_payload_bytes is None or not planned:
            return []
        size = len(text.encode()) * 2 + sum(
            4 * math.ceil(v.bytes / 3) + _BLOCK_OVERHEAD_BYTES
            for p in planned for v in (p.variant, *p.page_variants))
        if size <= caps.max_payload_bytes:
            return []
        return [AttachmentFailure(
            "attachment_serialized_payload_too_large",
            f"the message would be {size // 1024} KiB once serialized, over the "
            f"{caps.max_payload_bytes // 1024} KiB {target.runtime} takes in one turn; send "
            "fewer attachments, or send them in separate messages", member=target.member)]

    async def _plan_one(self, position: int, read: _Read, target: Target,
                        entry: VisionEntry) -> PlannedAttachment:
        if read.format.disposition == "refuse":
            what = ("not an image, a PDF or UTF-8 text (its bytes match no known format)"
                    if read.format.name == "unknown" else f"{read.format.name}")
            raise AttachmentError(
                "attachment_unsupported_mime",
                f"{read.original.name}: is {what}; teamctl sends PNG, JPEG, GIF and WebP "
                "(BMP/TIFF are converted), PDFs and text: export it as one of those")
        if read.format.kind != "image":
            return await self._plan_document(position, read, target, entry)
        limits = entry.limits
        purpose = target.capabilities.image_purpose or f"{target.runtime}-image"
        cached = await self._cache.get(read.sha256, purpose, limits, OPTIMIZER_VERSION)
        if cached is not None and self._artifacts.present(cached[0].sha256, cached[0].bytes):
            await anyio.to_thread.run_sync(self._artifacts.put, read.original.data,
                                           limiter=self._cpu)
            variant, warnings = cached
        else:
            variant, warnings = await anyio.to_thread.run_sync(
                self._make, read, purpose, limits, limiter=self._cpu)
            await self._cache.put(read.sha256, read.format.mime, variant, warnings,
                                  OPTIMIZER_VERSION)
        if variant.mime not in target.capabilities.image_mimes:
            raise AttachmentError(
                "attachment_runtime_unsupported",
                f"{read.original.name}: the {target.runtime} runtime cannot carry {variant.mime}")
        return PlannedAttachment(position, read.original.name, read.sha256, read.format.mime,
                                 len(read.original.data), variant, warnings)

    async def _plan_document(self, position: int, read: _Read, target: Target,
                             entry: VisionEntry) -> PlannedAttachment:
        recipient = Recipient(target.runtime, target.member, target.capabilities, entry,
                              target.documents,
                              target.capabilities.image_purpose or f"{target.runtime}-image")
        derived = await anyio.to_thread.run_sync(self._derive_document, read, recipient,
                                                 limiter=self._cpu)
        return PlannedAttachment(position, read.original.name, read.sha256, read.format.mime,
                                 len(read.original.data), derived.variant, derived.warnings,
                                 kind=read.format.kind, route=derived.route,
                                 pages=derived.pages, page_variants=derived.page_variants)

    def _derive_document(self, read: _Read, recipient: Recipient) -> Derived:
        self._artifacts.put(read.original.data)
        derived = derive_document(read.original.data, read.format, read.original.name,
                                  recipient)
        for blob in derived.blobs:
            self._artifacts.put(blob)
        return derived

    def _read(self, source: Path | Original) -> _Read:
        original = source if isinstance(source, Original) else read_original(source)
        return _Read(original, hashlib.sha256(original.data).hexdigest(),
                     sniff(original.data[:SNIFF_BYTES]))

    def _make(self, read: _Read, purpose: str,
              limits: Limits) -> tuple[PlannedVariant, tuple[str, ...]]:
        self._artifacts.put(read.original.data)
        variant, warnings, data = derive(read.original.data, read.format, read.original.name,
                                          purpose, limits)
        self._artifacts.put(data)
        return variant, warnings


def _failure(exc: AttachmentError, name: str, target: Target) -> AttachmentFailure:
    return AttachmentFailure(exc.failure.code, exc.failure.message, exc.failure.diagnostic,
                             name, target.member)


def _markers(target: Target, text: str, kinds: list[str]) -> list[AttachmentFailure]:
    unknown = unknown_markers(text, kinds)
    if not unknown:
        return []
    count = len(kinds)
    named = ", ".join(label(kind, n) for n, kind in enumerate(kinds, 1))
    return [AttachmentFailure(
        "attachment_marker_unknown",
        f"the text names {', '.join(unknown)}, but the message has {count} "
        f"attachment{'s' if count != 1 else ''} ({named}, in the order given); fix the marker "
        "or attach the file", member=target.member)]
