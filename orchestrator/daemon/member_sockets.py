"""A sandboxed member's own socket to the daemon (docs/security.md, "Sandbox").

The control socket is hidden from a sandboxed member (it sits in teamctl's state dir), so its
``teamctl mcp`` reaches the daemon through a socket of its own, bound into its sandbox: one
per member, in its private dir (``members/<team>/<member>/mcp/teamctl.sock``, 0600 in a 0700
dir), served by the daemon until it stops. A connection there is served by
``ControlServer.handle_member_connection``: ``member.*`` methods only, with that member's
current token only, from its own processes (peers.py) — the same checks as on the control
socket, and nothing else the operator's CLI may do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from orchestrator.daemon.connections import ControlSocket
from orchestrator.paths import ensure_private_dir

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from anyio.abc import TaskGroup

    from orchestrator.daemon.connections import Connection

__all__ = ["MemberSockets"]

log = structlog.get_logger("teamctl.member_sockets")

_MAX_CONNECTIONS = 16  # a member's MCP servers (one per CLI process that starts one)


class MemberSockets:
    """Serves each sandboxed member's socket in ``tg`` (``ensure``), ``handler`` once set."""

    def __init__(self, tg: TaskGroup, *, idle_timeout: float = 30.0) -> None:
        self._tg = tg
        self._idle_timeout = idle_timeout
        self._serving: dict[tuple[str, str], Path] = {}
        self.handler: Callable[[Connection, str, str], Awaitable[None]] | None = None

    def ensure(self, team: str, member: str, path: Path) -> Path:
        """Serve ``path`` for ``team``'s ``member`` (once; again for a new path)."""
        if self._serving.get((team, member)) == path:
            return path
        ensure_private_dir(path.parent)

        async def handle(connection: Connection) -> None:
            if self.handler is not None:
                await self.handler(connection, team, member)

        socket = ControlSocket(path, handle, max_connections=_MAX_CONNECTIONS,
                               idle_timeout=self._idle_timeout)
        self._tg.start_soon(socket.run, name=f"member socket {team}/{member}")
        self._serving[(team, member)] = path
        log.info("member_socket_serving", team=team, member=member, socket=str(path))
        return path
