"""Typed attachment failures (DESIGN §5): a code, a user message that says what to do, a
redacted diagnostic, and ``retryable``. A message with any failure is refused whole, before
anything is sent; every failure of the message is reported at once (``AttachmentRefused``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.errors import EXIT_REFUSED, TeamctlError
from orchestrator.redaction import redact

__all__ = ["AttachmentError", "AttachmentFailure", "AttachmentRefused", "FailureCode"]

FailureCode = Literal[
    "attachment_not_found",
    "attachment_not_a_regular_file",
    "attachment_too_large_original",
    "attachment_too_large_optimized",
    "attachment_serialized_payload_too_large",
    "attachment_dimensions_too_large",
    "attachment_unsupported_mime",
    "attachment_corrupt_image",
    "attachment_animated_too_large",
    "attachment_runtime_unsupported",
    "attachment_model_vision_unsupported",
    "attachment_model_vision_unknown",
    "attachment_artifact_missing",
    "attachment_artifact_write_failed",
    "attachment_provider_auth_required",
    "attachment_provider_quota_exceeded",
    "attachment_marker_unknown",
    "attachment_description_failed",
    # documents (docs/documents.md)
    "attachment_document_encrypted",
    "attachment_document_unreadable",
    "attachment_corrupt_document",
    "attachment_text_encoding",
    "attachment_document_route_unsupported",
    "attachment_document_no_text",
]

_RETRYABLE: frozenset[str] = frozenset({
    "attachment_artifact_write_failed", "attachment_provider_quota_exceeded",
})


@dataclass(frozen=True)
class AttachmentFailure:
    code: FailureCode
    message: str
    diagnostic: str = ""
    attachment: str | None = None
    member: str | None = None
    may_retry: bool | None = None  # when the cause knows better than the code

    @property
    def retryable(self) -> bool:
        return self.code in _RETRYABLE if self.may_retry is None else self.may_retry

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": redact(self.message), "retryable": self.retryable,
                "attachment": self.attachment, "member": self.member}


class AttachmentError(TeamctlError):
    """One attachment failure raised inside the pipeline (collected by the planner)."""

    exit_code = EXIT_REFUSED

    def __init__(self, code: FailureCode, message: str, diagnostic: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.failure = AttachmentFailure(code, message, redact(diagnostic))
        self.retryable = self.failure.retryable


class AttachmentRefused(TeamctlError):
    """The whole message is refused before anything was sent (exit 3)."""

    code = "attachment_refused"
    exit_code = EXIT_REFUSED

    def __init__(self, failures: list[AttachmentFailure]) -> None:
        lines = "; ".join(f"{f.code}: {f.message}" for f in failures)
        super().__init__(f"refused before send: {lines}",
                         failures=[f.to_json() for f in failures])
        self.failures = failures
        self.retryable = all(f.retryable for f in failures)
