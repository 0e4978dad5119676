"""``[team] slots`` with a real daemon and the CLI: two teams' members get values unique across
both, in each member's environment (the fake CLI echoes it), shown by ``status``, the same after
the daemon is killed with SIGKILL and resumed; a port another program took is moved, said in the
log; a range with nothing left refuses the launch naming the range and the fix."""

from __future__ import annotations

import os
import signal
import socket
from typing import TYPE_CHECKING, Any

from tests.support.members import fake_member
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

SLOTS = {"PORT": "port", "DB_NAME": "name", "REDIS_DB": "index:0-15"}


def _slots(teamctl: Teamctl) -> dict[tuple[str, str], dict[str, str]]:
    """Each member's slots as ``status --json`` shows them, by (team, member)."""
    return {(team["name"], m["name"]): m["slots"]
            for team in teamctl.json("status")["teams"] for m in team["members"]}


def _env(teamctl: Teamctl, team: str, member: str) -> dict[str, str]:
    """What the member's process finds in its environment (the fake's ``ENV`` reply)."""
    done = teamctl.run("send", "--team", team, member, "ENV " + " ".join(SLOTS), "--wait")
    assert done.returncode == 0, done.stderr
    lines = [line.removeprefix("env ") for line in done.stdout.splitlines()
             if line.startswith("env ")]
    return dict(line.split("=", 1) for line in lines)


def _launch(teamctl: Teamctl, name: str, members: list[str], **team: Any) -> None:
    path = teamctl.write_team(name, [fake_member(m) for m in members], **team)
    done = teamctl.run("launch", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_teams_slots_are_unique_in_their_env_and_the_same_after_a_daemon_kill(
        teamctl: Teamctl) -> None:
    """The values come from the journal, not from a fresh count: web's were given while api
    held the first ones; api relaunched without one member frees that member's, which a
    fresh count would give web after the daemon is killed — web keeps its own."""
    _launch(teamctl, "api", ["lead", "extra"], slots=SLOTS)
    _launch(teamctl, "web", ["lead", "dev"], slots=SLOTS)
    before = _slots(teamctl)
    assert set(before) == {("api", "lead"), ("api", "extra"), ("web", "lead"), ("web", "dev")}
    values = [item for slots in before.values() for item in slots.items()]
    assert len(values) == len(set(values)) == 12
    assert before[("web", "dev")]["DB_NAME"] == "web_dev"
    for (team, member), slots in before.items():
        assert _env(teamctl, team, member) == slots
    text = teamctl.run("status", "web").stdout
    dev = before[("web", "dev")]
    assert f"  dev: slots PORT={dev['PORT']} DB_NAME=web_dev REDIS_DB={dev['REDIS_DB']}" in text
    assert teamctl.run("stop", "api").returncode == 0
    _launch(teamctl, "api", ["lead"], slots=SLOTS)  # without extra: its values freed
    del before[("api", "extra")]
    assert _slots(teamctl) == before

    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    resumed = teamctl.run("launch", str(teamctl.workdir / "web.toml"))  # starts a daemon
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed by the daemon" in resumed.stdout
    assert _slots(teamctl) == before
    for (team, member), slots in before.items():
        assert _env(teamctl, team, member) == slots


def test_a_port_another_program_took_is_moved_at_the_next_launch_and_the_log_says_so(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    _launch(teamctl, "web", ["lead"], slots={"PORT": "port"})
    port = int(_slots(teamctl)[("web", "lead")]["PORT"])
    assert teamctl.run("stop", "web").returncode == 0
    with socket.socket() as squatter:  # another program listens on it meanwhile
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        _launch(teamctl, "web", ["lead"], slots={"PORT": "port"})
        moved = follow_logs.wait_for(lambda e: e["event"] == "slot_port_moved")
    new = _slots(teamctl)[("web", "lead")]["PORT"]
    assert int(new) != port
    assert (moved["team"], moved["member"], moved["slot"], moved["old"], moved["new"]) == \
        ("web", "lead", "PORT", str(port), new)
    assert _env(teamctl, "web", "lead") == {"PORT": new, "DB_NAME": "(unset)",
                                            "REDIS_DB": "(unset)"}


def test_a_launch_with_no_index_left_exits_1_naming_the_range_and_the_fix(
        teamctl: Teamctl) -> None:
    path = teamctl.write_team("web", [fake_member("lead"), fake_member("dev")],
                              slots={"REDIS_DB": "index:0-0"})
    done = teamctl.run("launch", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no value of REDIS_DB (index:0-0) is left for member 'dev'" in done.stderr
    assert 'REDIS_DB = "index:0-1"' in done.stderr
    assert teamctl.member_pids() == []  # nothing started


def test_a_hostile_slot_is_refused_by_launch_naming_the_file_line_and_fix(
        teamctl: Teamctl) -> None:
    path = teamctl.write_team("web", [fake_member("lead")],
                              slots={"TEAMCTL_HOME": "port", "PORT": "port:0-65536"})
    done = teamctl.run("launch", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{path}:3: team.slots.TEAMCTL_HOME: TEAMCTL_HOME is set by teamctl" in done.stderr
    assert f"{path}:3: team.slots.PORT: ports run from 1024 to 65535" in done.stderr
