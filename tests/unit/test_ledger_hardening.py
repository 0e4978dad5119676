"""The ledger under bad figures, a full disk, accounting bugs and concurrent turns
(docs/costs.md). Each test is named after the failure the hardening issue found; its
docstring states the promise."""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TokenUsage, UsageReading, token_count, usd
from orchestrator.costs.figures import MAX_TOKENS, checked_reading
from orchestrator.costs.text import cost_text
from orchestrator.daemon import ledger_journal
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.store import AsyncStore, Store
from orchestrator.errors import StoreError

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import AsyncIterator
    from contextlib import AbstractContextManager
    from pathlib import Path

pytestmark = pytest.mark.anyio

SONNET = "claude-sonnet-4-5"  # $3 / $0.30 / $15 per million (the table)
MEMBERS = ("a", "b", "c")


class FullDisk(Store):
    """A journal whose writes fail while ``full`` (SQLITE_FULL, as a full disk answers)."""

    full = False

    def transaction(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        if self.full:
            raise StoreError("the journal could not be written: database or disk is full")
        return super().transaction(durable=durable)

    def usage_rows(self) -> int:
        return int(self.connection.execute("SELECT COUNT(*) FROM usage").fetchone()[0])


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[FullDisk]:
    store = FullDisk(tmp_path / "state.db")
    for message_id in ("m1", "m2", "m3"):
        store.add_message(message_id, "web", "hello", list(MEMBERS))
    yield store
    store.close()


async def _ledger(store: Store, tg: Any, **team: Any) -> Ledger:
    ledger = Ledger(AsyncStore(store), tg, write_retry=(0.01, 0.05))
    await ledger.load()
    await ledger.configure(TeamConfig.model_validate({"team": {"name": "web", **team}, "members": [
        {"name": n, "runtime": "claude", "model": SONNET} for n in MEMBERS]}))
    return ledger


def _session(cost: float | None, input_tokens: int = 10) -> UsageReading:
    return UsageReading(tokens=TokenUsage(input_tokens=input_tokens), cost_usd=cost,
                        counter="claude-session:s1", baseline=TokenUsage(), turn_tokens=True,
                        model=SONNET)


def test_the_boundary_took_any_float_and_any_int_as_a_usage_figure() -> None:
    """A runtime's figure is a finite, non-negative, bounded number of the right type, or it
    is skipped (cost: unknown, None; tokens: 0) — never NaN, Infinity, 1e308, -1, 2**64, a
    bool or a string."""
    for bad in (math.nan, math.inf, -math.inf, 1e308, -1, -0.5, True, "5", [1]):
        assert usd(bad, "total_cost_usd") is None, bad
    assert usd(0, "c") == 0.0 and usd(1.25, "c") == 1.25 and usd(None, "c") is None
    for bad in (2**64, 2**53 + 1, -1, True, 1.0, math.nan, "10"):
        assert token_count({"input_tokens": bad}, "input_tokens") == 0, bad
    assert token_count({"input_tokens": MAX_TOKENS}, "input_tokens") == MAX_TOKENS
    summed = UsageReading(tokens=TokenUsage(input_tokens=MAX_TOKENS * 4, output_tokens=7),
                          cost_usd=math.inf)
    checked = checked_reading(summed)
    assert checked.tokens == TokenUsage(output_tokens=7) and checked.cost_usd is None


async def test_a_nan_or_infinite_running_total_made_the_spend_nan_and_no_budget_reachable(
        store: FullDisk) -> None:
    """A running total the ledger is handed as NaN, Infinity, 1e308 or -1 is skipped: the
    counter keeps its last good value, spend stays finite, the next good total is charged the
    whole increase, and the member's budget still holds it."""
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(store, tg)
        await ledger.set_budget("web", "a", usd=0.05)
        ledger.observe("web", "a", "m1", _session(0.01), SONNET)
        await ledger.settle("web", "a", "m1")
        for bad in (math.nan, math.inf, 1e308, -1.0):
            ledger.observe("web", "a", "m2", _session(bad), SONNET)
            assert math.isfinite(ledger.spent_usd(("web", "a")))
        await ledger.settle("web", "a", "m2")
        assert ledger.spent_usd(("web", "a")) == pytest.approx(0.01)
        assert ledger.gate("web", "a") is None
        ledger.observe("web", "a", "m3", _session(0.06), SONNET)
        charge = await ledger.settle("web", "a", "m3")
        assert charge is not None and charge.cost_usd == pytest.approx(0.05)
        assert ledger.spent_usd(("web", "")) == pytest.approx(0.06)
        hold = ledger.gate("web", "a")
        assert hold is not None and "member 'a' spent $0.0600 of $0.05" in hold.reason
        tg.cancel_scope.cancel()


async def test_a_nan_first_total_then_a_good_one_was_priced_from_the_table_for_good(
        store: FullDisk) -> None:
    """A session whose first total is NaN, then a good $2.50: the $2.50 is charged and a team
    budget of $1 holds the team. (The counter started as one "without a cost", so the $2.50
    and every later total were priced from the table instead: $0.000045.) The NaN turn's own
    cost is unknown — never priced, never $0."""
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(store, tg, budget_usd=1.0)
        ledger.observe("web", "a", "m1", _session(math.nan), SONNET)
        first = await ledger.settle("web", "a", "m1")
        assert first is not None and first.cost_usd is None
        assert ledger.gate("web", "a") is None
        ledger.observe("web", "a", "m2", _session(2.50), SONNET)
        second = await ledger.settle("web", "a", "m2")
        assert second is not None and second.cost_usd == pytest.approx(2.50)
        assert ledger.spent_usd(("web", "")) == pytest.approx(2.50)
        assert ledger.spent(("web", "a")).unknown == 1
        hold = ledger.gate("web", "b")
        assert hold is not None and "team 'web' spent $2.5000 of $1.00" in hold.reason
        tg.cancel_scope.cancel()


async def test_a_charge_made_while_the_disk_is_full_was_never_written(
        store: FullDisk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A charge the journal refuses (a full disk) is written again, in order, once the
    journal takes writes: after a restart the budget counts it. Meanwhile the totals in
    memory hold the budget and settle returns at once (the member goes on)."""
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(store, tg)
        both_written = threading.Event()
        record = ledger_journal._record

        def recorded(*args: Any, **kwargs: Any) -> None:
            record(*args, **kwargs)
            if store.usage_rows() == 2:
                both_written.set()

        monkeypatch.setattr(ledger_journal, "_record", recorded)
        store.full = True
        ledger.observe("web", "a", "m1", _session(0.25, 1000), SONNET)
        with anyio.fail_after(5):
            charge = await ledger.settle("web", "a", "m1")
        assert charge is not None and charge.cost_usd == pytest.approx(0.25)
        ledger.observe("web", "a", "m2", _session(0.40, 1000), SONNET)
        await ledger.settle("web", "a", "m2")
        assert ledger.spent_usd(("web", "a")) == pytest.approx(0.40)
        assert store.usage_rows() == 0
        store.full = False
        assert await anyio.to_thread.run_sync(both_written.wait, 10)
        tg.cancel_scope.cancel()
    async with anyio.create_task_group() as tg:  # a restart: the journal has both charges
        again = await _ledger(store, tg)
        assert again.spent_usd(("web", "a")) == pytest.approx(0.40)
        counter = again.counter("web", "a", "claude-session:s1")
        assert counter is None  # not loaded until the member's meter asks
        meter = await again.meter("web", "a", "claude", SONNET)
        assert meter.counted("claude-session:s1") == pytest.approx(0.40), "baselines in order"
        tg.cancel_scope.cancel()


async def test_an_accounting_error_failed_the_answered_turn(
        store: FullDisk, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An error in the ledger's write that is not the journal's (e.g. an int SQLite cannot
    take) is logged; settle never raises, so a turn that was answered stays answered."""
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(store, tg)

        def overflow(*_: Any, **__: Any) -> None:
            raise OverflowError("Python int too large to convert to SQLite INTEGER")

        monkeypatch.setattr(ledger_journal, "_record", overflow)
        ledger.observe("web", "a", "m1", _session(0.25), SONNET)
        assert await ledger.settle("web", "a", "m1") is None
        tg.cancel_scope.cancel()
    assert "usage_unrecorded" in capsys.readouterr().out


async def test_a_team_budget_crossing_left_the_other_members_turns_running(
        store: FullDisk) -> None:
    """The reading that crosses the team's budget stops every other turn of the team in flight
    at once (each once; a turn already stopping is not stopped again), and only then; a
    member's own budget stops only its own turn."""
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(store, tg, budget_usd=1.0)
        await ledger.set_budget("web", "c", usd=0.1)
        stopped: list[str] = []
        for name in MEMBERS:
            meter = await ledger.meter("web", name, "claude", SONNET)
            meter.on_stop("m1", lambda n=name: stopped.append(n))

        def call(member: str, calls: int) -> bool:
            return ledger.observe("web", member, "m1", UsageReading(
                tokens=TokenUsage(input_tokens=100_000 * calls), estimate=True), SONNET)

        assert call("c", 1) is True, "c's own budget ($0.30 of $0.10): c stops itself"
        assert stopped == [], "a member budget stops only its own turn"
        assert call("a", 1) is False and call("b", 1) is False  # $0.90 in all
        assert call("a", 2) is True, "$1.20: the team's budget is crossed; a stops itself"
        assert stopped == ["b"], "b's turn in flight is stopped at once, not at its next call"
        assert call("b", 2) is True and stopped == ["b"], "stopped once"
        tg.cancel_scope.cancel()


def test_the_budget_column_rounded_a_sub_cent_budget_to_cents() -> None:
    """A budget is shown with the digits it has: $0.005 is not $0.01."""
    assert cost_text({"cost_usd": 0.006, "budget_usd": 0.005}) == "$0.0060 / $0.0050"
    assert cost_text({"cost_usd": 1.2, "budget_usd": 5.0}) == "$1.2000 / $5.00"
    assert cost_text({"cost_usd": 0.0, "budget_usd": 0.012345}) == "$0.0000 / $0.012345"


def test_the_readme_and_demo_codex_model_had_no_price() -> None:
    """Every model README.md, the demo team and the vision catalog name has a price in the
    table (with a source the table names) or is listed under [unpriced] with the reason:
    the README's own Codex model (gpt-5.4-mini) is priced, so its cost is not '+ ?' and a
    dollar budget on it is enforceable."""
    import re
    import tomllib
    from importlib import resources
    from pathlib import Path

    from orchestrator.costs.prices import load_prices

    repo = Path(__file__).resolve().parents[2]
    table = tomllib.loads(resources.files("orchestrator.costs").joinpath(
        "price_table.toml").read_text(encoding="utf-8"))
    prices, unpriced = load_prices(), table["unpriced"]
    named = set(re.findall(r'model = "([^"]+)"', (repo / "README.md").read_text()))
    named |= set(re.findall(r'model = "([^"]+)"',
                            (repo / "fixtures/demo/team.toml").read_text()))
    catalog = tomllib.loads((repo / "orchestrator/attachments/vision_catalog.toml").read_text())
    for runtime in ("claude", "codex", "opencode"):
        named |= set(catalog[runtime])
    assert {"gpt-5.4-mini", "claude-sonnet-4-5", "claude-haiku-4-5",
            "openrouter/moonshotai/kimi-k2.6"} <= named
    missing = sorted(m for m in named if prices.price(m) is None and m not in unpriced)
    assert missing == [], "priced, or listed under [unpriced] with why"
    for model, price in prices.items():
        assert price.source in table["sources"], model
    mini = prices.price("gpt-5.4-mini")
    assert mini is not None and (mini.input, mini.cached_input, mini.output) == (0.75, 0.075,
                                                                                  4.50)
