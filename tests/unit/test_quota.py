"""The quota (docs/costs.md, "Quota windows"), in process on a manual clock: which account a
member spends (by its credential, never showing it), one refusal holding every member of the
account, a reset nobody named probed by one member, the reserve kept for the top priority, a
hold journaled; what the runtimes say of their windows (Claude's ``rate_limit_event``, Codex's
``account/rateLimits/updated``, as captured from the real CLIs); and the team file's new keys
under hostile values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import pytest

from orchestrator.config import TeamConfig, load_team_file
from orchestrator.contracts import WindowReading
from orchestrator.daemon.queue import AsyncStore
from orchestrator.daemon.quota import Quota
from orchestrator.daemon.quota._identity import account_of, fingerprint
from orchestrator.daemon.quota._journal import QuotaJournal
from orchestrator.daemon.quota._service import RESET_MARGIN
from orchestrator.errors import TeamFileError, UsageError
from runtimes.claude.runtime import window_reading
from runtimes.codex.app_server import limit_reset, window_of
from tests.support.fakes import journal_at
from tests.support.settle import until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.anyio
ANYIO_BACKENDS = ("asyncio", "trio")

KEY = "sk-ant-api03-secret-value-never-shown"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _team(*members: dict[str, Any], **team: Any) -> TeamConfig:
    accounts = team.pop("accounts", {})
    hosts = team.pop("hosts", {})
    return TeamConfig.model_validate({"team": {"name": "web", **team}, "accounts": accounts,
                                      "hosts": hosts, "members": [
        {"runtime": "claude", **m} for m in members]})


# -- accounts -------------------------------------------------------------------------------


def test_members_on_one_login_or_one_key_are_one_account_named_safely() -> None:
    team = _team({"name": "lead"}, {"name": "dev"},
                 {"name": "keyed", "env": {"ANTHROPIC_API_KEY": KEY}},
                 {"name": "same", "pass_env": ["ANTHROPIC_API_KEY"]},
                 {"name": "token", "env": {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-x"}},
                 {"name": "own", "login": "isolated"},
                 {"name": "cx", "runtime": "codex"},
                 {"name": "cxkey", "runtime": "codex", "env": {"CODEX_API_KEY": "sk-proj-1"}},
                 {"name": "custom", "runtime": "codex", "env": {"FAKE_OPENAI_API_KEY": "k"}},
                 {"name": "qw", "runtime": "acp", "acp_agent": "qwen", "login": "isolated",
                  "env": {"OPENAI_API_KEY": "sk-proj-1"}},
                 {"name": "far", "host": "box"})
    environ = {"ANTHROPIC_API_KEY": KEY}
    found = {m.name: account_of(team, m, environ) for m in team.members}
    assert found["lead"] == found["dev"] == "claude:operator"
    assert found["keyed"] == found["same"] == f"anthropic:key…{fingerprint(KEY)}", \
        "the same key, from env or pass_env, is one account"
    assert found["token"].startswith("claude:token…")
    assert found["own"] == "claude:isolated/web/own"
    assert found["cx"] == "codex:operator"
    assert found["cxkey"] == found["qw"] == f"openai:key…{fingerprint('sk-proj-1')}", \
        "one OpenAI key spent by Codex and by Qwen Code: one window"
    assert found["custom"] == f"fake-openai:key…{fingerprint('k')}"
    assert found["far"] == "claude:operator@box", "an SSH member spends its host's login"
    assert not any(KEY in name or "sk-proj-1" in name for name in found.values())
    assert len(fingerprint(KEY)) == 4


def test_a_pod_member_spends_its_secret() -> None:
    team = _team({"name": "pod", "host": "k8s", "login": "isolated"},
                 hosts={"k8s": {"kind": "kubernetes", "image": "img", "namespace": "agents",
                                "secret": "claude-key"}})
    assert account_of(team, team.members[0], {}) == "claude:secret/agents/claude-key"


# -- one window, one decision ---------------------------------------------------------------


@pytest.fixture
async def journal(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = journal_at(tmp_path / "state.db")
    yield AsyncStore(store)
    store.close()


def _quota(journal: AsyncStore, tg: Any, clock: Clock, pokes: list[str],
           **options: Any) -> Quota:
    return Quota(journal, tg, clock=clock, on_release=lambda team, member: pokes.append(member),
                 on_change=lambda: None, environ={}, **options)


THREE = ({"name": "dev"}, {"name": "lead", "lead": True}, {"name": "qa", "priority": 0})


async def test_one_refusal_holds_every_member_until_the_reset_then_wakes_them_by_priority(
        journal: AsyncStore) -> None:
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes)
        quota.configure(_team(*THREE))
        stop = quota.refused(("web", "dev"), clock.now + 60, "five_hour", "five_hour limit")
        assert stop == [("web", "lead"), ("web", "qa")], "the others' turns in flight stop"
        for member in ("dev", "lead", "qa"):
            pause = quota.gate(("web", member), claiming=True)
            assert pause is not None and pause.kind == "window"
            assert pause.text.startswith("held: claude:operator five-hour window until ")
        assert quota.refused(("web", "qa"), clock.now + 60.4, "five_hour", "again") == [], \
            "the same reset from another member changes nothing"
        clock.now += 60
        assert quota.gate(("web", "qa"), claiming=True) is not None, \
            "a reset is a whole second of the provider's clock: resumed RESET_MARGIN after"
        clock.now += RESET_MARGIN
        assert quota.gate(("web", "qa"), claiming=True) is None
        assert pokes == ["lead", "dev", "qa"], "woken in priority order, the lead first"
        tg.cancel_scope.cancel()


async def test_a_reset_not_named_is_probed_by_one_member_and_its_answer_opens_the_account(
        journal: AsyncStore) -> None:
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes, probe_after=30.0)
        quota.configure(_team(*THREE))
        quota.refused(("web", "dev"), clock.now - 5, None, "usage limit")  # a past reset
        pause = quota.gate(("web", "lead"))
        assert pause is not None and pause.until == clock.now + 30.0
        clock.now += 31
        assert quota.gate(("web", "qa"), claiming=True) is None, "the first with work probes"
        assert quota.gate(("web", "lead"), claiming=True).kind == "probe"  # type: ignore[union-attr]
        assert quota.gate(("web", "dev"), claiming=True).kind == "probe"  # type: ignore[union-attr]
        pokes.clear()
        quota.idle(("web", "qa"))  # nothing to send: the probe goes on
        assert pokes == ["lead", "dev"]
        assert quota.gate(("web", "dev"), claiming=True) is None
        assert quota.gate(("web", "qa"), claiming=True).kind == "probe"  # type: ignore[union-attr]
        quota.answered(("web", "dev"))
        assert all(quota.gate(("web", m)) is None for m in ("dev", "lead", "qa"))
        tg.cancel_scope.cancel()


async def test_a_probe_refused_again_holds_the_account_again(journal: AsyncStore) -> None:
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes, probe_after=30.0)
        quota.configure(_team(*THREE))
        quota.refused(("web", "dev"), None, None, "usage limit")
        clock.now += 31
        assert quota.gate(("web", "lead"), claiming=True) is None
        quota.refused(("web", "lead"), None, None, "still spent")
        assert quota.gate(("web", "lead"), claiming=True).kind == "window"  # type: ignore[union-attr]
        tg.cancel_scope.cancel()


async def test_past_the_reserve_only_the_top_priority_and_the_operator_keep_turns(
        journal: AsyncStore) -> None:
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes)
        quota.configure(_team(*THREE, quota_reserve=0.2,
                              accounts={"claude:operator": {"quota_reserve": 0.3}}))
        quota.reported(("web", "lead"), WindowReading("allowed", "five_hour", 0.65,
                                                      clock.now + 600))
        assert all(quota.gate(("web", m)) is None for m in ("dev", "lead", "qa")), \
            "65 % used: the account's own reserve of 30 % is not reached"
        quota.reported(("web", "dev"), WindowReading("warning", "five_hour", 0.71,
                                                     clock.now + 600))
        assert quota.gate(("web", "lead")) is None, "the lead keeps its turns"
        pause = quota.gate(("web", "dev"))
        assert pause is not None and pause.kind == "reserve"
        assert pause.text.startswith("paused: claude:operator five-hour window 71% used, the "
                                     "last 30% kept for priority 1 until ")
        clock.now += 601
        assert quota.gate(("web", "dev")) is None, "the window's reset ends the pause"
        tg.cancel_scope.cancel()


async def _held(journal: QuotaJournal) -> bool:
    return bool(await journal.held())


async def test_a_hold_is_journaled_and_a_new_daemon_holds_until_the_same_reset(
        journal: AsyncStore) -> None:
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes)
        quota.configure(_team(*THREE))
        quota.refused(("web", "qa"), clock.now + 600, "seven_day", "seven_day limit")
        written = QuotaJournal(journal)
        await until(lambda: _held(written))  # the write runs in a task of its own
        again = _quota(journal, tg, clock, pokes)
        await again.load()
        again.configure(_team(*THREE))
        pause = again.gate(("web", "lead"))
        assert pause is not None and pause.until == clock.now + 600
        assert "seven-day window" in pause.text
        tg.cancel_scope.cancel()


def test_an_accounts_table_that_names_no_account_of_the_team_is_refused(tmp_path: Path) -> None:
    async def check() -> None:
        store = journal_at(tmp_path / "state.db")
        try:
            async with anyio.create_task_group() as tg:
                quota = _quota(AsyncStore(store), tg, Clock(), [])
                with pytest.raises(UsageError) as refused:
                    quota.configure(_team({"name": "dev"}, accounts={
                        "openai:key…0000": {"quota_reserve": 0.1}}))
                assert "[accounts.\"openai:key…0000\"]" in refused.value.message
                assert "claude:operator" in refused.value.message
                tg.cancel_scope.cancel()
        finally:
            store.close()

    anyio.run(check)


# -- what the runtimes say (captured from the real CLIs: docs/costs.md) ---------------------


def test_claudes_rate_limit_event_is_read_as_its_most_used_window() -> None:
    warning = {"status": "allowed_warning", "resetsAt": 1796594440, "rateLimitType": "five_hour",
               "utilization": 0.85, "isUsingOverage": False, "surpassedThreshold": 0.8,
               "unifiedWindows": {
                   "five_hour": {"utilization": 0.85, "resetsAt": 1796594440,
                                 "status": "allowed_warning", "surpassedThreshold": 0.8},
                   "seven_day": {"utilization": 0.4, "resetsAt": 1797022840,
                                 "status": "allowed"}}}
    assert window_reading(warning) == WindowReading("warning", "five_hour", 0.85, 1796594440.0)
    weekly = {"status": "allowed", "resetsAt": 1796594440, "rateLimitType": "five_hour",
              "unifiedWindows": {"five_hour": {"utilization": 0.3, "resetsAt": 1796594440},
                                 "seven_day": {"utilization": 0.9, "resetsAt": 1797022840}}}
    assert window_reading(weekly) == WindowReading("allowed", "seven_day", 0.9, 1797022840.0)
    bare = {"status": "allowed", "isUsingOverage": False}  # after a transient 429's retry
    assert window_reading(bare) == WindowReading("allowed", None, None, None)


def test_codexs_rate_limits_are_read_as_their_most_used_window() -> None:
    limits = {"limitId": "codex", "primary": {"usedPercent": 30, "windowDurationMins": 300,
                                              "resetsAt": 1796594474},
              "secondary": {"usedPercent": 95, "windowDurationMins": 10080,
                            "resetsAt": 1797022874}, "rateLimitReachedType": None}
    assert window_of(limits) == WindowReading("allowed", "seven_day", 0.95, 1797022874.0)
    api_key = {"limitId": "codex", "primary": None, "secondary": None}  # an overload's 200
    assert window_of(api_key).used is None
    spent = {"primary": {"usedPercent": 100, "windowDurationMins": 300, "resetsAt": 1796594474}}
    assert limit_reset(spent) == 1796594474.0


# -- the team file --------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "key", "fix"), [
    ('quota_reserve = "0.2"', "team.quota_reserve", "use a number"),
    ("quota_reserve = -0.1", "team.quota_reserve", "not negative"),
    ("quota_reserve = 1.0", "team.quota_reserve", "smaller number"),
    ("quota_reserve = nan", "team.quota_reserve", ""),
])
def test_hostile_quota_reserves_are_refused_naming_file_key_and_fix(
        tmp_path: Path, line: str, key: str, fix: str) -> None:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\n{line}\n\n[[members]]\nname = "a"\n'
                    'runtime = "claude"\n')
    with pytest.raises(TeamFileError) as refused:
        load_team_file(path)
    assert f"{path}:3: {key}" in refused.value.message and fix in refused.value.message


@pytest.mark.parametrize(("text", "key"), [
    ('[[members]]\nname = "a"\nruntime = "claude"\npriority = "high"\n', "members[0].priority"),
    ('[[members]]\nname = "a"\nruntime = "claude"\npriority = 101\n', "members[0].priority"),
    ('[[members]]\nname = "a"\nruntime = "claude"\npriority = -1\n', "members[0].priority"),
    ('[accounts."not an account"]\nquota_reserve = 0.1\n\n[[members]]\nname = "a"\n'
     'runtime = "claude"\n', "as 'teamctl accounts' shows it"),
    ('[accounts."claude:operator"]\nreserve = 0.1\n\n[[members]]\nname = "a"\n'
     'runtime = "claude"\n', "accounts.claude:operator.reserve"),
    ('[accounts."claude:operator"]\nquota_reserve = 2\n\n[[members]]\nname = "a"\n'
     'runtime = "claude"\n', "accounts.claude:operator.quota_reserve"),
])
def test_hostile_priorities_and_accounts_are_refused(tmp_path: Path, text: str,
                                                     key: str) -> None:
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\n\n{text}')
    with pytest.raises(TeamFileError) as refused:
        load_team_file(path)
    assert key in refused.value.message and refused.value.exit_code == 2, \
        refused.value.message


async def test_hostile_reports_of_a_window_change_nothing_they_cannot_mean(
        journal: AsyncStore) -> None:
    """A runtime's figures are parsed from what its CLI printed: NaN, infinities, a reset in a
    thousand years, a negative or absurd use pause nobody for ever and start no task per
    report."""
    clock, pokes = Clock(), []
    async with anyio.create_task_group() as tg:
        quota = _quota(journal, tg, clock, pokes)
        quota.configure(_team(*THREE, quota_reserve=0.2))
        for used, resets in ((float("nan"), clock.now + 60), (-1.0, float("inf")),
                             (1e9, float("nan")), (0.9, 1e308), (0.9, clock.now + 60)):
            quota.reported(("web", "lead"), WindowReading("allowed", "five_hour", used, resets))
        report = quota.accounts()[0].report
        assert report is not None and (report.used, report.resets_at) == (0.9, clock.now + 60)
        for resets in range(100):  # a window reported moving: one wake, not a hundred tasks
            quota.reported(("web", "lead"), WindowReading("allowed", "w", 0.95,
                                                          clock.now + 60 + resets))
        assert quota.accounts()[0].reserve_wake == clock.now + 159, "one wake, moved"
        quota.refused(("web", "dev"), float("nan"), None, "nan")
        pause = quota.gate(("web", "qa"))
        assert pause is not None and pause.until == clock.now + 300.0, "not named: the wait"
        tg.cancel_scope.cancel()
