"""A member's attachments are read with its own rights (issue 44, attack 3; docs/security.md):
a real daemon, a hostile member ``a`` — sandboxed with the real bubblewrap, or not — whose
fake Claude makes what a prompt-injected model would (``TRY symlink``, ``TRY run mkfifo``, a
file in its private ``/tmp``) and calls ``send_message`` through its own ``teamctl mcp``
(``MCP send_message {...}``) with the operator's secrets as attachments, to teammate ``b``.

Each is refused with ``attachment_outside_member_view`` (one event naming ``a`` and the path),
nothing read (no artifact has a secret's sha256), nothing journaled (``b`` has no message from
``a``), and ``b`` never received the bytes; the daemon and ``b`` still answer. The good cases
still go through with their bytes intact (the sha256 ``b``'s fake reports)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.driver import REPO
from tests.support.members import fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import Teamctl

_REFUSED = "mcp error: attachment_outside_member_view: "
_GUARDS = {"pair_cooldown": 0.0, "max_messages_per_minute": 600}  # the good cases in a row


def _reply(teamctl: Teamctl, member: str, text: str) -> str:
    done = teamctl.run("send", member, text, "--wait")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _attach(teamctl: Teamctl, path: str) -> str:
    """``a`` sends ``path`` to ``b`` through its MCP tool; the tool's answer line."""
    args = json.dumps({"to": "b", "text": "[Doc #1] have a look", "attachments": [path]})
    reply = _reply(teamctl, "a", f"MCP send_message {args}")
    return next(line for line in reply.splitlines() if line.startswith("mcp"))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def host_tmp(tmp_path: Path) -> Iterator[Path]:
    """A file in this machine's ``/tmp`` (not the member's private one), named per test."""
    path = Path("/tmp") / f"teamctl-view-{tmp_path.name}.txt"
    path.write_text("the operator's /tmp file\n")
    yield path
    path.unlink(missing_ok=True)


def _secrets(teamctl: Teamctl, tmp_path: Path) -> dict[str, Path]:
    """The operator's secrets the attack sent (a fake key planted in the test HOME)."""
    key = tmp_path / "operator" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- FAKE-KEY-CANARY\n")
    return {"key": key, "shadow": Path("/etc/shadow"),
            "token": teamctl.home / "members" / "web" / "b" / "mcp.json",
            "log": teamctl.home / "logs" / "daemon.out"}


def _hostile_paths(teamctl: Teamctl, workdir: Path, host_tmp: Path,
                   secrets: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """Each attack: the path ``a`` names, and the rule that refuses it. ``a`` makes its own
    links and FIFO from inside, and writes ``host_tmp``'s path (its private /tmp's, when
    sandboxed); the hard link is the operator's (``a`` could not make one to a file it cannot
    see)."""
    made = _reply(teamctl, "a", "\n".join([
        f"TRY symlink /etc/shadow -> {workdir}/shadow-link",
        f"TRY symlink {secrets['key']} -> {workdir}/key-link",
        f"TRY symlink {teamctl.home} -> {workdir}/home-link",
        f"TRY run mkfifo {workdir}/pipe",
        f"TRY write {host_tmp}"]))
    assert "refused" not in made, made
    os.link(secrets["key"], workdir / "hard")
    daemon = int((teamctl.home / "daemon.pid").read_text().split()[0])
    outside = {
        "the operator's ssh key": str(secrets["key"]),
        "/etc/shadow": "/etc/shadow",
        "another member's mcp.json": str(secrets["token"]),
        "daemon.out": str(secrets["log"]),
        "a symlink in the workdir to /etc/shadow": f"{workdir}/shadow-link",
        "a symlink in the workdir to the key": f"{workdir}/key-link",
        "a symlinked dir to teamctl's home": f"{workdir}/home-link/logs/daemon.out",
        "/proc/self/root/etc/shadow": "/proc/self/root/etc/shadow",
        "the daemon's environ": f"/proc/{daemon}/environ",
        "a path in the member's /tmp": str(host_tmp),
        "a .. out of the workdir": f"{workdir}/{os.path.relpath(secrets['key'], workdir)}",
    }
    cases = {name: (path, "outside") for name, path in outside.items()}
    cases["a hard link to the key"] = (f"{workdir}/hard", "hard_link")
    cases["a FIFO"] = (f"{workdir}/pipe", "not_regular")
    return cases


def _assert_all_refused(teamctl: Teamctl, cases: dict[str, tuple[str, str]],
                        secrets: dict[str, Path]) -> None:
    before = len(_refusals(teamctl))
    for name, (path, rule) in cases.items():
        line = _attach(teamctl, path)
        assert line.startswith(_REFUSED), f"{name}: {line}"
        assert f"({rule})" in line, f"{name}: {line}"
    events = _refusals(teamctl)[before:]
    assert [(e["member"], e["path"]) for e in events] == [
        ("a", path) for path, _ in cases.values()], "one event per attempt, naming it"
    digests = {_sha(p.read_bytes()) for n, p in secrets.items() if n != "log"}
    stored = {f.name for f in (teamctl.home / "artifacts").rglob("*") if f.is_file()}
    assert digests.isdisjoint(stored), "no secret was read into the artifact store"
    to_b = teamctl.json("history", "b")["messages"]
    assert [m for m in to_b if m["sender"] == "a"] == [], "nothing journaled for b"
    assert not any(d in m.get("reply", "") or "" for d in digests for m in to_b)
    assert "received: still here" in _reply(teamctl, "b", "still here")
    assert "mcp: team web:" in _reply(teamctl, "a", "MCP list_team {}")


def _refusals(teamctl: Teamctl) -> list[dict[str, object]]:
    return [e for e in teamctl.log_events() if e["event"] == "attachment_outside_member_view"]


def _received(teamctl: Teamctl, data: bytes) -> bool:
    """Whether ``b``'s fake reported a document with exactly these bytes (its sha256)."""
    messages = teamctl.json("history", "b")["messages"]
    for message in messages:
        if message["state"] not in ("answered", "failed"):
            _reply(teamctl, "b", "noop")  # b's queue is FIFO: this waits for the one before
    replies = [m.get("reply") or "" for m in teamctl.json("history", "b")["messages"]]
    return any(f"sha256={_sha(data)}" in reply for reply in replies)


def _good(teamctl: Teamctl, path: Path, data: bytes) -> None:
    line = _attach(teamctl, str(path))
    assert line.startswith("mcp: queued as "), f"{path}: {line}"
    assert _received(teamctl, data), f"{path}: b did not get its bytes"


def test_a_sandboxed_members_attachments_outside_its_sandbox_are_refused(
        teamctl: Teamctl, tmp_path: Path, host_tmp: Path) -> None:
    """The attack replayed from inside bubblewrap: every secret, every trick refused; a file
    in its workdir, a symlink inside it to another file inside, and a file of a directory
    bound in with ``sandbox_ro`` still go through."""
    secrets = _secrets(teamctl, tmp_path)
    workdir, shared = tmp_path / "a", tmp_path / "shared"
    for path in (workdir, shared, tmp_path / "b"):
        path.mkdir()
    team = teamctl.write_team("web", [
        fake_member("a", workdir=str(workdir), sandbox="process", permissions="full",
                    sandbox_ro=[str(REPO / "fixtures"), str(shared)]),
        fake_member("b", workdir=str(tmp_path / "b"))], **_GUARDS)
    assert teamctl.run("launch", str(team)).returncode == 0
    cases = _hostile_paths(teamctl, workdir, host_tmp, secrets)
    cases["the member's own /tmp file"] = ("/tmp/mine.txt", "outside")
    assert "ok wrote" in _reply(teamctl, "a", "TRY write /tmp/mine.txt")
    _assert_all_refused(teamctl, cases, secrets)

    (workdir / "notes.md").write_text("# notes of a\n")
    _good(teamctl, workdir / "notes.md", b"# notes of a\n")
    (workdir / "inner.txt").write_text("inner\n")
    assert "ok linked" in _reply(teamctl, "a",
                                 f"TRY symlink {workdir}/inner.txt -> {workdir}/inner-link")
    _good(teamctl, workdir / "inner-link", b"inner\n")
    (shared / "spec.txt").write_text("the shared spec\n")
    _good(teamctl, shared / "spec.txt", b"the shared spec\n")


def test_an_unsandboxed_members_attachments_outside_its_workdir_are_refused(
        teamctl: Teamctl, tmp_path: Path, host_tmp: Path) -> None:
    """The same attack from a member without a sandbox (it works in its git worktree): the
    same refusals; a file of its workdir (the operator's checkout), of its worktree, of an
    ``attach_paths`` directory, and a symlink inside its worktree go through."""
    from tests.support.git import project_repo

    secrets = _secrets(teamctl, tmp_path)
    repo = project_repo(tmp_path / "repo")
    granted = tmp_path / "granted"
    granted.mkdir()
    (tmp_path / "b").mkdir()
    team = teamctl.write_team("web", [
        fake_member("a", workdir=str(repo), worktree=True, permissions="full",
                    attach_paths=[str(granted)]),
        fake_member("b", workdir=str(tmp_path / "b"))], **_GUARDS)
    assert teamctl.run("launch", str(team)).returncode == 0
    worktree = teamctl.home / "worktrees" / "web" / "a"
    cases = _hostile_paths(teamctl, worktree, host_tmp, secrets)
    _assert_all_refused(teamctl, cases, secrets)

    (repo / "plan.md").write_text("the operator's plan\n")
    _good(teamctl, repo / "plan.md", b"the operator's plan\n")
    (worktree / "work.md").write_text("a's work\n")
    _good(teamctl, worktree / "work.md", b"a's work\n")
    (granted / "shot.txt").write_text("granted\n")
    _good(teamctl, granted / "shot.txt", b"granted\n")
    assert "ok linked" in _reply(teamctl, "a",
                                 f"TRY symlink {worktree}/work.md -> {worktree}/work-link")
    _good(teamctl, worktree / "work-link", b"a's work\n")
