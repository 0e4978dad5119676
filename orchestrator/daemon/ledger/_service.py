"""The ledger: what every turn cost, and the budgets that stop a member before the money is
gone (docs/costs.md).

Runtimes report ``UsageReading``s through their member's ``Meter`` as often as they learn
something (Claude: each assistant message, then the turn's ``result``; Codex: each
``thread/tokenUsage/updated`` or ``turn.completed``; OpenCode: each step). A reading is either
the turn's own figures so far, or a running total of a runtime counter (a process, a thread):
the ledger charges the *increase* of each counter since it last settled it, and keeps those
baselines in the journal, so a total is never charged twice across turns, restarts, resumes
and re-deliveries. A total that goes backwards is logged and not charged. Codex reports no
cost: its tokens are priced from the vendored table; a model the table does not list has an
unknown cost (never zero). A member whose runtime makes calls it does not report (an ACP
agent's side requests: ``costs.coverage``) is charged what it reports, each charge marked with
why its figures are a lower bound.

Budgets (``budget_usd``/``budget_tokens``, per member and per team) are checked before each
turn (``gate``) and on every reading during one (``Meter.reading`` answers "stop"). A member
over a budget is *held*: its queue stays queued until ``teamctl budget`` raises the limit. A
runtime's refusal for a spent window holds every member of its account until the reset, and
its reports of the window pause the members below the top priority past the reserve: the
quota's (``daemon.quota``), built here and asked by the gate. Holds wake the member's queue
through ``on_release``.

``Ledger`` is the one object the core holds; each idea lives in its own module:
``_charge`` (an attempt in flight and its ``Charge``), ``_spend`` (the totals, the
attempts in flight, the counters' baselines), ``_writer`` (charges into the journal,
retried while it refuses them), ``_budgets`` (which budget is reached), ``_holds``
(budget and rate-limit holds), ``_stops`` (a team budget crossed stops the team's other
turns), ``_meter`` (the ``Meter`` a runtime gets) and ``_journal`` (the tables).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.costs.coverage import unreported
from orchestrator.costs.prices import PriceTable, load_prices
from orchestrator.daemon.ledger._budgets import Budgets
from orchestrator.daemon.ledger._charge import Charge, Totals
from orchestrator.daemon.ledger._holds import Hold, Holds
from orchestrator.daemon.ledger._journal import By, LedgerJournal
from orchestrator.daemon.ledger._meter import MemberMeter
from orchestrator.daemon.ledger._spend import Spending
from orchestrator.daemon.ledger._stops import TurnStops
from orchestrator.daemon.ledger._writer import WRITE_RETRY, ChargeWriter
from orchestrator.daemon.quota import PROBE_AFTER, Quota
from orchestrator.errors import BudgetReached, RateLimited

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio import Event
    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.contracts import TokenUsage, UsageReading, WindowReading
    from orchestrator.daemon.journal import AsyncJournal
    from orchestrator.daemon.ledger._charge import CounterValue
    from orchestrator.daemon.ledger._journal import Budget
    from orchestrator.errors import TurnHeld

__all__ = ["By", "Charge", "Hold", "Ledger", "MemberMeter"]

log = structlog.get_logger("teamctl.ledger")


class Ledger:
    """Usage accounting, budgets and holds for every member of every running team.

    ``on_release(team, member)``: a held member was released (the mailbox's poke);
    ``on_budget_change(team, member)``: the operator changed a budget (member None: the
    team's); ``on_change()``: a spend, a budget or a hold changed (the live view)."""

    def __init__(self, store: AsyncJournal, tg: TaskGroup, *,
                 on_release: Callable[[str, str], None],
                 on_budget_change: Callable[[str, str | None], None],
                 on_change: Callable[[], None], prices: PriceTable | None = None,
                 clock: Callable[[], float] = time.time,
                 write_retry: tuple[float, float] = WRITE_RETRY,
                 probe_after: float = PROBE_AFTER) -> None:
        self._journal = LedgerJournal(store)
        prices = prices or load_prices()
        self._spending = Spending(self._journal, prices)
        self._budgets = Budgets(self._journal, prices, self._spending)
        self._holds = holds = Holds(on_release=on_release, on_change=on_change)

        def quota_changed() -> None:
            holds.touched()
            on_change()

        self.quota = Quota(store, tg, clock=clock, on_release=on_release,
                           on_change=quota_changed, probe_after=probe_after)
        self._stops = TurnStops()
        self._writer = ChargeWriter(self._journal, tg, clock=clock, write_retry=write_retry)
        self._runtimes: dict[tuple[str, str], str] = {}  # the usage rows' runtime column
        self._on_budget_change = on_budget_change
        self._on_change = on_change

    async def load(self) -> None:
        """The totals charged so far and the accounts held, from the journal (once, at daemon
        start)."""
        await self._spending.load()
        await self.quota.load()

    # -- budgets ------------------------------------------------------------------------------

    async def configure(self, team: TeamConfig) -> None:
        """The team's budgets (``Budgets.configure``: an unenforceable one is refused), and
        whose figures will leave API calls out (``costs.coverage``: a lower bound)."""
        await self._budgets.configure(team)
        self.quota.configure(team)
        for member in team.members:
            self._runtimes[(team.name, member.name)] = member.runtime
            self._spending.set_unreported(team.name, member.name, unreported(
                member.runtime, member.acp_agent, member.model))

    async def set_budget(self, team: str, member: str | None, *, usd: float | None = None,
                         add_usd: float | None = None, tokens: int | None = None,
                         add_tokens: int | None = None, clear: bool = False) -> None:
        """The operator's change; a member no longer over its budgets is released."""
        await self._budgets.change(team, member, usd=usd, add_usd=add_usd, tokens=tokens,
                                   add_tokens=add_tokens, clear=clear)
        members = self._budgets.members(team) if member is None else [member]
        self._holds.release_budget(team, members, self._budgets.over)
        self._on_budget_change(team, member)
        self._on_change()

    def budget(self, team: str, member: str | None) -> Budget:
        return self._budgets.budget(team, member)

    def backstop_usd(self, team: str, member: str) -> float | None:
        """Claude's ``--max-budget-usd`` (``Budgets.backstop_usd``)."""
        return self._budgets.backstop_usd(team, member)

    # -- the gate and holds -------------------------------------------------------------------

    def gate(self, team: str, member: str, *, claiming: bool = False) -> Hold | None:
        """Before a turn: the member's hold, if any (a budget reached holds it now; its
        account's window: the quota's). ``claiming``: its queue claims a turn now (it may
        take its account's probe)."""
        hold = self._holds.hold(team, member)
        if hold is not None:
            return hold
        why = self._budgets.over(team, member)
        if why is not None:
            return self._holds.put(team, member, Hold("budget", why))
        return self._paused(team, member, claiming=claiming)

    def _paused(self, team: str, member: str, *, claiming: bool) -> Hold | None:
        pause = self.quota.gate((team, member), claiming=claiming)
        if pause is None:
            return None
        if pause.kind == "reserve":
            return Hold("reserve", pause.text, pause.until, operator_only=True)
        return Hold("rate_limit", pause.text, pause.until)

    def hold(self, team: str, member: str) -> Hold | None:
        return self._holds.hold(team, member) or self._paused(team, member, claiming=False)

    def held(self, team: str, member: str, stopped: TurnHeld) -> TurnHeld:
        """A turn ended held: hold the member (a refused window: its whole account; a budget:
        itself) and say why — a turn stopped because another member found the account's
        window spent reads as that refusal, not as a budget."""
        if isinstance(stopped, RateLimited):
            self.rate_limited(team, member, stopped.until, stopped.message,
                              window=stopped.window)
            return stopped
        pause = self.quota.gate((team, member))
        if pause is not None and pause.kind != "reserve":
            return RateLimited(member, pause.text, until=pause.until)
        if isinstance(stopped, BudgetReached):
            self.hold_budget(team, member, stopped.why)
        return stopped

    def hold_budget(self, team: str, member: str, reason: str) -> None:
        """A turn was stopped for its budget: the member stays held until the operator
        raises it (even if the turn's final figure came in just under the limit)."""
        self._holds.put(team, member, Hold("budget", self._budgets.over(team, member) or reason))

    def rate_limited(self, team: str, member: str, until: float | None, message: str, *,
                     window: str | None = None) -> None:
        """The member's request was refused for a spent window: its whole account is held
        until ``until`` (the quota's), and its other members' turns in flight stop now."""
        self._stops.stop((team, member), self.quota.refused((team, member), until, window,
                                                            message))

    def window(self, team: str, member: str, reading: WindowReading) -> None:
        """A runtime's report of its account's window (the quota's)."""
        self._stops.stop((team, member), self.quota.reported((team, member), reading))

    def answered(self, team: str, member: str) -> None:
        """A turn of the member was answered (a probe's answer opens its account)."""
        self.quota.answered((team, member))

    def idle(self, team: str, member: str) -> None:
        """The member passed the gate with nothing to send (a probe goes on to another)."""
        self.quota.idle((team, member))

    def hold_changed(self) -> Event:
        """An event set at the next change of any hold."""
        return self._holds.changed()

    # -- metering -----------------------------------------------------------------------------

    async def meter(self, team: str, member: str, runtime: str, model: str | None
                    ) -> MemberMeter:
        """The member's meter for one launch (its counters' baselines read from the journal
        here, so a reading never waits on it)."""
        self._runtimes[(team, member)] = runtime
        await self._spending.load_counters(team, member)
        return MemberMeter(self, team, member, model)

    def observe(self, team: str, member: str, message_id: str, reading: UsageReading,
                model: str | None) -> bool:
        """One reading of a turn in flight; True when a budget is now reached (stop it). A team
        budget reached stops the team's other turns in flight too (``on_stop``)."""
        if not self._spending.read(team, member, message_id, reading, model):
            return self._budgets.over(team, member) is not None
        return self._check(team, member)

    def _check(self, team: str, member: str) -> bool:
        """Whether the member's turn must stop; a team budget reached stops every other turn
        of the team in flight at once (``TurnStops``)."""
        if self._budgets.over(team, member) is None:
            return False
        self._stops.forget(team, member)  # its runtime stops it on this answer
        if self._budgets.team_over(team):
            self._stops.stop_others(team, member)
        return True

    def on_stop(self, team: str, member: str, message_id: str, stop: Callable[[], None]) -> None:
        self._stops.on_stop(team, member, message_id, stop)

    def counter(self, team: str, member: str, counter: str) -> CounterValue | None:
        return self._spending.counter(team, member, counter)

    async def settle(self, team: str, member: str, message_id: str) -> Charge | None:
        """The attempt is over (answered, failed or cut): journal its charge (with the
        message's running usage and the counters' new baselines) and add it to the totals.
        Never raises: accounting never fails a turn that was answered (a bug is logged)."""
        self._stops.forget(team, member, message_id)
        attempt = self._spending.take(team, member, message_id)
        if attempt is None:
            return None
        try:
            charge = self._spending.settle(attempt)
            if charge is None:
                return None
            runtime = self._runtimes.get((team, member), "?")
            await self._writer.write(team, member, runtime, message_id, charge,
                                     dict(attempt.latest))
            log.info("turn_charged", team=team, member=member, message_id=message_id,
                     **charge.as_dict())
            self._charged(team, member)
            return charge
        except Exception:
            log.exception("usage_unrecorded", team=team, member=member, message_id=message_id)
            return None

    async def charge_side_call(self, team: str, member: str, message_id: str, runtime: str,
                               model: str | None, tokens: TokenUsage | None,
                               cost_usd: float | None) -> Charge:
        """A side call made for a member's message (a described image): charged to the member
        and journaled with the message, priced by the table when the runtime gave no cost."""
        charge = self._spending.add_side_call(team, member, model, tokens, cost_usd)
        await self._writer.write(team, member, runtime, message_id, charge, {})
        log.info("side_call_charged", team=team, member=member, message_id=message_id,
                 runtime=runtime, **charge.as_dict())
        self._charged(team, member)
        return charge

    def _charged(self, team: str, member: str) -> None:
        self._budgets.over(team, member)  # the 80 % warning, once
        self._on_change()

    # -- queries ------------------------------------------------------------------------------

    def spent(self, key: tuple[str, str]) -> Totals:
        """Charged so far, plus the turn in flight (of the member, or of every member)."""
        return self._spending.spent(key)

    def spent_usd(self, key: tuple[str, str]) -> float:
        return self._spending.spent(key).cost_usd

    async def usage(self, team: str | None, by: By) -> list[dict[str, Any]]:
        return await self._journal.usage(team, by)
