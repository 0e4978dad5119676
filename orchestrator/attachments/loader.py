"""Delivery-time loading of planned variants: the bytes from the artifact store, verified
against their sha256, rebuilt from the original when the artifact is missing or corrupted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from orchestrator.attachments import documents
from orchestrator.attachments.artifacts import ArtifactMissing, ArtifactStore
from orchestrator.attachments.sniff import SNIFF_BYTES, sniff
from orchestrator.attachments.variants import derive
from orchestrator.contracts import ImagePart

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.attachments.variants import PlannedAttachment, PlannedVariant

__all__ = ["VariantLoader"]


class VariantLoader:
    """Loads the variants a claimed delivery carries (CPU and disk in worker threads)."""

    def __init__(self, artifacts: ArtifactStore, *, workers: int = 2) -> None:
        self._artifacts = artifacts
        self._cpu = anyio.CapacityLimiter(workers)

    async def load(self, original_sha256: str, variant: PlannedVariant) -> ImagePart:
        """The variant's verified bytes; rebuilt from the original if the artifact is missing
        or corrupted (deterministic encoding gives the same bytes); ArtifactMissing if not."""
        return await anyio.to_thread.run_sync(self._load, original_sha256, variant,
                                              limiter=self._cpu)

    def _load(self, original_sha256: str, variant: PlannedVariant) -> ImagePart:
        try:
            data = self._artifacts.get(variant.sha256)
        except ArtifactMissing:
            data = self._rebuild(original_sha256, variant)
        return ImagePart(variant.mime, variant.width, variant.height, variant.sha256, data,
                         self._artifacts.path(variant.sha256))

    async def original(self, sha256: str) -> tuple[bytes, Path | None]:
        """An original file's verified bytes and its artifact path (a derived document's file,
        placed where a runtime's tools can read it); nothing if it is gone (its pages and text
        still go: the file is an extra)."""
        try:
            data = await anyio.to_thread.run_sync(self._artifacts.get, sha256,
                                                  limiter=self._cpu)
        except ArtifactMissing:
            return b"", None
        return data, self._artifacts.path(sha256)

    async def load_document(self, attachment: PlannedAttachment) -> tuple[bytes, list[ImagePart]]:
        """A document's main variant (the PDF or text itself, or its page-marked text) and
        its rendered pages, verified; rebuilt from the original when an artifact is gone."""
        return await anyio.to_thread.run_sync(self._load_document, attachment,
                                              limiter=self._cpu)

    def _load_document(self, attachment: PlannedAttachment) -> tuple[bytes, list[ImagePart]]:
        wanted = (attachment.variant, *attachment.page_variants)
        found: dict[str, bytes] = {}
        for variant in wanted:
            try:
                found[variant.sha256] = self._artifacts.get(variant.sha256)
            except ArtifactMissing:
                found = self._rebuild_document(attachment)
                break
        pages = [ImagePart(v.mime, v.width, v.height, v.sha256, found[v.sha256],
                           self._artifacts.path(v.sha256)) for v in attachment.page_variants]
        return found[attachment.variant.sha256], pages

    def _rebuild_document(self, attachment: PlannedAttachment) -> dict[str, bytes]:
        original = self._artifacts.get(attachment.original_sha256)  # ArtifactMissing if gone
        made = documents.rebuild(original, sniff(original[:SNIFF_BYTES]), attachment.name,
                                 attachment.variant, attachment.page_variants)
        for variant in (attachment.variant, *attachment.page_variants):
            if variant.sha256 not in made:
                raise ArtifactMissing(variant.sha256, "gone, and rebuilding it gave other "
                                      "bytes (the PDF reader or optimizer changed)")
            self._artifacts.put(made[variant.sha256])
        return made

    def _rebuild(self, original_sha256: str, variant: PlannedVariant) -> bytes:
        original = self._artifacts.get(original_sha256)  # ArtifactMissing if gone too
        fmt = sniff(original[:SNIFF_BYTES])
        rebuilt, _, data = derive(original, fmt, original_sha256[:12], variant.purpose,
                                   variant.limits)
        if rebuilt.sha256 != variant.sha256:
            raise ArtifactMissing(variant.sha256, "gone, and rebuilding it gave other bytes "
                                  "(the optimizer changed)")
        self._artifacts.put(data)
        return data


