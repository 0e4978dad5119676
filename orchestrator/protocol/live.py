"""The live view (``ui``: its one-time sign-in link) and the change feed (``changes``: the
version a client waits past; the CLI's progress and ``status --watch`` read it).
"""

from pydantic import Field

from orchestrator.limits import MAX_SEQ
from orchestrator.protocol.common import Doc, Params

__all__ = [
    "ChangesDoc", "ChangesParams", "UiDoc", "UiParams",
]


class ChangesDoc(Doc):
    """The ``changes`` call's answer (``status --watch``): the change counter's version."""

    version: int


class UiDoc(Doc):
    """``teamctl ui --json``: the live view's address, with a one-time sign-in token."""

    url: str


class ChangesParams(Params):
    after: int = Field(default=0, ge=0, le=MAX_SEQ)
    wait: float = Field(default=0.0, ge=0, le=25.0, allow_inf_nan=False)


class UiParams(Params):
    port: int | None = Field(default=None, ge=1024, le=65535)
