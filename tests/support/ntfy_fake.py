"""A local ntfy server for the tests: no ntfy server is installable here (Debian has no
package; PyPI's and npm's ``ntfy`` are clients), so this implements the part of ntfy's
documented API that teamctl uses (docs.ntfy.sh, "Publishing", "Subscribing: JSON stream"):

- publish: ``POST``/``PUT /`` with a JSON body naming its ``topic`` (title, message, tags,
  priority, actions, click kept as sent), and ``POST``/``PUT /<topic>`` with the message as
  the body (what a tapped ``http`` action does);
- subscribe: ``GET /<topic>/json`` — one JSON object a line: an ``open`` event, then the
  cached messages after ``since`` (``all``, a unix time, or a message id), then each new one
  as it is published, and ``keepalive`` events; ``poll=1`` answers the cached ones and ends.

It runs uvicorn in a thread of the test process, so a test can stop it (connections refused,
open streams cut) and start it again on the same port with its cache kept, as a real server
keeps its message cache across a restart. Tests wait on ``wait_for`` (a condition with a
deadline), never on sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from starlette.requests import Request

KEEPALIVE = 1.0


class _QuietCut(logging.Filter):
    """uvicorn logs each stream this fake cuts at its stop as "Exception in ASGI
    application" (a CancelledError, and a page of traceback in a benchmark's output): that
    cut is the stop itself, not the fake's error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class _Server(uvicorn.Server):
    """uvicorn's server, stopped at once: uvicorn looks at ``should_exit`` every 0.1 s, then
    pauses 0.1 s more for the connections it cut — a fifth of a second each stop, in every
    test with this fake. Here its loop waits for ``stop`` itself, and its shutdown waits only
    for what it cut: the listeners closed, idle connections closed, each open stream's task
    cancelled (uvicorn then closes its connection), as a forced exit of uvicorn's does."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def stop(self) -> None:
        """From the test's thread: stop serving."""
        self.should_exit = self.force_exit = True
        if self._stopping is not None:
            loop, stopping = self._stopping
            with contextlib.suppress(RuntimeError):  # its loop has closed: stopped already
                loop.call_soon_threadsafe(stopping.set)

    async def main_loop(self) -> None:
        stopping = asyncio.Event()
        self._stopping = (asyncio.get_running_loop(), stopping)
        await self.on_tick(0)  # the Date header, as uvicorn's loop sets it first
        if not self.should_exit:  # else stop() came before the event was there to set
            await stopping.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        streams = list(self.server_state.tasks)
        quiet, log = _QuietCut(), logging.getLogger("uvicorn.error")
        log.addFilter(quiet)
        try:
            for task in streams:
                task.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
        finally:
            log.removeFilter(quiet)
        for server in self.servers:
            await server.wait_closed()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeNtfy:
    """The server: ``url``, ``messages(topic)``, ``wait_for``, ``stop()``/``start()``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._loop_events: set[asyncio.Event] = set()
        self.received_at: dict[str, float] = {}  # message id -> time.time() it arrived
        self.subscribed_at: list[float] = []  # when each GET /<topic>/json came
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(routes=[
            Route("/", self._publish_json, methods=["POST", "PUT"]),
            Route("/{topic}/json", self._subscribe, methods=["GET"]),
            Route("/{topic}", self._publish_text, methods=["POST", "PUT"]),
        ])

    # -- the test's side ----------------------------------------------------------------------

    def start(self) -> None:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error",
                                timeout_graceful_shutdown=1, lifespan="off")
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the fake ntfy server did not start"
            assert self._thread.is_alive(), "the fake ntfy server died starting"
            time.sleep(0.01)  # polling uvicorn's own started flag, bounded

    def stop(self) -> None:
        """Down: open streams cut, new connections refused; the cache is kept."""
        assert self._server is not None and self._thread is not None
        self._server.stop()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the fake ntfy server did not stop"
        self._server = None

    def messages(self, topic: str) -> list[dict[str, Any]]:
        with self._cond:
            return [m for m in self._messages if m["topic"] == topic]

    def wait_for(self, topic: str, predicate: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 30.0) -> list[dict[str, Any]]:
        """The topic's messages once ``predicate`` holds for them (AssertionError after
        ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for m in self._messages if m["topic"] == topic]
                if predicate(found):
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"waited {timeout} s on {topic}: {found[-5:]}"
                self._cond.wait(left)

    # -- the server's side --------------------------------------------------------------------

    def _add(self, message: dict[str, Any]) -> dict[str, Any]:
        message = {"id": secrets.token_hex(6), "time": int(time.time()), "event": "message",
                   **message}
        with self._cond:
            self.received_at[message["id"]] = time.time()
            self._messages.append(message)
            self._cond.notify_all()
        for event in list(self._loop_events):
            event.set()
        return message

    async def _publish_json(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"code": 40001, "error": "invalid request"}, status_code=400)
        if not isinstance(body, dict) or not isinstance(body.get("topic"), str):
            return JSONResponse({"code": 40001, "error": "no topic"}, status_code=400)
        fields = ("topic", "title", "message", "tags", "priority", "actions", "click")
        return JSONResponse(self._add({k: body[k] for k in fields if k in body}))

    async def _publish_text(self, request: Request) -> Response:
        text = (await request.body()).decode("utf-8", "replace")
        return JSONResponse(self._add({"topic": request.path_params["topic"],
                                       "message": text}))

    def _after(self, topic: str, since: str) -> list[dict[str, Any]]:
        found = self.messages(topic)
        if since == "all":
            return found
        if since.isdigit():
            return [m for m in found if m["time"] >= int(since)]
        ids = [m["id"] for m in found]
        return found[ids.index(since) + 1:] if since in ids else found

    async def _subscribe(self, request: Request) -> Response:
        topic = request.path_params["topic"]
        self.subscribed_at.append(time.time())
        since = request.query_params.get("since")
        cached = self._after(topic, since) if since else []
        if request.query_params.get("poll") in ("1", "true", "yes"):
            return Response("".join(json.dumps(m) + "\n" for m in cached),
                            media_type="application/x-ndjson")
        before = {m["id"] for m in self.messages(topic)}  # older ones: only what since asks
        return StreamingResponse(self._stream(topic, cached, before),
                                 media_type="application/x-ndjson")

    async def _stream(self, topic: str, cached: list[dict[str, Any]],
                      sent: set[str]) -> AsyncIterator[str]:
        event = asyncio.Event()
        self._loop_events.add(event)
        try:
            yield json.dumps({"id": secrets.token_hex(6), "time": int(time.time()),
                              "event": "open", "topic": topic}) + "\n"
            for message in cached:
                yield json.dumps(message) + "\n"
            while True:
                try:
                    await asyncio.wait_for(event.wait(), KEEPALIVE)
                except TimeoutError:
                    yield json.dumps({"event": "keepalive", "topic": topic,
                                      "time": int(time.time())}) + "\n"
                event.clear()
                for message in self.messages(topic):
                    if message["id"] not in sent:
                        sent.add(message["id"])
                        yield json.dumps(message) + "\n"
        finally:
            self._loop_events.discard(event)
