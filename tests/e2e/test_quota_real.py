"""Quota windows with the real Claude Code, Codex and OpenCode CLIs against the fake APIs'
rate-limit headers (docs/costs.md, "Quota windows"): the window's state is read as each CLI
reports it — Claude's ``rate_limit_event``, codex's ``account/rateLimits/updated`` — two
members on one credential are one account, a warning past the reserve pauses the lower
priority while the lead's turns go on, and the refusal of one member's request holds both: the
other makes no request until the reset, then each held message is answered once."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e

TOKEN = "sk-ant-oat01-e2e-dummy-subscription-token"


def _subscribed(name: str, claude_bin: Path, anthropic: FakeAnthropic,
                **extra: Any) -> dict[str, Any]:
    """A member on the one subscription token (not an API key: the windows are its)."""
    member = claude_member(name, claude_bin, anthropic, **extra)
    env = dict(member["env"])
    env.pop("ANTHROPIC_API_KEY")
    env["CLAUDE_CODE_OAUTH_TOKEN"] = TOKEN
    member["env"] = env
    return member


def _windows(five_hour: float, seven_day: float, reset: int, status: str) -> dict[str, str]:
    """The unified rate-limit headers the API sends a subscription's every answer (a warning
    names the threshold it passed: without it the CLI reports ``allowed``)."""
    passed = {"anthropic-ratelimit-unified-5h-surpassed-threshold": "0.8"} \
        if status == "allowed_warning" else {}
    return passed | {"anthropic-ratelimit-unified-status": status,
            "anthropic-ratelimit-unified-reset": str(reset),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
            "anthropic-ratelimit-unified-5h-utilization": str(five_hour),
            "anthropic-ratelimit-unified-5h-reset": str(reset),
            "anthropic-ratelimit-unified-5h-status": status,
            "anthropic-ratelimit-unified-7d-utilization": str(seven_day),
            "anthropic-ratelimit-unified-7d-reset": str(reset + 5 * 86400),
            "anthropic-ratelimit-unified-7d-status": "allowed"}


def test_real_claude_windows_are_read_as_the_cli_reports_them_and_one_refusal_holds_both(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    reset = int(time.time()) + 3600
    anthropic.ok_headers = _windows(0.3, 0.1, reset, "allowed")
    team = teamctl.write_team("e2e", [_subscribed("lead", claude_bin, anthropic, lead=True),
                                      _subscribed("dev", claude_bin, anthropic)],
                              quota_reserve=0.2)
    assert teamctl.run("launch", str(team)).returncode == 0
    done = teamctl.run("send", "dev", "hello", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    [account] = teamctl.json("accounts")["accounts"]
    assert account["name"].startswith("claude:token…") and TOKEN not in account["name"]
    assert [m["member"] for m in account["members"]] == ["lead", "dev"]
    assert {k: account["window"][k] for k in ("status", "window", "used", "resets_at")} == {
        "status": "allowed", "window": "five_hour", "used": 0.3, "resets_at": reset}

    anthropic.ok_headers = _windows(0.85, 0.4, reset, "allowed_warning")
    assert teamctl.run("send", "lead", "plan", "--wait", "--timeout", "120").returncode == 0
    window = teamctl.json("accounts")["accounts"][0]["window"]
    assert (window["status"], window["used"]) == ("warning", 0.85), window
    paused = teamctl.json("status")["teams"][0]["members"]
    [dev] = [m for m in paused if m["name"] == "dev"]
    assert dev["hold"].startswith(f"paused: {account['name']} five-hour window 85% used, the "
                                  "last 20% kept for priority 1 until ")
    assert teamctl.run("send", "lead", "review", "--wait", "--timeout", "120").returncode == 0

    soon = int(time.time()) + 15
    anthropic.error_status = 429
    anthropic.error_headers = _windows(1.0, 0.4, soon, "rejected")
    refused = teamctl.run("send", "lead", "one more").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held", timeout=120)
    assert (held["account"], held["until"], held["window"]) == (account["name"], soon,
                                                                "five_hour")
    requests = len(anthropic.message_requests())
    waiting = teamctl.run("send", "dev", "while held")
    assert f"held: {account['name']} five-hour window until " in waiting.stderr
    anthropic.error_status = None  # the window reset; both wait for it anyway
    anthropic.ok_headers = _windows(0.05, 0.4, soon + 18000, "allowed")
    assert len(anthropic.message_requests()) == requests, "dev made no request while held"
    ids = [refused, waiting.stdout.strip()]
    for message_id in ids:
        follow_logs.wait_for(lambda e, i=message_id: e["event"] == "delivery_answered"
                             and e.get("message_id") == i, timeout=120)
    answered = Counter(e["message_id"] for e in follow_logs.seen
                       if e["event"] == "delivery_answered")
    assert [answered[i] for i in ids] == [1, 1]
    released = follow_logs.wait_for(lambda e: e["event"] == "quota_released")
    at = datetime.fromisoformat(released["ts"].replace("Z", "+00:00")).timestamp()
    assert at >= soon, "not before the reset the CLI's rate_limit_event named"


def test_real_codex_app_server_windows_are_read_from_its_rate_limit_updates(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses,
        follow_logs: LogFollower) -> None:
    """codex reads the ``x-codex-primary-*``/``-secondary-*`` headers into
    ``account/rateLimits/updated``; a 429 ``usage_limit_reached`` is ``usageLimitExceeded``:
    its account is held until the spent window's reset."""
    reset = int(time.time()) + 3600
    responses.ok_headers = {
        "x-codex-primary-used-percent": "30", "x-codex-primary-window-minutes": "300",
        "x-codex-primary-reset-at": str(reset), "x-codex-secondary-used-percent": "10",
        "x-codex-secondary-window-minutes": "10080",
        "x-codex-secondary-reset-at": str(reset + 5 * 86400)}
    team = teamctl.write_team("e2e", [codex_member("a", codex_bin, responses),
                                      codex_member("b", codex_bin, responses)])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "a", "hello", "--wait", "--timeout", "120").returncode == 0
    [account] = teamctl.json("accounts")["accounts"]
    assert account["name"].startswith("fake-openai:key…"), "the provider's env_key's key"
    assert {k: account["window"][k] for k in ("window", "used", "resets_at")} == {
        "window": "five_hour", "used": 0.3, "resets_at": reset}

    soon = int(time.time()) + 15
    responses.error_status = 429
    responses.error_headers = {**responses.ok_headers, "x-codex-primary-used-percent": "100",
                               "x-codex-primary-reset-at": str(soon)}
    responses.usage_limit = {"plan_type": "pro", "resets_at": soon, "resets_in_seconds": 15}
    refused = teamctl.run("send", "b", "more").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held", timeout=120)
    assert (held["until"], held["window"]) == (soon, "five_hour")
    requests = len(responses.response_requests())
    waiting = teamctl.run("send", "a", "while held").stdout.strip()
    responses.error_status = None
    assert len(responses.response_requests()) == requests, "a made no request while held"
    for message_id in (refused, waiting):
        follow_logs.wait_for(lambda e, i=message_id: e["event"] == "delivery_answered"
                             and e.get("message_id") == i, timeout=120)


def test_real_opencode_held_by_a_retry_an_hour_away_keeps_its_message_queued(
        teamctl: Teamctl, opencode_bin: Path, chat: FakeChat,
        follow_logs: LogFollower) -> None:
    """OpenCode reports nothing of a window until it is refused; a 429 whose retry-after is an
    hour away is its `session.status` retry that far out: teamctl aborts the turn and holds the
    account. The aborted call answers an empty message with no error (1.18.33): that is no
    answer — the message stays queued, not answered empty."""
    team = teamctl.write_team("e2e", [opencode_member("oc", opencode_bin, chat,
                                                      model="fake/text-model")])
    assert teamctl.run("launch", str(team)).returncode == 0
    chat.error_status = 429
    chat.error_headers = {"retry-after": "3600"}
    message_id = teamctl.run("send", "oc", "hi").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "quota_held", timeout=120)
    assert held["account"] == "opencode:operator" and held["until"] > time.time() + 3000
    failed = follow_logs.wait_for(lambda e: e["event"] == "delivery_failed"
                                  and e.get("message_id") == message_id, timeout=60)
    assert failed["code"] == "rate_limited", failed
    [message] = teamctl.json("history", "oc")["messages"]
    assert (message["state"], message["attempts"]) == ("queued", 0), message
    assert not [e for e in follow_logs.seen if e["event"] == "delivery_answered"]
