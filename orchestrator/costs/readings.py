"""A whole usage reading through the figures' gate (docs/costs.md): the ledger checks every
reading a runtime sends, since a sum of valid step figures can still be out of bounds. Above
``costs.figures`` and ``orchestrator.contracts`` (whose types it reads), below the ledger."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.costs.figures import token_count, usd

if TYPE_CHECKING:
    from orchestrator.contracts import TokenUsage, UsageReading

__all__ = ["checked_reading", "checked_tokens"]


def checked_tokens(tokens: TokenUsage, what: str) -> TokenUsage:
    """``tokens`` with every count out of bounds (or not an int) refused as 0."""
    values = {f"{what}.{n}": getattr(tokens, n) for n in tokens.FIELDS}
    checked = {key: token_count(values, key) for key in values}
    if checked == values:
        return tokens
    return type(tokens)(*checked.values())


def checked_reading(reading: UsageReading) -> UsageReading:
    """The reading with any figure out of bounds refused (tokens: 0; cost: None)."""
    tokens = checked_tokens(reading.tokens, "tokens")
    baseline = None if reading.baseline is None else checked_tokens(reading.baseline,
                                                                    "baseline")
    cost = usd(reading.cost_usd, "cost_usd")
    if tokens is reading.tokens and baseline is reading.baseline and cost == reading.cost_usd:
        return reading
    return replace(reading, tokens=tokens, baseline=baseline, cost_usd=cost)
