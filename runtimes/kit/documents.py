"""What the adapters share about native documents (docs/runtimes.md "Documents"): a name safe to
hand a runtime as a file name, and the typed refusal of a document a transport cannot carry.

A document's name is whatever the sender's file was called: it may hold quotes, newlines, path
separators or ``..``. It only ever reaches a runtime as a JSON string (never a path the member
writes), and as a bare base name of ordinary characters.
"""

from __future__ import annotations

import re
import unicodedata

from orchestrator.contracts import DocumentPart, TurnFailed

__all__ = ["CODEX_WHY", "refused", "safe_name", "utf8_text"]

_UNSAFE = re.compile(r"[^\w .()+,@\[\]-]")
_MAX_NAME = 120

# both Codex transports: codex takes no document input at all (openai/codex#1797)
CODEX_WHY = "codex takes images and text only, no document"


def safe_name(part: DocumentPart) -> str:
    """The document's base name with anything but letters, digits, spaces and ``._-()+,@[]``
    replaced by ``_``, no leading dot, at most 120 characters; ``document-<sha12>`` when
    nothing is left."""
    base = part.name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join("_" if unicodedata.category(c).startswith("C") else c for c in base)
    base = _UNSAFE.sub("_", base).strip().lstrip(".").strip()
    if len(base) > _MAX_NAME:
        _, dot, suffix = base.rpartition(".")
        tail = f".{suffix}" if dot and len(suffix) <= 8 else ""
        base = base[:_MAX_NAME - len(tail)].rstrip() + tail
    return base or f"document-{part.sha256[:12]}"


def refused(member: str, part: DocumentPart, why: str) -> TurnFailed:
    """A document that cannot reach this member natively: never retried (the same turn would
    fail the same way); the operator sends it derived instead."""
    return TurnFailed(member, f"the document {safe_name(part)!r} ({part.mime}) cannot reach "
                      f"this member as a document: {why}; set documents = \"text\" for the "
                      "member (its pages then arrive as images and text)", api_status=None,
                      retryable=False)


def utf8_text(member: str, part: DocumentPart) -> str:
    """A text document's text; one that is not UTF-8 (the intake plans none) is refused."""
    try:
        return part.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refused(member, part, f"it is not UTF-8 text ({exc.reason})") from exc
