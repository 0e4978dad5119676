"""The real codex (pinned) runs commands in its own sandbox when TEAMCTL_HOME is under /tmp and a
system bubblewrap is on PATH (issue 45, item 4; docs/runtimes.md "Its own sandbox and /tmp").

codex makes its ``codex-linux-sandbox`` links in CODEX_HOME only outside its temp dir, and a
system bubblewrap runs every sandboxed command through one: with CODEX_HOME under /tmp every
command of an ``edit`` or ``read`` member failed (``bwrap: execvp codex-linux-sandbox``) and
each turn was still "answered". Each member now gets a temp dir of its own."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

from tests.support.real_members import codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e


def test_real_codex_under_tmp_runs_commands_in_its_own_sandbox_with_a_system_bwrap(
        teamctl: Teamctl, codex_bin: Path, responses: FakeResponses) -> None:
    """An ``edit`` member on each transport, its teamctl home under /tmp: the command the model
    asks for runs in codex's workspace-write sandbox and writes in the workdir; codex made its
    helper's links in the member's CODEX_HOME; no ``execvp`` failure reaches the reply.
    Before, with CODEX_HOME under codex's temp dir (/tmp), neither wrote the file."""
    assert str(teamctl.home).startswith("/tmp/"), "the case under test: a home under /tmp"
    assert shutil.which("bwrap"), "a system bubblewrap: apt-get install bubblewrap"
    members = [codex_member("app", codex_bin, responses),
               codex_member("exe", codex_bin, responses, transport="exec")]
    launched = teamctl.run("launch", str(teamctl.write_team("e2e", members)))
    assert launched.returncode == 0, launched.stdout + launched.stderr
    for name in ("app", "exe"):
        target = teamctl.workdir / f"{name}-made.txt"
        done = teamctl.run("send", name, f"DO_BASH touch {target}", "--wait", "--timeout", "120")
        assert done.returncode == 0, done.stderr
        assert "execvp" not in done.stdout, done.stdout
        assert target.exists(), f"{name}: {done.stdout}"
    # the app-server's links live as long as it does (exec's go with its process)
    links = teamctl.home / "members" / "e2e" / "app" / "runtime" / "codex-home" / "tmp"
    assert list(links.rglob("codex-linux-sandbox")), "codex made its helper's links"
