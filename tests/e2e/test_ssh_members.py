"""Members on another machine over SSH, against a real sshd on 127.0.0.1 (tests/support/sshd.py): a
fake runtime and the real CLIs answer as remote members; kill -9 of the local ssh and a stopped sshd
are survived (the message answered once); typed start failures; nothing left on the host."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import images
from tests.support.fake_anthropic import newest_user_images
from tests.support.fake_responses import newest_user_images as responses_images
from tests.support.members import FAKE_CLAUDE, fake_member
from tests.support.real_members import claude_member, codex_member
from tests.support.sshd import sshd

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses
    from tests.support.sshd import Sshd

pytestmark = pytest.mark.e2e
DEADLINE = 30.0


@pytest.fixture
def box() -> Iterator[Sshd]:
    with sshd() as server:
        yield server


def remote_member(name: str, **extra: object) -> dict[str, object]:
    """A fake Claude member on the host, with a key of its own (the host has no login)."""
    member = {"host": "box", "login": "isolated",
              "env": {"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000"}, **extra}
    return fake_member(name, **member)


def _until(what: str, check: object) -> None:
    """Wait for ``check()`` with a deadline (process tables have no event to wait on)."""
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} within {DEADLINE}s"
        time.sleep(0.05)


def test_a_remote_member_answers_and_leaves_nothing_behind(teamctl: Teamctl,
                                                           box: Sshd) -> None:
    team = teamctl.write_team("web", [remote_member("far"), fake_member("near")],
                              hosts={"box": box.host()})
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr
    status = teamctl.json("status")["teams"][0]["members"]
    assert [(m["name"], m["host"], m["readiness"]) for m in status] == [
        ("far", "box", "ready"), ("near", None, "ready")]
    done = teamctl.run("send", "far", "hello over there", "--wait")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fake-claude (claude-sonnet-4-5) received: hello over there"
    remote = box.user_processes()
    assert any(str(FAKE_CLAUDE) in p for p in remote), remote
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_each_bad_host_is_a_typed_start_failure_and_the_rest_of_the_team_works(
        teamctl: Teamctl, box: Sshd) -> None:
    import socket

    hung = socket.socket()  # accepts the TCP connection, then never says a word
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    closed = socket.socket()  # a port nothing listens on
    closed.bind(("127.0.0.1", 0))
    wrong_key = box.root / "wrong_known_hosts"
    wrong_key.write_text(f"[127.0.0.1]:{box.port} ssh-ed25519 "
                         "AAAAC3NzaC1lZDI1NTE5AAAAIJ2Kq0Ty0mJ8s2b5Wq1f2QK8oQmQb0m5w9P3a1b2c3d4\n")
    hosts = {
        "box": box.host(),
        "gone": {**box.host(), "port": closed.getsockname()[1]},
        "hung": {**box.host(), "port": hung.getsockname()[1]},
        "imposter": {**box.host(), "ssh_options": [f"UserKnownHostsFile={wrong_key}",
                                                   "StrictHostKeyChecking=yes"]},
        "stranger": {**box.host(), "user": "nobody-of-ours"},
    }
    once = {"restart": "never"}
    team = teamctl.write_team("web", [
        remote_member("unreachable", **once) | {"host": "gone"},
        remote_member("hangs", **once) | {"host": "hung"},
        remote_member("mismatch", **once) | {"host": "imposter"},
        remote_member("refused", **once) | {"host": "stranger"},
        remote_member("nocli", command="/opt/nowhere/claude", **once),
        fake_member("near"),
    ], hosts=hosts)
    try:
        teamctl.run("launch", str(team), timeout=120)
        members = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    finally:
        hung.close()
        closed.close()
    expected = {"unreachable": "ssh to", "hangs": "", "mismatch": "host key",
                "refused": "refused the login", "nocli": "/opt/nowhere/claude is not installed"}
    for name, words in expected.items():
        assert members[name]["launch"] in ("fatal", "stopped", "backoff"), members[name]
        assert f"on host {'box' if name == 'nocli' else ''}" in (members[name]["error"] or ""), \
            members[name]
        assert words in members[name]["error"], members[name]
    assert members["near"]["readiness"] == "ready"
    assert teamctl.run("send", "near", "still here?", "--wait").returncode == 0
    codes = {e["member"]: e.get("code") for e in teamctl.log_events()
             if e["event"] in ("member_start_failed", "member_failed") and e.get("code")}
    assert codes == {"unreachable": "host_unreachable", "hangs": "host_connect_hung",
                     "mismatch": "host_key_mismatch", "refused": "host_auth_failed",
                     "nocli": "host_runtime_missing"}, codes


def test_a_cut_connection_restarts_the_member_and_the_turn_is_answered_once(
        teamctl: Teamctl, box: Sshd, follow_logs: LogFollower) -> None:
    import os
    import signal

    team = teamctl.write_team("web", [remote_member(
        "far", backoff=[0.2, 1.0], max_restarts=50,
        env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000", "FAKE_CLAUDE_TURN_DELAY": "2"})],
        hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    [before] = teamctl.json("status")["teams"][0]["members"]
    message_id = teamctl.run("send", "far", "survive this").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id)
    os.kill(before["pid"], signal.SIGKILL)  # the local ssh client, mid-turn
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    [message] = teamctl.json("history", "far")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2)
    # the resumed session is told its turn was cut, not handed the message as new
    assert message["reply"].startswith("fake-claude (claude-sonnet-4-5) received: [teamctl] "
                                       f"your previous turn on message {message_id} was "
                                       "interrupted")
    assert message["reply"].endswith("survive this")
    [after] = teamctl.json("status")["teams"][0]["members"]
    assert after["session_id"] == before["session_id"], "the same runtime session, resumed"
    assert after["restarts"] >= 1 and after["pid"] != before["pid"]

    box.stop()  # the host goes down: every session with it
    follow_logs.wait_for(lambda e: e["event"] == "member_start_failed"
                         and e.get("code") == "host_unreachable", timeout=60)
    box.start()  # and comes back on the same port
    done = teamctl.run("send", "far", "back?", "--wait", "--timeout", "90")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fake-claude (claude-sonnet-4-5) received: back?"
    answered = [e for e in teamctl.log_events() if e["event"] == "delivery_answered"]
    assert [e["message_id"] for e in answered].count(message_id) == 1, "answered once"
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_the_real_claude_cli_answers_as_a_remote_member(
        teamctl: Teamctl, box: Sshd, claude_bin: Path, anthropic: FakeAnthropic) -> None:
    team = teamctl.write_team("web", [claude_member(
        "far", claude_bin, anthropic, host="box", login="isolated")], hosts={"box": box.host()})
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr
    shot = images.save(images.screenshot(640, 360), teamctl.workdir / "s.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "far", "look at [Image #1]")
    done = teamctl.run("send", "--attach", str(shot), "far", "look at [Image #1]", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: look at [Image #1]"
    [request] = [r for r in anthropic.message_requests() if "image" in json.dumps(r["body"])]
    assert newest_user_images(request["body"])[0]["sha256"] == \
        plan["attachments"][0]["variants"][0]["sha256"]
    transcripts = list((box.root / "home" / ".teamctl-remote").rglob("*.jsonl"))
    assert transcripts, "the session lives on the host"
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_a_remote_codex_reads_its_image_from_a_verified_copy_on_the_host(
        teamctl: Teamctl, box: Sshd, codex_bin: Path, responses: FakeResponses) -> None:
    team = teamctl.write_team("web", [codex_member(
        "far", codex_bin, responses, host="box", login="isolated")], hosts={"box": box.host()})
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr
    shot = images.save(images.screenshot(500, 300), teamctl.workdir / "s.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "far", "and [Image #1]?")
    sha = plan["attachments"][0]["variants"][0]["sha256"]
    done = teamctl.run("send", "--attach", str(shot), "far", "and [Image #1]?", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    [request] = [r for r in responses.response_requests() if "input_image" in str(r["body"])]
    assert [i["sha256"] for i in responses_images(request["body"])] == [sha]
    copy = box.root / "home" / ".cache" / "teamctl" / "images" / sha[:2] / sha
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == sha
    assert copy.stat().st_mode & 0o777 == 0o600
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_a_remote_member_messages_its_teammates_through_the_forwarded_socket(
        teamctl: Teamctl, box: Sshd, follow_logs: LogFollower) -> None:
    team = teamctl.write_team("web", [remote_member("far"), fake_member("near")],
                              hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    args = json.dumps({"to": "near", "text": "from the other machine"})
    done = teamctl.run("send", "far", f"MCP send_message {args}", "--wait")
    assert done.returncode == 0, done.stderr
    receipt = next(ln for ln in done.stdout.splitlines() if ln.startswith("mcp: "))
    assert "queued as " in receipt and "for near" in receipt, done.stdout
    message_id = receipt.split("queued as ")[1].split()[0]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id)
    [to_near] = teamctl.json("history", "near")["messages"]
    assert (to_near["sender"], to_near["text"]) == ("far", "from the other machine")
    listed = teamctl.run("send", "far", "MCP list_team", "--wait")
    assert "- far (you): claude claude-sonnet-4-5" in listed.stdout, listed.stdout


def test_doctor_checks_a_host_and_its_clis(teamctl: Teamctl, box: Sshd) -> None:
    team = teamctl.write_team("web", [remote_member("far")], hosts={
        "box": box.host(), "gone": {**box.host(), "port": 1}})
    report = teamctl.json("doctor", str(team), "--host", "box")
    assert report["reachable"] is True and report["home"] == str(box.root / "home")
    claude = next(r for r in report["runtimes"] if r["runtime"] == "claude")
    assert (claude["found"], claude["path"], claude["version"]) == (
        True, str(FAKE_CLAUDE), "2.1.332 (Claude Code)")
    shown = teamctl.run("doctor", str(team), "--host", "box")
    assert shown.returncode == 0 and f"claude    2.1.332 (Claude Code)  {FAKE_CLAUDE}" in \
        shown.stdout, shown.stdout
    gone = teamctl.run("doctor", str(team), "--host", "gone")
    assert gone.returncode == 1
    assert gone.stderr.startswith("host_unreachable: ssh to "), gone.stderr


def test_a_crashed_daemon_leaves_no_orphan_on_the_host(
        teamctl: Teamctl, box: Sshd, follow_logs: LogFollower) -> None:
    import os
    import signal

    from tests.support.daemon import start_daemon
    from tests.support.processes import wait_pid_exit

    team = teamctl.write_team("web", [remote_member(
        "far", env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000",
                    "FAKE_CLAUDE_TURN_DELAY": "2"})], hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    message_id = teamctl.run("send", "far", "survive the daemon").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id)
    old = [p.split()[0] for p in box.user_processes() if str(FAKE_CLAUDE) in p]
    assert len(old) == 1
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    start_daemon(teamctl)
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    _until("only the new runtime runs on the host", lambda: [
        p.split()[0] for p in box.user_processes() if str(FAKE_CLAUDE) in p] not in ([], old)
        and len([p for p in box.user_processes() if str(FAKE_CLAUDE) in p]) == 1)
    answered = [e for e in teamctl.log_events() if e["event"] == "delivery_answered"]
    assert [e["message_id"] for e in answered].count(message_id) == 1
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_a_stale_control_master_is_replaced_not_waited_on(
        teamctl: Teamctl, box: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    """The field bug: a master socket that accepts and never answers makes every ssh through it
    hang forever; ``-O check`` under a deadline finds it, and a fresh connection is made."""
    import shutil
    import socket
    import tempfile
    from pathlib import Path

    from runtimes.hosts.ssh.host import SshHost, SshTarget, control_dir

    # the home's path is too long for a socket: the daemon and this test share the control
    # dir through $XDG_RUNTIME_DIR (a fallback mkdtemp would be each process's own)
    runtime_dir = tempfile.mkdtemp(prefix="tc-xdg-")
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime_dir)
    teamctl.env["XDG_RUNTIME_DIR"] = runtime_dir
    host = box.host()
    target = SshTarget("box", host["address"], host["user"], host["port"],
                       host["identity_file"], tuple(host["ssh_options"]))
    root = Path(teamctl.env["TEAMCTL_HOME"]).expanduser().absolute()  # as the daemon has it
    path = SshHost(target, control_dir(root), "", "", "", Path()).control_path
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.listen(8)  # accepts, never speaks: what a wedged master looks like from outside
    try:
        team = teamctl.write_team("web", [remote_member("far")], hosts={"box": host})
        launched = teamctl.run("launch", str(team))
        assert launched.returncode == 0, launched.stderr
        done = teamctl.run("send", "far", "through a fresh master", "--wait")
        assert done.returncode == 0, done.stderr
    finally:
        stale.close()
        teamctl.shutdown()
        shutil.rmtree(runtime_dir, ignore_errors=True)
    assert [e for e in teamctl.log_events() if e["event"] == "ssh_master_stale"]


def test_a_remote_opencode_serve_is_reached_through_a_forwarded_port(
        teamctl: Teamctl, box: Sshd, opencode_bin: Path, chat: FakeChat) -> None:
    from tests.support.fake_chat import newest_user_images as chat_images
    from tests.support.real_members import opencode_member

    team = teamctl.write_team("web", [opencode_member(
        "far", opencode_bin, chat, model="fake/vision-model", vision=True, host="box",
        login="isolated")], hosts={"box": box.host()})
    launched = teamctl.run("launch", str(team), timeout=180)
    assert launched.returncode == 0, launched.stderr
    shot = images.save(images.screenshot(600, 400), teamctl.workdir / "s.png", "PNG")
    plan = teamctl.json("send", "--dry-run", "--attach", str(shot), "far", "what is off?")
    done = teamctl.run("send", "--attach", str(shot), "far", "what is off?", "--wait",
                       "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: what is off?"
    [image] = chat_images(chat.chat_requests()[-1]["body"])
    assert image["sha256"] == plan["attachments"][0]["variants"][0]["sha256"]
    serve = [p for p in box.user_processes() if "serve" in p and "--port" in p]
    assert serve, "opencode serve runs on the host"
    assert teamctl.run("stop", "web").returncode == 0
    _until("no process of the host's user is left", lambda: not box.user_processes())


def test_the_ask_profile_works_for_a_remote_member(teamctl: Teamctl, box: Sshd,
                                                   follow_logs: LogFollower) -> None:
    from tests.support.asking import next_request, wait_answered

    team = teamctl.write_team("web", [remote_member("far", permissions="ask")],
                              hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    assert "claude@box" in teamctl.run("status").stdout
    message_id = teamctl.run("send", "far", "WRITE out.txt hello").stdout.strip()
    row = next_request(teamctl, follow_logs)
    assert (row["tool"], row["message_id"]) == ("Write", message_id)
    written = box.root / "home" / "out.txt"  # its workdir there: the remote home
    assert not written.exists()
    assert teamctl.run("approve", row["id"]).returncode == 0
    wait_answered(follow_logs, message_id)
    assert written.read_text() == "hello\n", "written on the host, once approved here"


def test_a_remote_member_falls_asleep_leaves_nothing_running_there_and_wakes_on_its_session(
        teamctl: Teamctl, box: Sshd, follow_logs: LogFollower) -> None:
    """``pause_after`` on an SSH member: idle past it, its process there ends (nothing of the
    member runs there, only the host's master connection) and it reads asleep; its next
    message starts it there again on its recorded session, the receipt saying "resuming",
    answered once."""
    team = teamctl.write_team("web", [remote_member("far", pause_after=1.0)],
                              hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    one = teamctl.json("send", "far", "remember kiwi", "--wait")
    assert one["ok"], one
    session = teamctl.json("status")["teams"][0]["members"][0]["session_id"]
    follow_logs.wait_after(lambda e: e["event"] == "delivery_answered",
                           lambda e: e["event"] == "member_asleep", timeout=DEADLINE)
    # what stays there is the host's ControlMaster connection (its other members', the wake's)
    _until("nothing but the master's session runs there", lambda: all(
        p.split(" ", 1)[1].startswith("sshd: ") for p in box.user_processes()))
    assert teamctl.json("status")["teams"][0]["members"][0]["launch"] == "asleep"
    two = teamctl.run("send", "far", "still there?", "--wait")
    assert two.returncode == 0, two.stderr
    assert "resuming: far was asleep on box since " in two.stderr
    assert two.stdout.strip().endswith("received: still there?")
    woken = follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken"))
    assert (woken["resumed"], woken["session_id"]) == (True, session)
    assert [m["attempts"] for m in teamctl.json("history", "far")["messages"]] == [1, 1]


def _memory_cgroup(pid: str) -> str:
    """The memory cgroup a process of the host is in (its v1 path)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if "memory" in names.split(","):
            return path
    return ""


def test_a_remote_member_past_its_memory_max_is_killed_alone_on_its_host(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """issue 47's ceiling on an SSH host: the host's user was given a memory cgroup (as an
    administrator delegates one); the member's runtime runs in a cgroup of its own made there
    with its limit, the teammate beside it on the same host does not; told to allocate past
    64 MiB it is killed there alone — the daemon and the teammate answer, the event names the
    host and the peak, the turn is continued on the restarted process — and at the stop its
    cgroup there is gone, nothing of the user's left running."""
    with sshd(delegate=("memory", "pids")) as box:
        hog = remote_member("hog", memory_max="64M", pids_max=256, backoff=[0.05, 0.5],
                            env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000",
                                 "FAKE_CLAUDE_ALLOCATE_ON_TURN": "1",
                                 "FAKE_CLAUDE_ALLOCATE_MIB": "400"})
        team = teamctl.write_team("ceil", [hog, remote_member("calm")],
                                  hosts={"box": box.host()})
        launched = teamctl.run("launch", str(team), "--timeout", "60")
        assert launched.returncode == 0, launched.stderr
        rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
        assert rows["hog"]["ceiling"] == "memory_max 64 MiB, pids_max 256"
        runtimes = {p.split()[0]: _memory_cgroup(p.split()[0]) for p in box.user_processes()
                    if str(FAKE_CLAUDE) in p}
        delegated = box.cgroups["memory"]
        [group] = delegated.glob("teamctl-*/ceil.hog")
        assert sorted(path.removeprefix(_memory_cgroup(str(os.getpid())))
                      for path in runtimes.values()) == sorted([
            f"/{delegated.name}", f"/{delegated.name}/{group.parent.name}/ceil.hog"]), \
            "the runtime with a ceiling in its own cgroup there, its teammate in the session's"
        assert int((group / "memory.limit_in_bytes").read_text()) == 64 << 20
        assert (box.cgroups["pids"] / group.parent.name / "ceil.hog" / "pids.max"
                ).read_text().strip() == "256"
        assert group.stat().st_uid == pwd.getpwnam(box.user).pw_uid, \
            "made with the ssh user's rights"
        calm_pid = rows["calm"]["pid"]

        done = teamctl.run("send", "hog", "hold 400 MiB", "--wait", "--timeout", "90")
        assert done.returncode == 0, done.stderr
        [exceeded] = [e for e in teamctl.log_events() if e["event"] == "member_memory_exceeded"]
        assert (exceeded["member"], exceeded["host"], exceeded["cgroup"]) == (
            "hog", "box", str(group))
        assert exceeded["oom_kills"] >= 1 and exceeded["memory_max"] == 64 << 20
        assert exceeded["peak"] is not None and 32 << 20 < exceeded["peak"] <= 64 << 20
        [exited] = [e for e in teamctl.log_events() if e["event"] == "member_exited"]
        assert exited["member"] == "hog" and exited["reason"].startswith(
            "memory_max 64 MiB exceeded: the kernel's OOM killer ended")
        [message] = teamctl.json("history", "hog")["messages"]
        assert message["state"] == "answered" and message["attempts"] == 2

        daemon = teamctl.daemon_pid()
        assert daemon is not None and os.path.exists(f"/proc/{daemon}")
        reply = teamctl.run("send", "calm", "still there?", "--wait", "--timeout", "30")
        assert reply.returncode == 0, reply.stderr
        after = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
        assert after["calm"]["pid"] == calm_pid and after["calm"]["restarts"] == 0
        assert after["hog"]["restarts"] == 1 and after["hog"]["launch"] == "running"
        assert "hog: last exit: memory_max 64 MiB exceeded" in teamctl.run("status").stdout
        assert group.exists(), "the restarted runtime is held to its ceiling again"

        assert teamctl.run("stop", "ceil").returncode == 0
        follow_logs.wait_for(lambda e: e["event"] == "member_stopped" and e["member"] == "hog")
        assert not group.exists() and not group.parent.exists(), "removed there at the stop"
        _until("no process of the host's user is left", lambda: not box.user_processes())


def test_a_host_that_cannot_hold_a_ceiling_refuses_the_launch_naming_it_and_the_fix(
        teamctl: Teamctl, box: Sshd) -> None:
    """No cgroup of the host is the ssh user's: the launch is refused before anything
    starts, naming the host and what to enable there — never run unlimited; doctor --host
    says what the host supports."""
    team = teamctl.write_team("web", [remote_member("far", memory_max="64M")],
                              hosts={"box": box.host()})
    refused = teamctl.run("launch", str(team))
    assert refused.returncode != 0
    [failed] = [e for e in teamctl.log_events() if e["event"] == "control_request_failed"]
    assert (failed["method"], failed["code"]) == ("launch", "resource_limits_unavailable")
    assert "its memory_max cannot be held: no cgroup of host box can take the memory " \
        "controller" in refused.stderr
    assert "not writable by this user" in refused.stderr
    assert f"run its members there as root (user = \"root\"), or delegate a cgroup to " \
        f"{box.user} there" in refused.stderr
    assert not [p for p in box.user_processes() if str(FAKE_CLAUDE) in p]
    report = teamctl.json("doctor", str(team), "--host", "box")
    assert report["cgroups"]["ok"] is False
    assert "delegate a cgroup" in report["cgroups"]["fix"]
    [check] = report["checks"]
    assert (check["check"], check["ok"]) == ("ceiling of far (memory_max 64 MiB)", False)
    shown = teamctl.run("doctor", str(team), "--host", "box")
    assert shown.returncode == 1 and "ceilings: cgroups none" in shown.stdout, shown.stdout


def test_doctor_says_which_controllers_a_host_holds_members_to(teamctl: Teamctl) -> None:
    with sshd(delegate=("memory", "pids")) as box:
        team = teamctl.write_team("web", [remote_member("far", memory_max="64M")],
                                  hosts={"box": box.host()})
        report = teamctl.json("doctor", str(team), "--host", "box")
        rows = {row["controller"]: row for row in report["cgroups"]["controllers"]}
        assert (rows["memory"]["version"], rows["pids"]["version"], rows["cpu"]["version"]) \
            == (1, 1, None)
        assert rows["memory"]["base"] == str(box.cgroups["memory"])
        assert report["checks"] == [{"check": "ceiling of far (memory_max 64 MiB)", "ok": True,
                                     "detail": "held in a cgroup there (v1)"}]
        shown = teamctl.run("doctor", str(team), "--host", "box")
        assert shown.returncode == 0, shown.stdout
        assert "ceilings: cgroups memory (v1), pids (v1)" in shown.stdout, shown.stdout
        assert not [p for p in box.cgroups["memory"].iterdir() if p.is_dir()], \
            "what doctor made there is removed"
