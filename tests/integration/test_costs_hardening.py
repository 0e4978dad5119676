"""Costs under hostile figures and concurrency, through the daemon with the fake Claude
(fixtures/bin/claude: ``FIGURES`` reports a result's figures verbatim, ``SPEND`` makes priced
model calls): a bad usage figure is skipped, never charged, and never fails an answered turn;
the raw ``budget`` call is strict; a team budget stops every turn in flight (docs/costs.md).

Each test is named after the failure the hardening issue found; its docstring is the promise."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import fake_member

if TYPE_CHECKING:
    from tests.conftest import LogFollower, Teamctl


def _strict_json(text: str) -> Any:
    """JSON as the spec has it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_infinite_huge_or_negative_usage_figure_does_not_poison_the_ledger(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A runtime's total_cost_usd of NaN, Infinity, 1e308 or -1, and a token count of 2**64,
    are refused at the boundary (logged, skipped): each turn is answered and its reply kept,
    spend stays finite (the next good running total is charged the whole increase), the
    budget still holds the member, and status/usage/budget --json stay valid JSON."""
    team = teamctl.write_team("web", [fake_member("rev", budget_usd=0.08)])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "rev", "one", "--wait").returncode == 0  # $0.01
    bad = ("NaN 10", "Infinity 10", "1e308 10", "-1 10", "null 18446744073709551616")
    for figures in bad:
        done = teamctl.run("send", "rev", f"FIGURES {figures}", "--wait")
        assert done.returncode == 0, (figures, done.stderr)
        assert f"figures {figures}" in done.stdout, "the reply is kept"
    follow_logs.wait_for(lambda e: e["event"] == "usage_figure_refused"
                         and e.get("figure") == "input_tokens")
    assert teamctl.run("send", "rev", "two", "--wait").returncode == 0  # the CLI's total: 0.07
    history = teamctl.json("history", "rev")["messages"]
    assert [m["state"] for m in history] == ["answered"] * 7
    assert history[-1]["usage"]["cost_usd"] == pytest.approx(0.06), \
        "the good total after the skipped ones is charged the whole increase"
    for args in (("status", "--json"), ("usage", "--json"), ("budget", "rev", "--json"),
                 ("history", "rev", "--json")):
        done = teamctl.run(*args)
        assert done.returncode == 0, (args, done.stderr)
        _strict_json(done.stdout)
    spend = teamctl.json("status")["teams"][0]["members"][0]["spend"]
    assert spend["cost_usd"] == pytest.approx(0.07)
    assert spend["tokens"] < 2**53
    assert teamctl.run("send", "rev", "three", "--wait").returncode == 0  # 0.08: reached
    held = teamctl.run("send", "rev", "four", "--wait")
    assert held.returncode == 1 and "budget reached" in held.stderr, held.stderr
    raised = teamctl.json("budget", "rev", "--add", "1")
    assert raised["spend"]["budget_usd"] == pytest.approx(1.08) and raised["hold"] is None


def test_a_nan_total_then_a_good_one_charged_the_tokens_price_and_the_budget_leaked(
        teamctl: Teamctl) -> None:
    """A runtime whose first total_cost_usd is NaN and its next a good $2.50 is charged the
    $2.50 (it was charged $0.000045, its tokens priced from the table), so a team budget of
    $1 holds the team: the next message waits, held."""
    team = teamctl.write_team("web", [fake_member("rev")], budget_usd=1.0)
    assert teamctl.run("launch", str(team)).returncode == 0
    for figures in ("NaN 10", "2.5 10"):
        done = teamctl.run("send", "rev", f"FIGURES {figures}", "--wait")
        assert done.returncode == 0, (figures, done.stderr)
    first, second = (m["usage"] for m in teamctl.json("history", "rev")["messages"])
    assert first["cost_usd"] is None, "the NaN turn's cost is unknown, never priced"
    assert second["cost_usd"] == pytest.approx(2.5), "the good total: the whole increase"
    spend = teamctl.json("status")["teams"][0]["spend"]
    assert (spend["cost_usd"], spend["cost_unknown"]) == (pytest.approx(2.5), 1)
    held = teamctl.run("send", "rev", "three", "--wait")
    assert held.returncode == 1 and "budget reached" in held.stderr, held.stderr


def test_the_raw_budget_call_coerced_strings_and_booleans_to_dollars(teamctl: Teamctl) -> None:
    """The socket's ``budget`` params are strict: "5", true, NaN, Infinity and negatives are
    refused with a typed usage error and change nothing; a plain number is taken."""
    team = teamctl.write_team("web", [fake_member("rev", budget_usd=1.0)])
    assert teamctl.run("launch", str(team)).returncode == 0
    for params in ({"usd": "5"}, {"usd": True}, {"add_usd": "5"}, {"add_usd": False},
                   {"usd": float("nan")}, {"usd": float("inf")}, {"usd": -1.0},
                   {"tokens": "5"}, {"tokens": True}, {"tokens": 5.0}, {"clear": 1},
                   {"clear": "true"}):
        answer = teamctl.rpc("budget", {"member": "rev", **params})
        assert answer.get("error", {}).get("code") == "usage_error", (params, answer)
        assert answer["error"]["data"]["retryable"] is False
    assert teamctl.json("budget", "rev")["spend"]["budget_usd"] == 1.0, "nothing changed"
    taken = teamctl.rpc("budget", {"member": "rev", "usd": 5})
    assert "error" not in taken, taken
    assert teamctl.json("budget", "rev")["spend"]["budget_usd"] == 5.0


def test_a_team_budget_overshot_by_one_call_per_member_in_flight(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Five members in concurrent turns, each making a $0.30 model call every step: the call
    that crosses the $1.00 team budget stops every turn of the team in flight at once, so the
    team is charged at most the calls in flight at the crossing — $1.20, or $1.50 if another
    member's call raced the stop — where it was $2.40 (each member made one more call)."""
    names = ["a", "b", "c", "d", "e"]
    members = [fake_member(n, env={"FAKE_CLAUDE_STEP_DELAY": "0.5"}) for n in names]
    team = teamctl.write_team("web", members, budget_usd=1.0)
    assert teamctl.run("launch", str(team)).returncode == 0
    sent = {}
    for name in names:  # over the raw socket: the five turns start within milliseconds
        answer = teamctl.rpc("send", {"member": name, "text": "SPEND 60.0 200"})
        assert "error" not in answer, answer
        sent[name] = answer["result"]["id"]
    charged = {}
    for name in names:
        event = follow_logs.wait_for(lambda e, n=name: e["event"] == "turn_charged"
                                     and e.get("message_id") == sent[n], timeout=60)
        charged[name] = event["cost_usd"]
    total = sum(charged.values())
    assert total <= 1.5 + 1e-6, f"overshoot past the calls in flight: {charged}"
    assert total >= 1.0, charged
    for name in names:
        [message] = teamctl.json("history", name)["messages"]
        assert (message["state"], message["attempts"]) == ("queued", 0), (name, message)
        assert message["error"]["code"] == "budget_reached"
    rows = teamctl.json("status")["teams"][0]["members"]
    assert all(r["hold"] and "team 'web'" in r["hold"] for r in rows), rows
