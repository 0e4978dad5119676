"""How a spend reads, for the CLI and the live view alike: ``$1.2000 / $5.00``, ``+ ?`` when
some turns' cost is unknown, ``(tokens/budget tokens)`` under a token budget. Takes the
``Spend`` document as plain JSON (the CLI never imports the pydantic models)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["cost_text", "usd_text"]


def cost_text(spend: Mapping[str, Any]) -> str:
    text = f"${spend['cost_usd']:.4f}" + (" + ?" if spend.get("cost_unknown") else "")
    if spend.get("budget_usd") is not None:
        text += f" / {usd_text(spend['budget_usd'])}"
    if spend.get("budget_tokens") is not None:
        text += f" ({spend['tokens']}/{spend['budget_tokens']} tokens)"
    return text


def usd_text(value: float) -> str:
    """A budget with the digits it has: $5.00 in cents when it is whole cents, else at least
    the spend's 4 decimals and up to 6 ($0.0050, $0.012345) — never rounded to $0.01."""
    if round(value, 2) == value:
        return f"${value:.2f}"
    text = f"{value:.6f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"${whole}.{decimals.ljust(4, '0')}"
