"""How a spend reads, for the CLI and the live view alike: ``$1.2000 / $5.00``, ``+ ?`` when
some turns' cost is unknown, ``(tokens/budget tokens)`` under a token budget. Takes the
``Spend`` document as plain JSON (the CLI never imports the pydantic models)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["cost_text"]


def cost_text(spend: Mapping[str, Any]) -> str:
    text = f"${spend['cost_usd']:.4f}" + (" + ?" if spend.get("cost_unknown") else "")
    if spend.get("budget_usd") is not None:
        text += f" / ${spend['budget_usd']:.2f}"
    if spend.get("budget_tokens") is not None:
        text += f" ({spend['tokens']}/{spend['budget_tokens']} tokens)"
    return text
