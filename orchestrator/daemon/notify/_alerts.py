"""Alerts to the channels people already read — Slack, Discord, Telegram, email, the desktop —
through Apprise (one well-kept library, BSD-2, with 100+ services behind one URL syntax:
``slack://…``, ``discord://…``, ``tgram://…``, ``mailto://…``, ``dbus://``; docs/notify.md
says why it over one client per service). An alert is not actionable: the same redacted text
as the push, and a link to the live view.

Apprise is synchronous (requests): each send runs in a worker thread under a deadline, with
Apprise's own connect/read timeouts set below it, so a channel that hangs delays nothing else
and a failure is logged, never raised into the notifier.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import anyio
import structlog

from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["ALERT_TIMEOUT", "Alerts"]

log = structlog.get_logger("teamctl.notify")

ALERT_TIMEOUT = 15.0


def _with_timeouts(url: str, timeout: float) -> str:
    """Apprise's ``cto``/``rto`` (connect and read timeouts) unless the URL sets them."""
    if "cto=" in url or "rto=" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}cto={timeout / 3:g}&rto={timeout / 2:g}"


class Alerts:
    """The team's ``apprise`` URLs."""

    def __init__(self, urls: Sequence[str], *, timeout: float = ALERT_TIMEOUT) -> None:
        self._urls = [_with_timeouts(u, timeout) for u in urls]
        self._timeout = timeout

    def __bool__(self) -> bool:
        return bool(self._urls)

    async def send(self, title: str, body: str) -> bool:
        """Send one alert to every URL; whether all took it (a failure is logged)."""
        if not self._urls:
            return True
        title, body = redact(title), redact(body)
        sent = False
        with anyio.move_on_after(self._timeout):
            sent = await anyio.to_thread.run_sync(self._send, title, body,
                                                  abandon_on_cancel=True)
        if not sent:
            log.warning("notify_alert_failed", channels=len(self._urls),
                        error="an Apprise channel refused the alert or did not answer in time")
        return sent

    def _send(self, title: str, body: str) -> bool:
        # apprise loads its plugins at the first add(); one imports imghdr, deprecated since
        # Python 3.11: not this daemon's warning to show (the test suite makes warnings errors)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import apprise  # loaded only by a team with alerts

            sender = apprise.Apprise()
            for url in self._urls:
                if not sender.add(url):
                    log.warning("notify_alert_url_refused", error="an apprise URL Apprise "
                                "cannot read; check [notify] apprise")
            return bool(sender.notify(title=title, body=body))
