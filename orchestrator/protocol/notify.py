"""``notify_test`` (``teamctl notify test``; docs/notify.md): its params, bounded, and its
report of each check.
"""

from pydantic import Field

from orchestrator.limits import NAME_PATTERN
from orchestrator.protocol.common import Doc, Params

__all__ = [
    "NotifyCheck", "NotifyTestDoc", "NotifyTestParams",
]


class NotifyCheck(Doc):
    """One leg of ``teamctl notify test``: a kind published, the round trip, the alerts."""

    what: str = Field(description="approval, question, fatal, budget, review, quota, round "
                      "trip, alerts")
    ok: bool
    seconds: float | None = None
    detail: str = ""


class NotifyTestDoc(Doc):
    """``teamctl notify test --json``: one of each configured kind sent, and the round trip
    (a test action posted to the response topic, verified and its receipt published)."""

    team: str
    server: str | None = Field(default=None, description="the ntfy server (null: no ntfy)")
    checks: list[NotifyCheck]


class NotifyTestParams(Params):
    team: str | None = Field(default=None, pattern=NAME_PATTERN)
    timeout: float = Field(default=30.0, gt=0, le=120, allow_inf_nan=False)
