"""ACP members (runtime = "acp") through a real daemon and the fake ACP agent
(fixtures/bin/fake-acp, shaped on Qwen Code and Gemini CLI): turns on one long-lived process
and one session, images as base64 blocks of the planned bytes, the session loaded again after a
relaunch, permission requests answered by the profile or the operator, and the faults typed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.conftest import wait_pid_exit

if TYPE_CHECKING:
    from tests.conftest import Teamctl

REPO = Path(__file__).resolve().parents[2]
FAKE_ACP = REPO / "fixtures" / "bin" / "fake-acp"


def acp_member(name: str, **extra: Any) -> dict[str, Any]:
    member = {"name": name, "runtime": "acp", "command": [str(FAKE_ACP), "--acp"],
              "start_timeout": 20.0}
    member.update(extra)
    return member


def _row(teamctl: Teamctl) -> dict[str, Any]:
    [row] = teamctl.json("status")["teams"][0]["members"]
    return row  # type: ignore[no-any-return]


def test_text_turns_run_on_one_process_and_one_session_that_a_relaunch_loads(
        teamctl: Teamctl) -> None:
    """Each turn is a session/prompt on the same agent process and session; the reply is the
    streamed chunks; a relaunch loads the recorded session (session/load) and goes on."""
    team = teamctl.write_team("web", [acp_member("qw")])
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["readiness"] == "ready" and row["session_id"]
    pid, session = row["pid"], row["session_id"]
    first = teamctl.run("send", "qw", "remember kiwi", "--wait")
    assert first.returncode == 0, first.stderr
    assert "fake-acp (fake-small) turn 1 received: remember kiwi" in first.stdout
    second = teamctl.run("send", "qw", "and again", "--wait")
    assert "turn 2 received: and again" in second.stdout
    assert teamctl.member_pids() == [pid], "one process for every turn"

    assert teamctl.run("stop", "web").returncode == 0
    assert wait_pid_exit(pid, 10)
    assert teamctl.run("launch", str(team)).returncode == 0
    row = _row(teamctl)
    assert row["session_id"] == session and row["pid"] != pid
    third = teamctl.run("send", "qw", "still there?", "--wait")
    assert "turn 3 received: still there?" in third.stdout, "the session was loaded again"
