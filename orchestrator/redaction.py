"""The one redactor: every log event and every error shown passes through it.

It removes what must never reach a log or a terminal: image data (data URLs, long base64
runs) and secrets (Anthropic, OpenRouter, OpenAI-style keys, bearer tokens, Authorization
header values, ``*_API_KEY=`` assignments, GitHub tokens). It is deliberately greedy: a false
positive costs a few characters of a diagnostic, a false negative leaks a key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "redact", "redact_value"]

REDACTED = "[REDACTED]"

# Order matters: the most specific patterns run first so their label survives.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*,[A-Za-z0-9+/=%_-]*"), "data:[REDACTED]"),
    (re.compile(r"(?i)\b(authorization|proxy-authorization)(\"?\s*[:=]\s*\"?)"
                r"(?:(?:bearer|basic|token)\s+)?[^\s\"',}]+"),
     r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 " + REDACTED),
    (re.compile(r"(?i)\b([A-Z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD))(\"?\s*[:=]\s*\"?)[^\s\"',}]+"),
     r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b(x-api-key)(\"?\s*[:=]\s*\"?)[^\s\"',}]+"), r"\1\2" + REDACTED),
    (re.compile(r"sk-ant-[A-Za-z0-9_-]{4,}"), "sk-ant-" + REDACTED),
    (re.compile(r"sk-or-v1-[A-Za-z0-9_-]{4,}"), "sk-or-v1-" + REDACTED),
    (re.compile(r"sk-[A-Za-z0-9_-]{8,}"), "sk-" + REDACTED),
    (re.compile(r"\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_-]{12,}"), REDACTED),
    # Long base64 runs (image bytes). 80+ characters keeps sha256 hex digests (64) readable.
    (re.compile(r"[A-Za-z0-9+/]{80,}={0,2}"), "[BASE64 REDACTED]"),
)


def redact(text: str) -> str:
    """Return ``text`` with every secret and every run of image data replaced."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_value(value: Any) -> Any:
    """Redact strings anywhere inside a JSON-like value (dicts, lists, tuples)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value
