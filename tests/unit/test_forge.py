"""The forge's GitHub client (orchestrator/daemon/forge) — the real httpx client against the
local fake of GitHub's REST API over HTTP on localhost (tests/support/fake_github.py): the
token only in the Authorization header, pages, ETags, rate limits, typed refusals."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from orchestrator.client.cli import cli
from orchestrator.client.forge_doctor import inspect_forge
from orchestrator.config import TeamConfig
from orchestrator.daemon.forge import Forge, open_forge, read_token
from orchestrator.errors import ForgeError
from orchestrator.forge_config import ForgeSection
from tests.support.fake_github import FakeGitHub

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.anyio
_TOKEN = "ghp_fake-token-0001"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(repo="octo-org/web", token=_TOKEN) as server:
        yield server


def _forge(fake: FakeGitHub, token: str = _TOKEN, clock: float = 1_000.0) -> Forge:
    section = ForgeSection.model_validate(
        {"github": {"repo": "octo-org/web", "token_env": "TEAMCTL_T_GH", "api": fake.url}})
    return open_forge(section, {"TEAMCTL_T_GH": token}, clock=lambda: clock)


async def test_labelled_open_issues_come_back_over_every_page(fake: FakeGitHub) -> None:
    fake.add_label("teamctl")
    for n in range(130):
        fake.add_issue(f"issue {n}", labels=("teamctl",) if n % 2 == 0 else ())
    fake.edit_issue(1, state="closed")
    forge = _forge(fake)
    try:
        issues = await forge.labelled_issues("teamctl", "open")
    finally:
        await forge.aclose()
    assert [i.number for i in issues] == list(range(3, 131, 2))  # #1 closed, odd-numbered
    assert issues[0].title == "issue 2" and issues[0].labels == ("teamctl",)
    assert issues[0].url == "https://github.com/octo-org/web/issues/3"
    lists = [r for r in fake.state.requests if r[1].endswith("/issues")]
    assert lists == [("GET", "/repos/octo-org/web/issues", 200)]  # 65 items: one page of 100


async def test_a_second_page_is_followed_by_the_link_header(fake: FakeGitHub) -> None:
    for n in range(230):
        fake.add_issue(f"i{n}", labels=("teamctl",))
    forge = _forge(fake)
    try:
        issues = await forge.labelled_issues("teamctl", "open")
    finally:
        await forge.aclose()
    assert len(issues) == 230 and len({i.id for i in issues}) == 230
    assert [r[2] for r in fake.state.requests] == [200, 200, 200]


async def test_an_unchanged_list_is_a_304_that_costs_no_rate_limit(fake: FakeGitHub) -> None:
    fake.add_issue("first", labels=("teamctl",))
    forge = _forge(fake)
    try:
        before = await forge.labelled_issues("teamctl", "open")
        left = forge.rate_limit.remaining
        again = await forge.labelled_issues("teamctl", "open")
        assert again == before
        assert forge.rate_limit.remaining == left  # the 304 spent nothing
        fake.edit_issue(1, body="changed")
        changed = await forge.labelled_issues("teamctl", "open")
    finally:
        await forge.aclose()
    assert changed[0].body == "changed"
    assert [r[2] for r in fake.state.requests] == [200, 304, 200]
    assert forge.requests_made == 3


async def test_a_spent_rate_limit_stops_requests_until_its_reset(fake: FakeGitHub) -> None:
    fake.add_issue("x", labels=("teamctl",))
    fake.spend_rate_limit(reset=5_000)
    forge = _forge(fake, clock=1_000.0)
    try:
        with pytest.raises(ForgeError) as first:
            await forge.labelled_issues("teamctl", "open")
        assert first.value.code == "forge_rate_limited" and first.value.retryable
        assert first.value.until == 5_000
        assert forge.rate_limit.remaining == 0 and forge.rate_limit.reset == 5_000
        sent = len(fake.state.requests)
        with pytest.raises(ForgeError) as second:
            await forge.labelled_issues("teamctl", "open")
        assert second.value.code == "forge_rate_limited"
        assert len(fake.state.requests) == sent  # nothing sent while the window is spent
    finally:
        await forge.aclose()


async def test_a_secondary_rate_limit_429_waits_its_retry_after(fake: FakeGitHub) -> None:
    fake.state.secondary_retry_after = 60
    forge = _forge(fake, clock=1_000.0)
    try:
        with pytest.raises(ForgeError) as caught:
            await forge.repo_access()
    finally:
        await forge.aclose()
    assert caught.value.code == "forge_rate_limited" and caught.value.until == 1_060.0
    assert caught.value.status == 429


async def test_a_wrong_token_is_unauthorized_and_never_shown(
        fake: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    forge = _forge(fake, token="ghp_wrong-secret-9999")
    try:
        with pytest.raises(ForgeError) as caught:
            await forge.repo_access()
    finally:
        await forge.aclose()
    assert caught.value.code == "forge_unauthorized" and caught.value.status == 401
    assert "token_env" in caught.value.message
    shown = str(caught.value) + repr(caught.value.to_wire()) + caplog.text + repr(forge)
    assert "ghp_wrong-secret-9999" not in shown
    assert fake.state.auth_headers == ["Bearer ghp_wrong-secret-9999"]  # the header only


async def test_a_missing_issue_is_not_found_and_an_empty_comment_invalid(
        fake: FakeGitHub) -> None:
    fake.add_issue("one")
    forge = _forge(fake)
    try:
        with pytest.raises(ForgeError) as missing:
            await forge.issue(99)
        with pytest.raises(ForgeError) as invalid:
            await forge.comment(1, "")
        comment = await forge.comment(1, "T1 claimed by dev")
    finally:
        await forge.aclose()
    assert missing.value.code == "forge_not_found" and missing.value.status == 404
    assert invalid.value.code == "forge_invalid" and "missing_field" in invalid.value.message
    assert comment > 0 and fake.comments_on(1) == ["T1 claimed by dev"]


async def test_the_repos_permissions_say_what_is_missing(fake: FakeGitHub) -> None:
    fake.state.permissions = {"admin": False, "push": False, "pull": True, "triage": False}
    forge = _forge(fake)
    try:
        access = await forge.repo_access()
    finally:
        await forge.aclose()
    assert access.missing("pull", "push", "triage") == ("push", "triage")


async def test_a_forbidden_answer_is_typed_apart_from_a_rate_limit(fake: FakeGitHub) -> None:
    forge = _forge(fake)
    try:
        await forge.repo_access()  # the window is known, not spent
        fake.state.repo = "octo-org/other"  # a repository the token cannot see
        with pytest.raises(ForgeError) as caught:
            await forge.repo_access()
    finally:
        await forge.aclose()
    assert caught.value.code == "forge_not_found"


async def test_an_unreachable_api_is_retryable(fake: FakeGitHub) -> None:
    section = ForgeSection.model_validate(
        {"github": {"repo": "a/b", "token_env": "T", "api": "http://127.0.0.1:9"}})
    forge = open_forge(section, {"T": _TOKEN})
    try:
        with pytest.raises(ForgeError) as caught:
            await forge.repo_access()
    finally:
        await forge.aclose()
    assert caught.value.code == "forge_unreachable" and caught.value.retryable
    assert _TOKEN not in str(caught.value)


@pytest.mark.parametrize("value", ["", " ghp_x", "ghp\nx", "ghp_é"])
def test_a_missing_or_malformed_token_names_the_variable_never_a_value(value: str) -> None:
    with pytest.raises(ForgeError) as caught:
        read_token("GITHUB_TOKEN", {"GITHUB_TOKEN": value} if value else {})
    assert caught.value.code == "forge_token_missing"
    assert "GITHUB_TOKEN" in caught.value.message
    if value:
        assert value.strip() not in caught.value.message


def test_a_token_does_not_print() -> None:
    token = read_token("T", {"T": "ghp_secret"})
    assert "ghp_secret" not in f"{token} {token!r} {[token]}"
    assert token.reveal() == "ghp_secret"


def _team(fake: FakeGitHub, **forge: object) -> TeamConfig:
    return TeamConfig.model_validate({
        "team": {"name": "web"}, "members": [{"name": "dev", "runtime": "claude"}],
        "forge": {"github": {"repo": "octo-org/web", "token_env": "TEAMCTL_T_GH",
                             "api": fake.url}, **forge}})


def test_doctor_lists_the_tokens_permissions_and_names_the_one_missing(
        fake: FakeGitHub) -> None:
    fake.state.permissions = {"admin": False, "maintain": False, "push": False,
                              "triage": True, "pull": True}
    report = inspect_forge(_team(fake, pull_requests=True), {"TEAMCTL_T_GH": _TOKEN})
    assert report is not None and report["ok"] is False
    assert report["permissions"]["pull"] is True and report["missing"] == ["push"]
    assert "lacks push on octo-org/web" in report["problem"]
    assert "'write' access" in report["problem"]
    assert _TOKEN not in repr(report)
    enough = inspect_forge(_team(fake), {"TEAMCTL_T_GH": _TOKEN})  # intake alone: pull
    assert enough is not None and enough["ok"] is True and enough["missing"] == []


def test_doctor_says_a_refused_or_missing_token_without_showing_it(fake: FakeGitHub) -> None:
    wrong = inspect_forge(_team(fake), {"TEAMCTL_T_GH": "ghp_not-this-one"})
    unset = inspect_forge(_team(fake), {})
    assert wrong is not None and wrong["problem"].startswith("forge_unauthorized")
    assert unset is not None and unset["problem"].startswith("forge_token_missing")
    assert "ghp_not-this-one" not in repr(wrong)


def test_doctor_command_prints_the_permissions_and_the_missing_one(
        fake: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.state.permissions = {"admin": False, "push": False, "pull": True}
    path = tmp_path / "team.toml"
    path.write_text(f'[team]\nname = "web"\n\n[forge]\ngithub = {{ repo = "octo-org/web", '
                    f'token_env = "TEAMCTL_T_GH", api = "{fake.url}" }}\npull_requests = true\n'
                    '\n[[members]]\nname = "dev"\nruntime = "claude"\n', encoding="utf-8")
    monkeypatch.setenv("TEAMCTL_T_GH", _TOKEN)
    monkeypatch.setenv("TEAMCTL_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["doctor", str(path)])
    assert result.exit_code == 1, result.output
    assert "forge: octo-org/web at http://127.0.0.1:" in result.output
    assert "has pull; missing push" in result.output
    assert "lacks push on octo-org/web" in result.output
    assert _TOKEN not in result.output
