"""ntfy, as its documentation describes it (docs.ntfy.sh, "Publishing" and "Subscribing"):
publish a message as JSON (``POST /`` with ``topic`` in the body; ``actions`` of type
``http`` are the buttons, each posting its ``body`` to a URL when tapped), and follow a topic
over one outbound streaming request (``GET /<topic>/json?since=…``: one JSON object a line,
``open``, ``keepalive`` and ``message`` events).

``Ntfy.follow`` reconnects with exponential backoff (first/max settable: a test makes them
short) and resumes from the last message id it handed on, so nothing posted while the
connection was down is lost (the server keeps messages for its cache duration, 12 h on
ntfy.sh). Every request has a deadline; failures are ``NotifyUnreachable``.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import structlog

from orchestrator.errors import NotifyUnreachable
from orchestrator.tls import client_context

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from orchestrator.daemon.notify._policy import Backoff

__all__ = ["Ntfy"]

log = structlog.get_logger("teamctl.notify")

MAX_LINE_BYTES = 64 * 1024  # a message line of ntfy's is at most 4 KiB of text plus fields


class Ntfy:
    """One ntfy server, with the operator's access token (``token_env``) if any."""

    def __init__(self, server: str, token: str | None, backoff: Backoff) -> None:
        self.server = server.rstrip("/")
        self.backoff = backoff
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(headers=headers, trust_env=False,
                                         verify=client_context(trust_env=False),
                                         timeout=backoff.request_timeout)

    def topic_url(self, topic: str) -> str:
        return f"{self.server}/{topic}"

    async def publish(self, message: dict[str, Any]) -> str:
        """Publish one message (its ``topic`` inside); the id the server gave it."""
        with anyio.fail_after(self.backoff.request_timeout + 1.0):
            try:
                answer = await self._client.post(f"{self.server}/", json=message)
            except httpx.HTTPError as exc:
                raise NotifyUnreachable(self.server, type(exc).__name__) from exc
        if answer.status_code >= 300:
            raise NotifyUnreachable(self.server, f"HTTP {answer.status_code}")
        try:
            return str(answer.json().get("id", ""))
        except ValueError:
            return ""

    async def post_text(self, topic: str, text: str) -> None:
        """What a tapped ``http`` action does: its body POSTed to the topic's URL."""
        with anyio.fail_after(self.backoff.request_timeout + 1.0):
            try:
                answer = await self._client.post(self.topic_url(topic), content=text.encode())
            except httpx.HTTPError as exc:
                raise NotifyUnreachable(self.server, type(exc).__name__) from exc
        if answer.status_code >= 300:
            raise NotifyUnreachable(self.server, f"HTTP {answer.status_code}")

    async def follow(self, topic: str, since: str,
                     on_message: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """Hand each message of ``topic`` after ``since`` (a message id or a unix time) to
        ``on_message``, for ever: reconnecting with backoff, resuming after the last one."""
        delay = self.backoff.first
        down_since: float | None = None
        while True:
            try:
                async for event in self._stream(topic, since):
                    if event.get("event") == "open":
                        delay = self.backoff.first
                        log.info("notify_subscribed", server=self.server,
                                 down_for=None if down_since is None
                                 else round(time.monotonic() - down_since, 3))
                        down_since = None
                    elif event.get("event") == "message" and isinstance(event.get("id"), str):
                        await on_message(event)
                        since = event["id"]
            except NotifyUnreachable as exc:
                log.warning("notify_subscribe_failed", server=self.server, error=exc.message,
                            retry_in=delay)
            down_since = time.monotonic() if down_since is None else down_since
            await anyio.sleep(delay)
            delay = min(delay * 2, self.backoff.most)

    async def _stream(self, topic: str, since: str) -> AsyncIterator[dict[str, Any]]:
        timeout = httpx.Timeout(self.backoff.request_timeout, read=self.backoff.read_timeout)
        try:
            async with self._client.stream("GET", f"{self.topic_url(topic)}/json",
                                           params={"since": since}, timeout=timeout) as answer:
                if answer.status_code >= 300:
                    raise NotifyUnreachable(self.server, f"HTTP {answer.status_code}")
                async for line in bounded_lines(answer.aiter_bytes(), MAX_LINE_BYTES):
                    event = _event(line.decode("utf-8", errors="replace"))
                    if event is not None:
                        yield event
        except httpx.HTTPError as exc:
            raise NotifyUnreachable(self.server, type(exc).__name__) from exc
        raise NotifyUnreachable(self.server, "the stream ended")

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            await self._client.aclose()


async def bounded_lines(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """The lines of a byte stream, each at most ``limit`` bytes: a longer one is dropped as
    it arrives (never held whole), so a server that sends a gigabyte without a newline costs
    ``limit`` bytes of memory, and the lines after it still come."""
    held = bytearray()
    dropping = False
    async for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not dropping:
                held += chunk[start:end]
                yield bytes(held)
            held.clear()
            dropping = False
            start = end + 1
        if not dropping:
            held += chunk[start:]
            if len(held) > limit:
                held.clear()
                dropping = True
    if held and not dropping:
        yield bytes(held)


def _event(line: str) -> dict[str, Any] | None:
    """One line of the stream; blank, oversized and non-JSON lines are skipped."""
    if not line.strip() or len(line) > MAX_LINE_BYTES:
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
