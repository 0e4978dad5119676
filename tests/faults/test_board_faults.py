"""kill -9 of the daemon while idle claimers are being handed tasks: no task with two owners,
none lost, none held without the message that told its owner."""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from typing import TYPE_CHECKING

from tests.support.daemon import start_daemon
from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

MEMBERS = ["m0", "m1", "m2", "m3"]


def _handed(teamctl: Teamctl) -> dict[str, list[str]]:
    """The tasks each member was told it owns (its history), as every output names them."""
    return {m: [n for msg in teamctl.json("history", m)["messages"]
                for n in re.findall(r"you now own task (T\d+)", msg["text"])] for m in MEMBERS}


def test_daemon_killed_mid_claim_leaves_no_task_with_two_owners_and_none_lost(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The daemon is killed while tasks are being handed out. After it restarts: all 12
    tasks are there; each task in progress has one owner that was told (claim and message
    are one transaction), each member holds at most its max_tasks (1); the resumed members
    adopt what they held and the hand-out goes on until each holds one."""
    team = teamctl.write_team("web", [fake_member(m, claims=True) for m in MEMBERS])
    assert teamctl.run("launch", str(team)).returncode == 0
    for i in range(12):
        assert "result" in teamctl.rpc("task_add", {"team": "web", "title": f"task {i}"})
    follow_logs.wait_for(lambda e: e["event"] == "task_offered")
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)

    start_daemon(teamctl)
    for member in MEMBERS:  # handed before the kill (its task is in the journal), or after
        follow_logs.wait_for(lambda e, m=member: e.get("member") == m and e["event"] in (
            "task_offered", "tasks_adopted"), timeout=60)
    listed = teamctl.json("task", "list")
    assert listed["total"] == 12, "no task lost"
    held = [t for t in listed["tasks"] if t["state"] == "in_progress"]
    owners = Counter(t["owner"] for t in held)
    assert set(owners) == set(MEMBERS) and set(owners.values()) == {1}, owners
    handed = _handed(teamctl)
    for task in held:
        assert task["id"] in handed[task["owner"]], f"{task['owner']} holds {task['id']} untold"
    told = [n for ids in handed.values() for n in ids]
    assert len(told) == len(set(told)), f"a task handed to two members: {handed}"
    assert all(t["state"] in ("ready", "blocked") and t["owner"] is None
               for t in listed["tasks"] if t["state"] != "in_progress")
