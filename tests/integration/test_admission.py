"""Memory admission end to end (docs/scaling.md, "Starts that fit"): a real daemon whose view
of this machine's memory is a meminfo file the test writes (``TEAMCTL_MEMINFO``, no PSI), and
the CLI. A reserve above what is free keeps a member waiting — named in ``status`` — while
``launch`` returns; freeing memory or lowering the reserve starts it, and the message sent to it
meanwhile is delivered once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.support.fakes import write_meminfo
from tests.support.members import fake_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl

WAITING = "waiting for memory (needs ~260 MiB; 100 MiB free above the 2 GiB reserve)"


def _machine(teamctl: Teamctl, *, available_mib: int, total_mib: int = 16 * 1024) -> Path:
    """The daemon reads this file as /proc/meminfo (and no PSI), every 50 ms while one
    waits."""
    meminfo = write_meminfo(teamctl.workdir / "meminfo", available_mib=available_mib,
                            total_mib=total_mib)
    teamctl.env.update(TEAMCTL_MEMINFO=str(meminfo), TEAMCTL_PSI_MEMORY="",
                       TEAMCTL_MEMORY_POLL_INTERVAL="0.05")
    return meminfo


def _member(teamctl: Teamctl, name: str) -> dict[str, object]:
    [team] = teamctl.json("status")["teams"]
    return next(m for m in team["members"] if m["name"] == name)


def test_a_member_waits_for_memory_named_in_status_and_starts_once_memory_frees(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    meminfo = _machine(teamctl, available_mib=2048 + 100)
    team = teamctl.write_team("web", [fake_member("dev")], memory_reserve="2G")
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stderr  # waiting is not failing
    assert "teamctl: waiting for memory: dev (each starts once it fits above memory_reserve" \
        in launched.stderr
    assert f"  dev: {WAITING}" in launched.stdout
    status = teamctl.run("status")
    assert f"  dev: {WAITING}" in status.stdout and " waiting " in status.stdout
    row = _member(teamctl, "dev")
    assert (row["launch"], row["waiting"], row["pid"]) == ("waiting", WAITING, None)

    sent = teamctl.json("send", "dev", "hello while you wait")
    assert sent["notes"] == [f"dev is {WAITING}; the message waits in the journal until it "
                             "starts"]
    assert _member(teamctl, "dev")["queued"] == 1

    write_meminfo(meminfo, available_mib=2048 + 1024)  # memory freed
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == sent["id"])
    [message] = teamctl.json("history", "dev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1)
    assert message["reply"].endswith("received: hello while you wait")
    row = _member(teamctl, "dev")
    assert (row["launch"], row["waiting"], row["readiness"]) == ("running", None, "ready")
    admitted = [e for e in teamctl.log_events() if e["event"] == "member_admitted"]
    assert [(e["member"], e["reserve_bytes"], e["available_bytes"]) for e in admitted] == [
        ("dev", 2 * 2**30, (2048 + 1024) * 2**20)]


def test_a_relaunch_with_a_lower_reserve_starts_the_waiting_member(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    _machine(teamctl, available_mib=2048 + 100)
    members = [fake_member("lead", lead=True), fake_member("dev")]
    team = teamctl.write_team("web", members, memory_reserve="2G")
    assert teamctl.run("launch", str(team)).returncode == 0
    sent = teamctl.json("send", "dev", "queued before the reserve changed")
    lowered = teamctl.write_team("web", members, memory_reserve="1G")
    again = teamctl.run("launch", str(lowered))
    assert again.returncode == 0, again.stderr
    assert "team web already running: applied its new memory_reserve" in again.stdout
    follow_logs.wait_for(lambda e: e["event"] == "delivery_answered"
                         and e.get("message_id") == sent["id"])
    assert [m["state"] for m in teamctl.json("history", "dev")["messages"]] == ["answered"]
    admitted = [e["member"] for e in teamctl.log_events() if e["event"] == "member_admitted"]
    assert admitted == ["lead", "dev"], "the lead first, then launch order"
    same = teamctl.json("launch", str(lowered))
    assert same["ok"] and same["already_running"] and same["applied"] == []


def test_a_reserve_no_member_could_start_under_is_refused_and_hostile_ones_named(
        teamctl: Teamctl) -> None:
    _machine(teamctl, available_mib=1024, total_mib=4096)
    team = teamctl.write_team("web", [fake_member("dev")], memory_reserve="4G")
    refused = teamctl.run("launch", str(team))
    assert refused.returncode == 2, refused.stderr
    assert "memory_reserve = \"4G\" leaves member 'dev' (~260 MiB) no room in this machine's " \
           "4 GiB of memory" in refused.stderr
    assert teamctl.daemon_pid() is None or teamctl.member_pids() == []
    hostile = teamctl.write_team("web", [fake_member("dev")], memory_reserve="2")
    bad = teamctl.run("launch", str(hostile))
    assert bad.returncode == 2
    assert f"{hostile}:3: team.memory_reserve: '2' is not a size: write a size in quotes with " \
        "its unit" in bad.stderr


def test_a_launch_with_room_for_one_starts_the_lead_wherever_the_file_puts_it(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """Members started together join the line before it is looked at, whatever their
    launches take to prepare: the lead, last in the file, starts first."""
    _machine(teamctl, available_mib=2048 + 300)
    members = [fake_member("a"), fake_member("b"), fake_member("boss", lead=True)]
    team = teamctl.write_team("web", members, memory_reserve="2G")
    assert teamctl.run("launch", str(team)).returncode == 0
    follow_logs.wait_for(lambda e: e["event"] == "member_admitted" and e["member"] == "b")
    said = [(e["event"], e["member"]) for e in teamctl.log_events()
            if e["event"] in ("member_admitted", "member_waiting_for_memory")]
    # (the file's memory never goes down: once boss is up, its hold goes and a fits)
    assert said[:3] == [("member_admitted", "boss"), ("member_waiting_for_memory", "a"),
                        ("member_waiting_for_memory", "b")]
