"""The merge queue (docs/land.md): a done task's commits merged onto the team's integration
branch one at a time, checked there inside the owner's boundary, landed only when the check
passed; what fails goes back to its owner, and after ``integrate_retries`` to the operator.

- ``_service``: ``Land``, the face the daemon builds (the queue, its workers, recovery);
- ``_journal``: its tables (``land_entries``, ``land_teams``) and typed async methods;
- ``_git``: the integration branch, the scratch worktrees, the merge, the compare-and-swap;
- ``_check``: the integration check inside the owner's boundary;
- ``_messages``: what the owner and the task's lifetime are told;
- ``_api``: the operator's methods (``teamctl queue``, ``teamctl integrate``).
"""

from __future__ import annotations

from orchestrator.daemon.land._api import LandApi
from orchestrator.daemon.land._journal import MIGRATIONS
from orchestrator.daemon.land._service import Land

__all__ = ["MIGRATIONS", "Land", "LandApi"]
