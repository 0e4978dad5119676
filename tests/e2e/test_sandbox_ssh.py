"""A sandboxed member on an SSH host (``sandbox = "process"`` with ``host``, docs/security.md
"Sandbox", docs/scaling.md "Sandboxed members on a host"): a real daemon, a real sshd on
127.0.0.1 with a throwaway user (tests/support/sshd.py), the real bubblewrap run *there* as that
user, a fake Claude member whose ``TRY`` steps (fixtures/escape.py) try to get out. The policy is
the host's: the member's workdir there read-write, its runtime home there, the remote user's
credentials and teamctl's state there hidden; its MCP tools reach the daemon through its own
socket forwarded to the host and bound in; with ``network = "off"`` its way out is its egress
proxy here, forwarded the same way.

An e2e test (``make e2e``, .ci/system-deps installs openssh-server): a real sshd and a
throwaway system user are the machine's, not the suite's — ``make test`` installs nothing that
starts a service, and needs nothing beyond Python, git and bubblewrap."""

from __future__ import annotations

import json
import os
import pwd
from typing import TYPE_CHECKING

import pytest

from tests.support.driver import REPO
from tests.support.http_servers import api_servers
from tests.support.members import fake_member
from tests.support.sshd import sshd

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.sshd import Sshd


pytestmark = pytest.mark.e2e


@pytest.fixture
def box() -> Iterator[Sshd]:
    with sshd() as server:
        yield server


def _owned(box: Sshd, path: Path, text: str | None = None) -> Path:
    """``path`` in the remote user's home, theirs (a directory, or a 0600 file of ``text``)."""
    user = pwd.getpwnam(box.user)
    if text is None:
        path.mkdir(mode=0o700)
    else:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        os.chown(path.parent, user.pw_uid, user.pw_gid)
        path.write_text(text)
        path.chmod(0o600)
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def _launch(teamctl: Teamctl, box: Sshd, **extra: object) -> Path:
    """Member ``far`` sandboxed on the host (workdir ``~/proj`` there), ``near`` here."""
    home = box.root / "home"
    workdir = _owned(box, home / "proj")
    _owned(box, home / ".ssh" / "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- FAKE\n")
    team = teamctl.write_team("web", [
        fake_member("far", host="box", login="isolated", workdir="~/proj", sandbox="process",
                    permissions="full", sandbox_ro=[str(REPO / "fixtures")],
                    env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000",
                         **extra.pop("env", {})},  # type: ignore[dict-item]
                    **extra),
        fake_member("near")], hosts={"box": box.host()})
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stderr
    return workdir


def _far(teamctl: Teamctl, text: str) -> list[str]:
    """``far``'s reply to ``text``, line by line."""
    done = teamctl.run("send", "far", text, "--wait")
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _tries(teamctl: Teamctl, *steps: str) -> list[str]:
    reply = _far(teamctl, "\n".join(f"TRY {step}" for step in steps))
    return [line for line in reply if line.startswith("try ")]


def test_a_sandboxed_member_on_a_host_works_inside_its_workdir_there_and_nowhere_else(
        teamctl: Teamctl, box: Sshd) -> None:
    """On the host, inside bubblewrap run there: a turn is answered; a write in its workdir
    there lands on the host's disk; a write elsewhere in the remote home lands in a private
    tmpfs (never the disk), /etc is EROFS; the remote user's ~/.ssh key and teamctl's state
    there (other members' dirs) are not there (ENOENT); the runtime is pid 2 of its own pid
    namespace; ``status`` shows the sandbox."""
    workdir = _launch(teamctl, box)
    home = box.root / "home"
    status = teamctl.json("status")["teams"][0]["members"]
    assert [(m["name"], m["host"], m["sandbox"]) for m in status] == [
        ("far", "box", "process, network on"), ("near", None, None)]
    lines = _tries(teamctl, f"write {workdir}/inside.txt", f"write {home}/outside.txt",
                   "write /etc/teamctl-escape", f"read {home}/.ssh/id_*",
                   f"list {home}/.teamctl-remote", "pid")
    assert lines == [f"try write {workdir}/inside.txt: ok wrote",
                     f"try write {home}/outside.txt: ok wrote",
                     "try write /etc/teamctl-escape: refused EROFS",
                     f"try read {home}/.ssh/id_*: refused ENOENT",
                     # its own runtime home is bound below ~/.teamctl-remote: one entry (the
                     # home id) is seen, never the rest of what teamctl keeps there
                     f"try list {home}/.teamctl-remote: ok 1 entries",
                     "try pid : ok pid=2 ppid=1"], lines
    assert (workdir / "inside.txt").read_text() == "x"  # on the host's disk
    assert not (home / "outside.txt").exists()
    assert (home / ".ssh" / "id_ed25519").exists()
    assert _far(teamctl, "hello from here") == [
        "fake-claude (claude-sonnet-4-5) received: hello from here"]


def test_a_sandboxed_member_on_a_host_messages_a_teammate_through_its_own_forwarded_socket(
        teamctl: Teamctl, box: Sshd, follow_logs: LogFollower) -> None:
    """Its ``teamctl mcp`` (run inside the sandbox on the host) reaches the daemon through the
    member's own socket, forwarded to the host over the ControlMaster and bound in at
    ``/run/teamctl/mcp`` (what its MCP config names): send_message is queued for ``near``,
    which answers it."""
    _launch(teamctl, box)
    args = json.dumps({"to": "near", "text": "from the sandbox over there"})
    reply = _far(teamctl, f"MCP send_message {args}")
    [receipt] = [line for line in reply if line.startswith("mcp")]
    assert "queued as " in receipt and "for near" in receipt, reply
    message_id = receipt.split("queued as ")[1].split()[0]
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id)
    [to_near] = teamctl.json("history", "near")["messages"]
    assert (to_near["sender"], to_near["text"]) == ("far", "from the sandbox over there")
    config = json.loads((teamctl.home / "members" / "web" / "far" / "mcp.json").read_text())
    assert config["mcpServers"]["teamctl"]["env"]["TEAMCTL_MCP_HOME"] == "/run/teamctl/mcp"


def test_a_sandboxed_member_on_a_host_with_network_off_reaches_only_its_provider(
        teamctl: Teamctl, box: Sshd) -> None:
    """``network = "off"`` there: an empty network namespace on the host; its provider (its
    ANTHROPIC_BASE_URL) answers through its egress proxy here, forwarded to the host and bound
    in, the relay inside as locally; a direct connection out is ENETUNREACH, another local
    port ECONNREFUSED, and through the proxy another host is denied (403, logged)."""
    with api_servers() as (api, other):
        _launch(teamctl, box, network="off",
                env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{api}"})
        lines = _tries(teamctl, f"http http://127.0.0.1:{api}/", "tcp 1.1.1.1:443",
                       f"tcp 127.0.0.1:{other}", f"proxy 127.0.0.1:{other}")
        assert lines == [f"try http http://127.0.0.1:{api}/: ok 200 api on {api}",
                         "try tcp 1.1.1.1:443: refused ENETUNREACH",
                         f"try tcp 127.0.0.1:{other}: refused ECONNREFUSED",
                         f"try proxy 127.0.0.1:{other}: ok HTTP/1.1 403 Forbidden"], lines
    denied = [(e["member"], e["host"], e["port"]) for e in teamctl.log_events()
              if e.get("event") == "egress_denied"]
    assert denied == [("far", "127.0.0.1", other)]
    assert teamctl.json("status")["teams"][0]["members"][0]["sandbox"] == \
        "process, network off"


def test_no_bubblewrap_on_the_host_refuses_the_start_with_sandbox_unavailable(
        teamctl: Teamctl, box: Sshd) -> None:
    """bubblewrap missing there (``TEAMCTL_BWRAP`` names a path the host does not have): the
    member is refused (``sandbox_unavailable``, the host named, the install command in the
    message), never started unsandboxed; nothing of it runs on the host; ``near`` runs."""
    teamctl.env["TEAMCTL_BWRAP"] = "/opt/nowhere/bwrap"
    home = box.root / "home"
    _owned(box, home / "proj")
    team = teamctl.write_team("web", [
        fake_member("far", host="box", login="isolated", workdir="~/proj", sandbox="process",
                    restart="never", env={"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000"}),
        fake_member("near")], hosts={"box": box.host()})
    done = teamctl.run("launch", str(team))
    assert "apt-get install bubblewrap" in done.stdout + done.stderr
    failed = [e for e in teamctl.log_events() if e.get("event") == "member_start_failed"]
    assert failed and {(e["member"], e["code"]) for e in failed} == {
        ("far", "sandbox_unavailable")}, failed
    assert all("on host box" in e["error"] for e in failed), failed
    assert not [p for p in box.user_processes() if "fixtures/bin/claude" in p]
    assert "received: fine" in teamctl.run("send", "near", "fine", "--wait").stdout


def test_with_the_remote_home_as_workdir_teamctls_state_and_teammates_there_stay_hidden(
        teamctl: Teamctl, box: Sshd) -> None:
    """The default workdir on a host is the remote home (``~``), bound read-write whole: the
    credential paths in it are still hidden, and so are teamctl's state there (every other
    member's mirrored private dir, the image cache) and the workdir of a teammate on the same
    host — each an empty read-only tmpfs — while the member's own private dir below it is
    seen again, read-only (the daemon's), and the runtime home in it read-write."""
    home = box.root / "home"
    peer = _owned(box, home / "peer")
    _owned(box, peer / "secret.txt", "peer's work\n")
    _owned(box, home / ".ssh" / "id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- FAKE\n")
    _owned(box, home / ".cache")
    _owned(box, home / ".cache" / "teamctl" / "image", "an image\n")  # as the image cache
    key = {"ANTHROPIC_API_KEY": "sk-ant-remote-test-0000"}
    team = teamctl.write_team("web", [
        fake_member("far", host="box", login="isolated", sandbox="process", env=key,
                    sandbox_ro=[str(REPO / "fixtures")]),
        fake_member("peer", host="box", login="isolated", workdir="~/peer", env=key)],
        hosts={"box": box.host()})
    assert teamctl.run("launch", str(team)).returncode == 0
    [own] = list((home / ".teamctl-remote").glob("*/web/far"))
    lines = _tries(teamctl, f"write {home}/inside.txt", f"read {home}/.ssh/id_*",
                   f"read {peer}/secret.txt", f"write {peer}/secret.txt",
                   f"list {own.parent}", f"write {own}/mine.txt",
                   f"write {own}/runtime/mine.txt", f"list {home}/.cache/teamctl")
    assert lines == [f"try write {home}/inside.txt: ok wrote",
                     f"try read {home}/.ssh/id_*: refused ENOENT",
                     f"try read {peer}/secret.txt: refused ENOENT",
                     f"try write {peer}/secret.txt: refused EROFS",
                     f"try list {own.parent}: ok 1 entries",  # its own dir, not peer's
                     f"try write {own}/mine.txt: refused EROFS",  # the daemon's, read-only
                     f"try write {own}/runtime/mine.txt: ok wrote",  # its runtime's home
                     f"try list {home}/.cache/teamctl: ok 0 entries"], lines
    assert (home / "inside.txt").read_text() == "x"
    assert (own / "runtime" / "mine.txt").read_text() == "x"
    assert not (own / "mine.txt").exists()
    assert (peer / "secret.txt").read_text() == "peer's work\n"


def test_a_sandboxed_member_on_a_host_is_held_whole_by_its_cgroup_there(
        teamctl: Teamctl) -> None:
    """A ceiling on a sandboxed member there (the host's user given a memory and a pids
    cgroup): bubblewrap starts inside the member's cgroups on the host, so all it runs is
    held — bubblewrap and the runtime inside are in them — each limit written, and the limit
    file is out of its reach (the sandbox shows no /sys); at the stop they are gone."""
    with sshd(delegate=("memory", "pids")) as box:
        _launch(teamctl, box, memory_max="256M", pids_max=64)
        [row, _] = teamctl.json("status")["teams"][0]["members"]
        assert row["ceiling"] == "memory_max 256 MiB, pids_max 64"
        [memory] = box.cgroups["memory"].glob("teamctl-*/web.far")
        pids = box.cgroups["pids"] / memory.parent.name / "web.far"
        assert int((memory / "memory.limit_in_bytes").read_text()) == 256 << 20
        assert (pids / "pids.max").read_text().strip() == "64"
        held = [{int(pid) for pid in (group / "cgroup.procs").read_text().split()}
                for group in (memory, pids)]
        bwrap = {int(p.split()[0]) for p in box.user_processes() if p.split()[1:2]
                 and os.path.basename(p.split()[1]) == "bwrap"}
        runtime = {int(p.split()[0]) for p in box.user_processes() if "fixtures/bin/claude" in p}
        for inside in held:  # bubblewrap, and the runtime it runs
            assert bwrap and runtime and bwrap | runtime <= inside, (bwrap, runtime, inside)
        limit = memory / "memory.limit_in_bytes"
        reply = _far(teamctl, f"TRY write {limit}")
        assert f"try write {limit}: refused ENOENT" in reply, reply
        assert int(limit.read_text()) == 256 << 20
        assert teamctl.run("stop", "web").returncode == 0
        assert not memory.exists() and not pids.exists()
