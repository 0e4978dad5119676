"""Budgets (docs/costs.md): ``budget_usd``/``budget_tokens`` per member and per team, from
the team file merged with the operator's (``teamctl budget``), and which of them a member's
spend — the turn in flight included — has reached. A ``budget_warning`` is logged once at
WARN_AT of a budget. A money budget that could never be enforced (a runtime that reports no
cost, a model the price table does not list) is refused at launch."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from orchestrator.costs.text import usd_text
from orchestrator.daemon.ledger._journal import TEAM, Budget
from orchestrator.errors import NotFound, UsageError
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from orchestrator.config import TeamConfig
    from orchestrator.costs.prices import PriceTable
    from orchestrator.daemon.ledger._charge import Totals
    from orchestrator.daemon.ledger._journal import LedgerJournal
    from orchestrator.daemon.ledger._spend import Spending

__all__ = ["BACKSTOP_MARGIN", "WARN_AT", "Budgets"]

log = structlog.get_logger("teamctl.ledger")

WARN_AT = 0.8
BACKSTOP_MARGIN = 0.25  # Claude's --max-budget-usd: the budget left plus this share of it


class Budgets:
    """Every running team's budgets, checked against its spending."""

    def __init__(self, journal: LedgerJournal, prices: PriceTable, spending: Spending) -> None:
        self._journal = journal
        self._prices = prices
        self._spending = spending
        self._budgets: dict[tuple[str, str], Budget] = {}

    async def configure(self, team: TeamConfig) -> None:
        """The team file's budgets, merged with the journal's: a budget the operator changed
        with ``teamctl budget`` stays, unless the team file's value changed since."""
        self._refuse_unpriceable(team)
        stored = await self._journal.budgets(team.name)
        wanted = {TEAM: (team.team.budget_usd, team.team.budget_tokens)}
        for member in team.members:
            wanted[member.name] = (member.budget_usd, member.budget_tokens)
        for name, (usd, tokens) in wanted.items():
            budget = stored.get(name)
            if budget is None or (budget.file_usd, budget.file_tokens) != (usd, tokens):
                budget = Budget(usd, tokens, usd, tokens)
                await self._journal.save_budget(team.name, name, budget)
            self._budgets[(team.name, name)] = budget

    def _refuse_unpriceable(self, team: TeamConfig) -> None:
        """A money budget on a member whose runtime reports no cost and whose model has no
        price could never be enforced: refused at launch, not discovered after the spend."""
        for member in team.members:
            if not runtime_info(member.runtime).reports_cost and \
                    member.budget_usd is not None and member.budget_tokens is None and \
                    self._prices.price(member.model) is None:
                raise UsageError(
                    f"member {member.name!r}: budget_usd cannot be enforced — the price of "
                    f"{member.model or 'its default model'!s} is not in teamctl's price table "
                    f"({member.runtime} reports tokens, not cost); set budget_tokens, or pick "
                    "a listed model ('teamctl usage --prices' lists them)")

    async def change(self, team: str, member: str | None, *, usd: float | None = None,
                     add_usd: float | None = None, tokens: int | None = None,
                     add_tokens: int | None = None, clear: bool = False) -> None:
        """The operator's change (member None: the team's budget), journaled; its warning
        may come again."""
        key = (team, member or TEAM)
        budget = self._budgets.get(key)
        if budget is None:
            raise NotFound("member", member or team, self.members(team))
        if clear:
            budget.usd = budget.tokens = None
        if usd is not None:
            budget.usd = usd
        if add_usd is not None:
            budget.usd = (budget.usd if budget.usd is not None
                          else self._spending.spent(key).cost_usd) + add_usd
        if tokens is not None:
            budget.tokens = tokens
        if add_tokens is not None:
            budget.tokens = (budget.tokens if budget.tokens is not None
                             else self._spending.spent(key).tokens.total) + add_tokens
        budget.warned = False
        await self._journal.save_budget(team, key[1], budget)
        log.info("budget_set", team=team, member=member, usd=budget.usd, tokens=budget.tokens)

    def budget(self, team: str, member: str | None) -> Budget:
        return self._budgets.get((team, member or TEAM)) or Budget()

    def members(self, team: str) -> list[str]:
        """The team's members (those with a budgets row: every member of a running team)."""
        return [m for t, m in self._budgets if t == team and m]

    def backstop_usd(self, team: str, member: str) -> float | None:
        """Claude's ``--max-budget-usd``: what is left of the tighter money budget (member or
        team) plus BACKSTOP_MARGIN of it. The CLI checks after each model call, so at the
        budget itself it would throw away the reply of the turn that crosses it — a reply
        already paid for — while the ledger stops that turn and holds the next; the backstop
        is for a ledger that failed."""
        left = []
        for key in ((team, member), (team, TEAM)):
            budget = self._budgets.get(key)
            if budget is not None and budget.usd is not None:
                left.append(max(budget.usd - self._spending.spent(key).cost_usd, 0.0)
                            + BACKSTOP_MARGIN * budget.usd)
        return min(left) if left else None

    def over(self, team: str, member: str) -> str | None:
        """Which budget the member is at or past, including the turn in flight, or None."""
        for key, what in (((team, member), f"member {member!r}"), ((team, TEAM),
                                                                   f"team {team!r}")):
            why = self._reached(key, what)
            if why is not None:
                return why
        return None

    def team_over(self, team: str) -> bool:
        """Whether the team's own budget is reached."""
        return self._reached((team, TEAM), f"team {team!r}") is not None

    def _reached(self, key: tuple[str, str], what: str) -> str | None:
        """Which of ``key``'s budgets is reached, or None (the WARN_AT warning, once)."""
        budget = self._budgets.get(key)
        if budget is None or not budget.set:
            return None
        spent = self._spending.spent(key)
        if budget.usd is not None and spent.cost_usd >= budget.usd:
            return f"budget reached: {what} spent ${spent.cost_usd:.4f} of {usd_text(budget.usd)}"
        if budget.tokens is not None and spent.tokens.total >= budget.tokens:
            return (f"token budget reached: {what} used {spent.tokens.total} of "
                    f"{budget.tokens} tokens")
        _warn(key, budget, spent, what)
        return None


def _warn(key: tuple[str, str], budget: Budget, spent: Totals, what: str) -> None:
    """The ``budget_warning`` at WARN_AT of a budget, once (until the budget changes)."""
    if budget.warned:
        return
    ratios = []
    if budget.usd:
        ratios.append(spent.cost_usd / budget.usd)
    if budget.tokens:
        ratios.append(spent.tokens.total / budget.tokens)
    if ratios and max(ratios) >= WARN_AT:
        budget.warned = True
        log.warning("budget_warning", team=key[0], member=key[1] or None,
                    percent=round(max(ratios) * 100), spent_usd=round(spent.cost_usd, 6),
                    budget_usd=budget.usd, tokens=spent.tokens.total,
                    budget_tokens=budget.tokens, what=what)
