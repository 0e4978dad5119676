"""What one turn attempt used (docs/costs.md): the ``Attempt`` in flight, built from its
runtime's readings, the ``Charge`` it is settled with, and the ``Totals`` charges add up to.

A reading is either the turn's own figures so far, or a running total of a runtime counter (a
process, a thread). An attempt keeps, per counter, where it started and the latest total, and
is charged the increase; a total that goes backwards is logged and not charged. A counter the
ledger has never seen starts at the runtime's ``baseline`` (or zero).

A counter whose cost is a dollar total the runtime keeps (Claude's session ``total_cost_usd``,
an ACP agent's ``usage_update``: readings with ``turn_tokens``) starts at $0 even when its
first reading's cost was refused (NaN): the turn's cost is unknown, the counter keeps its last
good value, and the next good total is charged the whole increase. (It started as a counter
"without a cost" instead, priced from the table for good: a NaN and then $2.50 was charged
$0.000045.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from orchestrator.contracts import TokenUsage

if TYPE_CHECKING:
    from collections.abc import Mapping

    from orchestrator.contracts import UsageReading
    from orchestrator.costs.prices import PriceTable

__all__ = ["Attempt", "Charge", "CounterValue", "Totals"]

log = structlog.get_logger("teamctl.ledger")


@dataclass
class CounterValue:
    """A runtime counter's running total: tokens and cost (None: unknown)."""

    tokens: TokenUsage
    cost_usd: float | None


@dataclass(frozen=True)
class Charge:
    """What one turn attempt used: tokens and cost (None: unknown — no price, or a runtime
    that did not say); ``estimated``: the turn never reported its own end figure;
    ``unreported``: why its figures leave some of the member's API calls out (a lower bound,
    ``costs.coverage``)."""

    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float | None = 0.0
    estimated: bool = False
    model: str | None = None
    unreported: str | None = None

    @property
    def empty(self) -> bool:
        return self.tokens.total == 0 and not self.cost_usd

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = dict(self.tokens.as_dict())
        doc["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        if self.estimated:
            doc["estimated"] = True
        return doc


@dataclass
class Totals:
    """Charges added up: tokens, the known cost, and how many charges had an unknown one."""

    tokens: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    unknown: int = 0  # charges whose cost is unknown
    unreported: str | None = None  # why some charges leave API calls out: a lower bound

    def add(self, charge: Charge) -> None:
        self.tokens = self.tokens + charge.tokens
        if charge.cost_usd is None:
            self.unknown += 1
        else:
            self.cost_usd += charge.cost_usd
        self.unreported = self.unreported or charge.unreported


@dataclass
class Attempt:
    """One turn attempt in flight: its own figures and, per counter, where it started and
    the latest reading."""

    team: str
    member: str
    message_id: str
    model: str | None
    unreported: str | None = None  # the member's: why its figures are a lower bound
    own: Charge | None = None
    own_estimate: bool = True
    started: dict[str, CounterValue] = field(default_factory=dict)
    latest: dict[str, CounterValue] = field(default_factory=dict)
    final_seen: bool = False
    # dollar-total counters whose latest reading's cost was refused: this attempt's cost
    # there is unknown (their ``latest`` keeps the last good total)
    refused: set[str] = field(default_factory=set)

    def read(self, reading: UsageReading, known: Mapping[str, CounterValue],
             prices: PriceTable) -> bool:
        """Take one (checked) reading; False when it was an estimate after the turn's own
        figure, and so ignored. ``known``: the member's counters as last charged."""
        priced_model = reading.model or self.model
        if reading.counter is None:
            if reading.estimate and self.final_seen:
                return False
            cost = reading.cost_usd if reading.cost_usd is not None else \
                prices.cost(priced_model, reading.tokens)
            self.own = Charge(reading.tokens, cost, reading.estimate, priced_model)
            self.own_estimate = reading.estimate
        elif self._read_counter(reading, reading.counter, known):
            self.model = priced_model
        else:
            return True  # a total that went backwards: not charged, the turn not final
        if not reading.estimate:
            self.final_seen = True
            if self.own is not None and self.own_estimate:
                self.own = None  # the runtime's own figure replaces the estimate
        return True

    def _read_counter(self, reading: UsageReading, counter: str,
                      known: Mapping[str, CounterValue]) -> bool:
        """The counter's new running total; False (logged) when it went backwards."""
        if counter not in self.started:
            self.started[counter] = known.get(counter) or _baseline(reading)
        start = self.started[counter]
        previous = self.latest.get(counter) or start
        # a running total's cost the reading left out (refused) keeps its last value: the
        # next good total is charged the whole increase
        value = CounterValue(start.tokens + reading.tokens if reading.turn_tokens
                             else reading.tokens,
                             previous.cost_usd if reading.cost_usd is None else reading.cost_usd)
        if _dollar_total(reading) and reading.cost_usd is None:
            self.refused.add(counter)
        else:
            self.refused.discard(counter)
        if value.tokens.below(previous.tokens) or (
                value.cost_usd is not None and previous.cost_usd is not None
                and value.cost_usd < previous.cost_usd - 1e-9):
            log.warning("usage_backwards", team=self.team, member=self.member, counter=counter,
                        was=previous.tokens.as_dict(), now=value.tokens.as_dict(),
                        was_usd=previous.cost_usd, now_usd=value.cost_usd)
            return False
        self.latest[counter] = value
        return True

    def charge(self, prices: PriceTable) -> Charge:
        """What the attempt used so far: its own figures plus each counter's increase (priced
        from the table when the counter carries no cost)."""
        tokens, cost, estimated = TokenUsage(), 0.0, False
        known = True
        if self.own is not None:
            tokens, estimated = self.own.tokens, self.own.estimated
            if self.own.cost_usd is None:
                known = False
            else:
                cost = self.own.cost_usd
        for name, latest in self.latest.items():
            delta, delta_cost = self._increase(name, latest, prices)
            tokens = tokens + delta
            if delta_cost is None:
                known = False
            else:
                cost += delta_cost
        if not self.final_seen:
            estimated = True
        return Charge(tokens, cost if known else None, estimated, self.model, self.unreported)

    def _increase(self, counter: str, latest: CounterValue, prices: PriceTable
                  ) -> tuple[TokenUsage, float | None]:
        """A counter's tokens and cost since the attempt started (cost None: unknown)."""
        start = self.started[counter]
        delta = latest.tokens - start.tokens
        if counter in self.refused:  # a dollar total refused: unknown, never priced
            return delta, None
        if latest.cost_usd is not None and start.cost_usd is not None:
            return delta, latest.cost_usd - start.cost_usd
        if delta.as_dict() == TokenUsage().as_dict():
            return delta, 0.0
        return delta, prices.cost(self.model, delta)


def _baseline(reading: UsageReading) -> CounterValue:
    """Where a counter the ledger has never seen starts: the runtime's baseline, or zero; its
    cost at $0 when it carries one (a dollar total, even one whose first reading was refused),
    else unknown (tokens priced from the table)."""
    cost = 0.0 if reading.cost_usd is not None or _dollar_total(reading) else None
    return CounterValue(reading.baseline if reading.baseline is not None else TokenUsage(), cost)


def _dollar_total(reading: UsageReading) -> bool:
    """Whether the reading's counter is a dollar total the runtime keeps: ``turn_tokens``
    says so (the counter's cost is the running total, its tokens the turn's own — Claude's
    session, an ACP agent's session cost); a counter of tokens alone (Codex's thread) is
    priced from the table."""
    return reading.counter is not None and reading.turn_tokens
