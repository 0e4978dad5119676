"""The team's board (docs/board.md): tasks with dependencies, claimed in one transaction,
held by a member's launch and released when it does not come back.

- ``_service``: ``Board``, the face the daemon builds; ``_journal``: its tables and reads;
- ``_claims``: claims and leases; ``_writes``: the other writes; ``_review``: a review settled;
- ``_gate``: the check before done; ``_leases``: leases that follow the members' launches;
  ``_offers``: an idle claimer handed the next ready task; ``_notices``: the events about a
  task told to its current owner, once per source id; ``_silence``: no silent completions;
- ``_api`` and ``_members``: the board on the control API, the operator's and a member's.
"""

from __future__ import annotations

from orchestrator.daemon.board import _journal, _notices
from orchestrator.daemon.board._api import BoardApi
from orchestrator.daemon.board._gate import (
    CheckRun,
    Gates,
    minimal_environ,
    refused_inside,
    run_check,
)
from orchestrator.daemon.board._leases import LEASE_CHECK_INTERVAL, Leases
from orchestrator.daemon.board._members import MemberBoardApi, working_on
from orchestrator.daemon.board._notices import Notice, Told
from orchestrator.daemon.board._offers import Offers
from orchestrator.daemon.board._service import DEFAULT_GRACE, Board, GateResult
from orchestrator.daemon.board._silence import Silence
from orchestrator.daemon.board._writes import OPERATOR, TEAMCTL

MIGRATIONS = {**_journal.MIGRATIONS, **_notices.MIGRATIONS}

__all__ = ["DEFAULT_GRACE", "LEASE_CHECK_INTERVAL", "MIGRATIONS", "OPERATOR", "TEAMCTL", "Board",
           "BoardApi", "CheckRun", "GateResult", "Gates", "Leases", "MemberBoardApi", "Notice",
           "Offers", "Silence", "Told", "minimal_environ", "refused_inside", "run_check",
           "working_on"]
