"""A sandboxed member's own socket to the daemon (docs/security.md, "Sandbox").

The control socket is hidden from a sandboxed member (it sits in teamctl's state dir), so its
``teamctl mcp`` reaches the daemon through a socket of its own, bound into its sandbox: one
per member, in its private dir (``members/<team>/<member>/mcp/teamctl.sock``, 0600 in a 0700
dir), served by the daemon until it stops. A connection there is served by
``ControlServer.handle_member_connection``: ``member.*`` methods only, with that member's
current token only, from its own processes (peers.py) — the same checks as on the control
socket, and nothing else the operator's CLI may do.

The socket's directory is the daemon's (the member's private dir is never writable by the
member: orchestrator/daemon/members/_dirs.py), made and bound through a descriptor, never
following a link (``ControlSocket(owns_name=True)``). A socket that
fails for one member — its name taken by something else, its directory gone — is that
member's trouble: logged once per cause, bound again with a growing delay, never the
daemon's end (every error of its task is caught there, ``ExceptionGroup`` included); while it
is down the member's sandbox cannot bind it and its start fails, typed, under its restart
policy's backoff.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.daemon.control._connections import ControlSocket
from orchestrator.paths import remove_temp_socket_dir, temp_socket_dir

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from anyio.abc import TaskGroup

    from orchestrator.daemon.control._connections import Connection

__all__ = ["MemberSockets", "socket_dir"]

log = structlog.get_logger("teamctl.member_sockets")

_RETRY_FIRST, _RETRY_MAX = 0.5, 30.0
_MAX_CONNECTIONS = 16  # a member's MCP servers (one per CLI process that starts one)
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; kept clear of it
_TEMP_PREFIX = "tc-mcp-"  # a socket dir made in the temp dir (removed when serving ends)


def socket_dir(member_dir: Path) -> Path:
    """Where a member's own socket is bound: ``member_dir/mcp`` when the socket's path there
    fits the kernel's limit, else a private dir in the temp dir (``temp_socket_dir``: 0700,
    random name, recorded in the member's dir so a killed daemon's is used again) — a long
    ``TEAMCTL_HOME`` never makes the bind fail (the sandbox binds it in at a short path)."""
    candidate = member_dir / "mcp"
    if len(os.fsencode(candidate / "teamctl.sock")) <= _SOCKET_PATH_MAX:
        return candidate
    return temp_socket_dir(member_dir / "mcp-dir", _TEMP_PREFIX)


class MemberSockets:
    """Serves each sandboxed member's socket in ``tg`` (``ensure``), each connection by
    ``handler(connection, team, member)``."""

    def __init__(self, tg: TaskGroup, *,
                 handler: Callable[[Connection, str, str], Awaitable[None]],
                 idle_timeout: float = 30.0) -> None:
        self._tg = tg
        self._idle_timeout = idle_timeout
        self._serving: dict[tuple[str, str], Path] = {}
        self._handler = handler

    def directory(self, team: str, member: str, member_dir: Path) -> Path:
        """The dir of the member's socket: the one it is served in already, else
        ``socket_dir`` (a member's restarts keep one socket)."""
        serving = self._serving.get((team, member))
        return serving.parent if serving is not None else socket_dir(member_dir)

    def ensure(self, team: str, member: str, path: Path) -> Path:
        """Serve ``path`` for ``team``'s ``member`` (once; again for a new path)."""
        if self._serving.get((team, member)) == path:
            return path

        async def handle(connection: Connection) -> None:
            await self._handler(connection, team, member)

        async def run() -> None:
            await self._serve(team, member, path, handle)

        self._tg.start_soon(run, name=f"member socket {team}/{member}")
        self._serving[(team, member)] = path
        log.info("member_socket_serving", team=team, member=member, socket=str(path))
        return path

    async def _serve(self, team: str, member: str, path: Path,
                     handle: Callable[[Connection], Awaitable[None]]) -> None:
        """Serve until cancelled; whatever ends a round is this member's, then again. At the
        end a socket dir made in the temp dir (``socket_dir``) goes with it."""
        try:
            await self._rounds(team, member, path, handle)
        finally:
            if self._serving.get((team, member)) == path:
                del self._serving[(team, member)]
            remove_temp_socket_dir(path.parent, _TEMP_PREFIX)

    async def _rounds(self, team: str, member: str, path: Path,
                      handle: Callable[[Connection], Awaitable[None]]) -> None:
        delay, causes = _RETRY_FIRST, set[str]()
        while True:
            try:
                socket = ControlSocket(path, handle, max_connections=_MAX_CONNECTIONS,
                                       idle_timeout=self._idle_timeout, owns_name=True)
                await socket.run()
            except Exception as exc:  # a group too: the member's trouble, never the daemon's
                cause = _cause(exc)
                if cause not in causes:
                    causes.add(cause)
                    log.error("member_socket_failed", team=team, member=member,
                              socket=str(path), error=cause, retry_in=delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)


def _cause(exc: BaseException) -> str:
    """One line for what ended the socket (the inner error of a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"
