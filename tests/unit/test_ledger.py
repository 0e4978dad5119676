"""The ledger's accounting (running totals charged by their increase, across turns, restarts,
resumes and re-deliveries), the price table, and the budget gate (docs/costs.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TokenUsage, UsageReading
from orchestrator.costs.prices import PriceTable, load_prices
from orchestrator.daemon.ledger import Ledger
from orchestrator.daemon.store import AsyncStore, Store
from orchestrator.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio

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
    store = Store(tmp_path / "state.db")
    store.add_message("m1", "web", "hello", ["rev", "dev"])
    for message_id in ("m2", "m3", "m4"):
        store.add_message(message_id, "web", "again", ["rev", "dev"])
    yield AsyncStore(store)
    store.close()


async def _ledger(journal: AsyncStore, tg: Any, clock: Clock | None = None,
                  **budgets: Any) -> Ledger:
    ledger = Ledger(journal, tg, clock=clock or Clock())
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
        ledger = Ledger(journal, tg, clock=Clock())
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
            await Ledger(journal, tg).configure(team)
        tg.cancel_scope.cancel()


async def test_the_gate_holds_a_member_over_budget_until_it_is_raised(
        journal: AsyncStore, capsys: pytest.CaptureFixture[str]) -> None:
    released: list[tuple[str, str]] = []
    async with anyio.create_task_group() as tg:
        ledger = await _ledger(journal, tg, budget_usd=0.10)
        ledger.on_release = lambda team, member: released.append((team, member))
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
        ledger = await _ledger(journal, tg, clock)
        ledger.on_release = lambda team, member: released.append(member)
        ledger.rate_limited("web", "rev", clock.now + 3600, "five_hour limit reached")
        hold = ledger.gate("web", "rev")
        assert hold is not None and hold.describe().startswith("rate-limited until ")
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
