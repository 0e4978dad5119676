"""The forge in the daemon (docs/forge.md): the team's work taken from GitHub issues and
handed back there.

The face: ``Forges`` (each running team's poll loop, what ``status`` shows), ``Intake`` and
``WriteBack`` (one round each), ``MIGRATIONS``; the client itself — the Forge protocol,
GitHub's module, the token that does not print — is ``orchestrator/forge``, shared with
``teamctl doctor``, whose names are re-exported here. The package's own: ``_journal`` (the
issues taken, migration 23), ``_intake`` (issues become tasks, once), ``_write_back``
(comments on claim, review, done), ``_pull_journal`` (the pull requests, migration 25),
``_push`` (a task's branch pushed with the operator's git credentials), ``_pulls`` (pull
requests opened, followed, their CI and reviews told to the task's owner, merged),
``_pull_messages`` (what they say), ``_service`` (Forges). The token is read by the daemon from
the variable the team file names, never a member's.
"""

from __future__ import annotations

from orchestrator.daemon.forge import _journal, _pull_journal
from orchestrator.daemon.forge._intake import Intake, IntakeRound
from orchestrator.daemon.forge._pulls import Pulls, branch_of
from orchestrator.daemon.forge._service import Forges, ForgeStatus
from orchestrator.daemon.forge._write_back import WriteBack
from orchestrator.forge import Forge, Issue, RateLimit, RepoAccess, Token, open_forge, read_token

MIGRATIONS = {**_journal.MIGRATIONS, **_pull_journal.MIGRATIONS}

__all__ = ["MIGRATIONS", "Forge", "ForgeStatus", "Forges", "Intake", "IntakeRound", "Issue",
           "Pulls", "RateLimit", "RepoAccess", "Token", "WriteBack", "branch_of", "open_forge",
           "read_token"]
