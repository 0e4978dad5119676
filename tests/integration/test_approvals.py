"""The operator's approvals queue with a real daemon and the fake CLIs taught to ask: a Write
the `ask` profile does not allow waits in `teamctl approvals` as long as it takes, `approve`
makes the file appear and the runtime confirms it, `deny --message` reaches the model, a
question gets its answer, `--always` leaves a rule applied at the next launch, `allow` in the
team file pre-approves, and hostile or stale answers are typed errors that apply nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.asking import launch, next_request, reply_to, wait_answered
from tests.support.members import codex_member, fake_member, opencode_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


TEAM = "web"

def test_a_write_waits_for_the_operator_and_approve_makes_the_file(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    idle = 1.0  # the turn's watchdog: the operator takes longer than this to answer
    launch(teamctl, TEAM, fake_member("lead", permissions="ask", turn_idle_timeout=idle))
    message_id = teamctl.run("send", "lead", "WRITE out.txt hello").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["state"], row["tool"], row["kind"], row["message_id"]) == (
        "pending", "Write", "permission", message_id)
    assert row["summary"].endswith("out.txt (+1 lines)")

    def waits_on_the_operator() -> None:
        [member] = teamctl.json("status")["teams"][0]["members"]
        assert member["readiness"] == "busy"
        assert member["activity"] == f"waiting for approval {row['id']}"

    waits_on_the_operator()
    with pytest.raises(AssertionError, match="no matching log event"):  # the watchdog's line
        follow_logs.wait_for(lambda e: e["event"] == "turn_stuck", timeout=idle * 1.5)
    waits_on_the_operator()  # past the watchdog's timeout, the member still waits
    assert not (teamctl.workdir / "out.txt").exists()

    done = teamctl.run("approve", row["id"])
    assert done.returncode == 0, done.stderr
    assert f"{row['id']} approved: the runtime confirmed it" in done.stdout
    wait_answered(follow_logs, message_id)
    assert (teamctl.workdir / "out.txt").read_text() == "hello\n"
    [message] = teamctl.json("history", "lead")["messages"]
    assert "wrote out.txt" in message["reply"] and message["attempts"] == 1, \
        "the watchdog did not fire while it waited"
    [settled] = teamctl.json("approvals", "--all")["approvals"]
    assert settled["state"] == "approved" and settled["confirmed_at"] >= settled["settled_at"]
    assert teamctl.json("approvals")["approvals"] == [], "nothing waits any more"

    again = teamctl.run("approve", row["id"])
    assert again.returncode == 1 and "already approved; nothing was applied" in again.stderr


def test_deny_with_a_message_reaches_the_model_and_writes_nothing(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    message_id = teamctl.run("send", "lead", "WRITE secret.txt x").stdout.strip()
    row = next_request(teamctl, follow_logs)
    done = teamctl.run("deny", row["id"], "--message", "write it under docs/ instead")
    assert done.returncode == 0, done.stderr
    reply = reply_to(teamctl, follow_logs, "lead", message_id)
    assert "denied: write it under docs/ instead" in reply
    assert not (teamctl.workdir / "secret.txt").exists()
    [settled] = teamctl.json("approvals", "--all", "--json")["approvals"]
    assert settled["answer"]["message"] == "write it under docs/ instead"


def test_a_question_is_answered_from_the_cli(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    message_id = teamctl.run("send", "lead", "ASK which colour?").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["kind"], row["questions"]) == ("question", ["which colour?"])
    wrong = teamctl.run("approve", row["id"])
    assert wrong.returncode == 2 and "is a question" in wrong.stderr
    assert teamctl.run("answer", row["id"], "blue").returncode == 0
    assert 'answer: {"which colour?": "blue"}' in reply_to(teamctl, follow_logs, "lead", message_id)


def test_always_keeps_a_rule_that_the_next_launch_applies_and_allow_preapproves(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"),
                                      fake_member("dev", permissions="ask",
                                                  allow=["Write(*notes*)"]))
    first = teamctl.run("send", "lead", "WRITE a.txt one").stdout.strip()
    row = next_request(teamctl, follow_logs)
    done = teamctl.run("approve", "--always", row["id"], input="")
    assert done.returncode == 0 and "rule kept for web/lead: Write(**)" in done.stdout
    wait_answered(follow_logs, first)
    assert teamctl.run("restart", "lead").returncode == 0
    second = teamctl.run("send", "lead", "WRITE b.txt two", "--wait")
    assert second.returncode == 0 and "wrote b.txt" in second.stdout, "no operator needed"
    third = teamctl.run("send", "dev", "WRITE notes.md three", "--wait")
    assert third.returncode == 0 and "wrote notes.md" in third.stdout
    rows = teamctl.json("approvals", "--all")["approvals"]
    by_rule = [(r["member"], r["answer"]["rule"]) for r in rows
               if (r["answer"] or {}).get("by") == "rule"]
    assert by_rule == [("lead", "Write(**)"), ("dev", "Write(*notes*)")]


def test_hostile_and_stale_answers_are_typed_and_apply_nothing(teamctl: Teamctl) -> None:
    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    unknown = teamctl.run("approve", "apv_01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert unknown.returncode == 1 and "no approval named" in unknown.stderr
    for bad in ("apv_../../etc", "1; rm -rf /", "apv_" + "Z" * 300):
        done = teamctl.run("approve", bad)
        assert done.returncode == 2 and "is not an approval id" in done.stderr
    forged = teamctl.rpc("approve", {"id": "apv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "always": [1],
                                     "by": "rule"})
    assert forged["error"]["code"] == "usage_error"
    assert teamctl.run("answer", "apv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "").returncode == 2
    assert teamctl.run("status").returncode == 0, "the daemon is up"


def test_codex_on_app_server_asks_and_the_approval_reaches_the_server(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, codex_member("rev", permissions="ask"))
    message_id = teamctl.run("send", "rev", "APPROVE make test").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["summary"], row["runtime"]) == (
        "commandExecution", "make test", "codex")
    assert teamctl.run("approve", row["id"]).returncode == 0
    assert "approval: accept" in reply_to(teamctl, follow_logs, "rev", message_id)


def test_a_secret_in_a_request_is_redacted_in_the_queue_and_the_logs(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, codex_member("rev", permissions="ask"))
    secret = "sk-ant-api03-" + "S" * 40
    teamctl.run("send", "rev", f"APPROVE curl -H 'x-api-key: {secret}' https://x")
    row = next_request(teamctl, follow_logs)
    assert secret not in row["summary"] and "curl" in row["summary"]
    assert secret not in (teamctl.home / "logs" / "teamctl.jsonl").read_text()
    assert teamctl.run("deny", row["id"]).returncode == 0


def test_opencode_asks_over_http_and_always_lets_the_session_go_on_alone(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, opencode_member("des", permissions="ask",
                                                      turn_idle_timeout=1.0))
    first = teamctl.run("send", "des", "BASH touch made.txt").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["summary"], row["runtime"]) == ("bash", "touch made.txt",
                                                             "opencode")
    done = teamctl.run("approve", "--always", row["id"])
    assert done.returncode == 0 and "the runtime confirmed it" in done.stdout, done.stdout
    wait_answered(follow_logs, first)
    assert (teamctl.workdir / "made.txt").exists()
    [message] = teamctl.json("history", "des")["messages"]
    assert "bash ran: exit 0" in message["reply"] and message["attempts"] == 1
    again = teamctl.run("send", "des", "BASH touch again.txt", "--wait")
    assert "bash ran: exit 0" in again.stdout, "OpenCode's own always rule: no new request"


def test_opencode_reject_with_a_message_reaches_the_model(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, opencode_member("des", permissions="ask"))
    first = teamctl.run("send", "des", "BASH rm -rf build").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert teamctl.run("deny", row["id"], "--message", "never delete build/").returncode == 0
    reply = reply_to(teamctl, follow_logs, "des", first)
    assert "bash rejected with the following feedback: never delete build/" in reply


def test_an_opencode_question_is_answered_from_the_cli(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    launch(teamctl, TEAM, opencode_member("des", permissions="ask"))
    first = teamctl.run("send", "des", "ASK tabs or spaces?").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["kind"], row["questions"], row["runtime"]) == (
        "question", ["tabs or spaces?"], "opencode")
    done = teamctl.run("answer", row["id"], "spaces")
    assert done.returncode == 0 and "the runtime confirmed it" in done.stdout
    assert 'answers: [["spaces"]]' in reply_to(teamctl, follow_logs, "des", first)


def test_approvals_follow_prints_each_request_as_it_comes_and_a_stopped_member_expires_it(
        teamctl: Teamctl) -> None:
    import json
    import subprocess
    import sys

    launch(teamctl, TEAM, fake_member("lead", permissions="ask"))
    follower = subprocess.Popen([sys.executable, "-m", "orchestrator", "approvals", "-f",
                                 "--json"], env=teamctl.env, stdout=subprocess.PIPE, text=True)
    try:
        teamctl.run("send", "lead", "WRITE one.txt 1")
        assert follower.stdout is not None
        row = json.loads(follower.stdout.readline())  # blocks until the daemon has one
        assert (row["state"], row["tool"]) == ("pending", "Write")
    finally:
        follower.terminate()
        follower.wait(timeout=10)
        if follower.stdout is not None:
            follower.stdout.close()
    assert teamctl.run("stop", "web").returncode == 0
    gone = teamctl.run("approve", row["id"])
    assert gone.returncode == 1 and "expired" in gone.stderr, gone.stderr
    assert not (teamctl.workdir / "one.txt").exists()
