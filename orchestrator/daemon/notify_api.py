"""The control socket's ``notify_test`` (``teamctl notify test``): its params, bounded, and
the call into the notifier. ``api.ControlServer`` serves it beside its own methods."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.limits import NAME_PATTERN

if TYPE_CHECKING:
    from orchestrator.daemon.notify import NotifyService
    from orchestrator.wire import NotifyTestDoc

__all__ = ["NotifyApi"]

Handler = Callable[[Any], Awaitable[Any]]


class NotifyTestParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    timeout: float = Field(default=30.0, gt=0, le=120, allow_inf_nan=False)


class NotifyApi:
    def __init__(self, service: NotifyService) -> None:
        self._service = service

    def methods(self) -> dict[str, tuple[type[BaseModel], Handler]]:
        return {"notify_test": (NotifyTestParams, self._test)}

    async def _test(self, params: NotifyTestParams) -> NotifyTestDoc:
        return await self._service.test(params.team, params.timeout)
