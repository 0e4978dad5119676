"""Costs and budgets through the daemon, with the fake Claude CLI (fixtures/bin/claude): the
journal's cost is the CLI's own total_cost_usd increase, a budget holds the queue (messages
stay queued) until 'teamctl budget' raises it, a turn that crosses a budget is interrupted,
Claude gets --max-budget-usd as a backstop, and a rate limit pauses and resumes a member at
the reset time it names (docs/costs.md). Under hostile figures and concurrency (``FIGURES``,
``SPEND``): a bad usage figure is skipped, never charged, never fails an answered turn; the raw
``budget`` call is strict; a team budget stops every turn in flight."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from orchestrator.client.cli import cli
from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def _member(teamctl: Teamctl) -> dict:
    return teamctl.json("status")["teams"][0]["members"][0]


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_each_turn_is_charged_the_increase_of_the_clis_running_total(teamctl: Teamctl) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")]))) \
        .returncode == 0
    for text in ("one", "two", "three"):
        assert teamctl.run("send", "rev", text, "--wait").returncode == 0
    assert teamctl.run("restart", "rev").returncode == 0  # a new process: its total restarts
    assert teamctl.run("send", "rev", "four", "--wait").returncode == 0
    history = teamctl.json("history", "rev")["messages"]
    assert [m["usage"]["cost_usd"] for m in history] == [0.01] * 4, \
        "total_cost_usd is per process and cumulative: each turn is charged its increase"
    assert [m["usage"]["input_tokens"] for m in history] == [10] * 4
    spend = _member(teamctl)["spend"]
    assert spend["cost_usd"] == pytest.approx(0.04) and spend["tokens"] == 44
    usage = teamctl.json("usage")
    assert [(r["group"], r["turns"]) for r in usage["rows"]] == [("rev", 4)]
    assert usage["total_usd"] == pytest.approx(0.04)
    by_model = teamctl.json("usage", "--by", "model")["rows"]
    assert [r["group"] for r in by_model] == ["claude-sonnet-4-5"]
    [day] = teamctl.json("usage", "--by", "day")["rows"]
    assert day["group"] == time.strftime("%Y-%m-%d")
    text = teamctl.run("status").stdout
    assert "$0.0400" in text, text
    assert "$ $0.0100, 10 in (0 cached) / 1 out tokens" in teamctl.run("history", "rev").stdout


def test_a_member_over_budget_is_held_with_its_messages_queued_until_raised(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    team = teamctl.write_team("web", [fake_member("rev", budget_usd=0.02)])
    assert teamctl.run("launch", str(team)).returncode == 0
    [pid] = teamctl.member_pids()
    assert _cmdline(pid)[_cmdline(pid).index("--max-budget-usd") + 1] == "0.0250", \
        "Claude's own backstop: what is left of the budget, plus 25 %"
    for text in ("one", "two"):  # 0.01 each: the second reaches 0.02
        assert teamctl.run("send", "rev", text, "--wait").returncode == 0
    held_id = teamctl.run("send", "rev", "three").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "member_held" and e.get("hold") == "budget")
    row = _member(teamctl)
    assert row["hold"].startswith("budget reached: member 'rev' spent $0.0200 of $0.02")
    assert row["queued"] == 1 and row["readiness"] == "ready"
    message = teamctl.json("history", "rev")["messages"][-1]
    assert (message["id"], message["state"], message["attempts"]) == (held_id, "queued", 0)
    assert "budget reached" in teamctl.run("status").stdout

    raised = teamctl.json("budget", "rev", "--add", "5")
    assert raised["spend"]["budget_usd"] == pytest.approx(5.02) and raised["hold"] is None
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == held_id, timeout=60)
    assert teamctl.json("history", "rev")["messages"][-1]["state"] == "answered"
    follow_logs.wait_for(lambda e: e["event"] == "member_recycled"
                         and "budget changed" in e.get("reason", ""))
    [new_pid] = teamctl.member_pids()
    args = _cmdline(new_pid)
    assert "--resume" in args
    assert float(args[args.index("--max-budget-usd") + 1]) == pytest.approx(
        (5.02 - 0.02) + 0.25 * 5.02 + 0.02, abs=1e-4), \
        "a changed budget gives Claude a new backstop (its process is recycled, not crashed):" \
        " what is left + 25 %, on top of the resumed session's own total_cost_usd"
    assert _member(teamctl)["restarts"] == 0


def test_a_turn_that_crosses_the_budget_is_interrupted_and_its_message_held(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    # 100000 input tokens a step at claude-sonnet-4-5's $3/M = $0.30 a step: $0.50 is crossed
    # at the second step, of twenty
    team = teamctl.write_team("web", [fake_member("rev", budget_usd=0.5)])
    assert teamctl.run("launch", str(team)).returncode == 0
    message_id = teamctl.run("send", "rev", "SPEND 6.0 20").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "turn_over_budget")
    charged = follow_logs.wait_for(lambda e: e["event"] == "turn_charged"
                                   and e.get("message_id") == message_id)
    assert 0.5 <= charged["cost_usd"] < 1.0, "interrupted within a step of the limit"
    assert charged["input_tokens"] < 20 * 100000
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("queued", 0), "held, not failed"
    assert message["error"]["code"] == "budget_reached"
    assert _member(teamctl)["hold"].startswith("budget reached")


def test_a_rate_limit_pauses_the_member_and_it_resumes_at_the_reset_time(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    member = fake_member("rev", env={"FAKE_CLAUDE_RATE_LIMIT": "2"})  # resets in 2-3 s
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    message_id = teamctl.run("send", "rev", "hello").stdout.strip()
    held = follow_logs.wait_for(lambda e: e["event"] == "member_held")
    until = held["until"]
    assert held["hold"] == "rate_limit" and until > time.time() - 5
    # read within the hold on the socket (the documents `status --json` and `history --json`
    # print), not through CLI starts that a busy machine can stretch past the reset
    [row] = teamctl.rpc("status", {"team": None})["result"]["teams"][0]["members"]
    assert row["hold"] == "held: claude:operator five-hour window until " + time.strftime(
        "%H:%M", time.localtime(until))
    history = teamctl.rpc("history", {"team": None, "member": "rev", "limit": 50,
                                      "before": None})["result"]
    assert history["messages"][0]["state"] in ("queued", "prepared")
    follow_logs.wait_for(lambda e: e["event"] == "member_released", timeout=30)
    answered = follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                                    and e.get("message_id") == message_id, timeout=30)
    at = datetime.fromisoformat(answered["ts"].replace("Z", "+00:00")).timestamp()
    assert at >= until, "not before the reset time the CLI named"
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1)
    assert _member(teamctl)["hold"] is None


def test_bad_budgets_are_refused_with_the_key_and_nothing_starts(teamctl: Teamctl) -> None:
    bad = teamctl.write_team("web", [fake_member("rev", budget_usd=-1.0)])
    done = teamctl.run("launch", str(bad))
    assert done.returncode == 2 and "members[0].budget_usd" in done.stderr
    codex = {"name": "dev", "runtime": "codex", "model": "gpt-oss-120b", "budget_usd": 5.0,
             "command": str(Path(__file__).resolve().parents[2] / "fixtures/bin/codex")}
    refused = teamctl.run("launch", str(teamctl.write_team("web", [codex])))
    assert refused.returncode == 2, refused.stderr
    assert "budget_usd cannot be enforced" in refused.stderr
    # the refused launch stopped the daemon it had started, and it is gone by the time the
    # command returns: the next command does not reach it on its way out
    status = teamctl.run("status")
    assert status.returncode == 4 and "no teamctl daemon is reachable" in status.stderr, status
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")]))) \
        .returncode == 0
    for refused in (["--set", "-1"], ["--set", "ten"], ["--add", "1", "--set", "2"]):
        # the CLI's own argument checks, run in this process (they never reach the daemon)
        done = CliRunner().invoke(cli, ["budget", "rev", *refused], env=teamctl.env,
                                  prog_name="teamctl")
        assert done.exit_code == 2, (refused, done.output)
    unknown = teamctl.run("budget", "nobody", "--add", "1")
    assert unknown.returncode == 1 and "nobody" in unknown.stderr
    raw = teamctl.rpc("budget", {"member": "rev", "usd": float("inf")})
    assert "error" in raw, "an infinite budget is refused by the socket's schema"
    team = teamctl.json("budget", "--set", "3")
    assert team["member"] is None and team["spend"]["budget_usd"] == 3.0
    prices = json.loads(teamctl.run("usage", "--prices", "--json").stdout)
    assert any(row["model"] == "gpt-5-mini" for row in prices["models"])


def test_hostile_usage_and_budget_calls_are_refused_and_nothing_is_lost(
        teamctl: Teamctl) -> None:
    gate = teamctl.workdir / "gate"  # lead's turn stays in flight through the hostile calls
    team = teamctl.write_team("web", [fake_member(
        "lead", budget_usd=1.0, env={"FAKE_CLAUDE_TURN_GATE": str(gate)})])
    assert teamctl.run("launch", str(team)).returncode == 0
    queued = teamctl.run("send", "lead", "kept through it all").stdout.strip()
    for method, params in (
            ("usage", {"by": "week"}), ("usage", {"by": ["member"]}),
            ("usage", {"team": "../etc"}), ("usage", {"prices": "yes please", "x": 1}),
            ("budget", {"member": "lead", "usd": -1}), ("budget", {"member": "lead",
                                                                  "usd": "ten"}),
            ("budget", {"member": "lead", "add_usd": 1e12}),
            ("budget", {"member": "lead", "tokens": -5}),
            ("budget", {"member": "lead", "tokens": 1.5}),
            ("budget", {"member": "../../lead", "usd": 1}),
            ("budget", {"member": "lead", "usd": 1, "owner": "me"}),
            ("budget", {"member": "lead", "clear": "maybe"})):
        answer = teamctl.rpc(method, params)
        assert answer["error"]["code"] == "usage_error", (method, params, answer)
    unknown = teamctl.rpc("budget", {"member": "nobody", "usd": 1})
    assert unknown["error"]["code"] == "not_found"
    assert teamctl.json("budget", "lead")["spend"]["budget_usd"] == 1.0, "nothing changed"
    assert teamctl.run("status").returncode == 0, "the daemon is up"
    gate.touch()
    done = teamctl.run("send", "lead", "and after", "--wait")
    assert done.returncode == 0, done.stderr
    states = {m["id"]: m["state"] for m in teamctl.json("history", "lead")["messages"]}
    assert states[queued] == "answered", "the queued message was not lost"


def test_a_qwen_members_side_requests_reached_no_figure_and_nothing_said_so(
        teamctl: Teamctl) -> None:
    """Qwen Code reports its turns' own calls, never its side requests (memory extraction,
    suggestions: 9 of 14 API calls in a captured five-turn run), so its figures are a lower
    bound: status, usage, budget and history say so and why, the text and --json alike; its
    Claude teammate's figures stay whole."""
    from orchestrator.costs.coverage import QWEN
    from tests.support.members import acp_member

    team = teamctl.write_team("web", [
        acp_member("qw", acp_agent="qwen", model="qwen3-coder-plus",
                   env={"OPENAI_API_KEY": "sk-fake"}), fake_member("lead")])
    assert teamctl.run("launch", str(team)).returncode == 0
    for member in ("qw", "lead"):
        assert teamctl.run("send", member, "hello", "--wait").returncode == 0
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert (rows["qw"]["spend"]["lower_bound"], rows["lead"]["spend"]["lower_bound"]) == (
        QWEN, None)
    note = f"cost \u2265 (a lower bound): {QWEN}"
    status = teamctl.run("status").stdout
    assert f"  qw: {note}" in status.splitlines() and "lead: cost" not in status
    assert "team web  (cost \u2265 $" in status
    usage = teamctl.json("usage")
    assert {r["group"]: r["lower_bound"] for r in usage["rows"]} == {"qw": QWEN, "lead": None}
    shown = teamctl.run("usage").stdout.splitlines()
    assert shown[-2].startswith("\u2265 total $") and shown[-1] == f"  qw: {note}"
    assert teamctl.run("budget", "qw").stdout.splitlines()[1] == f"  {note}"
    [message] = teamctl.json("history", "qw")["messages"]
    assert message["usage"]["lower_bound"] == QWEN
    assert "(a lower bound: see teamctl status)" in teamctl.run("history", "qw").stdout


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
