"""Every dollar counted, or said not to be (issue 45): an ACP agent that makes API calls it
never reports (Qwen Code's memory extraction and suggestions, Gemini CLI's router) is charged
what it reports, and its spend, its usage rows and its turns say they are a lower bound and
why (orchestrator/costs/coverage.py, docs/costs.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig
from orchestrator.contracts import TokenUsage, UsageReading
from orchestrator.costs.coverage import GEMINI_ROUTED, QWEN, UNKNOWN_AGENT, unreported
from orchestrator.costs.text import cost_text, lower_bound_note
from orchestrator.daemon.ledger import Accounts
from orchestrator.daemon.queue import AsyncStore
from orchestrator.daemon.roster import Roster
from tests.support.fakes import journal_at, ledger_alone

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")  # written to anyio: trio catches a reliance on asyncio

SONNET = "claude-sonnet-4-5"


def _team(qw: dict[str, Any]) -> TeamConfig:
    return TeamConfig.model_validate({"team": {"name": "web"}, "members": [
        {"name": "qw", "runtime": "acp", **qw}, {"name": "rev", "runtime": "claude",
                                                 "model": SONNET}]})


QWEN_MEMBER = {"acp_agent": "qwen", "model": "qwen3-coder-plus"}


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = journal_at(tmp_path / "state.db")
    store.add_message("m1", "web", "hello", ["qw", "rev"])
    yield AsyncStore(store)
    store.close()


def test_the_agents_captured_leaving_calls_out_are_named_with_why() -> None:
    """Qwen Code always; Gemini CLI only with no model named (its router's call); an ACP
    agent without a preset was never captured; Claude, Codex and OpenCode count every call."""
    assert unreported("acp", "qwen", "qwen3-coder-plus") == QWEN
    assert unreported("acp", "gemini", None) == GEMINI_ROUTED
    assert unreported("acp", "gemini", "gemini-2.5-flash") is None
    assert unreported("acp", None, "any") == UNKNOWN_AGENT
    assert [unreported(r, None, "m") for r in ("claude", "codex", "opencode")] == [None] * 3
    assert "memory extraction" in QWEN and "9 of 14 API calls" in QWEN
    assert "name a model" in GEMINI_ROUTED


async def test_a_qwen_members_spend_usage_and_turns_were_counted_whole_without_a_word(
        journal: AsyncStore) -> None:
    """Its side requests reached no figure, and nothing said so: its spend (from launch on,
    before a turn), its team's, its usage row and its turn's usage now say they are a lower
    bound and why; a member that counts every call says nothing. The turns' rows keep it
    after a restart, whatever the member runs then."""
    async with anyio.create_task_group() as tg:
        ledger = ledger_alone(journal, tg)
        await ledger.load()
        await ledger.configure(_team(QWEN_MEMBER))
        assert ledger.spent(("web", "qw")).unreported == QWEN, "known before the first turn"
        assert ledger.spent(("web", "")).unreported == QWEN
        assert ledger.spent(("web", "rev")).unreported is None
        await ledger.meter("web", "qw", "acp", "qwen3-coder-plus")
        ledger.observe("web", "qw", "m1", UsageReading(
            tokens=TokenUsage(input_tokens=11, output_tokens=3)), "qwen3-coder-plus")
        charge = await ledger.settle("web", "qw", "m1")
        assert charge is not None and charge.unreported == QWEN
        accounts = Accounts(Roster(journal), ledger)
        assert accounts.spend("web", "qw").lower_bound == QWEN
        assert accounts.spend("web", "rev").lower_bound is None
        [row] = (await accounts.usage(None, "member")).rows
        assert (row.group, row.lower_bound) == ("qw", QWEN)
        tg.cancel_scope.cancel()
    delivery = journal.sync.delivery("m1", "qw")
    assert delivery is not None and delivery.usage is not None
    assert delivery.usage["lower_bound"] == QWEN
    async with anyio.create_task_group() as tg:  # a new daemon; qw now names Gemini's model
        again = ledger_alone(journal, tg)
        await again.load()
        await again.configure(_team({"acp_agent": "gemini", "model": "gemini-2.5-flash"}))
        assert again.spent(("web", "qw")).unreported == QWEN, "its turns' rows say so"
        tg.cancel_scope.cancel()


def test_a_lower_bound_reads_as_one_with_its_reason_and_a_whole_figure_as_before() -> None:
    spend = {"cost_usd": 0.25, "cost_unknown": 0, "tokens": 10, "budget_usd": 1.0,
             "budget_tokens": None}
    assert cost_text(spend) == "$0.2500 / $1.00"
    assert lower_bound_note(spend) is None and lower_bound_note(None) is None
    partial = {**spend, "lower_bound": QWEN}
    assert cost_text(partial) == "\u2265 $0.2500 / $1.00"
    assert lower_bound_note(partial) == f"cost \u2265 (a lower bound): {QWEN}"
