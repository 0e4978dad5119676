"""Serving the live view: uvicorn inside the daemon's event loop, on a loopback socket bound
on the first ``teamctl ui`` and kept for the daemon's life. uvicorn's own signal handling is
off (the daemon owns SIGTERM) and so is its access log (a first request's URL carries the
token). Its connections are capped, timed out and kept off the daemon's last descriptors
(``guard``)."""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING

import structlog
import uvicorn

from orchestrator.daemon.web.app import build_app
from orchestrator.daemon.web.guard import ConnectionGuard, GuardedSocket, guarded_protocol
from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anyio.abc import TaskGroup

    from orchestrator.daemon.web.app import View
    from orchestrator.daemon.web.settings import WebSettings

__all__ = ["WebServer"]

log = structlog.get_logger("teamctl.web")


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the daemon handles its signals


class WebServer:
    def __init__(self, view: View, tg: TaskGroup, settings: WebSettings) -> None:
        self._view = view
        self._tg = tg
        self.port: int | None = None
        self.changes = view.changes
        self.guard = ConnectionGuard(settings)
        view.sessions.idle = settings.session_idle
        view.sessions.lifetime = settings.session_lifetime

    def url(self, port: int | None) -> str:
        """Start serving (on ``port``, or any free one) unless already; a URL with a new
        one-time token."""
        if self.port is None:
            self._start(port or 0)
        elif port and port != self.port:
            raise UsageError(f"the live view is already served on port {self.port}; "
                             "restart the daemon to move it")
        return f"http://127.0.0.1:{self.port}/?token={self._view.sessions.new_token()}"

    def _start(self, port: int) -> None:
        # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets, and without it
        # every response on a kept-alive connection waits ~40 ms for a delayed ACK
        sock = GuardedSocket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.guard = self.guard
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot serve the live view on 127.0.0.1:{port}: "
                             f"{exc.strerror}; pick another --port") from None
        sock.listen(128)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self._view.sessions.port = self.port
        settings = self.guard.settings
        config = uvicorn.Config(build_app(self._view), log_config=None, access_log=False,
                                lifespan="off", timeout_graceful_shutdown=1,
                                http=guarded_protocol(self.guard),
                                timeout_keep_alive=int(max(1.0, settings.keep_alive)),
                                h11_max_incomplete_event_size=16 * 1024)
        server = _Server(config)
        sockets: list[socket.socket] = [sock]
        self._tg.start_soon(server.serve, sockets, name="live view")
        log.info("ui_serving", port=self.port)
