"""Sandboxed members (``sandbox = "process"``, docs/security.md "Sandbox"): a real daemon, the
real bubblewrap, fake Claude members. Each escape attempt is made from inside member ``a``'s
sandbox by the fake's ``TRY`` steps (fixtures/escape.py) and answered by the OS; the reply
shows each attempt and its errno; the daemon and member ``b`` (not sandboxed) go on."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.members import fake_member
from tests.support.processes import pid_alive

if TYPE_CHECKING:
    from tests.support.driver import Teamctl


def _team(teamctl: Teamctl, tmp_path: Path, **extra: object) -> Path:
    for name in ("a", "b"):
        (tmp_path / name).mkdir(exist_ok=True)
    (tmp_path / "b" / "secret.txt").write_text("b's work\n")
    return teamctl.write_team("web", [
        fake_member("a", workdir=str(tmp_path / "a"), sandbox="process", permissions="full",
                    sandbox_ro=[str(REPO / "fixtures")], **extra),
        fake_member("b", workdir=str(tmp_path / "b"))])


def _reply(teamctl: Teamctl, member: str, text: str) -> str:
    done = teamctl.run("send", member, text, "--wait")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _pid(teamctl: Teamctl, member: str) -> int:
    doc = teamctl.rpc("status", {"team": "web"})["result"]
    return int(next(m["pid"] for t in doc["teams"] for m in t["members"] if m["name"] == member))


def test_escape_attempts_from_a_sandboxed_member_are_refused_by_the_os(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """From inside ``a``'s sandbox: a write in its workdir lands; a write to /etc is EROFS; a
    write to the operator's home lands in a private tmpfs, never on the disk; the operator's
    ~/.ssh key, ``b``'s workdir and the daemon's control socket are not there (ENOENT; ``b``'s
    workdir is an empty read-only tmpfs: EROFS to a write); ``b``'s
    process cannot be signalled (another pid namespace: ESRCH); the private /tmp fills to
    ENOSPC. ``b`` and the daemon are unaffected: ``b`` still runs and answers."""
    operator = teamctl.env["HOME"]
    ssh = os.path.join(operator, ".ssh")
    os.makedirs(ssh, exist_ok=True)
    with open(os.path.join(ssh, "id_ed25519"), "w") as key:
        key.write("-----BEGIN OPENSSH PRIVATE KEY----- FAKE\n")
    assert teamctl.run("launch", str(_team(teamctl, tmp_path))).returncode == 0
    b_pid = _pid(teamctl, "b")
    attempts = [f"TRY write {tmp_path / 'a' / 'inside.txt'}", "TRY write /etc/teamctl-escape",
                f"TRY write {operator}/escape.txt", f"TRY read {ssh}/id_*",
                f"TRY read {tmp_path / 'b' / 'secret.txt'}",
                f"TRY write {tmp_path / 'b' / 'secret.txt'}",
                f"TRY connect {teamctl.home / 'teamctl.sock'}",
                f"TRY read {teamctl.home / 'state.db'}", f"TRY kill {b_pid}",
                "TRY fill /tmp/fill.bin"]
    reply = _reply(teamctl, "a", "\n".join(attempts))
    assert f"try write {tmp_path / 'a' / 'inside.txt'}: ok wrote" in reply
    assert (tmp_path / "a" / "inside.txt").read_text() == "x"
    assert "try write /etc/teamctl-escape: refused EROFS" in reply
    assert f"try write {operator}/escape.txt: ok wrote" in reply  # its private tmpfs...
    assert not os.path.exists(os.path.join(operator, "escape.txt"))  # ...never the disk
    for line in (f"try read {ssh}/id_*: refused ENOENT",
                 f"try read {tmp_path / 'b' / 'secret.txt'}: refused ENOENT",
                 f"try write {tmp_path / 'b' / 'secret.txt'}: refused EROFS",
                 f"try connect {teamctl.home / 'teamctl.sock'}: refused ENOENT",
                 f"try read {teamctl.home / 'state.db'}: refused ENOENT",
                 f"try kill {b_pid}: refused ESRCH",
                 "try fill /tmp/fill.bin: refused ENOSPC"):
        assert line in reply, reply
    assert (tmp_path / "b" / "secret.txt").read_text() == "b's work\n"
    assert pid_alive(b_pid)
    assert "received: still here" in _reply(teamctl, "b", "still here")
    assert "received: and me" in _reply(teamctl, "a", "and me")


def test_teamctl_tools_reach_the_daemon_from_inside_through_the_members_own_socket(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``teamctl mcp`` inside the sandbox calls list_team through ``a``'s own socket and is
    answered: the daemon's peer check saw the caller's pid as this pid namespace's parent
    sees it (SO_PEERCRED translates it), a descendant of ``a``'s bwrap — while inside, the
    runtime is pid 2 of its own namespace. ``status`` shows the sandbox per member."""
    assert teamctl.run("launch", str(_team(teamctl, tmp_path))).returncode == 0
    status = teamctl.json("status")["teams"][0]["members"]
    assert [m["sandbox"] for m in status] == ["process, network on", None]
    assert "a: sandbox process, network on" in teamctl.run("status").stdout
    reply = _reply(teamctl, "a", "TRY pid")
    assert "try pid : ok pid=2 ppid=1" in reply
    reply = _reply(teamctl, "a", "MCP list_team {}")
    assert "mcp: team web:" in reply and "- a (you)" in reply and "- b:" in reply


def test_a_members_own_socket_serves_only_member_calls_with_its_own_token(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``a``'s socket (in its private dir, 0600 in 0700) answers no operator method
    (``status``: method not found) and refuses ``b``'s token (``mcp_token_not_yours``)."""
    from tests.support.driver import socket_exchange

    assert teamctl.run("launch", str(_team(teamctl, tmp_path))).returncode == 0
    # a's socket: in its private dir, or a short private one where that path is too long
    path = next(Path(e["socket"]) for e in teamctl.log_events()
                if e["event"] == "member_socket_serving" and e["member"] == "a")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700

    def call(method: str, params: dict[str, object]) -> dict[str, object]:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return dict(json.loads(socket_exchange(path, line.encode() + b"\n")))

    assert call("status", {"team": None})["error"]["code"] == -32601  # type: ignore[index]
    config = json.loads((teamctl.home / "members" / "web" / "b" / "mcp.json").read_text())
    token = config["mcpServers"]["teamctl"]["env"]["TEAMCTL_MEMBER_TOKEN"]
    answer = call("member.list_team", {"token": token})
    assert answer["error"]["data"]["code"] == "mcp_token_not_yours"  # type: ignore[index]


def test_a_missing_bubblewrap_refuses_the_start_with_sandbox_unavailable(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """bubblewrap not found (``TEAMCTL_BWRAP`` pointed at a path that does not exist): the
    sandboxed member is refused (``sandbox_unavailable``, the install command in the message),
    never started unsandboxed; the other member runs."""
    teamctl.env["TEAMCTL_BWRAP"] = str(tmp_path / "no" / "bwrap")
    done = teamctl.run("launch", str(_team(teamctl, tmp_path)))
    assert "apt-get install bubblewrap" in done.stdout + done.stderr
    failed = [e for e in teamctl.log_events() if e.get("event") == "member_start_failed"]
    assert failed and all(e["code"] == "sandbox_unavailable" for e in failed)
    assert {e["member"] for e in failed} == {"a"}
    assert "received: fine" in _reply(teamctl, "b", "fine")


def test_doctor_reports_bubblewrap_and_what_each_sandboxed_member_will_see(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``teamctl doctor TEAMFILE``: bubblewrap's version and that it made its namespaces; per
    sandboxed member its read-write (workdir, runtime home), read-only (the system, the
    toolchain, sandbox_ro) and hidden (the operator's ~/.ssh, teamctl's state dir, ``b``'s
    workdir) paths; nothing for the member without a sandbox. A bwrap that is not there:
    the reason."""
    os.makedirs(os.path.join(teamctl.env["HOME"], ".ssh"), exist_ok=True)
    team = _team(teamctl, tmp_path)
    report = teamctl.json("doctor", str(team))
    assert report["sandbox"]["ok"] is True and report["sandbox"]["version"].startswith("bubble")
    a, b = report["members"]
    assert "sandbox" not in b
    assert a["sandbox"]["rw"][:2] == [str(tmp_path / "a"),
                                      str(teamctl.home / "members" / "web" / "a" / "runtime")]
    assert f"{teamctl.home / 'members' / 'web' / 'a'} (the daemon's files for it)" \
        in a["sandbox"]["ro"]
    assert "/usr" in a["sandbox"]["ro"] and str(REPO / "fixtures") in a["sandbox"]["ro"]
    for hidden in (os.path.join(teamctl.env["HOME"], ".ssh"), str(teamctl.home),
                   str(tmp_path / "b")):
        assert hidden in a["sandbox"]["hidden"]
    assert a["sandbox"]["network"] == "on"
    teamctl.env["TEAMCTL_BWRAP"] = str(tmp_path / "no" / "bwrap")
    text = teamctl.run("doctor", str(team)).stdout
    assert "sandbox: bubblewrap - at -, unavailable: bubblewrap" in text
