"""The daemon's queue in the journal: messages and their deliveries
(``queued → prepared → sent → answered | failed``), their attachments and the refusals.

- ``_store``: ``Store`` (the journal file with these tables' calls) and ``AsyncStore`` (the
  daemon's one way in); ``_schema``: the tables' migrations; ``_delivery``: a delivery's row.

It sits below the mailbox, the board and the ledger — each reads the journal through
``AsyncStore`` — so it imports none of them.
"""

from __future__ import annotations

from orchestrator.daemon.queue._delivery import AttemptStamp, Delivery, Origin
from orchestrator.daemon.queue._schema import MIGRATIONS
from orchestrator.daemon.queue._store import AsyncStore, NewMessage, Store

__all__ = ["MIGRATIONS", "AsyncStore", "AttemptStamp", "Delivery", "NewMessage", "Origin", "Store"]
