"""The merge queue's test pieces (docs/land.md): a repository and a team of worktree members that
integrates, a member's work committed in its worktree as it would commit it, and waits on the
queue's journal (never on time); for a real daemon, a fake Claude member told to write, commit
and complete its task through the CLI, and how the task's landing ended (its log event)."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from orchestrator.config import TeamConfig
from tests.support.git import git

if TYPE_CHECKING:
    from orchestrator.protocol.land import QueueEntryDoc
    from tests.support.driver import LogFollower, Teamctl
    from tests.support.fakes import Core

__all__ = ["add_task", "commit_in", "complete", "integrating_team", "land_repo", "say",
           "settled", "settled_entry", "tip", "work"]


def land_repo(path: Path) -> Path:
    """A small repository on ``main``: a README and a ``.gitignore``, one commit — a copy of
    the one this process made first (three git processes fewer each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(_first_land_repo(), path, symlinks=True)
    return path


@functools.cache
def _first_land_repo() -> Path:
    path = Path(tempfile.mkdtemp(prefix="teamctl-land-repo-")) / "repo"
    atexit.register(_remove, path.parent, os.getpid())
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("the project\nline two\nline three\n")
    (path / ".gitignore").write_text("build/\n")
    git(path, "add", "README.md", ".gitignore")
    git(path, "commit", "-q", "-m", "initial")
    return path


def _remove(path: Path, owner: int) -> None:
    """At the exit of the process that made it (not of a child forked from it)."""
    if os.getpid() == owner:
        shutil.rmtree(path, ignore_errors=True)


def integrating_team(repo: Path, *members: str, name: str = "web", retries: int = 3,
                     members_extra: dict[str, Any] | None = None,
                     **integrate: Any) -> TeamConfig:
    """A team of fake Claude members in worktrees of ``repo`` whose tasks land on
    ``teamctl/<team>/main`` (``integrate``: the table's keys)."""
    rows = [{"name": m, "runtime": "claude", "start_timeout": 5.0, **(members_extra or {})}
            for m in members]
    return TeamConfig.model_validate({
        "team": {"name": name, "workdir": str(repo), "worktree": True,
                 "integrate": integrate, "integrate_retries": retries},
        "members": rows})


def commit_in(worktree: Path, name: str, text: str, message: str | None = None) -> None:
    """``name`` written with ``text`` in a member's worktree and committed there (as the
    member would)."""
    (worktree / name).parent.mkdir(parents=True, exist_ok=True)
    (worktree / name).write_text(text)
    git(worktree, "add", "--", name)
    git(worktree, "commit", "-q", "-m", message or f"write {name}")


def tip(repo: Path, branch: str) -> str | None:
    """Where ``branch`` is, read with plain git (None: no such branch)."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").strip()
    except Exception:
        return None


async def settled_entry(c: Core, task: int, *states: str,
                        deadline: float = 20.0) -> QueueEntryDoc:
    """The task's newest queue entry once it is in one of ``states`` (default: it ended),
    read again at each change the core announces (the queue's moves among them: the live
    view's own wake-up, never a poll)."""
    assert c.built is not None
    land, changes = c.built.land, c.built.changes
    wanted = states or ("landed", "sent_back", "needs_you")
    with anyio.fail_after(deadline):
        while True:
            seen = changes.version
            entries = await land.entries(task)
            if entries and entries[0].state in wanted:
                return entries[0]
            await changes.wait(seen, timeout=deadline)


# -- a real daemon's member, through the CLI ---------------------------------------------------

def say(teamctl: Teamctl, member: str, text: str) -> str:
    """``text`` sent to ``member`` (a fake Claude), its reply once answered."""
    done = teamctl.run("send", member, text, "--wait")
    assert done.returncode == 0, done.stderr
    return done.stdout


def add_task(teamctl: Teamctl, member: str, title: str) -> int:
    done = teamctl.run("task", "add", title, "--assign", member)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip()[1:])


def work(teamctl: Teamctl, member: str, name: str, text: str, *, commit: bool = True) -> None:
    """The member writes ``name`` in its worktree and commits it (its shell's git)."""
    say(teamctl, member, f"WRITE {name} {text}")
    if commit:
        reply = say(teamctl, member, f"GIT add -A\nGIT commit -q -m write-{name}")
        assert "commit -q -m" in reply and "exit 0" in reply, reply


def complete(teamctl: Teamctl, member: str, task: int, summary: str = "done") -> str:
    return say(teamctl, member,
               f'MCP task_complete {{"id": {task}, "summary": {json.dumps(summary)}}}')


def settled(follow_logs: LogFollower, task: int, attempt: int = 1,
            timeout: float = 60.0) -> dict[str, object]:
    """How the task's ``attempt`` ended (its log event)."""
    return follow_logs.wait_for(lambda e: e["event"] in ("task_landed", "task_not_landed")
                                and e.get("task") == task and e.get("attempt") == attempt,
                                timeout=timeout)
