"""What waits on the operator: the ``ask`` profile's permission requests and questions
(docs/approvals.md), and the rules ``approve --always`` kept.

- ``_service``: ``Approvals``, the face the daemon builds, and each member's approver;
- ``_journal``: the approvals' table; ``_kept_rules``: the kept rules' table;
- ``_rules``: what a rule matches.
"""

from __future__ import annotations

from orchestrator.daemon.approvals._journal import MIGRATIONS as APPROVAL_MIGRATIONS
from orchestrator.daemon.approvals._journal import ApprovalJournal
from orchestrator.daemon.approvals._kept_rules import MIGRATIONS as KEPT_RULE_MIGRATIONS
from orchestrator.daemon.approvals._service import (
    CONFIRM_WAIT,
    Approvals,
    MemberApprover,
    parse_rule,
)

__all__ = ["APPROVAL_MIGRATIONS", "CONFIRM_WAIT", "KEPT_RULE_MIGRATIONS", "ApprovalJournal",
           "Approvals", "MemberApprover", "parse_rule"]
