"""The one gate every usage figure a runtime reports passes through (docs/costs.md): a token
count is a non-negative int of at most MAX_TOKENS; a dollar figure a finite non-negative
int or float of at most MAX_USD. Anything else — NaN, Infinity, 1e308, -1, 2**64, a bool, a
string — is logged (redacted) and skipped, never charged: one bad figure must not poison the
ledger (a NaN spend reaches no budget again; an infinite one holds a member forever; an int
past SQLite's 2**63 fails the journal write).

The runtimes parse their events with ``token_count`` and ``usd`` (through
``orchestrator.contracts``, the one module runtimes import); the ledger passes every reading
through ``costs.readings.checked_reading`` as well (a sum of valid step figures can still be
out of bounds). This module reads single figures only, so the contracts it sits below are
never its import."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAX_TOKENS", "MAX_USD", "token_count", "usd"]

log = structlog.get_logger("teamctl.costs")

MAX_TOKENS = 2**53  # exact in a float, and far below SQLite's 2**63 even summed
MAX_USD = 1_000_000.0  # one figure (a turn, a session's running total): $1e6 is not real


def _refused(what: str, value: Any) -> None:
    log.warning("usage_figure_refused", figure=what, value=redact(repr(value)[:80]),
                kind=type(value).__name__)


def token_count(values: Mapping[str, Any], key: str) -> int:
    """A token count from a runtime's usage report: a non-negative int up to MAX_TOKENS; else
    0 (absent: silently; anything else: logged)."""
    value = values.get(key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    _refused(key, value)
    return 0


def usd(value: Any, what: str) -> float | None:
    """A dollar figure from a runtime (``what``: its field): a finite number in
    [0, MAX_USD]; else None — unknown, never 0 (absent: silently; anything else: logged)."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and \
            math.isfinite(value) and 0 <= value <= MAX_USD:
        return float(value)
    _refused(what, value)
    return None
