"""The journal's migrations, gathered at the composition root: each table's owner declares its
own beside its code, and this module puts them in their fixed order (script n: user_version
n), so the journal's engine and the queue import no owner.

A new migration takes the next number in its owner's part; numbers never change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.daemon import (
    admission,
    board,
    describe,
    forge,
    land,
    ledger,
    notify,
    queue,
    quota,
    slots,
    telemetry,
    worktrees,
)
from orchestrator.daemon.approvals import APPROVAL_MIGRATIONS, KEPT_RULE_MIGRATIONS
from orchestrator.daemon.journal import TEAM_MIGRATIONS, VARIANT_MIGRATIONS, collect
from orchestrator.daemon.queue import Store

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "open_journal"]

MIGRATIONS = collect(TEAM_MIGRATIONS, VARIANT_MIGRATIONS, queue.MIGRATIONS,
                     worktrees.MIGRATIONS, APPROVAL_MIGRATIONS, ledger.MIGRATIONS,
                     describe.MIGRATIONS, KEPT_RULE_MIGRATIONS, board.MIGRATIONS,
                     notify.MIGRATIONS, slots.MIGRATIONS, admission.MIGRATIONS,
                     land.MIGRATIONS, quota.MIGRATIONS, forge.MIGRATIONS,
                     telemetry.MIGRATIONS)
SCHEMA_VERSION = len(MIGRATIONS)


def open_journal(path: Path) -> Store:
    """The journal file at ``path``, migrated to ``SCHEMA_VERSION``."""
    return Store(path, MIGRATIONS)
