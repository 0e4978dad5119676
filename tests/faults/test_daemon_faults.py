"""kill -9 of the daemon: nothing lost, nothing answered twice, no member duplicated; and a
daemon out of file descriptors keeps running."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
from collections import Counter

from tests.support.daemon import start_daemon
from tests.support.driver import REPO, LogFollower, Teamctl
from tests.support.members import codex_member, fake_member, opencode_member
from tests.support.processes import cgroup_dir, pid_alive, wait_for_path, wait_pid_exit


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

    start_daemon(teamctl)
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
    start_daemon(teamctl)
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

    start_daemon(teamctl)
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


def test_a_daemon_killed_leaves_a_member_s_cgroup_the_next_one_takes_it_over(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """A member with a ceiling left a server running outside its process group (setsid):
    after kill -9 of the daemon, the orphan reaper stops the runtime, and the next daemon
    kills what is still in the member's cgroup (``cgroup_orphans_stopped``) and starts the
    member again in its cgroup, with its limit, nothing else in it."""
    teamctl.run("launch", str(teamctl.write_team("web", [fake_member(
        "lead", memory_max="256M", permissions="full")])))
    [old] = teamctl.member_pids()
    group = cgroup_dir(old)
    server = teamctl.workdir / "server.pid"
    done = teamctl.run("send", "lead", f"TRY run setsid sh -c 'echo $$ > {server}.new; mv "
                       f"{server}.new {server}; exec sleep 300' </dev/null >/dev/null 2>&1 &",
                       "--wait")
    assert done.returncode == 0, done.stderr
    assert wait_for_path(server, 30)
    follow = int(server.read_text())
    assert cgroup_dir(follow) == group, "the server the member started is in its cgroup"
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)

    start_daemon(teamctl)
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("member") == "lead"
                         and e.get("pid") != old, timeout=60)
    assert wait_pid_exit(old, 10) and wait_pid_exit(follow, 10), "no orphan left"
    [stopped] = [e for e in teamctl.log_events() if e["event"] == "cgroup_orphans_stopped"]
    assert follow in stopped["pids"]
    [new] = teamctl.member_pids()
    assert cgroup_dir(new) == group
    limit = group / ("memory.limit_in_bytes" if (group / "memory.limit_in_bytes").exists()
                     else "memory.max")
    assert int(limit.read_text()) == 256 << 20
    held = {int(p) for p in (group / "cgroup.procs").read_text().split()}
    assert new in held and follow not in held

