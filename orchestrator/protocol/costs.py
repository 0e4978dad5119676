"""What the ledger answers (``usage``, ``budget``; docs/costs.md): spend per member, usage rows,
the price table, a budget — and their params (``budget``'s are strict: "5" is not 5.0).
"""

from typing import Literal

from pydantic import ConfigDict, Field

from orchestrator.limits import NAME_PATTERN
from orchestrator.protocol.common import Doc, TeamParams

__all__ = [
    "BudgetDoc", "BudgetParams", "PriceRow", "PricesDoc", "Spend", "UsageDoc", "UsageParams",
    "UsageRow",
]


class Spend(Doc):
    """What a member (or a team) has used, and its budget (docs/costs.md)."""

    cost_usd: float = Field(description="charged so far, the turn in flight included")
    cost_unknown: int = Field(default=0, description="turns whose cost is unknown (a model "
                              "the price table does not list): not in cost_usd")
    tokens: int = Field(description="input + output tokens")
    budget_usd: float | None = None
    budget_tokens: int | None = None
    lower_bound: str | None = Field(
        default=None, description="why cost_usd and tokens leave some of the API calls out "
        "(an ACP agent that does not report its side requests): they are a lower bound; "
        "null: every call is counted")


class UsageRow(Doc):
    team: str
    group: str = Field(description="the member, the model or the day (YYYY-MM-DD), per --by")
    turns: int
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_output_tokens: int
    cost_usd: float = Field(description="the known part (see cost_unknown)")
    cost_unknown: int = Field(description="turns whose cost is unknown")
    lower_bound: str | None = Field(
        default=None, description="why these turns' figures leave API calls out (a lower "
        "bound); null: every call is counted")


class UsageDoc(Doc):
    """``teamctl usage --json``: tokens and cost from the journal, grouped."""

    by: Literal["member", "model", "day"]
    rows: list[UsageRow]
    total_usd: float
    total_tokens: int


class PriceRow(Doc):
    model: str
    input: float = Field(description="USD per million input tokens")
    cached_input: float
    output: float
    source: str


class PricesDoc(Doc):
    """``teamctl usage --prices --json``: the vendored price table."""

    checked: str
    sources: dict[str, str]
    models: list[PriceRow]


class BudgetDoc(Doc):
    """``teamctl budget --json``: a member's (or a team's) budget and spend after the change."""

    team: str
    member: str | None = Field(description="null: the whole team's budget")
    spend: Spend
    hold: str | None = None


class UsageParams(TeamParams):
    by: Literal["member", "model", "day"] = "member"
    prices: bool = False


_USD = Field(default=None, ge=0, le=1_000_000, allow_inf_nan=False)


_TOKENS = Field(default=None, ge=0, le=10**13)


class BudgetParams(TeamParams):
    """Strict: "5" and true are refused, not coerced to 5.0 and 1.0 (an int is a float)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    member: str | None = Field(default=None, pattern=NAME_PATTERN)
    usd: float | None = _USD
    add_usd: float | None = _USD
    tokens: int | None = _TOKENS
    add_tokens: int | None = _TOKENS
    clear: bool = False
