"""The mailbox: a journaled FIFO per member, delivered one turn at a time, and the
messages the control API and the router send through it.

- ``_service``: ``Mailbox``, the face the daemon builds; ``_queues``: one runner per member;
- ``_turns``: one delivery through its turn; ``_records``: its progress into the journal;
- ``_waiters``: ``--wait``; ``_hooks``: who hears of an answer or a change;
- ``_messages``: ``Messages``, a message planned, journaled, waited for and read back.

The queue's rows themselves are ``daemon.queue``'s (the journal side every owner reads).
"""

from __future__ import annotations

from orchestrator.daemon.mailbox._messages import Messages
from orchestrator.daemon.mailbox._service import Mailbox

__all__ = ["Mailbox", "Messages"]
