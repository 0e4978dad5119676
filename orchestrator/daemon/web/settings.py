"""The live view's limits, as settings the daemon reads from its environment once at start
(``TEAMCTL_UI_*``; docs/live-view.md has the table). Tests shorten the timeouts; an operator
may widen the caps. A malformed value is a usage error that names the variable."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["WebSettings"]


@dataclass(frozen=True)
class WebSettings:
    max_connections: int = 64  # open connections on the port, a tab's stream included
    fd_reserve: int = 128  # descriptors the live view never takes (control socket, members)
    header_timeout: float = 10.0  # a request head must be complete within this, or closed
    keep_alive: float = 5.0  # an idle kept-alive connection is closed after this
    session_idle: float = 3600.0  # a session nobody used for this long is void
    session_lifetime: float = 12 * 3600.0  # and any session this long after its sign-in

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WebSettings:
        environ = os.environ if environ is None else environ
        values: dict[str, float | int] = {}
        for f in fields(cls):
            name = f"TEAMCTL_UI_{f.name.upper()}"
            raw = environ.get(name)
            if raw is None:
                continue
            kind = int if f.type == "int" else float
            try:
                value = kind(raw)
            except ValueError:
                value = -1
            if value <= 0:
                raise UsageError(f"{name}={raw!r} is not a positive {kind.__name__}; "
                                 "fix or unset it and start the daemon again")
            values[f.name] = value
        return cls(**values)  # type: ignore[arg-type]
