"""A Codex member whose every command would fail in codex's own sandbox is never started
silently (issue 45, item 4; docs/runtimes.md "Its own sandbox and /tmp"): ``launch`` refuses it
and ``doctor`` names the fix; a member with teamctl's own temp dir passes both. The fake codex
runs no sandbox, so a fake ``bwrap`` on the member's PATH stands for a system bubblewrap (the
check only looks it up); the real codex is tests/e2e/test_codex_sandbox_real.py."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from tests.support.members import codex_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import Teamctl


def _members(teamctl: Teamctl, tmp_path: Path) -> Path:
    found = tmp_path / "bin"
    found.mkdir()
    (found / "bwrap").write_text("#!/bin/sh\nexit 1\n")
    (found / "bwrap").chmod(0o755)
    path = f"{found}:{os.environ.get('PATH', '')}"
    return teamctl.write_team("web", [
        codex_member("rev", env={"TMPDIR": str(teamctl.home), "PATH": path,
                                 "CODEX_API_KEY": "k"}),
        codex_member("ok", env={"PATH": path, "CODEX_API_KEY": "k"})])


def test_doctor_names_the_fix_for_a_codex_member_whose_tmpdir_holds_its_codex_home(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """``rev``'s env names TMPDIR = the teamctl home: doctor exits 1, its row says why and
    what to change; ``ok`` gets its own temp dir, its helper's links made by codex."""
    team = _members(teamctl, tmp_path)
    done = teamctl.run("doctor", str(team), "--json")
    assert done.returncode == 1, done.stdout
    rows = {r["member"]: r for r in json.loads(done.stdout)["members"]}
    assert "remove TMPDIR from the member's env" in rows["rev"]["fix"]
    assert "bwrap: execvp codex-linux-sandbox" in rows["rev"]["problem"]
    assert rows["rev"]["codex_sandbox"]["helper"].startswith("refused")
    assert rows["ok"]["problem"] is None
    ok = rows["ok"]["codex_sandbox"]
    assert (ok["sandbox"], ok["tmpdir"]) == (
        "workspace-write", str(teamctl.home / "members/web/ok/runtime/tmp"))
    assert ok["bwrap"].endswith("/bin/bwrap") and ok["helper"].startswith("links in ")
    text = teamctl.run("doctor", str(team))
    assert "codex sandbox workspace-write: links in" in text.stdout
    assert "member rev cannot start" in text.stderr


def test_launch_refuses_a_codex_member_whose_every_command_would_fail(
        teamctl: Teamctl, tmp_path: Path) -> None:
    """The launch fails (exit 1) naming the member, the cause and the fix — the member is not
    started to answer each turn with a failed command; its teammate starts."""
    done = teamctl.run("launch", str(_members(teamctl, tmp_path)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not ready: rev" in done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.strip().startswith("rev:")]
    assert "codex's own sandbox would run none of its commands" in line
    assert "remove TMPDIR from the member's env" in line
    rows = {m["name"]: m for m in teamctl.json("status")["teams"][0]["members"]}
    assert rows["rev"]["launch"] == "fatal"
    assert "codex's own sandbox would run none of its commands" in rows["rev"]["error"]
    assert rows["ok"]["launch"] != "fatal"
