"""The client side: the ``teamctl`` commands (``cli``), the calls to the daemon over its socket
(``calls``), and ``doctor``. It imports the shared modules of ``orchestrator`` and never the
daemon's (``teamctl daemon`` starts it through one lazy import)."""

from __future__ import annotations

from orchestrator.client.calls import call, daemon_exit, ensure_daemon, ping

__all__ = ["call", "daemon_exit", "ensure_daemon", "ping"]
