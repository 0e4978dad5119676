"""The team file's ``[notify]`` section (docs/notify.md): where the needs-you items go, apart
from config.py.

``ntfy = { server, topic | topic_file, token_env }``: actionable pushes (the topic names come
from the operator's own file, ``TEAMCTL_HOME/notify.toml``, unless the team file names a
publish topic — a secret topic is better not committed); ``apprise = [URL, ...]``: alerts to
Slack, Discord, Telegram, email, the desktop; ``events``: which kinds are sent;
``quiet_hours = "22:00-07:00"`` (local time); ``max_per_minute``: at most this many pushes a
minute, the rest in one digest; ``include_text``: a question's text and a task's body in the
notification (never by default); ``action_ttl``: how long an action button stays valid;
``live_view_url``: the link an alert carries.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

__all__ = ["EVENTS", "Event", "NotifySection", "NtfySettings", "quiet_minutes"]

Event = Literal["approval", "question", "fatal", "budget", "review", "integrate", "quota"]
EVENTS: tuple[Event, ...] = ("approval", "question", "fatal", "budget", "review", "integrate",
                             "quota")
TOPIC_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # what ntfy takes as a topic name
_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_QUIET = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


def _http_url(value: str) -> str:
    if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", value):
        raise ValueError(f"{value!r} is not an http(s) URL (e.g. https://ntfy.sh)")
    return value.rstrip("/")


def quiet_minutes(spec: str) -> tuple[int, int]:
    """``"22:00-07:00"`` as (start, end) minutes of the day; ValueError if malformed."""
    found = _QUIET.match(spec)
    if found is None:
        raise ValueError(f"quiet_hours = {spec!r}: write HH:MM-HH:MM, e.g. \"22:00-07:00\"")
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    return h1 * 60 + m1, h2 * 60 + m2


def _quiet(spec: str) -> str:
    quiet_minutes(spec)
    return spec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class NtfySettings(_Strict):
    # None: the server of the operator's notify.toml (else https://ntfy.sh)
    server: Annotated[str, Field(max_length=300), AfterValidator(_http_url)] | None = None
    topic: Annotated[str, Field(pattern=TOPIC_PATTERN)] | None = None
    topic_file: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    token_env: Annotated[str, Field(pattern=_ENV)] | None = None

    @model_validator(mode="after")
    def _one_topic(self) -> NtfySettings:
        if self.topic is not None and self.topic_file is not None:
            raise ValueError("ntfy: give topic or topic_file, not both (topic_file keeps a "
                             "secret topic out of the team file)")
        return self


class NotifySection(_Strict):
    """Where the needs-you items go (docs/notify.md)."""

    ntfy: NtfySettings | None = None
    apprise: Annotated[list[Annotated[str, Field(min_length=3, max_length=2000)]],
                       Field(max_length=32)] = []
    events: Annotated[list[Event], Field(min_length=1)] = list(EVENTS)
    quiet_hours: Annotated[str, AfterValidator(_quiet)] | None = None
    max_per_minute: Annotated[int, Field(ge=2, le=600)] = 10
    include_text: bool = False
    action_ttl: Annotated[float, Field(gt=0, le=7 * 86400, allow_inf_nan=False)] = 86400.0
    live_view_url: Annotated[str, Field(max_length=300), AfterValidator(_http_url)] | None = None
