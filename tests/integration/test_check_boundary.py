"""The board's check runs inside its owner's boundary (issue 44, attack 2 and item 3;
docs/board.md, "The check before done"; docs/security.md): a real daemon, the real
bubblewrap, fake Claude members that act as a prompt-injected teammate would — each writes
its own ``Makefile`` (``TRY run``, fixtures/escape.py), then creates, claims and completes its
own task through its MCP tools, and the team's ``[board] check = "make test"`` (the docs' own
example) runs that recipe. A sandboxed owner's recipe runs in its sandbox: its writes in its
workdir land, nothing outside does, the operator's key is not there, its network rule holds; an
unsandboxed owner's runs as that member runs (documented: it can do what the member can)."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.driver import REPO
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

# not in a key's shape, so the redactor would not hide it: seen in the output if it was read
KEY = "fake-operator-ssh-key-7f3a9c"


def _launch(teamctl: Teamctl, members: list[dict[str, object]], **board: object) -> None:
    """The team with a ``[board]`` table (``check = "make test"`` unless given)."""
    path = teamctl.write_team("web", members)
    board = {"check": "make test", **board}
    path.write_text(path.read_text() + "\n[board]\n" + "".join(
        f"{key} = {json.dumps(value)}\n" for key, value in board.items()))
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def _sandboxed(name: str, workdir: Path, **extra: object) -> dict[str, object]:
    workdir.mkdir(exist_ok=True)
    return fake_member(name, workdir=str(workdir), sandbox="process", permissions="full",
                       sandbox_ro=[str(REPO / "fixtures")], **extra)


def _say(teamctl: Teamctl, member: str, text: str) -> str:
    done = teamctl.run("send", member, text, "--wait")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _write_makefile(teamctl: Teamctl, member: str, *recipe: str) -> None:
    """The member writes its own Makefile from inside its runtime (a shell command, as an
    agent's shell tool runs it); the recipe's lines are shell lines, ``-`` to go on."""
    body = base64.b64encode(("test:\n" + "".join(f"\t{line}\n" for line in recipe)).encode())
    reply = _say(teamctl, member, f"TRY run echo {body.decode()} | base64 -d > Makefile")
    assert "try run" in reply and ": ok exit 0" in reply, reply


def _own_task(teamctl: Teamctl, member: str) -> int:
    """The member creates, claims and completes a task of its own through its MCP tools (no
    operator action): the gate runs the team's check; the task's id."""
    created = _say(teamctl, member, 'MCP task_create {"title": "ship the feature"}')
    found = re.search(r'"id": "T(\d+)"', created)
    assert found, created
    task_id = int(found.group(1))
    assert "mcp: " in _say(teamctl, member, f'MCP task_claim {{"id": {task_id}}}')
    _say(teamctl, member, f'MCP task_complete {{"id": {task_id}, "summary": "done"}}')
    return task_id


def _gate_note(teamctl: Teamctl, task_id: int) -> tuple[str, str]:
    """The task's status and its last gate event's note."""
    shown = teamctl.json("task", "show", str(task_id))
    notes = [e["note"] or "" for e in shown["events"] if e["kind"] == "gate"]
    assert notes, shown["events"]
    return shown["task"]["state"], notes[-1]


def _escape_recipe(teamctl: Teamctl, canary: str, outside: Path) -> list[str]:
    """A recipe that leaves its mark in the workdir, then tries the operator's home, a
    directory outside, /tmp, teamctl's home and the operator's key, and fails last (so its
    whole output is the gate's event)."""
    home = teamctl.env["HOME"]
    return ["echo check-ran > check-ran.txt", f"-echo x > {home}/{canary}",
            f"-echo x > {outside}/{canary}", f"-echo x > /tmp/{canary}",
            f"-echo x > {teamctl.home}/{canary}",
            f"-cat {home}/.ssh/id_ed25519", "@echo RECIPE-END; exit 4"]


def _plant_key(teamctl: Teamctl) -> None:
    ssh = os.path.join(teamctl.env["HOME"], ".ssh")
    os.makedirs(ssh, exist_ok=True)
    with open(os.path.join(ssh, "id_ed25519"), "w") as key:
        key.write(KEY + "\n")


def test_a_sandboxed_members_own_makefile_runs_as_its_check_inside_its_sandbox(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """Attack 2 replayed: the sandboxed member writes a Makefile whose recipe writes canaries
    to the operator's home, a directory outside its workdir, /tmp and teamctl's home, and reads
    the operator's ~/.ssh key; it then creates, claims and completes its own task. The check ran
    (its output is the task's event), inside: its write in the workdir landed, no canary
    reached the disk, the key is not in the output. The unsandboxed member's recipe runs
    as that member does — the operator's rights: its canary lands — as docs/board.md says."""
    _plant_key(teamctl)
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "b").mkdir()
    _launch(teamctl, [_sandboxed("a", tmp_path / "a"),
                      fake_member("b", workdir=str(tmp_path / "b"))])
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    _write_makefile(teamctl, "a", *_escape_recipe(teamctl, canary, outside))
    status, note = _gate_note(teamctl, _own_task(teamctl, "a"))
    assert (tmp_path / "a" / "check-ran.txt").read_text() == "check-ran\n"
    for place in (teamctl.env["HOME"], str(outside), "/tmp", str(teamctl.home)):
        assert not os.path.exists(os.path.join(place, canary)), f"a canary in {place}"
    assert KEY not in note, "the check read the operator's key"
    assert status == "in_progress"
    assert "the check 'make test' failed" in note and "RECIPE-END" in note, note
    assert "id_ed25519" in note  # it tried: the recipe's line and cat's error are shown

    _write_makefile(teamctl, "b", f"echo x > {outside}/{canary}-b", "@exit 4")
    _, note = _gate_note(teamctl, _own_task(teamctl, "b"))
    assert "failed (exit 2)" in note, note
    assert (outside / f"{canary}-b").exists(), "unsandboxed: as the member runs"


def test_a_check_with_the_network_off_reaches_no_tcp_port_outside(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """With ``network = "off"`` the check runs in the member's empty network namespace: a
    port listening on this machine's loopback is not reached (ECONNREFUSED inside, no
    connection accepted outside)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        _launch(teamctl, [_sandboxed("a", tmp_path / "a", network="off")])
        _write_makefile(teamctl, "a", f"-bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' "
                        "&& echo TCP-REACH''ED", "@exit 4")
        _, note = _gate_note(teamctl, _own_task(teamctl, "a"))
        assert "Connection refused" in note and "TCP-REACHED" not in note, note
        try:
            listener.accept()[0].close()
            raise AssertionError("the check connected outside its network namespace")
        except BlockingIOError:
            pass


def test_a_check_the_sandbox_cannot_run_fails_with_its_reason_in_the_events(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """A task whose check names a program that is not inside the member's sandbox:
    bubblewrap's own refusal is ``check_refused`` in the task's events, with the fix, and the
    task stays in progress."""
    _launch(teamctl, [_sandboxed("a", tmp_path / "a")])
    added = teamctl.run("task", "add", "x", "--check", "teamctl-no-such-check --all",
                        "--assign", "a")
    assert added.returncode == 0, added.stderr
    task_id = int(added.stdout.strip().lstrip("T"))
    _say(teamctl, "a", f'MCP task_complete {{"id": {task_id}, "summary": "done"}}')
    status, note = _gate_note(teamctl, task_id)
    assert status == "in_progress"
    assert note.startswith("check_refused: ") and "is not found inside its sandbox" in note
    assert "teamctl-no-such-check" in note and "sandbox_ro" in note, note


def _running_with(marker: str) -> list[int]:
    """The pids whose command line holds ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_a_hanging_check_inside_is_killed_whole_at_its_timeout(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """The same bound as outside: a check past ``check_timeout`` is killed with everything it
    started — bubblewrap's process group, and with it the sandbox's pid namespace (a
    background sleep included) — and reported; the task stays in progress."""
    _launch(teamctl, [_sandboxed("a", tmp_path / "a")], check_timeout=1)
    marker = f"86400.{uuid.uuid4().int % 10**6}"
    _write_makefile(teamctl, "a", f"@echo started; sleep {marker} & sleep {marker}")
    status, note = _gate_note(teamctl, _own_task(teamctl, "a"))
    assert status == "in_progress"
    assert "did not finish within 1 s (killed)" in note and "started" in note, note
    for pid in _running_with(marker):  # killed with the namespace: each gone at once
        assert wait_pid_exit(pid, 10.0), f"pid {pid} outlived its check"
