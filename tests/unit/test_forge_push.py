"""The forge's push on a hostile member's repository (orchestrator/daemon/forge/_push.py): the
member can write the repository's config and hooks (its worktree shares them), so everything
there that runs a program — a pre-push hook, core.fsmonitor, a credential helper — or sends the
push elsewhere (a ``url.*.pushInsteadOf``: it did, before the push moved to a scratch
repository of teamctl's) is ignored; the task's commit
reaches the team file's remote and nothing planted runs with the operator's rights."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from orchestrator.daemon.forge._push import push
from tests.support.git import git

if TYPE_CHECKING:
    from pathlib import Path


def _planted(marker: Path, name: str) -> str:
    return f"#!/bin/sh\necho {name} >> {marker}\n"


def test_nothing_a_member_plants_in_the_repository_runs_when_teamctl_pushes(
        tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    repo, remote, elsewhere = tmp_path / "repo", tmp_path / "remote.git", tmp_path / "other.git"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("work\n")
    git(repo, "add", "a.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "task")
    commit = git(repo, "rev-parse", "HEAD").strip()
    for bare in (remote, elsewhere):
        git(tmp_path, "init", "-q", "--bare", str(bare))
    hooks = repo / ".git" / "hooks"
    for hook in ("pre-push", "reference-transaction", "post-checkout"):
        (hooks / hook).write_text(_planted(marker, hook))
        (hooks / hook).chmod(0o755)
    helper = tmp_path / "helper.sh"
    helper.write_text(_planted(marker, "credential-helper"))
    helper.chmod(0o755)
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(_planted(marker, "fsmonitor"))
    monitor.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(monitor))
    git(repo, "config", "credential.helper", f"!{helper}")
    git(repo, "config", f"url.{elsewhere}.pushInsteadOf", str(remote))
    home = tmp_path / "home"
    home.mkdir()

    push(repo / ".git", str(remote), commit, "teamctl/web/T1", repo="octo-org/web",
         environ={"HOME": str(home), "PATH": os.environ["PATH"]})

    assert git(remote, "rev-parse", "refs/heads/teamctl/web/T1").strip() == commit
    assert git(elsewhere, "for-each-ref").strip() == "", "the member's insteadOf was followed"
    assert not marker.exists(), marker.read_text()
