"""Costs and budgets as the control API shows and changes them (docs/costs.md): usage by
member, model or day, the price table, a member's or a team's budget and what it has spent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.costs.prices import load_prices
from orchestrator.protocol.costs import BudgetDoc, PriceRow, PricesDoc, Spend, UsageDoc, UsageRow

if TYPE_CHECKING:
    from orchestrator.daemon.ledger._service import By, Ledger
    from orchestrator.daemon.roster import Roster

__all__ = ["Accounts"]


class Accounts:
    def __init__(self, roster: Roster, ledger: Ledger) -> None:
        self._roster = roster
        self._ledger = ledger

    def spend(self, team: str, member: str | None) -> Spend:
        """What ``member`` (None: the whole team) has spent, beside its budget."""
        key = (team, member or "")
        spent, budget = self._ledger.spent(key), self._ledger.budget(team, member)
        return Spend(cost_usd=round(spent.cost_usd, 6), cost_unknown=spent.unknown,
                     tokens=spent.tokens.total, budget_usd=budget.usd,
                     budget_tokens=budget.tokens, lower_bound=spent.unreported)

    def hold(self, team: str, member: str) -> str | None:
        """Why the member's queue is held (a budget, its account's window), or None."""
        hold = self._ledger.hold(team, member)
        return None if hold is None else hold.describe()

    def account(self, team: str, member: str) -> str | None:
        """The quota account the member spends (docs/costs.md, "Quota windows")."""
        return self._ledger.quota.account((team, member))

    async def usage(self, team: str | None, by: By) -> UsageDoc:
        name = None if team is None else await self._roster.resolve_any(team)
        rows = [UsageRow(team=r["team"], group=str(r["key"] or "(unknown)"), turns=r["turns"],
                         input_tokens=r["i"] or 0, cached_input_tokens=r["c"] or 0,
                         output_tokens=r["o"] or 0, reasoning_output_tokens=r["r"] or 0,
                         cost_usd=round(r["usd"] or 0.0, 6), cost_unknown=r["unknown"] or 0,
                         lower_bound=r["unreported"])
                for r in await self._ledger.usage(name, by)]
        return UsageDoc(by=by, rows=rows, total_usd=round(sum(r.cost_usd for r in rows), 6),
                        total_tokens=sum(r.input_tokens + r.output_tokens for r in rows))

    def prices(self) -> PricesDoc:
        table = load_prices()
        return PricesDoc(checked=table.checked, sources=table.sources, models=[
            PriceRow(model=model, input=p.input, cached_input=p.cached_input, output=p.output,
                     source=p.source) for model, p in table.items()])

    async def budget(self, team: str | None, member: str | None,
                     **change: float | int | bool | None) -> BudgetDoc:
        """Change (or, with no change, show) a member's budget — ``member`` None: the team's.
        Raising it releases a member held by it; its queue goes on."""
        if member is None:
            config = self._roster.resolve(team)
        else:
            config, member = self._roster.resolve_member(team, member)
        ledger = self._ledger
        if any(value not in (None, False) for value in change.values()):
            await ledger.set_budget(config.name, member, **change)  # type: ignore[arg-type]
        return BudgetDoc(team=config.name, member=member,
                         spend=self.spend(config.name, member),
                         hold=None if member is None else self.hold(config.name, member))
