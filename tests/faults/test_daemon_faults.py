"""kill -9 of the daemon: nothing lost, nothing answered twice, no member duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

from tests.conftest import REPO, LogFollower, Teamctl, fake_member, pid_alive, wait_pid_exit
from tests.integration.test_codex_member import codex_member
from tests.integration.test_opencode_member import opencode_member


def _start_daemon(teamctl: Teamctl) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "daemon"],
                               env=teamctl.env, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert process.stdout is not None
    assert "teamctl daemon ready" in process.stdout.readline()
    process.stdout.close()
    teamctl.spawned.append(process)
    return process


def test_daemon_killed_mid_delivery_resumes_the_team_and_redelivers(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    gate = teamctl.workdir / "daemon-back"  # lead's turns answer once the daemon is back
    team = teamctl.write_team("web", [
        fake_member("lead", env={"FAKE_CLAUDE_TURN_GATE": str(gate)}),
        opencode_member("des"),
        codex_member("rev"),  # a long-lived codex app-server
    ])
    assert teamctl.run("launch", str(team)).returncode == 0
    old_pids = teamctl.member_pids()
    threads = {m["name"]: m["session_id"]
               for m in teamctl.json("status")["teams"][0]["members"]}
    message_id = teamctl.run("send", "lead", "survive this").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id)
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)

    _start_daemon(teamctl)
    gate.touch()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    [message] = teamctl.json("history", "lead")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    events = teamctl.log_events()
    assert [e["state"] for e in events if e["event"] == "delivery_recovered"] == ["queued"]
    answered = Counter(e["message_id"] for e in events if e["event"] == "delivery_answered")
    assert answered[message_id] == 1
    assert [e["team"] for e in events if e["event"] == "team_resumed"] == ["web"]
    stopped = [e for e in events if e["event"] == "orphan_stopped"]
    assert {e["member"] for e in stopped} <= {"lead", "des", "rev"}
    assert any(e["member"] == "des" for e in stopped), "opencode serve never exits by itself"
    assert all(wait_pid_exit(pid, 10) for pid in old_pids), "no old member left running"
    for name in ("lead", "des", "rev"):  # the lead answers while the others may still start
        follow_logs.wait_for(lambda e, name=name: e["event"] == "member_ready"
                             and e.get("member") == name and e.get("pid") not in old_pids,
                             timeout=60)
    assert not [e for e in teamctl.log_events() if e["event"] == "member_unresponsive"]
    new_pids = teamctl.member_pids()
    assert len(new_pids) == 3 and not set(new_pids) & set(old_pids)
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert rows["rev"]["session_id"] == threads["rev"], "the app-server's thread was resumed"


def test_stale_socket_and_pid_file_are_replaced(teamctl: Teamctl) -> None:
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")])))
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    assert (teamctl.home / "teamctl.sock").exists(), "left behind by the dead daemon"
    assert teamctl.run("status").returncode == 4
    _start_daemon(teamctl)
    assert teamctl.daemon_pid() != daemon and pid_alive(teamctl.daemon_pid() or 0)
    done = teamctl.run("send", "lead", "after", "--wait")
    assert done.returncode == 0, done.stderr


def test_a_request_waiting_when_the_daemon_dies_expires_and_is_asked_again(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    # the continuation of the cut turn makes the fake redo its step, as a model would finish it
    team = teamctl.write_team("web", [fake_member(
        "lead", permissions="ask", env={"FAKE_CLAUDE_REDO_ON_CONTINUE": "1"})])
    assert teamctl.run("launch", str(team)).returncode == 0
    message_id = teamctl.run("send", "lead", "WRITE out.txt kept").stdout.strip()
    first = follow_logs.wait_for(lambda e: e["event"] == "approval_requested")
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)

    _start_daemon(teamctl)
    second = follow_logs.wait_for(lambda e: e["event"] == "approval_requested"
                                  and e["approval_id"] != first["approval_id"], timeout=60)
    stale = teamctl.run("approve", first["approval_id"])
    assert stale.returncode == 1 and "daemon restarted" in stale.stderr
    assert not (teamctl.workdir / "out.txt").exists(), "a stale answer applied nothing"
    assert teamctl.run("approve", second["approval_id"]).returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    assert (teamctl.workdir / "out.txt").read_text() == "kept\n"
    states = [(r["id"], r["state"]) for r in teamctl.json("approvals", "--all")["approvals"]]
    assert states == [(first["approval_id"], "expired"), (second["approval_id"], "approved")]
