"""For the tests that kill or stop a process and check what survives: the daemon started as its own
process (``python -m orchestrator daemon``), a member's process killed and its relaunch
awaited, or stopped (SIGSTOP) for a block."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.driver import LogFollower, Teamctl

REPO = Path(__file__).resolve().parents[2]


def start_daemon(teamctl: Teamctl) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-m", "orchestrator", "daemon"],
                               env=teamctl.env, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert process.stdout is not None
    assert "teamctl daemon ready" in process.stdout.readline()
    process.stdout.close()
    teamctl.spawned.append(process)
    return process


def kill_the_agent(teamctl: Teamctl, follow_logs: LogFollower, *, timeout: float
                   ) -> tuple[dict[str, Any], dict[str, Any]]:
    """kill -9 of the one member's process: its ``runtime_ready`` before, and the next."""
    [before] = [e for e in teamctl.log_events() if e["event"] == "runtime_ready"]
    [pid] = teamctl.member_pids()
    os.kill(pid, signal.SIGKILL)
    assert wait_pid_exit(pid, 10)
    after = follow_logs.wait_for(lambda e: e["event"] == "runtime_ready" and e["pid"] != pid,
                                 timeout=timeout)
    return before, after


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP ``pid`` for the block (continued after it, if it still exists)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
