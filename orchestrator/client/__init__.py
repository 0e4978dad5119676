"""The client side: the ``teamctl`` commands (``cli``), the calls to the daemon over its socket
(``calls``), and ``doctor``. It imports the shared modules of ``orchestrator`` and never the
daemon's (``teamctl daemon`` starts it through one lazy import).

``client.call`` and the rest of ``calls`` are imported at their first use, not with the
package: ``teamctl --help`` never opens the socket, and every ``teamctl`` call pays for what
the CLI imports before it parses its arguments (orchestrator/client/lazy_commands.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator.client.calls import call, daemon_exit, ensure_daemon, ping

__all__ = ["call", "daemon_exit", "ensure_daemon", "ping"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from orchestrator.client import calls

        return getattr(calls, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
