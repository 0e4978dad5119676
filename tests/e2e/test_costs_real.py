"""Costs, budgets and rate limits with the real Claude Code and Codex CLIs against fake APIs
that report large token usage (docs/costs.md)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from tests.support.real_members import claude_member, codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def _ts(event: dict) -> float:
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def test_real_claude_is_charged_its_own_cost_and_stops_before_the_budget(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    # claude-sonnet-4-5 at the CLI's list price: 100000 in + 20000 out = $0.30 + $0.30 a turn
    anthropic.input_tokens, anthropic.output_tokens = 100_000, 20_000
    team = teamctl.write_team("e2e", [claude_member("rev", claude_bin, anthropic,
                                                    budget_usd=1.0)])
    assert teamctl.run("launch", str(team)).returncode == 0
    for text in ("first", "second"):
        done = teamctl.run("send", "rev", text, "--wait", "--timeout", "120")
        assert done.returncode == 0 and done.stdout.strip() == f"pong: {text}", done.stderr
    costs = [m["usage"]["cost_usd"] for m in teamctl.json("history", "rev")["messages"]]
    assert costs == [pytest.approx(0.6), pytest.approx(0.6)], \
        "the CLI's total_cost_usd (0.6, then 1.2 in one process) charged by its increase"
    first = teamctl.json("history", "rev")["messages"][0]["usage"]
    assert (first["input_tokens"], first["output_tokens"]) == (100_000, 20_000)

    held_id = teamctl.run("send", "rev", "third").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "member_held")
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["hold"].startswith("budget reached: member 'rev' spent $1.2000 of $1.00")
    assert row["spend"]["cost_usd"] == pytest.approx(1.2)
    third = teamctl.json("history", "rev")["messages"][-1]
    assert (third["state"], third["attempts"]) == ("queued", 0)
    assert len(anthropic.message_requests()) == 2, "no model call for a held message"

    assert teamctl.run("budget", "rev", "--add", "5").returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == held_id, timeout=120)
    messages = teamctl.json("history", "rev")["messages"]
    assert [m["state"] for m in messages] == ["answered"] * 3
    assert messages[-1]["usage"]["cost_usd"] == pytest.approx(0.6), \
        "a recycled process starts its own total from zero"
    assert teamctl.json("usage")["total_usd"] == pytest.approx(1.8)


def test_real_claude_subscription_limit_pauses_until_its_reset_then_answers(
        teamctl: Teamctl, claude_bin: Path, anthropic: FakeAnthropic,
        follow_logs: LogFollower) -> None:
    member = claude_member("rev", claude_bin, anthropic)
    env = dict(member["env"])  # type: ignore[call-overload]
    env.pop("ANTHROPIC_API_KEY")
    env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-e2e-dummy-subscription-token"
    member["env"] = env
    reset = int(time.time()) + 10
    anthropic.error_status = 429
    anthropic.error_headers = {"anthropic-ratelimit-unified-status": "rejected",
                               "anthropic-ratelimit-unified-reset": str(reset),
                               "anthropic-ratelimit-unified-representative-claim": "five_hour"}
    assert teamctl.run("launch", str(teamctl.write_team("e2e", [member]))).returncode == 0
    message_id = teamctl.run("send", "rev", "hello?").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "member_held", timeout=120)
    assert (held["hold"], held["until"]) == ("rate_limit", reset), \
        "the reset time the CLI's rate_limit_event named"
    anthropic.error_status = None  # the window resets; the member must wait for it anyway
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["hold"].startswith("held: claude:token…")
    assert row["hold"].endswith(" five-hour window until " + time.strftime(
        "%H:%M", time.localtime(reset)))
    answered = follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                                    and e.get("message_id") == message_id, timeout=120)
    assert _ts(answered) >= reset
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1), "a hold is no attempt"
    # the refused turn reached the session: it is continued there, the message as a reminder
    assert message["reply"].startswith("pong: [teamctl] your previous turn on message")
    assert message["reply"].endswith("(not a new request):\n\nhello?")
    assert len(anthropic.message_requests()) == 2, "one refused call, then one after the reset"


def test_real_codex_is_priced_from_the_table_and_a_turn_crossing_its_budget_is_interrupted(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses,
        follow_logs: LogFollower) -> None:
    # gpt-5-mini: 1M input at $0.25 + 100k output at $2.00 = $0.45 a model call
    responses.input_tokens, responses.output_tokens = 1_000_000, 100_000
    team = teamctl.write_team("e2e", [codex_member("rev", codex_bin, responses,
                                                   model="gpt-5-mini", budget_usd=0.8)])
    assert teamctl.run("launch", str(team)).returncode == 0
    first = teamctl.run("send", "rev", "first", "--wait", "--timeout", "120")
    assert first.returncode == 0 and first.stdout.strip() == "pong: first", first.stderr
    [usage] = [m["usage"] for m in teamctl.json("history", "rev")["messages"]]
    assert usage["cost_usd"] == pytest.approx(0.45) and usage["input_tokens"] == 1_000_000, \
        "Codex reports tokens only: priced from the table"

    second = teamctl.run("send", "rev", "second", "--wait", "--timeout", "120")
    assert second.returncode == 1 and "is paused (budget reached" in second.stderr, \
        second.stderr
    follow_logs.wait_for(lambda e: e["event"] == "turn_over_budget")
    charged = follow_logs.wait_for(lambda e: e["event"] == "turn_charged"
                                   and e["cost_usd"] and e["input_tokens"] == 1_000_000
                                   and e["message_id"] != teamctl.json(
                                       "history", "rev")["messages"][0]["id"])
    assert charged["cost_usd"] == pytest.approx(0.45), "the interrupted attempt is charged"
    held = teamctl.json("history", "rev")["messages"][-1]
    assert (held["state"], held["attempts"], held["error"]["code"]) == (
        "queued", 0, "budget_reached")
    assert len(responses.response_requests()) == 2

    assert teamctl.run("budget", "rev", "--set", "2").returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == held["id"], timeout=120)
    reply = teamctl.json("history", "rev")["messages"][-1]["reply"]
    # the turn the budget interrupted is continued on its thread, the message as a reminder
    assert reply.startswith("pong: [teamctl] your previous turn on message")
    assert reply.endswith("(not a new request):\n\nsecond")
    assert teamctl.json("usage", "--by", "model")["rows"][0]["group"] == "gpt-5-mini"
    assert teamctl.json("usage")["total_usd"] == pytest.approx(1.35)
