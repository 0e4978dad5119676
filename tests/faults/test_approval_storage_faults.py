"""A full disk under the approvals queue (issue 25 #11), a real one: the daemon's home on a
small tmpfs (root can mount; CI runs as root), filled while a member's turn is about to ask."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.support.members import fake_member

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl


@pytest.fixture
def journal_disk(teamctl: Teamctl) -> Iterator[Path]:
    """TEAMCTL_HOME on a 2 MiB tmpfs, its logs on their own (they stay writable, and the test
    reads them); the test fills the small one."""
    home = teamctl.home
    home.mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(home)],
                   check=True)
    (home / "logs").mkdir(mode=0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs",
                    str(home / "logs")], check=True)
    try:
        yield home
    finally:
        with contextlib.suppress(FileNotFoundError):
            (home / "filler").unlink()
        teamctl.run("stop", timeout=120)
        subprocess.run(["umount", "-l", str(home / "logs")], check=True)
        subprocess.run(["umount", "-l", str(home)], check=True)


def _fill(disk: Path) -> None:
    """Write until the tmpfs has no block left."""
    descriptor = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def test_a_full_disk_denies_the_request_instead_of_killing_the_member(
        teamctl: Teamctl, journal_disk: Path, follow_logs: LogFollower) -> None:
    """The journal refuses the request's row: it is retried, then that one request is denied
    with the reason (the model reads it) and the member stays running; once there is room the
    delivery is recorded and the next request waits in the queue as usual."""
    env = {"TEAMCTL_APPROVAL_WRITE_DEADLINE": "0.5"}
    gate = teamctl.workdir / "disk-full"  # the turns ask once the test has filled the disk
    slow = fake_member("lead", permissions="ask", env={"FAKE_CLAUDE_TURN_GATE": str(gate)})
    # the daemon starts here, with the short deadline (follow_logs only reads the log file)
    done = teamctl.run("launch", str(teamctl.write_team("web", [slow])), extra_env=env)
    assert done.returncode == 0, done.stderr
    message_id = teamctl.run("send", "lead", "WRITE full.txt x").stdout.strip()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_sent"
                         and e.get("message_id") == message_id, timeout=60)
    _fill(journal_disk)
    gate.touch()
    refused = follow_logs.wait_for(lambda e: e["event"] == "approval_unrecorded", timeout=60)
    assert refused["code"] == "store_error" and refused["member"] == "lead"
    [member] = teamctl.json("status")["teams"][0]["members"]
    assert member["launch"] == "running", "the member lives on"
    (journal_disk / "filler").unlink()
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == message_id, timeout=60)
    [message] = teamctl.json("history", "lead")["messages"]
    assert "denied: teamctl: this request was denied because the journal could not record " \
           "it (store_error" in message["reply"]
    assert not (teamctl.workdir / "full.txt").exists()
    again = teamctl.run("send", "lead", "WRITE room.txt y").stdout.strip()
    asked = follow_logs.wait_for(lambda e: e["event"] == "approval_requested", timeout=60)
    assert teamctl.run("approve", asked["approval_id"]).returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == again, timeout=60)
    assert (teamctl.workdir / "room.txt").read_text() == "y\n"
    [member] = teamctl.json("status")["teams"][0]["members"]
    assert member["launch"] == "running"
