"""The documents of a failure: the daemon's error (``error.data`` on the socket), the CLI's
error and refusal documents (``--json``), and the failures a member status or a send carries.
"""

from typing import Any, Literal

from orchestrator.protocol.common import Doc

__all__ = [
    "ErrorDoc", "ErrorReply", "Failure", "Refusal", "WireError",
]


class WireError(Doc):
    """``error.data`` of a JSON-RPC error answer: a TeamctlError as the daemon raised it."""

    code: str
    message: str
    retryable: bool
    exit_code: int
    details: dict[str, Any] = {}


class ErrorDoc(Doc):
    code: str
    message: str
    retryable: bool


class ErrorReply(Doc):
    """What ``--json`` prints when a command fails (other than a refusal)."""

    ok: Literal[False] = False
    error: ErrorDoc


class Failure(Doc):
    """One reason an attachment (or the whole message) was refused before send."""

    code: str
    message: str
    retryable: bool
    attachment: str | None = None
    member: str | None = None


class Refusal(Doc):
    """``send --json`` when the message is refused before anything is sent (exit 3)."""

    ok: Literal[False] = False
    failures: list[Failure]
