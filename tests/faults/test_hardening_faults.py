"""Faults the hardening issue found: stuck turns on every runtime, running out of file
descriptors, a frozen member. Each with a real daemon and the fake CLIs."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys

import pytest

from tests.conftest import REPO, LogFollower, Teamctl, fake_member, wait_pid_exit
from tests.integration.test_codex_member import codex_member
from tests.integration.test_opencode_member import opencode_member


@pytest.mark.parametrize("transport", ["exec", "app-server"])
def test_a_stuck_codex_turn_goes_back_to_the_queue(teamctl: Teamctl, transport: str) -> None:
    """It ended ``failed internal_error`` ("ExceptionGroup"), attempt 1, never re-delivered."""
    member = codex_member("rev", turn_idle_timeout=1.0, transport=transport,
                          env={"FAKE_CODEX_HANG_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "received: [teamctl] your previous turn on message " in done.stdout, \
        "the interrupted turn is continued on its thread"
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    codes = [e.get("code") for e in teamctl.log_events() if e["event"] == "delivery_failed"]
    assert codes == ["runtime_stuck"]


def test_a_stuck_opencode_turn_goes_back_to_the_queue(teamctl: Teamctl) -> None:
    member = opencode_member("des", turn_idle_timeout=1.0,
                             env={"FAKE_OPENCODE_HANG_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "des", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    [message] = teamctl.json("history", "des")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    codes = [e.get("code") for e in teamctl.log_events() if e["event"] == "delivery_failed"]
    assert codes == ["runtime_stuck"]


def _limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def test_running_out_of_file_descriptors_does_not_stop_the_daemon(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """EMFILE on accept killed the daemon: now it is logged and retried, and the daemon
    answers again once connections close."""
    daemon = subprocess.Popen([sys.executable, "-m", "orchestrator", "daemon"],
                              env=teamctl.env, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, preexec_fn=_limit_fds,
                              start_new_session=True)
    teamctl.spawned.append(daemon)
    assert daemon.stdout is not None
    assert "teamctl daemon ready" in daemon.stdout.readline()
    daemon.stdout.close()
    path = str(teamctl.home / "teamctl.sock")
    flood = []
    for _ in range(120):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)  # the kernel queues what the daemon cannot accept yet
        flood.append(sock)
    failed = follow_logs.wait_for(lambda e: e["event"] == "control_accept_failed")
    assert "Too many open files" in failed["error"]
    for sock in flood:
        sock.close()
    assert daemon.poll() is None, "the daemon is still up"
    done = teamctl.run("status")
    assert done.returncode == 0, done.stderr
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("lead")]))
                       ).returncode == 0
    assert teamctl.run("send", "lead", "hello", "--wait").returncode == 0


def test_a_frozen_idle_member_is_noticed_by_the_liveness_probe(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A SIGSTOPped idle member used to show alive and ready until a turn went silent."""
    member = fake_member("lead", liveness_interval=0.5, liveness_deadline=1.5,
                         backoff=[0.1, 1.0])
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [frozen] = teamctl.member_pids()
    os.kill(frozen, signal.SIGSTOP)
    event = follow_logs.wait_for(lambda e: e["event"] == "member_unresponsive")
    assert event["pid"] == frozen
    assert wait_pid_exit(frozen, 10), "the frozen process was killed"
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("pid") != frozen)
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["pid"] != frozen and row["restarts"] == 1
    assert row["liveness"] == "alive" and row["readiness"] == "ready"
    assert teamctl.run("send", "lead", "back?", "--wait").returncode == 0
