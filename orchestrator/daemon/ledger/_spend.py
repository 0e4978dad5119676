"""What each member and each team spent (docs/costs.md): the totals charged so far (read from
the journal once, at daemon start), the attempts in flight, and per member the running total
each runtime counter was last charged up to — so a total is never charged twice across turns,
restarts, resumes and re-deliveries. Every reading passes the figure gate
(``costs.readings.checked_reading``) before it counts."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from orchestrator.contracts import TokenUsage
from orchestrator.costs.figures import usd as usd_figure
from orchestrator.costs.readings import checked_reading, checked_tokens
from orchestrator.daemon.ledger._charge import Attempt, Charge, Totals
from orchestrator.daemon.ledger._journal import TEAM

if TYPE_CHECKING:
    from orchestrator.contracts import UsageReading
    from orchestrator.costs.prices import PriceTable
    from orchestrator.daemon.ledger._charge import CounterValue
    from orchestrator.daemon.ledger._journal import LedgerJournal

__all__ = ["Spending"]

Key = tuple[str, str]  # (team, member); member TEAM: the whole team


class Spending:
    """The spend of every member and team, the turns in flight included."""

    def __init__(self, journal: LedgerJournal, prices: PriceTable) -> None:
        self._journal = journal
        self._prices = prices
        self._spent: defaultdict[Key, Totals] = defaultdict(Totals)
        self._inflight: dict[Key, Attempt] = {}
        self._counters: dict[Key, dict[str, CounterValue]] = {}
        # why a member's figures leave some of its API calls out (its launch's runtime)
        self._unreported: dict[Key, str] = {}

    async def load(self) -> None:
        """The totals charged so far, from the journal (once, at daemon start)."""
        for row in await self._journal.totals():
            tokens = TokenUsage(int(row["i"] or 0), int(row["c"] or 0), int(row["o"] or 0),
                                int(row["r"] or 0))
            # refused: a total in a journal written before the figures were checked
            cost = usd_figure(row["usd"] or 0.0, f"journal total of {row['member']}")
            tokens = checked_tokens(tokens, f"journal total of {row['member']}")
            for key in ((row["team"], row["member"]), (row["team"], TEAM)):
                totals = self._spent[key]
                totals.tokens = totals.tokens + tokens
                totals.cost_usd += cost or 0.0
                totals.unknown += int(row["unknown"] or 0) + (cost is None)
                totals.unreported = totals.unreported or row["unreported"]

    def set_unreported(self, team: str, member: str, why: str | None) -> None:
        """What the member's runtime leaves out of its figures from now on (None: nothing,
        as far as captured): its charges, and its spend, are then a lower bound."""
        if why is None:
            self._unreported.pop((team, member), None)
        else:
            self._unreported[(team, member)] = why

    async def load_counters(self, team: str, member: str) -> None:
        """The member's counters as last charged, from the journal (once per member, so a
        reading never waits on it)."""
        if (team, member) not in self._counters:
            self._counters[(team, member)] = await self._journal.counters(team, member)

    def read(self, team: str, member: str, message_id: str, reading: UsageReading,
             model: str | None) -> bool:
        """One reading of the member's turn in flight (the first of ``message_id`` starts its
        attempt); False when it was an estimate after the turn's own figure (ignored)."""
        reading = checked_reading(reading)
        attempt = self._inflight.get((team, member))
        if attempt is None or attempt.message_id != message_id:
            attempt = self._inflight[(team, member)] = Attempt(
                team, member, message_id, model, self._unreported.get((team, member)))
        return attempt.read(reading, self._counters.get((team, member), {}), self._prices)

    def take(self, team: str, member: str, message_id: str) -> Attempt | None:
        """The member's attempt in flight, now over; None when it is not ``message_id``'s
        (an attempt of another message is dropped)."""
        attempt = self._inflight.pop((team, member), None)
        if attempt is None or attempt.message_id != message_id:
            return None
        return attempt

    def settle(self, attempt: Attempt) -> Charge | None:
        """The attempt's charge, added to the totals, its counters the new baselines; None
        when it read nothing."""
        charge = attempt.charge(self._prices)
        if charge.empty and not attempt.latest and attempt.own is None:
            return None
        self.add(attempt.team, attempt.member, charge)
        self._counters.setdefault((attempt.team, attempt.member), {}).update(attempt.latest)
        return charge

    def add_side_call(self, team: str, member: str, model: str | None,
                      tokens: TokenUsage | None, cost_usd: float | None) -> Charge:
        """A side call made for a member's message (a described image), charged to the
        member: its figures gated, priced by the table when the runtime gave no cost."""
        tokens = checked_tokens(tokens or TokenUsage(), "side call tokens")
        cost = usd_figure(cost_usd, "side call cost_usd")
        charge = Charge(tokens, cost if cost is not None else self._prices.cost(model, tokens),
                        False, model)
        self.add(team, member, charge)
        return charge

    def add(self, team: str, member: str, charge: Charge) -> None:
        self._spent[(team, member)].add(charge)
        self._spent[(team, TEAM)].add(charge)

    def spent(self, key: Key) -> Totals:
        """Charged so far, plus the turn in flight (of the member, or of every member); a
        lower bound (``unreported``) when a charge was, or the member's runtime leaves calls
        out — before its first turn too, so the operator knows before the money is spent."""
        totals = self._spent.get(key) or Totals()
        team, member = key
        inflight = [a for (t, m), a in self._inflight.items()
                    if t == team and (m == member or member == TEAM)]
        out = Totals(totals.tokens, totals.cost_usd, totals.unknown,
                     totals.unreported or self._why(key))
        for attempt in inflight:
            out.add(attempt.charge(self._prices))
        return out

    def _why(self, key: Key) -> str | None:
        """Why the member's (or, ``TEAM``, any member's) runtime leaves calls out."""
        team, member = key
        if member != TEAM:
            return self._unreported.get(key)
        return next((why for (t, _), why in self._unreported.items() if t == team), None)

    def counter(self, team: str, member: str, counter: str) -> CounterValue | None:
        return self._counters.get((team, member), {}).get(counter)
