"""The attachment planner's cache held in memory: what the planner's tests and the
normalisation benchmark give a ``Planner`` in place of the journal's table."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.attachments.normalize import Limits
    from orchestrator.attachments.variants import PlannedVariant


class MemoryPlanCache:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, Limits, str], tuple[PlannedVariant, tuple[str, ...]]] = {}

    async def get(self, original_sha256: str, purpose: str, limits: Limits, optimizer: str
                  ) -> tuple[PlannedVariant, tuple[str, ...]] | None:
        return self.rows.get((original_sha256, purpose, limits, optimizer))

    async def put(self, original_sha256: str, original_mime: str, variant: PlannedVariant,
                  warnings: tuple[str, ...], optimizer: str) -> None:
        self.rows[(original_sha256, variant.purpose, variant.limits, optimizer)] = (variant,
                                                                                   warnings)
