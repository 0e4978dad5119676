"""The live view's port cannot lock the operator out (issue 25).

Any local uid can connect to the loopback port before signing in, so the listening socket
(``GuardedSocket``) admits a connection it accepts only while the live view holds fewer than
``max_connections`` and the daemon has more than ``fd_reserve`` descriptors free (RLIMIT_NOFILE
minus the count of /proc/self/fd); the rest get a 503 and are closed there, before asyncio
accepts the next one — so the control socket, the journal and the members' pipes always have
descriptors left, and asyncio never meets EMFILE on this port. (Admitting in the protocol's
``connection_made`` was too late: asyncio accepts a whole backlog before any of them runs.)

uvicorn's h11 protocol has no header timeout; here a connection that is not serving a request
``header_timeout`` seconds after it opened (or after its last response) is closed — a half-sent
request head, or an idle kept-alive connection, holds nothing for long.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import time
from typing import TYPE_CHECKING, Any

import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

    from orchestrator.daemon.web.settings import WebSettings

__all__ = ["ConnectionGuard", "GuardedSocket", "free_descriptors", "guarded_protocol"]

log = structlog.get_logger("teamctl.web")

_LOG_EVERY = 10.0  # seconds between two "refused" log lines under a flood (with a count)
_REFUSALS_PER_CALL = 64  # then asyncio's loop runs other work before accepting again
_BUSY_BODY = (b'{"ok":false,"error":{"code":"ui_busy","message":"the live view holds all the '
              b'connections it may: close a tab, or try again in a few seconds",'
              b'"retryable":true}}')  # the one error shape of every route (security.py)
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
         b"Content-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 5\r\n\r\n%s"
         % (len(_BUSY_BODY), _BUSY_BODY))


def free_descriptors() -> int:
    """Descriptors this process may still open (0 if it cannot even look)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        used = len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0
    return (1 << 30 if soft == resource.RLIM_INFINITY else soft) - used


class ConnectionGuard:
    """Who gets in: the connection cap and the descriptor reserve, counted."""

    def __init__(self, settings: WebSettings) -> None:
        self.settings = settings
        self.open = 0
        self.peak = 0
        self.refused = 0
        self._unlogged = 0
        self._logged_at = -_LOG_EVERY

    def admit(self) -> bool:
        if self.open < self.settings.max_connections and (
                free_descriptors() > self.settings.fd_reserve):
            self.open += 1
            self.peak = max(self.peak, self.open)
            return True
        self.refused += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= _LOG_EVERY:  # a flood is one line per interval
            log.warning("ui_connections_refused", count=self._unlogged, open=self.open,
                        max_connections=self.settings.max_connections,
                        fd_reserve=self.settings.fd_reserve)
            self._logged_at, self._unlogged = now, 0
        return False

    def release(self) -> None:
        self.open -= 1


class GuardedSocket(socket.socket):
    """A listening socket whose ``accept`` (asyncio's, for uvicorn) returns only admitted
    connections; the ones the guard refuses are answered 503 and closed here."""

    guard: ConnectionGuard

    def accept(self) -> tuple[socket.socket, Any]:
        for _ in range(_REFUSALS_PER_CALL):
            conn, address = super().accept()  # BlockingIOError: none waits, asyncio stops
            if self.guard.admit():
                return conn, address
            with contextlib.suppress(OSError):
                conn.send(_BUSY, socket.MSG_DONTWAIT)
            conn.close()
        raise BlockingIOError  # more wait: asyncio's loop comes back for them


def guarded_protocol(guard: ConnectionGuard) -> type[H11Protocol]:
    """uvicorn's h11 protocol, counted by ``guard``, with a header timeout."""

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            guard.release()
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(guard.settings.header_timeout, self._expire)

        def _expire(self) -> None:
            self._deadline = None
            if self.cycle is None or self.cycle.response_complete:  # no request is served
                self.transport.close()

    return Guarded
