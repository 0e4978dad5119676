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
unknown cost (never zero).

Budgets (``budget_usd``/``budget_tokens``, per member and per team) are checked before each
turn (``gate``) and on every reading during one (``Meter.reading`` answers "stop"). A member
over a budget is *held*: its queue stays queued until ``teamctl budget`` raises the limit. A
runtime's rate limit holds the member until the reset time it named, then releases it by
itself. Holds wake the member's queue through ``on_release``.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import structlog

from orchestrator.contracts import TokenUsage, UsageReading
from orchestrator.costs.figures import checked_reading, checked_tokens
from orchestrator.costs.figures import usd as usd_figure
from orchestrator.costs.prices import PriceTable, load_prices
from orchestrator.costs.text import usd_text
from orchestrator.daemon.ledger_journal import Budget, CounterValue, LedgerJournal
from orchestrator.errors import NotFound, StoreError, UsageError
from orchestrator.runtime_table import runtime_info

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from orchestrator.config import TeamConfig
    from orchestrator.daemon.journal import AsyncJournal

__all__ = ["Charge", "Hold", "Ledger", "MemberMeter"]

log = structlog.get_logger("teamctl.ledger")

TEAM = ""  # the budgets row of a whole team
WARN_AT = 0.8
BACKSTOP_MARGIN = 0.25  # Claude's --max-budget-usd: the budget left plus this share of it
RATE_LIMIT_DEFAULT_HOLD = 300.0  # a limit that named no reset time
RATE_LIMIT_MAX_HOLD = 8 * 24 * 3600.0  # a reset time further out than this is not believed
WRITE_RETRY = (0.5, 5.0)  # a charge the journal refused: first retry, longest wait (doubling)
By = Literal["member", "model", "day"]


@dataclass(frozen=True)
class Charge:
    """What one turn attempt used: tokens and cost (None: unknown — no price, or a runtime
    that did not say); ``estimated``: the turn never reported its own end figure."""

    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float | None = 0.0
    estimated: bool = False
    model: str | None = None

    @property
    def empty(self) -> bool:
        return self.tokens.total == 0 and not self.cost_usd

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.tokens.as_dict())
        doc["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        if self.estimated:
            doc["estimated"] = True
        return doc


@dataclass(frozen=True)
class Hold:
    """Why a member's queue is held: ``budget`` (until the operator raises it) or
    ``rate_limit`` (until ``until``, epoch seconds)."""

    kind: Literal["budget", "rate_limit"]
    reason: str
    until: float | None = None

    def describe(self) -> str:
        if self.kind == "rate_limit" and self.until is not None:
            return f"rate-limited until {time.strftime('%H:%M', time.localtime(self.until))}: " \
                   f"{self.reason}"
        return self.reason


@dataclass
class _Totals:
    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    unknown: int = 0  # charges whose cost is unknown

    def add(self, charge: Charge) -> None:
        self.tokens = self.tokens + charge.tokens
        if charge.cost_usd is None:
            self.unknown += 1
        else:
            self.cost_usd += charge.cost_usd


@dataclass
class _Attempt:
    """One turn attempt in flight: its own figures and, per counter, where it started and
    the latest reading."""

    message_id: str
    model: str | None
    own: Charge | None = None
    own_estimate: bool = True
    started: dict[str, CounterValue] = field(default_factory=dict)
    latest: dict[str, CounterValue] = field(default_factory=dict)
    final_seen: bool = False


class Ledger:
    """Usage accounting, budgets and holds for every member of every running team."""

    def __init__(self, store: AsyncJournal, tg: TaskGroup, *, prices: PriceTable | None = None,
                 clock: Callable[[], float] = time.time,
                 write_retry: tuple[float, float] = WRITE_RETRY) -> None:
        self._journal = LedgerJournal(store)
        self._tg = tg
        self._prices = prices or load_prices()
        self._clock = clock
        self._spent: defaultdict[tuple[str, str], _Totals] = defaultdict(_Totals)
        self._inflight: dict[tuple[str, str], _Attempt] = {}
        self._budgets: dict[tuple[str, str], Budget] = {}
        self._holds: dict[tuple[str, str], Hold] = {}
        self._runtimes: dict[tuple[str, str], str] = {}
        self._counters: dict[tuple[str, str], dict[str, CounterValue]] = {}
        # per member: the turn in flight and what stops it now (Meter.on_stop)
        self._stops: dict[tuple[str, str], tuple[str, Callable[[], None]]] = {}
        self._unwritten: list[tuple[Any, ...]] = []  # charges the journal refused, in order
        self._write_retry = write_retry
        self._writing = False
        self.on_release: Callable[[str, str], None] | None = None  # the mailbox's poke
        self.on_budget_change: Callable[[str, str | None], None] | None = None
        self.on_change: Callable[[], None] | None = None
        self._hold_event = anyio.Event()  # set (and replaced) whenever a hold changes

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

    # -- budgets ------------------------------------------------------------------------------

    async def configure(self, team: TeamConfig) -> None:
        """The team file's budgets, merged with the journal's: a budget the operator changed
        with ``teamctl budget`` stays, unless the team file's value changed since."""
        self._refuse_unpriceable(team)
        stored = await self._journal.budgets(team.name)
        wanted = {TEAM: (team.team.budget_usd, team.team.budget_tokens)}
        for member in team.members:
            wanted[member.name] = (member.budget_usd, member.budget_tokens)
            self._runtimes[(team.name, member.name)] = member.runtime
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

    async def set_budget(self, team: str, member: str | None, *, usd: float | None = None,
                         add_usd: float | None = None, tokens: int | None = None,
                         add_tokens: int | None = None, clear: bool = False) -> None:
        key = (team, member or TEAM)
        budget = self._budgets.get(key)
        if budget is None:
            raise NotFound("member", member or team, [m for t, m in self._budgets
                                                       if t == team and m])
        if clear:
            budget.usd = budget.tokens = None
        if usd is not None:
            budget.usd = usd
        if add_usd is not None:
            budget.usd = (budget.usd if budget.usd is not None else self.spent_usd(key)) + add_usd
        if tokens is not None:
            budget.tokens = tokens
        if add_tokens is not None:
            budget.tokens = (budget.tokens if budget.tokens is not None
                             else self.spent(key).tokens.total) + add_tokens
        budget.warned = False
        await self._journal.save_budget(team, key[1], budget)
        log.info("budget_set", team=team, member=member, usd=budget.usd, tokens=budget.tokens)
        for name in self._members(team) if member is None else [member]:
            hold = self._holds.get((team, name))
            if hold is not None and hold.kind == "budget" and self._over(team, name) is None:
                self._release(team, name)
        if self.on_budget_change is not None:
            self.on_budget_change(team, member)
        self._changed()

    def budget(self, team: str, member: str | None) -> Budget:
        return self._budgets.get((team, member or TEAM)) or Budget()

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
                left.append(max(budget.usd - self.spent_usd(key), 0.0)
                            + BACKSTOP_MARGIN * budget.usd)
        return min(left) if left else None

    # -- the gate and holds -------------------------------------------------------------------

    def gate(self, team: str, member: str) -> Hold | None:
        """Before a turn: the member's hold, if any (a budget reached holds it now)."""
        hold = self.hold(team, member)
        if hold is not None:
            return hold
        why = self._over(team, member)
        if why is None:
            return None
        return self._hold(team, member, Hold("budget", why))

    def hold(self, team: str, member: str) -> Hold | None:
        hold = self._holds.get((team, member))
        if hold is not None and hold.until is not None and hold.until <= self._clock():
            self._release(team, member)
            return None
        return hold

    def hold_budget(self, team: str, member: str, reason: str) -> None:
        """A turn was stopped for its budget: the member stays held until the operator
        raises it (even if the turn's final figure came in just under the limit)."""
        self._hold(team, member, Hold("budget", self._over(team, member) or reason))

    def rate_limited(self, team: str, member: str, until: float | None, message: str) -> None:
        """Hold the member until ``until`` (a reset time that is missing, past or absurd:
        RATE_LIMIT_DEFAULT_HOLD / at most RATE_LIMIT_MAX_HOLD), then release it by itself."""
        now = self._clock()
        current = self._holds.get((team, member))
        limited = current if current is not None and current.kind == "rate_limit" else None
        if until is None or not math.isfinite(until) or until <= now:
            if limited is not None:
                return
            until = now + RATE_LIMIT_DEFAULT_HOLD
        until = min(until, now + RATE_LIMIT_MAX_HOLD)
        if limited is not None and abs((limited.until or 0) - until) < 1.0:
            return
        self._hold(team, member, Hold("rate_limit", message[:300], until))
        self._tg.start_soon(self._release_at, team, member, until,
                            name=f"rate limit {team}/{member}")

    async def _release_at(self, team: str, member: str, until: float) -> None:
        await anyio.sleep(max(until - self._clock(), 0.0))
        hold = self._holds.get((team, member))
        if hold is not None and hold.kind == "rate_limit" and hold.until == until:
            self._release(team, member)

    def hold_changed(self) -> anyio.Event:
        """An event set at the next change of any hold."""
        return self._hold_event

    def _holds_changed(self) -> None:
        self._hold_event.set()
        self._hold_event = anyio.Event()

    def _hold(self, team: str, member: str, hold: Hold) -> Hold:
        if self._holds.get((team, member)) != hold:
            self._holds[(team, member)] = hold
            self._holds_changed()
            log.warning("member_held", team=team, member=member, hold=hold.kind,
                        reason=hold.reason, until=hold.until)
            self._changed()
        return hold

    def _release(self, team: str, member: str) -> None:
        hold = self._holds.pop((team, member), None)
        if hold is None:
            return
        log.info("member_released", team=team, member=member, hold=hold.kind)
        self._holds_changed()
        if self.on_release is not None:
            self.on_release(team, member)
        self._changed()

    def _over(self, team: str, member: str) -> str | None:
        """Which budget the member is at or past, including the turn in flight, or None."""
        for key, what in (((team, member), f"member {member!r}"), ((team, TEAM),
                                                                   f"team {team!r}")):
            why = self._reached(key, what)
            if why is not None:
                return why
        return None

    def _reached(self, key: tuple[str, str], what: str) -> str | None:
        """Which of ``key``'s budgets is reached, or None (the 80 % warning, once)."""
        budget = self._budgets.get(key)
        if budget is None or not budget.set:
            return None
        spent = self.spent(key)
        if budget.usd is not None and spent.cost_usd >= budget.usd:
            return f"budget reached: {what} spent ${spent.cost_usd:.4f} of {usd_text(budget.usd)}"
        if budget.tokens is not None and spent.tokens.total >= budget.tokens:
            return (f"token budget reached: {what} used {spent.tokens.total} of "
                    f"{budget.tokens} tokens")
        self._warn(key, budget, spent, what)
        return None

    def _warn(self, key: tuple[str, str], budget: Budget, spent: _Totals, what: str) -> None:
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

    # -- metering -----------------------------------------------------------------------------

    async def meter(self, team: str, member: str, runtime: str, model: str | None
                    ) -> MemberMeter:
        """The member's meter for one launch (its counters' baselines read from the journal
        here, so a reading never waits on it)."""
        self._runtimes[(team, member)] = runtime
        if (team, member) not in self._counters:
            self._counters[(team, member)] = await self._journal.counters(team, member)
        return MemberMeter(self, team, member, model)

    def observe(self, team: str, member: str, message_id: str, reading: UsageReading,
                model: str | None) -> bool:
        """One reading of a turn in flight; True when a budget is now reached (stop it). A team
        budget reached stops the team's other turns in flight too (``on_stop``)."""
        reading = checked_reading(reading)
        attempt = self._inflight.get((team, member))
        if attempt is None or attempt.message_id != message_id:
            attempt = self._inflight[(team, member)] = _Attempt(message_id, model)
        priced_model = reading.model or attempt.model
        if reading.counter is None:
            if reading.estimate and attempt.final_seen:
                return self._over(team, member) is not None
            cost = reading.cost_usd if reading.cost_usd is not None else \
                self._prices.cost(priced_model, reading.tokens)
            attempt.own = Charge(reading.tokens, cost, reading.estimate, priced_model)
            attempt.own_estimate = reading.estimate
        else:
            if reading.counter not in attempt.started:
                base = self._baseline(team, member, reading)
                attempt.started[reading.counter] = base
            start = attempt.started[reading.counter]
            previous = attempt.latest.get(reading.counter) or start
            # a running total's cost the reading left out (refused) keeps its last value: the
            # next good total is charged the whole increase
            value = CounterValue(start.tokens + reading.tokens if reading.turn_tokens
                             else reading.tokens,
                             previous.cost_usd if reading.cost_usd is None else reading.cost_usd)
            if value.tokens.below(previous.tokens) or (
                    value.cost_usd is not None and previous.cost_usd is not None
                    and value.cost_usd < previous.cost_usd - 1e-9):
                log.warning("usage_backwards", team=team, member=member,
                            counter=reading.counter, was=previous.tokens.as_dict(),
                            now=value.tokens.as_dict(), was_usd=previous.cost_usd,
                            now_usd=value.cost_usd)
                return self._check(team, member)
            attempt.latest[reading.counter] = value
            attempt.model = priced_model
        if not reading.estimate:
            attempt.final_seen = True
            if attempt.own is not None and attempt.own_estimate:
                attempt.own = None  # the runtime's own figure replaces the estimate
        return self._check(team, member)

    def _check(self, team: str, member: str) -> bool:
        """Whether the member's turn must stop; a team budget reached stops every other turn
        of the team in flight at once, so the team overshoots by the calls in flight at the
        crossing only — not by one more call per member (docs/costs.md)."""
        if self._over(team, member) is None:
            return False
        self._stops.pop((team, member), None)  # its runtime stops it on this answer
        if self._reached((team, TEAM), f"team {team!r}") is not None:
            for (t, other), (message_id, stop) in list(self._stops.items()):
                if t != team or other == member:
                    continue
                del self._stops[(t, other)]
                log.warning("team_budget_stop", team=team, member=other, message_id=message_id,
                            crossed_by=member)
                try:
                    stop()
                except Exception:  # a runtime's bug must not break the crossing member's reading
                    log.exception("team_budget_stop_failed", team=team, member=other)
        return True

    def on_stop(self, team: str, member: str, message_id: str, stop: Callable[[], None]) -> None:
        self._stops[(team, member)] = (message_id, stop)

    def _baseline(self, team: str, member: str, reading: UsageReading) -> CounterValue:
        assert reading.counter is not None
        known = self._counters.get((team, member), {}).get(reading.counter)
        if known is not None:
            return known
        if reading.baseline is not None:
            return CounterValue(reading.baseline, 0.0 if reading.cost_usd is not None else None)
        return CounterValue(TokenUsage(), 0.0 if reading.cost_usd is not None else None)

    def counter(self, team: str, member: str, counter: str) -> CounterValue | None:
        return self._counters.get((team, member), {}).get(counter)

    def _charge(self, attempt: _Attempt) -> Charge:
        tokens, cost, estimated = TokenUsage(), 0.0, False
        known = True
        if attempt.own is not None:
            tokens, estimated = attempt.own.tokens, attempt.own.estimated
            if attempt.own.cost_usd is None:
                known = False
            else:
                cost = attempt.own.cost_usd
        for name, latest in attempt.latest.items():
            start = attempt.started[name]
            delta = latest.tokens - start.tokens
            tokens = tokens + delta
            if latest.cost_usd is not None and start.cost_usd is not None:
                cost += latest.cost_usd - start.cost_usd
            elif delta.as_dict() == TokenUsage().as_dict():
                continue
            else:
                priced = self._prices.cost(attempt.model, delta)
                if priced is None:
                    known = False
                else:
                    cost += priced
        if not attempt.final_seen:
            estimated = True
        return Charge(tokens, cost if known else None, estimated, attempt.model)

    async def settle(self, team: str, member: str, message_id: str) -> Charge | None:
        """The attempt is over (answered, failed or cut): journal its charge (with the
        message's running usage and the counters' new baselines) and add it to the totals.
        Never raises: accounting never fails a turn that was answered (a bug is logged)."""
        if self._stops.get((team, member), ("",))[0] == message_id:
            del self._stops[(team, member)]
        attempt = self._inflight.pop((team, member), None)
        if attempt is None or attempt.message_id != message_id:
            return None
        try:
            return await self._settle(team, member, message_id, attempt)
        except Exception:
            log.exception("usage_unrecorded", team=team, member=member, message_id=message_id)
            return None

    async def _settle(self, team: str, member: str, message_id: str, attempt: _Attempt
                      ) -> Charge | None:
        charge = self._charge(attempt)
        if charge.empty and not attempt.latest and attempt.own is None:
            return None
        self._spent[(team, member)].add(charge)
        self._spent[(team, TEAM)].add(charge)
        self._counters.setdefault((team, member), {}).update(attempt.latest)
        runtime = self._runtimes.get((team, member), "?")
        await self._journal_charge(team, member, runtime, message_id, charge,
                                   dict(attempt.latest))
        log.info("turn_charged", team=team, member=member, message_id=message_id,
                 **charge.as_dict())
        self._over(team, member)  # the 80 % warning, once
        self._changed()
        return charge

    async def _journal_charge(self, team: str, member: str, runtime: str, message_id: str,
                              charge: Charge, counters: dict[str, CounterValue]) -> None:
        """Write one charge; a journal that refuses it (a full disk) gets it again, in order,
        from a background writer with a growing wait, as a delivery's outcome is — the totals
        in memory hold the budget meanwhile, and the member goes on."""
        write = (team, member, runtime, message_id, charge, counters, self._clock())
        if not self._unwritten:
            try:
                await self._journal.record(*write)
                return
            except StoreError as exc:
                log.error("usage_unrecorded", team=team, member=member, message_id=message_id,
                          error=exc.message, charge=charge.as_dict(), retry=True)
        self._unwritten.append(write)
        if not self._writing:
            self._writing = True
            self._tg.start_soon(self._write_unwritten, name="ledger: unwritten charges")

    async def _write_unwritten(self) -> None:
        delay, longest = self._write_retry
        try:
            while self._unwritten:
                await anyio.sleep(delay)
                write = self._unwritten[0]
                try:
                    await self._journal.record(*write)
                except StoreError:
                    delay = min(delay * 2, longest)
                    continue
                self._unwritten.pop(0)
                delay = self._write_retry[0]
                log.info("usage_recorded_late", team=write[0], member=write[1],
                         message_id=write[3])
        finally:
            self._writing = False
            if self._unwritten:  # the daemon stops with the journal still refusing them
                log.error("usage_lost", charges=len(self._unwritten))

    async def charge_side_call(self, team: str, member: str, message_id: str, runtime: str,
                               model: str | None, tokens: TokenUsage | None,
                               cost_usd: float | None) -> Charge:
        """A side call made for a member's message (a described image): charged to the member
        and journaled with the message, priced by the table when the runtime gave no cost."""
        tokens = checked_tokens(tokens or TokenUsage(), "side call tokens")
        cost = usd_figure(cost_usd, "side call cost_usd")
        charge = Charge(tokens, cost if cost is not None else self._prices.cost(model, tokens),
                        False, model)
        self._spent[(team, member)].add(charge)
        self._spent[(team, TEAM)].add(charge)
        await self._journal_charge(team, member, runtime, message_id, charge, {})
        log.info("side_call_charged", team=team, member=member, message_id=message_id,
                 runtime=runtime, **charge.as_dict())
        self._over(team, member)
        self._changed()
        return charge

    # -- queries ------------------------------------------------------------------------------

    def spent(self, key: tuple[str, str]) -> _Totals:
        """Charged so far, plus the turn in flight (of the member, or of every member)."""
        totals = self._spent.get(key) or _Totals()
        team, member = key
        inflight = [a for (t, m), a in self._inflight.items()
                    if t == team and (m == member or member == TEAM)]
        if not inflight:
            return totals
        out = _Totals(totals.tokens, totals.cost_usd, totals.unknown)
        for attempt in inflight:
            out.add(self._charge(attempt))
        return out

    def spent_usd(self, key: tuple[str, str]) -> float:
        return self.spent(key).cost_usd

    def unknown(self, key: tuple[str, str]) -> int:
        return self.spent(key).unknown

    async def usage(self, team: str | None, by: By) -> list[dict[str, Any]]:
        return await self._journal.usage(team, by)

    def _members(self, team: str) -> list[str]:
        return [m for t, m in self._budgets if t == team and m]

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()


@dataclass(eq=False)
class MemberMeter:
    """The ``Meter`` one member's runtime gets (``LaunchSpec.meter``)."""

    ledger: Ledger
    team: str
    member: str
    model: str | None

    def reading(self, message_id: str, reading: UsageReading) -> bool:
        try:
            return self.ledger.observe(self.team, self.member, message_id, reading, self.model)
        except Exception:  # accounting never breaks the runtime's reader (the turn goes on)
            log.exception("usage_reading_failed", team=self.team, member=self.member,
                          message_id=message_id)
            return False

    def on_stop(self, message_id: str, stop: Callable[[], None]) -> None:
        self.ledger.on_stop(self.team, self.member, message_id, stop)

    def rate_limited(self, until: float | None, message: str) -> None:
        self.ledger.rate_limited(self.team, self.member, until, message)

    def counted(self, counter: str) -> float:
        known = self.ledger.counter(self.team, self.member, counter)
        return 0.0 if known is None or known.cost_usd is None else known.cost_usd
