"""A runtime behind a launcher that runs it as a child on the same stdio (Qwen Code's ``qwen``
runs ``node cli.js`` so; any npm wrapper may): a kill -9 of the launcher — the pid teamctl
watches — must not leave the member silently gone while the orphaned child holds the pipes open.
The kit's stdio process ends the group for every runtime on it (ACP, Claude, Codex's
app-server)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tests.support.daemon import kill_the_agent
from tests.support.members import FAKE_ACP, FAKE_CLAUDE, acp_member, fake_member

if TYPE_CHECKING:
    from tests.support.driver import LogFollower, Teamctl

LAUNCHER = f"""import subprocess, sys
sys.exit(subprocess.call([{str(FAKE_ACP)!r}, "--acp"]))
"""


def test_a_killed_launcher_whose_child_holds_stdio_restarts_the_member_and_loads_its_session(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The launcher's exit ends its process group (the agent with it): the exit is seen, the
    member restarts and loads the same session."""
    launcher = teamctl.workdir / "launcher.py"
    launcher.write_text(LAUNCHER)
    member = acp_member("qw", command=[sys.executable, str(launcher)], backoff=[0.1, 1.0])
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    first = teamctl.run("send", "qw", "hello", "--wait", "--timeout", "60")
    assert first.returncode == 0, first.stderr
    before, after = kill_the_agent(teamctl, follow_logs, timeout=30)
    assert (after["resumed"], after["session_id"]) == (True, before["session_id"])
    done = teamctl.run("send", "qw", "again", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "turn 2 received: again" in done.stdout, "the loaded session continues"


def test_a_killed_claude_launcher_whose_child_holds_stdio_restarts_the_member(
        teamctl: Teamctl, follow_logs: LogFollower) -> None:
    """The same for a Claude member (StdioJsonProcess, not ACP's own code): before, the
    orphaned child kept stdout open and the member was never seen to die."""
    launcher = teamctl.workdir / "claude-launcher.py"
    launcher.write_text(f"""import subprocess, sys
sys.exit(subprocess.call([{str(FAKE_CLAUDE)!r}, *sys.argv[1:]]))
""")
    member = fake_member("lead", command=[sys.executable, str(launcher)], backoff=[0.1, 1.0])
    assert teamctl.run("launch", str(teamctl.write_team("web", [member]))).returncode == 0
    assert teamctl.run("send", "lead", "hello", "--wait", "--timeout", "60").returncode == 0
    kill_the_agent(teamctl, follow_logs, timeout=30)
    done = teamctl.run("send", "lead", "again", "--wait", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert "received: again" in done.stdout


