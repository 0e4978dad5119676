"""``teamctl trace MSG-ID``: the control method that answers a message's trace."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from orchestrator import protocol
from orchestrator.daemon.telemetry._model import build_trace
from orchestrator.errors import NotFound

if TYPE_CHECKING:
    from orchestrator.daemon.telemetry._journal import TraceJournal
    from orchestrator.protocol.traces import TraceDoc, TraceParams

__all__ = ["TraceApi"]

Handler = Callable[[Any], Awaitable[Any]]


class TraceApi:
    """The trace method's handler, over the journal's reads."""

    def __init__(self, journal: TraceJournal, *,
                 recorded: Callable[[], Awaitable[None]] | None = None) -> None:
        """``recorded``: journals what the runtimes reported and is not yet written (the
        tool calls), before a trace is read."""
        self._journal = journal
        self._recorded = recorded

    def handlers(self) -> dict[str, Handler]:
        return {protocol.TRACE.name: self._trace}

    async def _trace(self, params: TraceParams) -> TraceDoc:
        if self._recorded is not None:
            await self._recorded()
        rows = await self._journal.rows(params.id)
        if rows is None:
            raise NotFound("message", params.id, [])
        return build_trace(rows)
