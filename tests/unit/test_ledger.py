"""The ledger's accounting (running totals charged by their increase, across turns, restarts,
resumes and re-deliveries), the price table, and the budget gate (docs/costs.md); and the ledger
under bad figures, a full disk, accounting bugs and concurrent turns, each test named after the
failure the hardening issue found."""

from __future__ import annotations

import json
import math
import threading
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TokenUsage, UsageReading, token_count, usd
from orchestrator.costs.figures import MAX_TOKENS
from orchestrator.costs.prices import PriceTable, load_prices
from orchestrator.costs.readings import checked_reading
from orchestrator.costs.text import cost_text
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.ledger import _journal as ledger_journal
from orchestrator.daemon.migrations import MIGRATIONS
from orchestrator.daemon.queue import AsyncStore, Store
from orchestrator.errors import StoreError, UsageError
from tests.support.fakes import journal_at, ledger_alone

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import AsyncIterator, Callable
    from contextlib import AbstractContextManager
    from pathlib import Path

    from orchestrator.daemon.ledger import Ledger

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio

SONNET = "claude-sonnet-4-5"  # $3 / $0.30 / $15 per million (the table)


def _team(**budgets: Any) -> TeamConfig:
    member: dict[str, Any] = {"name": "rev", "runtime": "claude", "model": SONNET}
    member.update({k: v for k, v in budgets.items() if k.startswith("budget")})
    team: dict[str, Any] = {"name": "web"}
    team.update(budgets.get("team", {}))
    return TeamConfig.model_validate({"team": team, "members": [
        member, {"name": "dev", "runtime": "codex", "model": budgets.get("codex_model",
                                                                         "gpt-5-mini")}]})


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = journal_at(tmp_path / "state.db")
    store.add_message("m1", "web", "hello", ["rev", "dev"])
    for message_id in ("m2", "m3", "m4"):
        store.add_message(message_id, "web", "again", ["rev", "dev"])
    yield AsyncStore(store)
    store.close()


async def _ledger(journal: AsyncStore, tg: Any, clock: Clock | None = None, *,
                  on_release: Callable[[str, str], None] = lambda team, member: None,
                  **budgets: Any) -> Ledger:
    ledger = ledger_alone(journal, tg, clock=clock or Clock(), on_release=on_release)
    await ledger.load()
    await ledger.configure(_team(**budgets))
    return ledger


def _process(cost: float, input_tokens: int, counter: str = "claude-process:1"
             ) -> UsageReading:
    return UsageReading(tokens=TokenUsage(input_tokens=input_tokens), cost_usd=cost,
                        counter=counter, baseline=TokenUsage(), model=SONNET)


async def test_a_running_total_is_charged_by_its_increase(journal: AsyncStore) -> None:
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg)
        await ledger.meter("web", "rev", "claude", SONNET)
        for message_id, total in (("m1", 0.05), ("m2", 0.10), ("m3", 0.15)):
            ledger.observe("web", "rev", message_id, _process(total, int(total * 1e6)), SONNET)
            charge = await ledger.settle("web", "rev", message_id)
            assert charge is not None and charge.cost_usd == pytest.approx(0.05)
            assert charge.tokens.input_tokens == 50_000
        # a restart: a new process is a new counter, starting from zero
        ledger.observe("web", "rev", "m4", _process(0.02, 20_000, "claude-process:2"), SONNET)
        charge = await ledger.settle("web", "rev", "m4")
        assert charge is not None and charge.cost_usd == pytest.approx(0.02)
        assert ledger.spent_usd(("web", "rev")) == pytest.approx(0.17)
        assert ledger.spent_usd(("web", "")) == pytest.approx(0.17)
        tg.cancel_scope.cancel()
    delivery = journal.sync.delivery("m2", "rev")
    assert delivery is not None and delivery.usage is not None
    assert delivery.usage["cost_usd"] == pytest.approx(0.05)


async def test_a_resumed_thread_is_charged_from_the_baseline_the_journal_kept(
        journal: AsyncStore) -> None:
    thread = "codex-thread:t1"

    def reading(total: int) -> UsageReading:
        return UsageReading(tokens=TokenUsage(input_tokens=total, output_tokens=total // 10),
                            counter=thread, model="gpt-5-mini")

    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg)
        await ledger.meter("web", "dev", "codex", "gpt-5-mini")
        ledger.observe("web", "dev", "m1", reading(1000), "gpt-5-mini")
        await ledger.settle("web", "dev", "m1")
        tg.cancel_scope.cancel()
    async with anyio.create_task_group() as tg:  # a new daemon: the thread is resumed
        again = await _ledger(journal, tg)
        assert again.spent(("web", "dev")).tokens.total == 1100, "totals from the journal"
        await again.meter("web", "dev", "codex", "gpt-5-mini")
        again.observe("web", "dev", "m2", reading(3000), "gpt-5-mini")
        charge = await again.settle("web", "dev", "m2")
        assert charge is not None
        assert charge.tokens == TokenUsage(input_tokens=2000, output_tokens=200)
        assert charge.cost_usd == pytest.approx((2000 * 0.25 + 200 * 2.0) / 1e6), \
            "Codex reports no cost: its tokens are priced from the table"
        tg.cancel_scope.cancel()


async def test_a_cut_turn_keeps_its_estimate_and_the_redelivery_is_not_charged_twice(
        journal: AsyncStore) -> None:
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg)
        await ledger.meter("web", "rev", "claude", SONNET)
        # attempt 1: two model calls seen, then the process dies before its result
        ledger.observe("web", "rev", "m1", UsageReading(
            tokens=TokenUsage(input_tokens=100_000), estimate=True), SONNET)
        cut = await ledger.settle("web", "rev", "m1")
        assert cut is not None and cut.estimated and cut.cost_usd == pytest.approx(0.30)
        # attempt 2 on a fresh process: its own result settles it
        ledger.observe("web", "rev", "m1", UsageReading(
            tokens=TokenUsage(input_tokens=120_000), estimate=True), SONNET)
        ledger.observe("web", "rev", "m1", _process(0.40, 120_000, "claude-process:new"), SONNET)
        final = await ledger.settle("web", "rev", "m1")
        assert final is not None and not final.estimated
        assert final.cost_usd == pytest.approx(0.40), "the result replaces the estimate"
        assert ledger.spent_usd(("web", "rev")) == pytest.approx(0.70)
        tg.cancel_scope.cancel()
    delivery = journal.sync.delivery("m1", "rev")
    assert delivery is not None and delivery.usage is not None
    assert delivery.usage["cost_usd"] == pytest.approx(0.70)
    assert delivery.usage["estimated"] is True, "one of its attempts was an estimate"


async def test_a_total_that_goes_backwards_is_logged_and_not_charged(
        journal: AsyncStore, capsys: pytest.CaptureFixture[str]) -> None:
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg)
        await ledger.meter("web", "rev", "claude", SONNET)
        ledger.observe("web", "rev", "m1", _process(0.50, 500_000), SONNET)
        await ledger.settle("web", "rev", "m1")
        ledger.observe("web", "rev", "m2", _process(0.20, 200_000), SONNET)  # backwards
        charge = await ledger.settle("web", "rev", "m2")
        assert charge is None or charge.empty
        assert ledger.spent_usd(("web", "rev")) == pytest.approx(0.50)
        tg.cancel_scope.cancel()
    assert "usage_backwards" in capsys.readouterr().out


async def test_an_unknown_price_is_unknown_not_zero_and_tokens_still_bound_it(
        journal: AsyncStore) -> None:
    async with anyio.create_task_group() as tg:
        ledger = ledger_alone(journal, tg, clock=Clock())
        team = TeamConfig.model_validate({"team": {"name": "web"}, "members": [
            {"name": "dev", "runtime": "codex", "model": "gpt-oss-120b",
             "budget_tokens": 1500}]})
        await ledger.configure(team)
        await ledger.meter("web", "dev", "codex", "gpt-oss-120b")
        ledger.observe("web", "dev", "m1", UsageReading(
            tokens=TokenUsage(input_tokens=1000, output_tokens=600),
            counter="codex-thread:x"), "gpt-oss-120b")
        charge = await ledger.settle("web", "dev", "m1")
        assert charge is not None and charge.cost_usd is None
        assert ledger.spent(("web", "dev")).unknown == 1
        hold = ledger.gate("web", "dev")
        assert hold is not None and "token budget reached" in hold.reason
        tg.cancel_scope.cancel()


async def test_a_money_budget_that_could_never_be_enforced_is_refused(
        journal: AsyncStore) -> None:
    team = TeamConfig.model_validate({"team": {"name": "web"}, "members": [
        {"name": "dev", "runtime": "codex", "model": "gpt-oss-120b", "budget_usd": 5.0}]})
    async with anyio.create_task_group() as tg:
        with pytest.raises(UsageError, match=r"budget_usd cannot be enforced.*budget_tokens"):
            await ledger_alone(journal, tg).configure(team)
        tg.cancel_scope.cancel()


async def test_the_gate_holds_a_member_over_budget_until_it_is_raised(
        journal: AsyncStore, capsys: pytest.CaptureFixture[str]) -> None:
    released: list[tuple[str, str]] = []
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg, budget_usd=0.10,
                               on_release=lambda team, member: released.append((team, member)))
        await ledger.meter("web", "rev", "claude", SONNET)
        assert ledger.gate("web", "rev") is None
        ledger.observe("web", "rev", "m1", _process(0.085, 1000), SONNET)
        await ledger.settle("web", "rev", "m1")
        assert ledger.gate("web", "rev") is None
        assert "budget_warning" in capsys.readouterr().out, "a warning at 80 %"
        stop = ledger.observe("web", "rev", "m2", _process(0.12, 2000), SONNET)
        assert stop, "a reading during a turn that crosses the budget says stop"
        await ledger.settle("web", "rev", "m2")
        hold = ledger.gate("web", "rev")
        assert hold is not None and hold.kind == "budget"
        assert "$0.1200 of $0.10" in hold.reason
        assert ledger.backstop_usd("web", "rev") == pytest.approx(0.025), "left + 25 %"
        await ledger.set_budget("web", "rev", add_usd=1.0)
        assert released == [("web", "rev")]
        assert ledger.gate("web", "rev") is None
        assert ledger.backstop_usd("web", "rev") == pytest.approx(0.98 + 0.275)
        tg.cancel_scope.cancel()


async def test_a_team_budget_holds_every_member(journal: AsyncStore) -> None:
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg, team={"budget_usd": 0.05})
        await ledger.meter("web", "rev", "claude", SONNET)
        ledger.observe("web", "rev", "m1", _process(0.06, 1000), SONNET)
        await ledger.settle("web", "rev", "m1")
        dev = ledger.gate("web", "dev")
        assert dev is not None and "team 'web'" in dev.reason
        tg.cancel_scope.cancel()


async def test_budgets_merge_the_team_file_with_the_operators_changes(
        journal: AsyncStore) -> None:
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg, budget_usd=1.0)
        await ledger.set_budget("web", "rev", usd=3.0)
        again = await _ledger(journal, tg, budget_usd=1.0)
        assert again.budget("web", "rev").usd == 3.0, "the operator's --set stays on relaunch"
        edited = await _ledger(journal, tg, budget_usd=2.0)
        assert edited.budget("web", "rev").usd == 2.0, "an edited team file wins"
        tg.cancel_scope.cancel()


async def test_a_rate_limit_holds_until_the_named_reset_and_releases_itself(
        journal: AsyncStore) -> None:
    clock = Clock()
    released: list[str] = []
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg, clock,
                               on_release=lambda team, member: released.append(member))
        ledger.rate_limited("web", "rev", clock.now + 3600, "five_hour limit reached",
                            window="five_hour")
        hold = ledger.gate("web", "rev")
        assert hold is not None and hold.describe().startswith(
            "held: claude:operator five-hour window until ")
        ledger.rate_limited("web", "rev", None, "again, no reset named")
        assert ledger.hold("web", "rev") == hold, "a limit without a reset keeps the one known"
        clock.now += 3601
        assert ledger.gate("web", "rev") is None and released == ["rev"]
        ledger.rate_limited("web", "dev", clock.now + 10 * 365 * 86400, "absurd")
        far = ledger.hold("web", "dev")
        assert far is not None and far.until is not None
        assert far.until - clock.now <= 8 * 24 * 3600, "a reset years away is not believed"
        tg.cancel_scope.cancel()


def test_the_price_table_names_its_sources_and_prices_snapshots_and_prefixes() -> None:
    table = load_prices()
    assert table.checked and len(table) >= 20
    assert all(price.source in table.sources for _, price in table.items())
    sonnet = table.price("claude-sonnet-4-5-20250929")
    assert sonnet is not None and sonnet.input == 3.0
    assert table.price("openrouter/openai/gpt-5-mini") == table.price("gpt-5-mini")
    assert table.price("gpt-oss-120b") is None and table.cost("nope", TokenUsage(1)) is None
    tokens = TokenUsage(input_tokens=1_000_000, cached_input_tokens=400_000,
                        output_tokens=100_000)
    assert table.cost("gpt-5-mini", tokens) == pytest.approx(0.6 * 0.25 + 0.4 * 0.025 + 0.2)
    assert PriceTable({"models": {}}).price("gpt-5") is None


def test_budget_keys_refuse_negative_and_non_numeric_values(tmp_path: Path) -> None:
    from orchestrator.config import load_team_file
    from orchestrator.errors import TeamFileError

    for value, key in (("-1.0", "budget_usd"), ('"10"', "budget_usd"), ("-5", "budget_tokens"),
                       ('"lots"', "budget_tokens"), ("nan", "budget_usd")):
        path = tmp_path / "team.toml"
        path.write_text(f'[team]\nname = "web"\n\n[[members]]\nname = "rev"\n'
                        f'runtime = "claude"\n{key} = {value}\n')
        with pytest.raises(TeamFileError) as raised:
            load_team_file(path)
        assert f"members[0].{key}" in raised.value.message, value
        assert raised.value.exit_code == 2
    path.write_text('[team]\nname = "web"\nbudget_tokens = -1\n\n[[members]]\nname = "rev"\n'
                    'runtime = "claude"\n')
    with pytest.raises(TeamFileError) as raised:
        load_team_file(path)
    assert "team.budget_tokens" in raised.value.message
    path.write_text('[team]\nname = "web"\nbudget_usd = 20\n\n[[members]]\nname = "rev"\n'
                    'runtime = "claude"\nbudget_usd = 2.5\nbudget_tokens = 100000\n')
    config = load_team_file(path)
    assert config.team.budget_usd == 20 and config.members[0].budget_tokens == 100000
    assert json.dumps(config.model_dump(mode="json"))  # travels to the daemon as JSON


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
    store = FullDisk(tmp_path / "state.db", MIGRATIONS)
    for message_id in ("m1", "m2", "m3"):
        store.add_message(message_id, "web", "hello", list(MEMBERS))
    yield store
    store.close()


async def _members_ledger(store: Store, tg: Any, **team: Any) -> Ledger:
    ledger = ledger_alone(AsyncStore(store), tg, write_retry=(0.01, 0.05))
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
        ledger = await _members_ledger(store, tg)
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
        ledger = await _members_ledger(store, tg, budget_usd=1.0)
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
        ledger = await _members_ledger(store, tg)
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
        again = await _members_ledger(store, tg)
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
        ledger = await _members_ledger(store, tg)

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
        ledger = await _members_ledger(store, tg, budget_usd=1.0)
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
