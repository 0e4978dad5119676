"""The control socket's ``notify_test`` (``teamctl notify test``): the call into the notifier
(its params, bounded: ``orchestrator.protocol.notify``). The control server serves it beside
its own methods."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orchestrator import protocol

if TYPE_CHECKING:
    from orchestrator.daemon.notify._service import NotifyService
    from orchestrator.protocol.notify import NotifyTestDoc, NotifyTestParams

__all__ = ["NotifyApi"]

Handler = Callable[[Any], Awaitable[Any]]


class NotifyApi:
    def __init__(self, service: NotifyService) -> None:
        self._service = service

    def handlers(self) -> dict[str, Handler]:
        """Its handler, by the protocol table's row."""
        return {protocol.NOTIFY_TEST.name: self._test}

    async def _test(self, params: NotifyTestParams) -> NotifyTestDoc:
        return await self._service.test(params.team, params.timeout)
