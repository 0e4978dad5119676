"""The price table (``price_table.toml``): model → USD per million tokens, reviewed data with
its sources and the date it was checked. A model that is not listed has an unknown price —
``cost`` returns None, never 0 (docs/costs.md)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.contracts import TokenUsage

__all__ = ["Price", "PriceTable", "load_prices"]

_SNAPSHOT_SUFFIX = re.compile(r"(?:-\d{8}|@\d{8}|-latest)$")
_PER = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    cached_input: float
    output: float
    source: str

    def cost(self, tokens: TokenUsage) -> float:
        """Uncached input, cached input and output (reasoning included) at their rates."""
        cached = min(max(tokens.cached_input_tokens, 0), max(tokens.input_tokens, 0))
        fresh = max(tokens.input_tokens, 0) - cached
        return (fresh * self.input + cached * self.cached_input
                + max(tokens.output_tokens, 0) * self.output) / _PER


class PriceTable:
    def __init__(self, data: dict[str, Any]) -> None:
        self.checked = str(data.get("checked", "unknown"))
        self.sources: dict[str, str] = dict(data.get("sources", {}))
        self._models: dict[str, Price] = {}
        for model, raw in dict(data.get("models", {})).items():
            self._models[model] = Price(float(raw["input"]),
                                        float(raw.get("cached_input", raw["input"])),
                                        float(raw["output"]), str(raw.get("source", "table")))

    def __len__(self) -> int:
        return len(self._models)

    def items(self) -> list[tuple[str, Price]]:
        return sorted(self._models.items())

    def price(self, model: str | None) -> Price | None:
        """The model's price (a dated snapshot id matches its base id; an OpenCode id's
        provider prefix is dropped), or None: unknown."""
        if not model:
            return None
        for key in (model, model.rsplit("/", 1)[-1]):
            found = self._models.get(key) or self._models.get(_SNAPSHOT_SUFFIX.sub("", key))
            if found is not None:
                return found
        return None

    def cost(self, model: str | None, tokens: TokenUsage) -> float | None:
        price = self.price(model)
        return None if price is None else price.cost(tokens)


@cache
def load_prices() -> PriceTable:
    """The packaged table (parsed once per process)."""
    text = resources.files("orchestrator.costs").joinpath("price_table.toml").read_text(
        encoding="utf-8")
    return PriceTable(tomllib.loads(text))
