"""The quota (docs/costs.md, "Quota windows"): members whose runtime spends one credential are
one account, with one rate-limit window and one decision for all of them.

- ``_identity``: which account a member spends (its safe name: ``claude:operator``,
  ``openai:key…3f2a``);
- ``_windows``: one account's window — its last report, its hold, its probe — and the words
  shown for each pause;
- ``_service``: ``Quota``, the face the ledger builds and its gate asks;
- ``_journal``: the held accounts, so a hold outlives the daemon;
- ``_api``: ``teamctl accounts``, the control method.
"""

from __future__ import annotations

from orchestrator.daemon.quota._api import QuotaApi
from orchestrator.daemon.quota._journal import MIGRATIONS
from orchestrator.daemon.quota._service import PROBE_AFTER, Quota, probe_after_from_env

__all__ = ["MIGRATIONS", "PROBE_AFTER", "Quota", "QuotaApi", "probe_after_from_env"]
