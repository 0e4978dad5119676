"""Who may use the live view: a one-time token (printed by ``teamctl ui``) becomes a session
cookie (HttpOnly, SameSite=Strict); every state-changing request carries the session's CSRF
token; the Host header must name the loopback address the page is served on (a DNS-rebinding
page on another origin cannot pass); every answer carries a strict Content-Security-Policy."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

__all__ = ["COOKIE", "CSP", "Refusal", "Sessions"]

COOKIE = "teamctl_session"
CSRF_HEADER = "x-csrf-token"
TOKEN_LIFETIME = 600.0  # a printed token that nobody used is void after 10 minutes
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY",
                    "cache-control": "no-store"}


class Refusal(Exception):
    """A request the view refuses: its HTTP status and a message that says what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Sessions:
    port: int = 0
    _tokens: dict[str, float] = field(default_factory=dict)  # one-time token -> expiry
    _sessions: dict[str, str] = field(default_factory=dict)  # session id -> csrf token

    def new_token(self) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens[token] = time.monotonic() + TOKEN_LIFETIME
        return token

    def redeem(self, token: str) -> tuple[str, str]:
        """A valid unused token becomes a session: (session id, its CSRF token)."""
        expiry = self._tokens.pop(token, None) if token else None
        if expiry is None or expiry < time.monotonic():
            raise Refusal(403, "this link's token is unknown, used or expired: run "
                               "'teamctl ui' again for a new one")
        session, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._sessions[session] = csrf
        return session, csrf

    def check_host(self, host: str | None) -> None:
        allowed = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        if host not in allowed:
            raise Refusal(421, f"this view answers only for {sorted(allowed)[0]}, "
                               f"not {host!r}")

    def csrf_of(self, session: str | None) -> str:
        csrf = self._sessions.get(session or "")
        if csrf is None:
            raise Refusal(401, "not signed in: open the link 'teamctl ui' prints")
        return csrf

    def check_csrf(self, session: str | None, sent: str | None) -> None:
        if not sent or not secrets.compare_digest(self.csrf_of(session), sent):
            raise Refusal(403, "missing or wrong CSRF token: reload the page")
