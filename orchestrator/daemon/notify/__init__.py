"""Needs you, wherever you are (docs/notify.md): what needs the operator, pushed to ntfy
and the alert channels, and the taps and replies that come back.

- ``_service``: ``NotifyService``, one ``TeamNotifier`` per team with ``[notify]``;
- ``_needs_you``: what needs the operator now (the live view reads it too);
- ``_messages``: what a notification says; ``_policy``: how much is pushed, and when;
- ``_ntfy``, ``_alerts``: the channels; ``_tokens``, ``_responses``, ``_refusals``,
  ``_cursor``: the buttons' tokens, the response topic applied, what it refused, where its
  reader is;
- ``_journal``: its tables; ``_api``: ``notify_test`` on the control API.
"""

from __future__ import annotations

from orchestrator.daemon.notify._api import NotifyApi
from orchestrator.daemon.notify._journal import MIGRATIONS
from orchestrator.daemon.notify._needs_you import waiting
from orchestrator.daemon.notify._service import NotifyService, check_can_start

__all__ = ["MIGRATIONS", "NotifyApi", "NotifyService", "check_can_start", "waiting"]
