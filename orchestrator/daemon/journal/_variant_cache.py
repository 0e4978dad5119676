"""The planner's variant cache, kept in the journal's file (table ``variants``): a variant
already made for the same original bytes, purpose, limits and optimizer version is not made
again. It is a cache: losing a row only costs one normalization."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchestrator.attachments.variants import PlannedVariant

if TYPE_CHECKING:
    from orchestrator.attachments.normalize import Limits
    from orchestrator.daemon.journal._engine import AsyncJournal, Journal, Migrations

__all__ = ["MIGRATIONS", "JournalVariantCache"]

MIGRATIONS: Migrations = {
    2: """
    CREATE TABLE variants (
        original_sha256 TEXT NOT NULL,
        purpose TEXT NOT NULL,
        limits TEXT NOT NULL,
        optimizer TEXT NOT NULL,
        original_mime TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        warnings TEXT NOT NULL,
        PRIMARY KEY (original_sha256, purpose, limits, optimizer)
    );
    """,
}


class JournalVariantCache:
    """The ``VariantCache`` the planner uses, over the journal's connection (its calls run in
    the journal's one writer thread)."""

    def __init__(self, journal: AsyncJournal) -> None:
        self._journal = journal

    async def get(self, original_sha256: str, purpose: str, limits: Limits,
                  optimizer: str) -> tuple[PlannedVariant, tuple[str, ...]] | None:
        return await self._journal.run(_get, original_sha256, purpose, limits, optimizer)

    async def put(self, original_sha256: str, original_mime: str, variant: PlannedVariant,
                  warnings: tuple[str, ...], optimizer: str) -> None:
        await self._journal.run(_put, original_sha256, original_mime, variant, warnings,
                                optimizer)


def _get(journal: Journal, original_sha256: str, purpose: str, limits: Limits,
         optimizer: str) -> tuple[PlannedVariant, tuple[str, ...]] | None:
    row = journal.connection.execute(
        "SELECT variant_id, purpose, sha256, mime, width, height, bytes, warnings "
        "FROM variants WHERE original_sha256 = ? AND purpose = ? AND limits = ? "
        "AND optimizer = ?", (original_sha256, purpose, limits.to_json(), optimizer),
    ).fetchone()
    if row is None:
        return None
    variant = PlannedVariant(row["variant_id"], row["purpose"], row["sha256"], row["mime"],
                             row["width"], row["height"], row["bytes"], limits)
    return variant, tuple(json.loads(row["warnings"]))


def _put(journal: Journal, original_sha256: str, original_mime: str, variant: PlannedVariant,
         warnings: tuple[str, ...], optimizer: str) -> None:
    with journal.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO variants (original_sha256, purpose, limits, optimizer, "
            "original_mime, variant_id, sha256, mime, width, height, bytes, warnings) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (original_sha256, variant.purpose, variant.limits.to_json(), optimizer,
             original_mime, variant.variant_id, variant.sha256, variant.mime,
             variant.width, variant.height, variant.bytes, json.dumps(list(warnings))),
        )
