"""The daemon is never a confused deputy (docs/security.md): a prompt-injected teammate in a
real bubblewrap sandbox plants names where the daemon once wrote, bound or watched as the
operator — its socket dir, its pid record, the MCP config's and settings' temp files, Codex's
images and config — then its runtime is killed and restarted, and nothing outside changes.

Each runtime family (the fake Claude, Codex, OpenCode and ACP agent: ``TRY`` steps of
fixtures/escape.py, as a model talked into it would run them) plays every attack of issue 44
that went through the daemon's own writes (1: the socket dir exchanged for a link to the
teamctl home; 4: the pid record's temp file linked out; 9: the images' and config files' temp
names and directories linked out) — now refused by the kernel (the member's private dir is
read-only to it; what it may write, ``runtime/``, the daemon never writes) — and the same
plants left in an older layout's private dir (what a member could plant before the split) are
cleared at the next start with an event each. After it all a walk of the member's writable
binds finds nothing the daemon made there. Another member and the daemon answer throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import images
from tests.support.driver import REPO, socket_exchange
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

FIXTURES = REPO / "fixtures" / "bin"
ORIGINAL = "ssh-ed25519 AAAA-the-operators-own-key operator@laptop\n"


def _runtime(kind: str) -> dict[str, Any]:
    """A member of ``kind`` run by its fake CLI."""
    return {"claude": {"runtime": "claude", "model": "claude-sonnet-4-5",
                       "command": str(FIXTURES / "claude")},
            "codex": {"runtime": "codex", "model": "gpt-5.4-mini",
                      "command": str(FIXTURES / "codex")},
            "opencode": {"runtime": "opencode", "model": "openrouter/moonshotai/kimi-k2.6",
                         "command": str(FIXTURES / "opencode")},
            "acp": {"runtime": "acp", "command": [str(FIXTURES / "fake-acp"), "--acp"]},
            }[kind]


def _team(teamctl: Teamctl, tmp_path: Path, kind: str) -> Path:
    for name in ("a", "b"):
        (tmp_path / name).mkdir(exist_ok=True)
    boxed = {"name": "a", **_runtime(kind), "workdir": str(tmp_path / "a"),
             "sandbox": "process", "permissions": "full", "start_timeout": 20.0,
             "sandbox_ro": [str(REPO / "fixtures")], "prompt": "you are a"}
    if kind == "claude":
        boxed["config"] = {"theme": "dark"}  # a settings file as well
    return teamctl.write_team("web", [boxed, fake_member("b", workdir=str(tmp_path / "b"))])


def _reply(teamctl: Teamctl, member: str, text: str, *attach: Path) -> str:
    args = [a for path in attach for a in ("--attach", str(path))]
    done = teamctl.run("send", *args, member, text, "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _row(teamctl: Teamctl, member: str) -> dict[str, Any]:
    doc = teamctl.json("status")
    return next(m for t in doc["teams"] for m in t["members"] if m["name"] == member)


def _outside(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of the operator's outside every sandbox, and a file in it (a stand-in
    ``authorized_keys``): nothing may appear in the one or change in the other."""
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    canary = outside / "authorized_keys"
    canary.write_text(ORIGINAL)
    canary.chmod(0o644)
    return outside, canary


def _kill_and_wait(teamctl: Teamctl, follow_logs: LogFollower, member: str) -> None:
    """SIGKILL the member's process (as a runtime that killed itself) and wait for its next
    start to be ready (a ``member_ready`` of another pid)."""
    pid = int(_row(teamctl, member)["pid"])
    os.kill(pid, signal.SIGKILL)
    assert wait_pid_exit(pid, 20)
    follow_logs.wait_for(lambda e: e.get("event") == "member_ready" and
                         e.get("member") == member and e.get("pid") != pid, timeout=60)


def _plants(private: Path, outside: Path, canary: Path) -> tuple[list[str], list[str]]:
    """Every name the daemon once wrote, bound or watched as the operator, planted from
    inside: in its private dir (read-only to it now: refused) and in its runtime home (its
    own: they land, and the daemon never looks there)."""
    home = private / "runtime"
    return [
        # 1: the socket dir swapped for a link into the workdir, re-pointed at teamctl's home
        f"TRY exchange {private / 'mcp'} {private / 'runtime.pid'}",
        f"TRY symlink {private.parents[2]} -> {private / 'mcp'}",
        # 4: the pid record's temp file
        f"TRY symlink {canary} -> {private / '.runtime.pid.tmp'}",
        f"TRY symlink {canary} -> {private / 'runtime.pid'}",
        # 9: the images' dir and temp names, the config files' temp names
        f"TRY symlink {outside} -> {private / 'attachments'}",
        f"TRY symlink {canary} -> {private / '.mcp.json.tmp'}",
        f"TRY symlink {canary} -> {private / '.settings.json.tmp'}",
        f"TRY symlink {canary} -> {private / '.system-prompt.md.tmp'}",
        f"TRY symlink {canary} -> {private / '.agent-defaults.json.tmp'}",
        f"TRY write {private / 'mcp.json'}",
    ], [
        # the same names in the runtime home, where the daemon never writes now
        f"TRY mkdir {home / 'codex-home'}",
        f"TRY symlink {canary} -> {home / 'codex-home' / '.config.toml.tmp'}",
        f"TRY symlink {outside} -> {home / 'attachments'}",
        f"TRY symlink {canary} -> {home / '.mcp.json.tmp'}",
        f"TRY symlink {canary} -> {home / 'runtime.pid'}",
    ]


@pytest.mark.parametrize("kind", ["claude", "codex", "opencode", "acp"])
def test_names_a_sandboxed_member_plants_never_redirect_the_daemon(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path, kind: str) -> None:
    """Attacks 1, 4 and 9 from inside, for each runtime family: every plant in the private
    dir is refused (EROFS: read-only to the member), those in its runtime home land there and
    are never followed — after its runtime is killed and restarted and an image sent
    (Codex's copy for its runtime), the canary is unchanged and nothing new is outside;
    ``status`` over the member's own socket inside is still only the member's
    (``/run/teamctl/mcp/teamctl.sock`` answers no operator method); the daemon and ``b``
    answer."""
    outside, canary = _outside(tmp_path)
    assert teamctl.run("launch", str(_team(teamctl, tmp_path, kind))).returncode == 0
    private = teamctl.home / "members" / "web" / "a"
    refused, landed = _plants(private, outside, canary)
    reply = _reply(teamctl, "a", "\n".join([*refused, *landed]))
    tries = [line for line in reply.splitlines() if line.startswith("try ")]
    assert len(tries) == len(refused) + len(landed), reply
    for line in tries[:len(refused)]:
        assert line.endswith("refused EROFS"), line
    for line in tries[len(refused):]:
        assert ": ok " in line, line
    _kill_and_wait(teamctl, follow_logs, "a")
    shot = images.save(images.screenshot(320, 200), teamctl.workdir / "shot.png", "PNG")
    sees = kind != "acp"  # the fake agent's model is not in the vision catalog
    answered = _reply(teamctl, "a", "TRY pid", *([shot] if sees else []))
    assert "try pid" in answered
    if sees:
        assert "sha256=" in answered, answered  # the image reached the runtime
    assert canary.read_text() == ORIGINAL and stat.S_IMODE(canary.stat().st_mode) == 0o644
    assert sorted(p.name for p in outside.iterdir()) == ["authorized_keys"]
    assert not any(os.path.islink(p) for p in private.iterdir())
    # the socket bound inside is still the member's own: no operator method there
    socket = next(Path(e["socket"]) for e in teamctl.log_events()
                  if e["event"] == "member_socket_serving" and e["member"] == "a")
    answer = json.loads(socket_exchange(socket, b'{"jsonrpc":"2.0","id":1,"method":"status",'
                                                b'"params":{}}\n'))
    assert "error" in answer and "result" not in answer
    assert "received: still here" in _reply(teamctl, "b", "still here")
    _assert_nothing_of_the_daemons_in(private / "runtime", tmp_path / "a", private)


def test_an_older_layouts_plants_are_cleared_at_the_start_never_followed(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """What a member could plant in its private dir before it became read-only to it (the
    socket dir a link to teamctl's home, the pid record's temp file and the images' dir
    linked out, a directory where the socket goes): at the next start each is removed and
    named in an event, nothing is written through it, the member's session dirs move into
    ``runtime/``, and the member starts and answers; no socket fight (the control socket is
    bound once)."""
    outside, canary = _outside(tmp_path)
    team = _team(teamctl, tmp_path, "claude")
    assert teamctl.run("launch", str(team)).returncode == 0
    assert teamctl.run("stop").returncode == 0  # the daemon too: a new one finds the dir
    private = teamctl.home / "members" / "web" / "a"
    for name in ("mcp", "runtime", "runtime.pid", "mcp.json"):  # as an older teamctl left it
        path = private / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    (private / "config" / "projects").mkdir(parents=True)
    (private / "config" / "projects" / "kept.jsonl").write_text("{}\n")
    (private / "mcp").symlink_to(teamctl.home)
    (private / ".runtime.pid.tmp").symlink_to(canary)
    (private / "runtime.pid").symlink_to(canary)
    (private / "attachments").symlink_to(outside)
    (private / "mcp.json").symlink_to(canary)
    assert teamctl.run("launch", str(team)).returncode == 0
    assert "received: hello" in _reply(teamctl, "a", "hello")
    assert canary.read_text() == ORIGINAL
    assert sorted(p.name for p in outside.iterdir()) == ["authorized_keys"]
    removed = {Path(e["path"]).name for e in teamctl.log_events()
               if e["event"] == "member_dir_link_removed"}
    assert {"mcp", ".runtime.pid.tmp", "attachments", "mcp.json"} <= removed
    assert not os.path.islink(private / "runtime.pid"), "the orphan sweep read no link"
    assert (private / "runtime" / "config" / "projects" / "kept.jsonl").exists()
    binds = [e for e in teamctl.log_events() if e["event"].startswith("control_socket_re")]
    assert binds == [], binds
    assert (teamctl.home / "teamctl.sock").exists() and not os.path.islink(private / "mcp")


def test_a_directory_where_a_socket_goes_is_the_members_trouble_never_the_daemons_end(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """Attack 5: a directory named ``teamctl.sock`` where the member's socket goes made the
    daemon exit (``IsADirectoryError`` in an ``ExceptionGroup``). Swapped in at once
    (``RENAME_EXCHANGE``): in the member's socket dir — the daemon's alone — the name is
    cleared (``socket_name_cleared``) and bound again; where the control socket goes (the
    operator's to clear) it is retried with a growing delay (``control_socket_rebind_failed``,
    once) and bound once the directory is gone. The daemon, ``a`` and ``b`` carry on."""
    assert teamctl.run("launch", str(_team(teamctl, tmp_path, "claude"))).returncode == 0
    daemon = teamctl.daemon_pid()
    socket = next(Path(e["socket"]) for e in teamctl.log_events()
                  if e["event"] == "member_socket_serving" and e["member"] == "a")
    _swap_in_a_directory(socket)
    follow_logs.wait_for(lambda e: e.get("event") == "socket_name_cleared"
                         and e.get("socket") == str(socket), timeout=30)
    _wait_socket(socket)
    control = teamctl.home / "teamctl.sock"
    _swap_in_a_directory(control)
    follow_logs.wait_for(lambda e: e.get("event") == "control_socket_rebind_failed",
                         timeout=30)
    (control / "inside").unlink()
    control.rmdir()
    _wait_socket(control)
    assert teamctl.daemon_pid() == daemon
    assert [e for e in teamctl.log_events() if e["event"] == "control_socket_rebind_failed"
            ] and len([e for e in teamctl.log_events()
                       if e["event"] == "control_socket_rebind_failed"]) <= 2
    assert "received: a again" in _reply(teamctl, "a", "a again")
    assert "received: b again" in _reply(teamctl, "b", "b again")
    assert "mcp: team web:" in _reply(teamctl, "a", "MCP list_team {}")


def _swap_in_a_directory(path: Path) -> None:
    """A directory (with a file in it) takes ``path``'s name in one step."""
    import ctypes

    directory = path.with_name(path.name + ".dir")
    directory.mkdir()
    (directory / "inside").write_text("x")
    libc = ctypes.CDLL(None, use_errno=True)
    exchange = 2  # RENAME_EXCHANGE
    if libc.renameat2(-100, bytes(path), -100, bytes(directory), exchange) != 0:
        raise OSError(ctypes.get_errno(), "renameat2", str(path))


def _wait_socket(path: Path, timeout: float = 60.0) -> None:
    """Until ``path`` is a socket that accepts a connection."""
    import socket as sockets
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_socket():
            with sockets.socket(sockets.AF_UNIX) as probe:
                try:
                    probe.connect(str(path))
                    return
                except OSError:
                    pass
        time.sleep(0.05)  # polling a name: the daemon gives no event for the test to hold
    raise AssertionError(f"{path} was not bound again within {timeout}s")


def _assert_nothing_of_the_daemons_in(*roots_and_private: Path) -> None:
    """A walk of the member's writable binds (its runtime home, its workdir) finds no object
    the daemon made: no socket, no file holding the member's token or the bytes of one of
    the daemon's files for it, none of their names. (What bubblewrap made inside as a mount
    point for a read-only file — an empty file at Codex's ``config.toml`` — holds nothing.)"""
    *roots, private = roots_and_private
    daemon_files = {p.name: p.read_bytes() for p in private.iterdir()
                    if p.is_file() and not p.is_symlink() and p.stat().st_size}
    token = json.loads(daemon_files.get("mcp.json", b"{}") or b"{}").get(
        "mcpServers", {}).get("teamctl", {}).get("env", {}).get("TEAMCTL_MEMBER_TOKEN")
    for root in roots:
        for path in root.rglob("*"):
            info = os.lstat(path)
            assert not stat.S_ISSOCK(info.st_mode), f"a socket of the daemon's in {path}"
            if not stat.S_ISREG(info.st_mode):
                continue
            assert path.name not in ("runtime.pid", "codex-config.toml", "agent-defaults.json",
                                     "settings.json", "system-prompt.md"), path
            data = path.read_bytes()
            assert not token or token.encode() not in data, f"the member's token in {path}"
            assert data not in [d for d in daemon_files.values() if len(d) > 32], path


def test_a_workdir_that_holds_teamctls_state_cannot_move_it_aside(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Found while closing issue 44: a writable workdir that holds teamctl's home (a workdir
    of ``~`` with the default ``~/.local/state/teamctl``) let a member rename a parent of the
    state dir from inside and make its own in its place — the daemon, which opens its state
    by path, would have used the member's. Every directory between the workdir and the state
    is pinned in the sandbox: the rename and the exchange are refused (EBUSY), the daemon's
    state is where it was, and it answers."""
    from tests.support.driver import Teamctl as Ctl

    nest = tmp_path / "nest"
    home = nest / "state" / "teamctl"
    ctl = Ctl(home, teamctl.workdir, {**teamctl.env, "TEAMCTL_HOME": str(home)})
    try:
        (nest / "other").mkdir(parents=True)
        team = ctl.write_team("web", [
            {"name": "a", **_runtime("claude"), "workdir": str(nest), "sandbox": "process",
             "permissions": "full", "start_timeout": 20.0,
             "sandbox_ro": [str(REPO / "fixtures")]},
            fake_member("b", workdir=str(tmp_path / "b-work"))])
        (tmp_path / "b-work").mkdir()
        assert ctl.run("launch", str(team)).returncode == 0
        reply = _reply(ctl, "a", "\n".join([
            f"TRY run mv {nest / 'state'} {nest / 'moved'}",
            f"TRY exchange {nest / 'state'} {nest / 'other'}",
            f"TRY write {nest / 'mine.txt'}"]))
        assert "Device or resource busy" in reply, reply
        assert f"try exchange {nest / 'state'} {nest / 'other'}: refused EBUSY" in reply
        assert f"try write {nest / 'mine.txt'}: ok wrote" in reply, "its workdir is its own"
        assert (home / "state.db").is_file() and not (nest / "moved").exists()
        assert "received: still" in _reply(ctl, "b", "still")
    finally:
        ctl.shutdown()
