"""Idle members asleep, through a real daemon and each runtime's fake CLI (fixtures/bin/):
Claude, Codex on its app-server and on exec, OpenCode and an ACP agent. A member idle past
``pause_after`` has its process stopped (no restart counted) and ``status`` shows it asleep
since a time; its next message wakes it on its recorded session — the receipt says
"resuming", the message is answered once. ``max_running = 2`` with three members: never more
than two processes, the longest-idle member put to sleep for a message to the third. (The
state machine and the cap's rules in process: tests/unit/test_sleep.py and
test_running_cap.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support.members import acp_member, codex_member, fake_member, opencode_member
from tests.support.processes import wait_pid_exit
from tests.support.sandboxed import SANDBOXED

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl

PAUSE_AFTER = 0.5  # seconds: the test's (a user's is minutes)

# each runtime's member on its fake
RUNTIMES: dict[str, Callable[..., dict[str, Any]]] = {
    "claude": fake_member,
    "codex": codex_member,
    "codex-exec": lambda name, **extra: codex_member(name, transport="exec", **extra),
    "opencode": opencode_member,
    "acp": acp_member,
}


def _row(teamctl: Teamctl, name: str = "m") -> dict[str, Any]:
    members = teamctl.rpc("status", {"team": None})["result"]["teams"][0]["members"]
    return next(m for m in members if m["name"] == name)  # type: ignore[no-any-return]


def _answered(message_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == "delivery_answered" and e.get("message_id") == message_id


def _asleep(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["event"] == "member_asleep" and e.get("member") == name


@pytest.mark.parametrize("runtime", list(RUNTIMES))
def test_an_idle_member_falls_asleep_and_its_next_message_wakes_it_on_its_session(
        teamctl: Teamctl, follow_logs: LogFollower, runtime: str) -> None:
    """Answered, then idle past ``pause_after``: asleep — no process, liveness unknown, since
    a time — with its session kept; the next message wakes it on that session, the receipt
    saying "resuming", answered once; a wake is not a restart."""
    member = RUNTIMES[runtime]("m", pause_after=PAUSE_AFTER)
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    one = teamctl.json("send", "m", "remember kiwi", "--wait", "--timeout", "60")
    assert one["ok"] and "received: remember kiwi" in one["reply"], one
    session = _row(teamctl)["session_id"]
    follow_logs.wait_after(_answered(one["id"]), _asleep("m"))
    row = _row(teamctl)
    assert (row["launch"], row["liveness"], row["readiness"], row["pid"]) == (
        "asleep", "unknown", "not_ready", None)
    assert row["asleep_since"] and row["activity"].startswith("asleep since ")
    assert "idle 0.5 s (pause_after)" in row["note"]
    assert teamctl.member_pids() == [], "its process is gone"
    shown = teamctl.run("status")
    assert " asleep " in shown.stdout and "m: asleep since " in shown.stdout, shown.stdout

    two = teamctl.run("send", "m", "what was the word?", "--wait", "--timeout", "60")
    assert two.returncode == 0, two.stderr
    assert "received: what was the word?" in two.stdout
    assert "resuming: m was asleep since " in two.stderr, two.stderr
    messages = teamctl.json("history", "m")["messages"]
    assert [(m["state"], m["attempts"]) for m in messages] == [("answered", 1), ("answered", 1)]
    woken = follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken"))
    assert (woken["resumed"], woken["session_id"]) == (True, session), woken
    after = _row(teamctl)
    assert (after["session_id"], after["restarts"]) == (session, 0)


def test_a_sandboxed_member_falls_asleep_and_wakes_in_a_new_sandbox_on_its_session(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    """``sandbox = "process"``: the sleep ends the member's sandbox with its runtime; the wake
    starts both again, the session resumed, the message answered once."""
    (tmp_path / "a").mkdir()
    member = fake_member("m", pause_after=PAUSE_AFTER, workdir=str(tmp_path / "a"),
                         **SANDBOXED)
    launched = teamctl.run("launch", str(teamctl.write_team("web", [member])))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert _row(teamctl)["sandbox"] == "process, network on"
    one = teamctl.json("send", "m", "one", "--wait", "--timeout", "60")
    assert one["ok"], one
    pid = _row(teamctl)["pid"] or 0
    follow_logs.wait_after(_answered(one["id"]), _asleep("m"))
    assert wait_pid_exit(pid, 10), "the sandbox went with its runtime"
    two = teamctl.run("send", "m", "two", "--wait", "--timeout", "60")
    assert two.returncode == 0 and "resuming: m was asleep" in two.stderr, two.stderr
    woken = follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e.get("woken"))
    assert woken["resumed"] and _row(teamctl)["sandbox"] == "process, network on"


def test_max_running_two_of_three_the_longest_idle_sleeps_for_a_message_to_the_third(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """``max_running = 2``: the third member starts asleep (never started); a message to it
    puts the member idle the longest to sleep, then it starts and answers — two processes
    live before and after."""
    team = teamctl.write_team("web", [fake_member("a"), fake_member("b"), fake_member("c")],
                              max_running=2)
    launched = teamctl.run("launch", str(team))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert _row(teamctl, "c")["launch"] == "asleep" and _row(teamctl, "c")["epoch"] == 0
    assert len(teamctl.member_pids()) == 2
    b_pid = _row(teamctl, "b")["pid"]
    assert teamctl.run("send", "a", "busy one", "--wait", "--timeout", "60").returncode == 0
    done = teamctl.run("send", "c", "your turn", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "received: your turn" in done.stdout and "resuming: c was asleep" in done.stderr
    b = _row(teamctl, "b")
    assert b["launch"] == "asleep" and "its running slot given to c (max_running = 2)" in b["note"]
    pids = teamctl.member_pids()
    assert len(pids) == 2 and b_pid not in pids
    [message] = teamctl.json("history", "c")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 1)
    slept = follow_logs.wait_for(_asleep("b"))
    started = follow_logs.wait_for(lambda e: e["event"] == "member_starting"
                                   and e.get("member") == "c")
    assert slept["ts"] <= started["ts"], "b's process stopped before c's started"
