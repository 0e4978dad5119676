"""Liveness with the real Claude Code CLI (pinned npm release) against the local fake API: the
probe (an ``mcp_status`` control request) is answered by the CLI itself — no model request
reaches the API — and a frozen CLI is noticed, reads ``unresponsive`` and is restarted."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.processes import wait_pid_exit
from tests.support.real_members import claude_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.e2e


def _row(teamctl: Teamctl) -> dict[str, Any]:
    [row] = teamctl.json("status")["teams"][0]["members"]
    return row  # type: ignore[no-any-return]


def test_real_claude_answers_the_probe_without_a_model_call_and_a_frozen_one_is_restarted(
        teamctl: Teamctl, follow_logs: LogFollower, claude_bin: Path,
        anthropic: FakeAnthropic) -> None:
    member = claude_member("rev", claude_bin, anthropic, liveness_interval=0.5,
                           liveness_deadline=8.0, backoff=[2.0, 4.0])
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", [member])))
    assert launched.returncode == 0, launched.stderr + launched.stdout
    pid = _row(teamctl)["pid"]

    os.kill(pid, signal.SIGSTOP)  # a probe goes out, unanswered while it is stopped...
    follow_logs.wait_for(lambda e: e["event"] == "member_probe_late")
    os.kill(pid, signal.SIGCONT)  # ...and the real CLI answers it once continued
    follow_logs.wait_for(lambda e: e["event"] == "member_probe_recovered")
    row = _row(teamctl)
    assert (row["pid"], row["epoch"], row["liveness"]) == (pid, 1, "alive")
    assert anthropic.message_requests() == [], "the probe is no model call"

    os.kill(pid, signal.SIGSTOP)
    try:
        event = follow_logs.wait_for(lambda e: e["event"] == "member_unresponsive")
        assert (event["pid"], event["epoch"], event["stopped"]) == (pid, 1, True)
        down = _row(teamctl)
        assert (down["liveness"], down["readiness"]) == ("unresponsive", "not_ready")
        assert wait_pid_exit(pid, 10), "the frozen CLI was killed"
    finally:
        if not wait_pid_exit(pid, 0):
            os.kill(pid, signal.SIGCONT)
    follow_logs.wait_for(lambda e: e["event"] == "member_ready" and e["epoch"] == 2,
                         timeout=60)
    assert anthropic.message_requests() == []
    done = teamctl.run("send", "rev", "are you back?", "--wait", "--timeout", "120")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pong: are you back?"
    back = _row(teamctl)
    assert (back["liveness"], back["epoch"], back["restarts"]) == ("alive", 2, 1)
    assert len(anthropic.message_requests()) == 1
