"""How a spend reads, for the CLI and the live view alike: ``$1.2000 / $5.00``, ``+ ?`` when
some turns' cost is unknown, ``(tokens/budget tokens)`` under a token budget, ``≥`` before it
when it is a lower bound (a runtime that leaves calls out of what it reports), and the note
that says why. Takes the ``Spend`` document as plain JSON (the CLI never imports the pydantic
models)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["LOWER_BOUND", "cost_text", "lower_bound_note", "usd_text"]

LOWER_BOUND = "\u2265 "  # "≥ ": the figure after it leaves some API calls out


def cost_text(spend: Mapping[str, Any]) -> str:
    text = (LOWER_BOUND if spend.get("lower_bound") else "") + f"${spend['cost_usd']:.4f}" \
        + (" + ?" if spend.get("cost_unknown") else "")
    if spend.get("budget_usd") is not None:
        text += f" / {usd_text(spend['budget_usd'])}"
    if spend.get("budget_tokens") is not None:
        text += f" ({spend['tokens']}/{spend['budget_tokens']} tokens)"
    return text


def lower_bound_note(spend: Mapping[str, Any] | None) -> str | None:
    """``cost ≥ (a lower bound): <why>`` for a spend that leaves calls out, else None."""
    why = spend.get("lower_bound") if spend else None
    return f"cost {LOWER_BOUND}(a lower bound): {why}" if why else None


def usd_text(value: float) -> str:
    """A budget with the digits it has: $5.00 in cents when it is whole cents, else at least
    the spend's 4 decimals and up to 6 ($0.0050, $0.012345) — never rounded to $0.01."""
    if round(value, 2) == value:
        return f"${value:.2f}"
    text = f"{value:.6f}".rstrip("0")
    whole, _, decimals = text.partition(".")
    return f"${whole}.{decimals.ljust(4, '0')}"
