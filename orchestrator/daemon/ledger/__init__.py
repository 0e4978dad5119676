"""The ledger (docs/costs.md): what every turn cost, and the budgets that stop a member
before the money is gone.

- ``_service``: ``Ledger``, the face the daemon builds; ``_meter``: what one member's runtime
  sees of it; ``_charge``: one turn attempt and its charge; ``_spend``: the totals;
- ``_budgets``, ``_holds``, ``_stops``: budgets, the holds they put, the turns they stop;
- ``_journal``: its tables; ``_writer``: charges into them, in order;
- ``_accounts``: costs and budgets as the control API shows and changes them.
"""

from __future__ import annotations

from orchestrator.daemon.ledger._accounts import Accounts
from orchestrator.daemon.ledger._journal import MIGRATIONS
from orchestrator.daemon.ledger._service import Ledger

__all__ = ["MIGRATIONS", "Accounts", "Ledger"]
