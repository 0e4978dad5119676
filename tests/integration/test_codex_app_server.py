"""Codex members on one long-lived `codex app-server` (transport = "app-server"), through the
fake codex speaking the captured protocol: turns on one process and one thread, images as
localImage files, a relaunch that resumes the thread, a stuck turn interrupted and
re-delivered, the process killed mid-turn and the turn re-delivered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests import images
from tests.integration.test_codex_member import codex_member

if TYPE_CHECKING:
    from tests.conftest import Teamctl


def _member(name: str, **extra: object) -> dict[str, object]:
    return codex_member(name, transport="app-server", **extra)


def test_turns_run_on_one_process_and_one_thread_that_survives_a_relaunch(
        teamctl: Teamctl) -> None:
    team = teamctl.write_team("web", [_member("rev", prompt="You review code.")])
    assert teamctl.run("launch", str(team)).returncode == 0
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["readiness"] == "ready" and row["session_id"]
    pid, thread = row["pid"], row["session_id"]
    first = teamctl.run("send", "rev", "remember kiwi", "--wait")
    assert first.returncode == 0, first.stderr
    assert "turn 1 received: You review code.\n\nremember kiwi" in first.stdout
    shot = images.save(images.screenshot(800, 450), teamctl.workdir / "s.png", "PNG")
    second = teamctl.run("send", "--attach", str(shot), "rev", "look", "--wait")
    assert second.returncode == 0 and "turn 2 received: look" in second.stdout
    assert "image/png" in second.stdout
    third = teamctl.run("send", "rev", "and again", "--wait")
    assert "turn 3 received: and again" in third.stdout
    assert teamctl.member_pids() == [pid], "one process for every turn"
    assert teamctl.run("stop", "web").returncode == 0
    assert teamctl.run("launch", str(team)).returncode == 0
    [row] = teamctl.json("status")["teams"][0]["members"]
    assert row["session_id"] == thread and row["pid"] != pid
    fourth = teamctl.run("send", "rev", "still there?", "--wait")
    assert "turn 4 received: still there?" in fourth.stdout, "the thread was resumed"


def test_a_stuck_turn_is_interrupted_and_redelivered_on_the_same_process(
        teamctl: Teamctl) -> None:
    member = _member("rev", turn_idle_timeout=1.0, env={"FAKE_CODEX_HANG_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    [pid] = teamctl.member_pids()
    done = teamctl.run("send", "rev", "are you there?", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    [message] = teamctl.json("history", "rev")["messages"]
    assert message["state"] == "answered" and message["attempts"] == 2
    assert teamctl.member_pids() == [pid], "the interrupt ended the turn: no restart"
    actions = [e["action"] for e in teamctl.log_events() if e["event"] == "turn_stuck"]
    assert actions == ["interrupt"]


def test_a_server_killed_mid_turn_is_restarted_and_the_turn_redelivered(
        teamctl: Teamctl) -> None:
    member = _member("rev", backoff=[0.1, 1.0], env={"FAKE_CODEX_CRASH_ON_TURN": "1"})
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    done = teamctl.run("send", "rev", "hello", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received: hello" in done.stdout
    [message] = teamctl.json("history", "rev")["messages"]
    assert (message["state"], message["attempts"]) == ("answered", 2)
