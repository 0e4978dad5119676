"""The merge queue on the control API (docs/land.md): ``queue`` (``teamctl queue [--pause |
--resume]``) and ``integrate`` (``teamctl integrate T3``). The params are strict, bounded
models (``orchestrator.protocol.land``); the queue answers in its documents."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orchestrator import protocol

if TYPE_CHECKING:
    from orchestrator.daemon.land._service import Land
    from orchestrator.protocol.land import IntegrateParams, QueueDoc, QueueEntryDoc, QueueParams

__all__ = ["LandApi"]

Handler = Callable[[Any], Awaitable[BaseModel]]


class LandApi:
    """The operator's methods of the merge queue."""

    def __init__(self, land: Land) -> None:
        self._land = land

    def handlers(self) -> dict[str, Handler]:
        """Its handlers, by the protocol table's rows."""
        return {protocol.QUEUE.name: self._queue, protocol.INTEGRATE.name: self._integrate}

    async def _queue(self, params: QueueParams) -> QueueDoc:
        return await self._land.queue(params.team, pause=params.pause, resume=params.resume)

    async def _integrate(self, params: IntegrateParams) -> QueueEntryDoc:
        return await self._land.integrate(params.team, params.id)
