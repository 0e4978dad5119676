"""The live view, built on the first ``teamctl ui``: uvicorn, Starlette, the routes and the
page cost a daemon ~10 MiB of memory (of ~60), which a daemon that never serves the page need
not hold. The change feed (``status --watch``, the page's event stream) exists from the start."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.daemon.changes import Changes
    from orchestrator.daemon.web.server import WebServer

__all__ = ["LazyLiveView"]


class LazyLiveView:
    def __init__(self, changes: Changes, build: Callable[[], WebServer]) -> None:
        self.changes = changes
        self._build = build
        self._server: WebServer | None = None

    def url(self, port: int | None) -> str:
        """Serve the page (importing and building it the first time); a URL with a new
        one-time token (see ``WebServer.url``)."""
        if self._server is None:
            self._server = self._build()
        return self._server.url(port)
