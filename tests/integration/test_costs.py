"""Costs and budgets through the daemon, with the fake Claude CLI (fixtures/bin/claude): the
journal's cost is the CLI's own total_cost_usd increase, a budget holds the queue (messages
stay queued) until 'teamctl budget' raises it, a turn that crosses a budget is interrupted,
Claude gets --max-budget-usd as a backstop, and a rate limit pauses and resumes a member at
the reset time it names (docs/costs.md)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from orchestrator.client.cli import cli
from tests.conftest import fake_member

if TYPE_CHECKING:
    from tests.conftest import LogFollower, Teamctl


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
    assert row["hold"].startswith("rate-limited until " + time.strftime(
        "%H:%M", time.localtime(until)))
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
    from tests.integration.test_acp_member import acp_member

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
