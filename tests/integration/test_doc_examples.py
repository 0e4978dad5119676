"""Every team file the README and docs/ show (tests/support/doc_examples.py), launched as a user
would with the fake CLIs: again while it runs, and again after a kill -9 of the daemon — the
documented recovery. Issue 45: a Codex member whose ``config`` has a ``features`` table made
the second launch exit 1 (``reviewer: config changed``), teamctl comparing the
``features.multi_agent`` it derives with the file. The examples that need a machine or a
cluster (``Example.offline`` says why) are launched in process instead
(tests/unit/test_doc_examples.py)."""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import pytest

from tests.support.doc_examples import Example, for_fakes, team_examples, toml_text
from tests.support.processes import wait_pid_exit

if TYPE_CHECKING:
    from tests.support.driver import Teamctl

RUNNABLE = [e for e in team_examples() if e.offline is None]


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda e: e.source)
def test_a_documented_team_file_launched_again_or_after_a_daemon_kill_has_nothing_to_do(
        teamctl: Teamctl, example: Example) -> None:
    """Relaunch is idempotent for every runtime: a running team is compared with what the
    operator wrote, never with what teamctl derived for its members."""
    name = example.doc["team"]["name"]
    path = teamctl.workdir / "team.toml"
    path.write_text(toml_text(for_fakes(example.doc)))
    first = teamctl.run("launch", str(path))
    assert first.returncode == 0, first.stdout + first.stderr
    again = teamctl.run("launch", str(path))
    assert again.returncode == 0, again.stderr
    assert f"team {name} already running, from this same file (nothing to do)" in again.stdout
    daemon = teamctl.daemon_pid()
    assert daemon is not None
    os.kill(daemon, signal.SIGKILL)
    assert wait_pid_exit(daemon, 10)
    resumed = teamctl.run("launch", str(path))
    assert resumed.returncode == 0, resumed.stderr
    assert f"team {name} resumed by the daemon, from this same file (nothing to do)" \
        in resumed.stdout
