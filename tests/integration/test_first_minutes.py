"""What a newcomer meets first: a refused launch leaves nothing running behind it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.members import fake_member

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

FAKE_CODEX = Path(__file__).resolve().parents[2] / "fixtures/bin/codex"


def test_refused_launch_leaves_no_daemon_it_started(teamctl: Teamctl) -> None:
    """A launch the daemon refuses (a dollar budget on a model with no price) exits 2 and stops
    the daemon that launch started: no process is left up for a team that never ran."""
    unpriced = {"name": "dev", "runtime": "codex", "model": "gpt-unpriced-for-tests",
                "budget_usd": 5.0, "command": str(FAKE_CODEX)}
    refused = teamctl.run("launch", str(teamctl.write_team("web", [unpriced])))
    assert refused.returncode == 2, refused.stderr
    assert "budget_usd cannot be enforced" in refused.stderr
    assert teamctl.run("status").returncode == 4, "the daemon the refused launch started stays up"


def test_refused_launch_keeps_a_daemon_that_runs_a_team(teamctl: Teamctl) -> None:
    """The daemon is only stopped when the refused launch started it and nothing runs in it."""
    assert teamctl.run("launch", str(teamctl.write_team("web", [fake_member("rev")]))) \
        .returncode == 0
    unpriced = {"name": "dev", "runtime": "codex", "model": "gpt-unpriced-for-tests",
                "budget_usd": 5.0, "command": str(FAKE_CODEX)}
    assert teamctl.run("launch", str(teamctl.write_team("api", [unpriced]))).returncode == 2
    assert teamctl.json("status", "--json")["teams"][0]["name"] == "web"
