"""The merge queue's git (docs/land.md): the integration branch, a scratch worktree of teamctl's
own for each attempt, the merge (``merge``, ``squash`` or ``rebase``), and the branch moved
only by compare-and-swap.

Every command is the hardened git of ``orchestrator/git_run.py`` — no hook, no filter, merge
or diff driver, no fsmonitor of the repository's or a member's configuration runs: a
member's branch is data here, never code teamctl runs as the operator. Places come from
teamctl's records (the owner's worktree record's common dir), never from a ``.git`` file a
member can write; the scratch worktree lives under ``TEAMCTL_HOME/land/<team>/``, where no
member can write (a sandboxed owner's integration check writes it while it runs, and the
tree is thrown away after). What a conflict shows is git's own diff of the unmerged paths
(a symlink's target as text, never the file it points to), bounded. Call these from a worker
thread.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import GitFailed
from orchestrator.git_run import Git, GitPlace, discover

if TYPE_CHECKING:
    from pathlib import Path

    from orchestrator.integrate_config import IntegrateMode

__all__ = [
    "TEAMCTL_IDENTITY",
    "Conflict",
    "Merged",
    "branch_tip",
    "checked_out",
    "close_scratch",
    "commit_leftovers",
    "contains",
    "head_of",
    "integrate",
    "make_branch",
    "move_branch",
    "open_scratch",
]

TEAMCTL_IDENTITY = ("teamctl", "teamctl@localhost")
HUNK_CHARS = 6000  # the conflicting hunks shown to the owner, at most
MAX_FILES = 50  # conflicting files named, at most
# the queue's own settings on top of the hardened ones: a rebase moves no other branch
_SETTINGS = (("rebase.updateRefs", "false"), ("rebase.autoSquash", "false"),
             ("rebase.autoStash", "false"), ("merge.autoStash", "false"),
             ("rebase.missingCommitsCheck", "ignore"), ("merge.conflictStyle", "merge"))


@dataclass(frozen=True)
class Merged:
    """The commit the branch would move to; ``empty``: nothing new (already on it)."""

    commit: str
    empty: bool = False


@dataclass(frozen=True)
class Conflict:
    """The merge stopped: the files in conflict, git's diff of them (bounded), and its
    message (no file in conflict: it refused, e.g. unrelated histories)."""

    files: list[str]
    hunks: str
    message: str


def identity(name: str, email: str) -> dict[str, str]:
    """Author and committer for the commits teamctl makes (no configuration is asked)."""
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": TEAMCTL_IDENTITY[0],
            "GIT_COMMITTER_EMAIL": TEAMCTL_IDENTITY[1]}


def repository(place: GitPlace) -> Git:
    """Hardened git in the repository (its common dir), with the queue's settings: one per
    attempt (the configuration's drivers are read at its first call)."""
    return Git(place, settings=_SETTINGS)


def branch_tip(repo: Git, branch: str) -> str | None:
    """The commit ``branch`` is at (None: it does not exist)."""
    done = repo.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}",
                           check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def make_branch(repo: Git, branch: str, base: str) -> str:
    """``branch`` made at ``base`` if it does not exist (create-only: a branch made meanwhile
    is kept); the commit it is at."""
    repo.run("update-ref", "-m", "teamctl: integration branch", f"refs/heads/{branch}",
                    base, "", check=False)
    tip = branch_tip(repo, branch)
    if tip is None:
        raise GitFailed("update-ref", f"the integration branch {branch} cannot be made at "
                        f"{base[:12]}")
    return tip


def contains(repo: Git, tip: str, commit: str) -> bool:
    """Whether ``commit`` is already part of ``tip``'s history."""
    return repo.run("merge-base", "--is-ancestor", commit, tip,
                           check=False).returncode == 0


def checked_out(repo: Git, branch: str) -> str | None:
    """Where ``branch`` is checked out (a path), if anywhere: teamctl never moves a branch
    under a checkout (the operator's, a member's)."""
    listed = repo.run("worktree", "list", "--porcelain", "-z").stdout.split("\0")
    path = None
    for line in listed:
        if line.startswith("worktree "):
            path = line[len("worktree "):]
        elif line == f"branch refs/heads/{branch}":
            return path or "?"
    return None


def open_scratch(repo: Git, path: Path, at: str) -> GitPlace:
    """A fresh worktree at ``path`` (teamctl's), detached at ``at``; its place as git made it
    (found before anything of a member's ran there)."""
    close_scratch(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    repo.run("worktree", "add", "--detach", "--", str(path), at)
    common = repo.place.common_dir
    found = discover(path)
    if found is None or found.common_dir != common or found.git_dir.parent != common / "worktrees":
        close_scratch(repo, path)
        raise GitFailed("worktree add", f"git made the scratch worktree {path} somewhere "
                        "unexpected")
    return GitPlace(found.git_dir, common, path)


def close_scratch(repo: Git, path: Path) -> None:
    """The scratch worktree removed (its files, never through a link), git's record of it
    pruned."""
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_writable_then_retry)
    repo.run("worktree", "prune", check=False)


def _writable_then_retry(_function: object, name: str, _exc: object) -> None:
    """A directory a check made read-only: made writable (never through a link), retried."""
    parent = os.path.dirname(name)
    with contextlib.suppress(OSError):
        if not os.path.islink(parent):
            os.chmod(parent, stat.S_IRWXU)
        if os.path.isdir(name) and not os.path.islink(name):
            os.chmod(name, stat.S_IRWXU)
            shutil.rmtree(name, onerror=_ignore)
        else:
            os.unlink(name)


def _ignore(_function: object, name: str, _exc: object) -> None:
    """What still cannot be removed stays (a scratch dir of a later attempt is new)."""


def integrate(scratch: GitPlace, *, mode: IntegrateMode, commit: str, onto: str, message: str,
              author: tuple[str, str]) -> Merged | Conflict:
    """``commit`` brought onto ``onto`` in the scratch worktree (detached at ``onto``) as
    ``mode`` says: a merge commit, one squashed commit by ``author``, or the commits rebased."""
    git = Git(scratch, settings=_SETTINGS)
    env = identity(*author) if mode == "squash" else identity(*TEAMCTL_IDENTITY)
    if mode == "rebase":
        base = git.run("merge-base", onto, commit).stdout.strip()
        done = git.run("rebase", "--no-autosquash", "--onto", onto, base, commit, env=env,
                       check=False)
    elif mode == "squash":
        done = git.run("merge", "--squash", "--no-commit", commit, env=env, check=False)
        if done.returncode == 0:
            if not git.run("diff", "--cached", "--quiet", check=False).returncode:
                return Merged(onto, empty=True)
            done = git.run("commit", "--no-verify", "-m", message, env=env, check=False)
    else:
        done = git.run("merge", "--no-ff", "--no-edit", "-m", message, commit, env=env,
                       check=False)
    if done.returncode != 0:
        return _conflict(git, done.stdout + done.stderr)
    head = head_of(git)
    return Merged(head, empty=head == onto)


def _conflict(git: Git, said: str) -> Conflict:
    """What stopped the merge: the unmerged files and git's diff of them."""
    files = [f for f in git.run("diff", "--name-only", "--diff-filter=U", "-z",
                                check=False).stdout.split("\0") if f]
    hunks = ""
    if files:
        hunks = git.run("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--",
                        *files[:MAX_FILES], check=False).stdout
        hunks = hunks.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        if len(hunks) > HUNK_CHARS:
            hunks = hunks[:HUNK_CHARS] + f"\n… {len(hunks) - HUNK_CHARS} more characters"
    message = "\n".join(line for line in said.strip().splitlines()[-12:])
    return Conflict(files, hunks, message[-2000:])


def head_of(git: Git) -> str:
    return git.run("rev-parse", "--verify", "HEAD^{commit}").stdout.strip()


def move_branch(repo: Git, branch: str, new: str, old: str) -> bool:
    """``branch`` moved from ``old`` to ``new`` — only if it is still at ``old`` (False: it
    moved meanwhile; nothing is written)."""
    return repo.run("update-ref", "-m", "teamctl: landed", f"refs/heads/{branch}", new,
                           old, check=False).returncode == 0


def commit_leftovers(git: Git, title: str, author: tuple[str, str]) -> bool:
    """What the owner left uncommitted in its worktree, committed with the task's title (its
    own git, in its boundary: ``git``); False when nothing was left."""
    git.run("add", "--all", "--", ".")
    if not git.run("diff", "--cached", "--quiet", check=False).returncode:
        return False
    git.run("commit", "--no-verify", "-m", title, env=identity(*author))
    return True
