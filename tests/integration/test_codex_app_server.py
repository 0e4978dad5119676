"""Codex members on one long-lived `codex app-server` (the default transport), through the
fake codex speaking the captured protocol: turns on one process and one thread, the role as
developer instructions, images as localImage files, usage per turn in the journal, a relaunch
that resumes the thread, stuck turns interrupted (and killed when the interrupt is ignored),
failures typed, approvals answered, and the server recycled by turns, children and memory
without counting as a crash."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.support import images
from tests.support.members import codex_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl


def _member(name: str, **extra: Any) -> dict[str, Any]:
    return codex_member(name, transport="app-server", **extra)


def _row(teamctl: Teamctl) -> dict[str, Any]:
    [row] = teamctl.json("status")["teams"][0]["members"]
    return row  # type: ignore[no-any-return]


def test_turns_run_on_one_process_and_one_thread_that_survives_a_relaunch(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [codex_member("rev", prompt="You review code.")])
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["readiness"] == "ready" and row["session_id"], "app-server is the default"
    pid, thread = row["pid"], row["session_id"]
    first = teamctl.run("send", "rev", "remember kiwi", "--wait")
    assert first.returncode == 0, first.stderr
    assert "turn 1 received: remember kiwi\ninstructions: You review code." in first.stdout, \
        "the role is the thread's developer instructions, not part of the message"
    shot = images.save(images.screenshot(800, 450), teamctl.workdir / "s.png", "PNG")
    second = teamctl.run("send", "--attach", str(shot), "rev", "look", "--wait")
    assert second.returncode == 0 and "turn 2 received: look" in second.stdout
    assert "image/png" in second.stdout
    third = teamctl.run("send", "rev", "and again", "--wait")
    assert "turn 3 received: and again" in third.stdout
    assert teamctl.member_pids() == [pid], "one process for every turn"
    per_turn = {"input_tokens": 100, "cached_input_tokens": 10, "output_tokens": 20,
                "reasoning_output_tokens": 5,
                # gpt-5.4-mini: (90 x $0.75 + 10 x $0.075 + 20 x $4.50) per million tokens
                "cost_usd": 0.000158}
    history = teamctl.json("history", "rev")["messages"]
    assert [m["usage"] for m in history] == [per_turn] * 3, "each turn's own usage"
    limits = [e for e in teamctl.log_events() if e["event"] == "rate_limits"]
    assert [e["used_percent"]["primary"] for e in limits] == [7, 14, 21]

    assert teamctl.run("stop", "web").returncode == 0
    assert wait_pid_exit(pid, 10)
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["session_id"] == thread and row["pid"] != pid
    fourth = teamctl.run("send", "rev", "still there?", "--wait")
    assert "turn 4 received: still there?" in fourth.stdout, "the thread was resumed"
    assert teamctl.json("history", "rev")["messages"][-1]["usage"] == per_turn, \
        "app-server reports the turn's own usage, resumed or not"


def test_a_stuck_turn_is_interrupted_and_redelivered_on_the_same_process(
        teamctl: Teamctl) -> None:
    member = _member("rev", turn_idle_timeout=1.0, env={"FAKE_CODEX_HANG_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [pid] = teamctl.member_pids()
    done = teamctl.run("send", "rev", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    assert teamctl.member_pids() == [pid], "the interrupt ended the turn: no restart"
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt"]


def test_an_ignored_interrupt_kills_the_server_and_the_turn_is_redelivered(
        teamctl: Teamctl) -> None:
    member = _member("rev", turn_idle_timeout=1.0, interrupt_grace=0.2, backoff=[0.1, 1.0],
                     env={"FAKE_CODEX_HANG_ON_TURN": "1", "FAKE_CODEX_IGNORE_INTERRUPT": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [pid] = teamctl.member_pids()
    done = teamctl.run("send", "rev", "are you there?", "--wait", "--timeout", "90")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received: [teamctl] your previous turn on message " in done.stdout, \
        "the resumed thread continues the cut turn"
    assert wait_pid_exit(pid, 10) and teamctl.member_pids() != [pid]
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt", "kill"]


def test_a_server_killed_mid_turn_is_restarted_and_the_turn_redelivered(
        teamctl: Teamctl) -> None:
    member = _member("rev", backoff=[0.1, 1.0], env={"FAKE_CODEX_CRASH_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received: [teamctl] your previous turn on message " in done.stdout, \
        "the resumed thread continues the cut turn"
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2)
    assert _row(teamctl)["restarts"] == 1


def test_a_failed_turn_is_a_failed_delivery_with_the_api_message_and_status(
        teamctl: Teamctl) -> None:
    member = _member("rev", env={"FAKE_CODEX_FAIL_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait")
    assert done.returncode == 1
    assert "Incorrect API key provided (fake 401)" in done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("failed", 1)
    assert message["error"]["code"] == "turn_failed" and not message["error"]["retryable"]
    again = teamctl.run("send", "rev", "and now?", "--wait")
    assert "turn 2 received: and now?" in again.stdout, "the same server goes on"


def test_an_error_without_turn_completed_fails_the_turn_within_the_idle_timeout(
        teamctl: Teamctl) -> None:
    member = _member("rev", turn_idle_timeout=2.0, env={
        "FAKE_CODEX_FAIL_ON_TURN": "1", "FAKE_CODEX_NO_COMPLETED_AFTER_ERROR": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait", "--timeout", "60")
    assert done.returncode == 1, "it does not hang"
    assert "Incorrect API key provided (fake 401)" in done.stderr
    events = [e["event"] for e in teamctl.log_events()]
    assert "turn_failed_without_completion" in events


def test_a_thread_that_no_longer_exists_starts_a_new_one_and_says_so(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [_member("rev")])
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("send", "rev", "hello", "--wait").returncode == 0
    thread = _row(teamctl)["session_id"]
    assert teamctl.run("stop", "web").returncode == 0
    codex_home = teamctl.home / "members" / "web" / "rev" / "runtime" / "codex-home"
    [rollout] = codex_home.glob(f"sessions/*/*/*/rollout-*-{thread}.jsonl")
    rollout.unlink()
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["session_id"] != thread and thread in (row["note"] or "")
    done = teamctl.run("send", "rev", "who are you?", "--wait")
    assert "turn 1 received: who are you?" in done.stdout
    assert [e["lost_session"] for e in teamctl.log_events()
            if e["event"] == "session_lost"] == [thread]


def test_a_server_answering_in_an_unknown_shape_is_a_typed_start_failure(
        teamctl: Teamctl) -> None:
    member = _member("rev", max_restarts=0, env={"FAKE_CODEX_NO_THREAD_ID": "1"})
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert done.returncode != 0
    row = _row(teamctl)
    assert "thread/start answered without a thread id" in (row["error"] or ""), row


def test_a_missing_codex_fails_the_member_with_the_fix(teamctl: Teamctl) -> None:
    member = _member("rev", command="/nonexistent/codex")
    done = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert done.returncode != 0
    row = _row(teamctl)
    assert row["launch"] == "fatal" and "not found" in (row["error"] or "")


def test_approval_requests_are_declined_and_noted_never_left_waiting(
        teamctl: Teamctl) -> None:
    assert teamctl.run("launch", str(teamctl.write_team("web", [_member("rev")]))).returncode \
        == 0
    done = teamctl.run("send", "rev", "APPROVE rm -rf build\nASK_USER", "--wait",
                       "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "approval: decline" in done.stdout
    assert "user input: {'code': -32601, 'message': 'teamctl does not handle " \
        "item/tool/requestUserInput'}" in done.stdout, "an unknown request gets an error"
    [message] = teamctl.json("history", "rev")["messages"]
    assert any("rm -rf build" in note and "declined" in note for note in message["notes"])
    [event] = [e for e in teamctl.log_events() if e["event"] == "approval_declined"]
    assert event["request"] == "item/commandExecution/requestApproval"


def test_the_server_is_recycled_after_recycle_turns_and_it_is_not_a_restart(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [_member("rev", recycle_turns=2)])
    assert teamctl.run("launch", str(team)).returncode == 0
    first_pid, thread = _row(teamctl)["pid"], _row(teamctl)["session_id"]
    for n in (1, 2, 3):
        done = teamctl.run("send", "rev", f"turn {n}", "--wait")
        assert f"turn {n} received: turn {n}" in done.stdout, "the thread carries on"
    row = _row(teamctl)
    assert row["pid"] != first_pid and row["session_id"] == thread
    assert (row["restarts"], row["recycles"], row["last_exit"]) == (0, 1, None)
    assert wait_pid_exit(first_pid, 10)
    [event] = [e for e in teamctl.log_events() if e["event"] == "member_recycled"]
    assert "recycle_turns = 2" in event["reason"] and event["exit"] == 0, \
        "stopped by closing its stdin: it exited by itself"
    assert not [e for e in teamctl.log_events() if e["event"] == "member_restart_decision"]


def test_children_piling_up_recycle_the_server_and_the_leftovers_are_stopped(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    member = _member("rev", recycle_children=2, recycle_check_interval=0,
                     env={"FAKE_CODEX_LEAK_CHILD": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    first_pid = _row(teamctl)["pid"]
    for n in (1, 2, 3):
        assert teamctl.run("send", "rev", f"turn {n}", "--wait").returncode == 0
    # the check runs after the third answer went out: wait for its recycle, not a guess
    follow_logs.wait_for(lambda e: e["event"] == "member_recycled")
    row = _row(teamctl)
    assert row["recycles"] == 1 and row["pid"] != first_pid
    [event] = [e for e in teamctl.log_events() if e["event"] == "member_recycled"]
    assert "3 child processes (recycle_children = 2)" in event["reason"]
    assert wait_pid_exit(first_pid, 10)
    leaked = (teamctl.home / "members" / "web" / "rev" / "runtime" / "codex-home"
              / "leaked-children")
    pids = [int(line) for line in leaked.read_text().split()]
    assert len(pids) == 3
    assert all(wait_pid_exit(pid, 10) for pid in pids[:3]), \
        "the leaked children went with their server"


def test_memory_above_recycle_rss_mb_recycles_the_server(teamctl: Teamctl,
                                                          follow_logs: LogFollower) -> None:
    member = _member("rev", recycle_rss_mb=1,  # any real process holds more than 1 MiB
                     recycle_check_interval=0)
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    first_pid = _row(teamctl)["pid"]
    assert teamctl.run("send", "rev", "hello", "--wait").returncode == 0
    assert teamctl.run("send", "rev", "again", "--wait").returncode == 0
    # the check runs after the answer went out: wait for the second recycle, not a guess
    follow_logs.wait_for(lambda _e: [e["event"] for e in follow_logs.seen].count(
        "member_recycled") >= 2)
    row = _row(teamctl)
    assert row["recycles"] == 2 and row["pid"] != first_pid and row["restarts"] == 0
    reasons = [e["reason"] for e in teamctl.log_events() if e["event"] == "member_recycled"]
    assert len(reasons) == 2 and all("recycle_rss_mb = 1" in r for r in reasons)


def test_garbage_from_the_server_is_skipped_and_the_turn_still_answered(
        teamctl: Teamctl) -> None:
    member = _member("rev", env={"FAKE_CODEX_GARBAGE": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [pid] = teamctl.member_pids()
    done = teamctl.run("send", "rev", "hello", "--wait")
    assert done.returncode == 0, done.stderr
    assert "turn 1 received: hello" in done.stdout
    assert teamctl.member_pids() == [pid]
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["usage"]["input_tokens"] == 100, "the well-formed usage that followed"
    assert [e["event"] for e in teamctl.log_events()].count("runtime_corrupt_line") == 1
