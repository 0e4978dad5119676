"""kill -9 of the daemon in the middle of an integration (docs/land.md): during the merge and
during the integration check. The branch stays at its last good commit — never at a commit
whose check did not pass — the entry is queued again by the restarted daemon, and the task lands
exactly once.

The merge is held by a ``git`` in front of the daemon's PATH that waits at ``git merge`` until
the test lets it go (teamctl's hardened git keeps PATH, nothing else); the check holds itself
the same way. Each writes its pid first, so the test kills what the dead daemon left running."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
from contextlib import suppress
from typing import TYPE_CHECKING

from tests.support.daemon import start_daemon
from tests.support.git import git
from tests.support.land import land_repo, tip
from tests.support.members import fake_member
from tests.support.processes import wait_for_path, wait_pid_exit

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl

BRANCH = "teamctl/web/main"
HOLD = """
import os, pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
(gate / sys.argv[2]).write_text(str(os.getpid()))
deadline = time.monotonic() + 120
while not (gate / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def _held_git(bin_dir: Path, gate: Path) -> None:
    """``git`` that waits at ``git merge`` (until ``gate/go`` exists), then runs the real one."""
    real = shutil.which("git")
    assert real is not None
    wrapper = bin_dir / "git"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = merge ] && [ ! -e {shlex.quote(str(gate))}/go ]; then
    {shlex.quote(sys.executable)} -c {shlex.quote(HOLD)} {shlex.quote(str(gate))} merging
fi
exec {shlex.quote(real)} "$@"
""")
    wrapper.chmod(0o700)


def _launch(teamctl: Teamctl, **integrate: object) -> Path:
    repo = land_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("web", [fake_member("a", permissions="full")], workdir="repo",
                              worktree=True, integrate=integrate)
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr
    return repo


def _done_task(teamctl: Teamctl) -> None:
    assert teamctl.run("task", "add", "add a", "--assign", "a").returncode == 0
    for text in ("WRITE a.txt from a", "GIT add -A\nGIT commit -q -m a",
                 'MCP task_complete {"id": 1, "summary": "done"}'):
        assert teamctl.run("send", "a", text, "--wait").returncode == 0


def _kill_daemon_and_what_it_left(teamctl: Teamctl, held: Path) -> None:
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    left = int(held.read_text())
    with suppress(ProcessLookupError):
        os.killpg(os.getpgid(left), signal.SIGKILL)
    assert wait_pid_exit(left, 10)


def _landed_once(teamctl: Teamctl, follow_logs: LogFollower, repo: Path, main: str) -> None:
    follow_logs.wait_for(lambda e: e["event"] == "queue_entry_requeued" and e.get("task") == 1,
                         timeout=60)
    follow_logs.wait_for(lambda e: e["event"] == "task_landed" and e.get("task") == 1,
                         timeout=60)
    merges = git(repo, "log", "--merges", "--format=%s", f"{main}..{BRANCH}").splitlines()
    assert merges == ["T1: add a (a)"], merges
    [entry] = teamctl.json("queue")["recent"]
    assert (entry["state"], entry["attempt"]) == ("landed", 1)
    assert not any((teamctl.home / "land" / "web").iterdir())  # no scratch worktree left


def test_daemon_killed_during_a_merge_leaves_the_branch_and_lands_once_after(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    gate, bin_dir = tmp_path / "gate", tmp_path / "bin"
    gate.mkdir()
    bin_dir.mkdir()
    _held_git(bin_dir, gate)
    teamctl.env["PATH"] = f"{bin_dir}:{teamctl.env['PATH']}"
    repo = _launch(teamctl, check="true")
    main = git(repo, "rev-parse", "main").strip()
    _done_task(teamctl)
    assert wait_for_path(gate / "merging", 60), "the merge never started"
    _kill_daemon_and_what_it_left(teamctl, gate / "merging")
    assert tip(repo, BRANCH) in (None, main), "the branch moved before its check"
    (gate / "go").touch()
    start_daemon(teamctl)
    _landed_once(teamctl, follow_logs, repo, main)


def test_daemon_killed_during_the_check_leaves_the_branch_and_lands_once_after(
        teamctl: Teamctl, follow_logs: LogFollower, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    script = tmp_path / "hold.py"
    script.write_text(HOLD + "sys.exit(0 if (gate / 'go').exists() else 9)\n")
    repo = _launch(teamctl, check=f"{shlex.quote(sys.executable)} {script} {gate} checking")
    main = git(repo, "rev-parse", "main").strip()
    _done_task(teamctl)
    assert wait_for_path(gate / "checking", 60), "the check never started"
    running = teamctl.json("queue")["running"]
    assert running["phase"] == "checking" and running["result"], running
    _kill_daemon_and_what_it_left(teamctl, gate / "checking")
    assert tip(repo, BRANCH) == main, "the branch moved to a commit whose check had not passed"
    (gate / "go").touch()
    start_daemon(teamctl)
    _landed_once(teamctl, follow_logs, repo, main)
