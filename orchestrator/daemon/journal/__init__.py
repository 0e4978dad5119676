"""The journal: one SQLite file, its engine and the tables no subsystem owns alone.

- ``_engine``: ``Journal`` (the connection, transactions, migrations) and ``AsyncJournal``
  (the writer thread, group commit); the owners declare their own tables beside their code,
  and the composition root gives the journal their migrations in order;
- ``_team_records``: the teams launched and their members; ``_variant_cache``: the planner's
  variant cache.
"""

from __future__ import annotations

from orchestrator.daemon.journal._engine import AsyncJournal, Journal, Migrations, collect
from orchestrator.daemon.journal._team_records import MIGRATIONS as TEAM_MIGRATIONS
from orchestrator.daemon.journal._team_records import TeamJournal, TeamRecord
from orchestrator.daemon.journal._variant_cache import MIGRATIONS as VARIANT_MIGRATIONS
from orchestrator.daemon.journal._variant_cache import JournalVariantCache

__all__ = ["TEAM_MIGRATIONS", "VARIANT_MIGRATIONS", "AsyncJournal", "Journal",
           "JournalVariantCache", "Migrations", "TeamJournal", "TeamRecord", "collect"]
