"""The merge queue with the real CLIs (issue 49; docs/land.md): a real Claude, Codex and OpenCode
member, each in its own worktree, each completes a task through teamctl's ``task_complete``
tool (the fake APIs scripted with ``DO_TOOL``); what it left in its worktree is committed with
the task's title, merged onto ``teamctl/e2e/main`` and checked there (``true``, inside the
owner's boundary), and the branch holds all three when they are done."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.support.git import git
from tests.support.land import land_repo
from tests.support.real_members import claude_member, codex_member, opencode_member

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fake_anthropic import FakeAnthropic
    from tests.support.fake_chat import FakeChat
    from tests.support.fake_responses import FakeResponses

pytestmark = pytest.mark.e2e
BRANCH = "teamctl/e2e/main"


def test_claude_codex_and_opencode_members_each_complete_a_task_that_lands(
        teamctl: Teamctl, follow_logs: LogFollower, claude_bin: Path, codex_bin: Path,
        opencode_bin: Path, anthropic: FakeAnthropic, responses: FakeResponses,
        chat: FakeChat) -> None:
    repo = land_repo(teamctl.workdir / "repo")
    team = teamctl.write_team("e2e", [
        claude_member("cl", claude_bin, anthropic),
        codex_member("cdx", codex_bin, responses),
        opencode_member("oc", opencode_bin, chat, model="fake/text-model", vision=False)],
        workdir="repo", worktree=True, integrate={"check": "true"})
    done = teamctl.run("launch", str(team))
    assert done.returncode == 0, done.stdout + done.stderr
    worktrees = {w["member"]: w["path"] for w in teamctl.json("worktrees")["worktrees"]}
    for number, member in enumerate(("cl", "cdx", "oc"), start=1):
        added = teamctl.run("task", "add", f"work of {member}", "--assign", member)
        assert added.stdout.strip() == f"T{number}", added.stderr
        # the member's work in its worktree (what its own tools would have written)
        (teamctl.workdir / worktrees[member] / f"{member}.txt").write_text(f"by {member}\n")
        said = teamctl.run("send", member, "DO_TOOL task_complete " + json.dumps(
            {"id": f"T{number}", "summary": "done"}), "--wait", "--timeout", "180",
            timeout=240)
        assert said.returncode == 0 and '"state": "done"' in said.stdout, said.stdout
        follow_logs.wait_for(lambda e, n=number: e["event"] == "task_landed"
                             and e.get("task") == n, timeout=120)
    files = git(repo, "ls-tree", "--name-only", BRANCH).split()
    assert {"cl.txt", "cdx.txt", "oc.txt"} <= set(files), files
    subjects = git(repo, "log", "--format=%s", BRANCH).splitlines()
    assert {"T1: work of cl", "T2: work of cdx", "T3: work of oc"} <= set(subjects), subjects
    recent = teamctl.json("queue")["recent"]
    assert [(e["task"], e["state"]) for e in recent] == [
        ("T3", "landed"), ("T2", "landed"), ("T1", "landed")]
