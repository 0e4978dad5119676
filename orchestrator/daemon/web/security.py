"""Who may use the live view: a one-time token (printed by ``teamctl ui``) becomes a session
cookie (HttpOnly, SameSite=Strict) that expires after an idle and an absolute lifetime; every
state-changing request carries the session's CSRF token; the Host header must name the loopback
address the page is served on (a DNS-rebinding page on another origin cannot pass); every answer
carries a strict Content-Security-Policy. Every refusal is answered in one JSON shape, the CLI's
``--json`` error (``{"ok": false, "error": {"code", "message", "retryable"}}``, ``error_answer``).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from orchestrator.protocol.failures import ErrorDoc, ErrorReply
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["COOKIE", "CSP", "Refusal", "Sessions", "error_answer"]

COOKIE = "teamctl_session"
CSRF_HEADER = "x-csrf-token"
TOKEN_LIFETIME = 600.0  # a printed token that nobody used is void after 10 minutes
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff",
                    "referrer-policy": "no-referrer", "x-frame-options": "DENY",
                    "cache-control": "no-store"}


def error_answer(status: int, code: str, message: str, *, retryable: bool = False,
                 failures: list[dict[str, Any]] | None = None) -> JSONResponse:
    """The one shape of every refusal the view answers: the CLI's ``--json`` error
    (``ErrorReply``), with a refused send's typed ``failures`` beside it (as ``send --json``
    lists them). The message is redacted."""
    doc = ErrorReply(error=ErrorDoc(code=code, message=redact(message), retryable=retryable)
                     ).model_dump()
    if failures is not None:
        doc["failures"] = failures
    return JSONResponse(doc, status_code=status)


class Refusal(Exception):
    """A request the view refuses: its HTTP status, a stable code and a message that says what
    to do."""

    def __init__(self, status: int, message: str, *, code: str,
                 retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.retryable = retryable

    def response(self) -> JSONResponse:
        return error_answer(self.status, self.code, self.message, retryable=self.retryable)


@dataclass
class _Session:
    csrf: str
    started: float
    used: float


@dataclass
class Sessions:
    """``idle``: a session nobody used for this long is void; ``lifetime``: any session is void
    this long after its sign-in (seconds; settings, docs/live-view.md)."""

    port: int = 0
    idle: float = 3600.0
    lifetime: float = 12 * 3600.0
    clock: Callable[[], float] = time.monotonic
    _tokens: dict[str, float] = field(default_factory=dict)  # one-time token -> expiry
    _sessions: dict[str, _Session] = field(default_factory=dict)  # by session id

    def new_token(self) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens[token] = self.clock() + TOKEN_LIFETIME
        return token

    def redeem(self, token: str) -> tuple[str, str]:
        """A valid unused token becomes a session: (session id, its CSRF token)."""
        now = self.clock()
        self._tokens = {t: expiry for t, expiry in self._tokens.items() if expiry >= now}
        if not token or self._tokens.pop(token, None) is None:
            raise Refusal(403, "this link's token is unknown, used or expired: run "
                               "'teamctl ui' again for a new one", code="sign_in_token_invalid")
        self._sessions = {k: s for k, s in self._sessions.items() if self._alive(s, now)}
        session, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._sessions[session] = _Session(csrf, now, now)
        return session, csrf

    def _alive(self, session: _Session, now: float) -> bool:
        return now - session.used <= self.idle and now - session.started <= self.lifetime

    def check_host(self, host: str | None) -> None:
        allowed = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        if host not in allowed:
            raise Refusal(421, f"this view answers only for {sorted(allowed)[0]}, "
                               f"not {host!r}", code="wrong_host")

    def csrf_of(self, session: str | None) -> str:
        """The CSRF token of a live session, which counts as used now (401 otherwise)."""
        found = self._sessions.get(session or "")
        now = self.clock()
        if found is not None and not self._alive(found, now):
            del self._sessions[session or ""]
            raise Refusal(401, "this session expired: run 'teamctl ui' again to sign in",
                          code="session_expired")
        if found is None:
            raise Refusal(401, "not signed in: open the link 'teamctl ui' prints",
                          code="not_signed_in")
        found.used = now
        return found.csrf

    def check_csrf(self, session: str | None, sent: str | None) -> None:
        if not sent or not secrets.compare_digest(self.csrf_of(session), sent):
            raise Refusal(403, "missing or wrong CSRF token: reload the page",
                          code="csrf_token_invalid")
