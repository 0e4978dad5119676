"""A git worktree per member (``worktree = true``): its own checkout on its own branch, so two
teammates editing the same file never clobber each other or the operator's checkout.

Each worktree lives under ``TEAMCTL_HOME/worktrees/<team>/<member>`` (outside the repository),
on branch ``teamctl/<team>/<member>``, made from the team workdir's HEAD or ``base``; it is
recorded in the journal and reused on every relaunch. Files named in the repository's
``.worktreeinclude`` (one glob per line, relative to the repository root; ignored files such as
``.env``) are copied in when the worktree is made — nothing else that is ignored, and never
anything under ``node_modules``.

Nothing here ever deletes work: ``prune`` removes a worktree only when it is clean, its commits
are in its base or pushed, and its member is not running; every other one is kept, with why.
All git calls run ``git`` from argv lists with a deadline; call these functions from a worker
thread.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import TeamctlError

__all__ = ["Worktree", "WorktreeError", "create", "diff", "inspect", "is_git_repo", "prune_one",
           "toplevel", "workdir_in"]

_GIT_TIMEOUT = 120.0
_NEVER_COPIED = "node_modules"


class WorktreeError(TeamctlError):
    code = "worktree_failed"

    def __init__(self, member: str, problem: str, fix: str) -> None:
        super().__init__(f"member {member!r}: {problem}; {fix}", member=member)


@dataclass(frozen=True)
class Worktree:
    team: str
    member: str
    path: Path
    branch: str
    base: str  # the ref it was made from, as given ("HEAD" or ``base``)
    base_commit: str  # what that ref was when the worktree was made
    repo: Path


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT, check=False,
                              env={"PATH": _path(), "GIT_TERMINAL_PROMPT": "0", "LANG": "C",
                                   "HOME": str(Path.home())})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TeamctlError(f"git {' '.join(args[:2])} failed: {exc}") from exc
    if check and done.returncode != 0:
        raise TeamctlError(f"git {' '.join(args[:2])}: {done.stderr.strip()[:500]}")
    return done


def _path() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def toplevel(workdir: Path) -> Path | None:
    """The repository root holding ``workdir``, or None if it is not in a git repository."""
    done = _git(workdir, "rev-parse", "--show-toplevel", check=False) if workdir.is_dir() \
        else None
    return Path(done.stdout.strip()) if done is not None and done.returncode == 0 else None


def is_git_repo(workdir: Path) -> bool:
    return toplevel(workdir) is not None


def branch_name(team: str, member: str) -> str:
    return f"teamctl/{team}/{member}"


def create(root: Path, team: str, member: str, workdir: Path, base: str | None,
           known: Worktree | None) -> Worktree:
    """The member's worktree: ``known`` (from the journal) if it is still there, else made —
    on its branch if that branch exists already, else on a new branch from ``base``."""
    repo = toplevel(workdir)
    if repo is None:
        raise WorktreeError(member, f"{workdir} is not in a git repository",
                            "set worktree = false, or make the workdir a repository")
    if known is not None and (known.path / ".git").exists():
        return known
    path = root / team / member
    branch = branch_name(team, member)
    ref = base or "HEAD"
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if resolved.returncode != 0:
        raise WorktreeError(member, f"base {ref!r} is not a commit of {repo}",
                            "set base to a branch, tag or commit that exists")
    base_commit = resolved.stdout.strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _git(repo, "worktree", "prune", check=False)  # forget worktrees whose dir is gone
    has_branch = _git(repo, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}",
                      check=False).returncode == 0
    args = ["worktree", "add", str(path), branch] if has_branch else \
        ["worktree", "add", "-b", branch, str(path), base_commit]
    done = _git(repo, *args, check=False)
    if done.returncode != 0:
        message = done.stderr.strip()
        if "already checked out" in message or "is already used by worktree" in message:
            raise WorktreeError(member, f"branch {branch} is already checked out elsewhere "
                                f"({message.splitlines()[-1][:200]})",
                                f"check out another branch there, or remove that worktree "
                                f"('git worktree list' in {repo})")
        raise WorktreeError(member, f"git worktree add failed: {message[:300]}",
                            "see the message above")
    _copy_included(repo, path)
    return Worktree(team, member, path, branch, ref, base_commit, repo)


def workdir_in(tree: Worktree, workdir: Path) -> Path:
    """Where the member works inside its worktree: the same place relative to the repository
    root as its workdir is in the operator's checkout."""
    return tree.path / workdir.resolve().relative_to(tree.repo)


def _copy_included(repo: Path, path: Path) -> None:
    include = repo / ".worktreeinclude"
    if not include.is_file():
        return
    for line in include.read_text().splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        for source in repo.glob(pattern):
            relative = source.relative_to(repo)
            if _NEVER_COPIED in relative.parts or not source.is_file() or \
                    relative.parts[0] == ".git":
                continue
            target = path / relative
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


def inspect(tree: Worktree) -> dict[str, object]:
    """Path, branch, base, commits ahead, dirty files and the diffstat against the base."""
    if not tree.path.exists():
        return {"team": tree.team, "member": tree.member, "path": str(tree.path),
                "branch": tree.branch, "base": tree.base, "missing": True, "ahead": 0,
                "dirty": 0, "untracked": 0, "diffstat": ""}
    ahead = _git(tree.path, "rev-list", "--count", f"{tree.base_commit}..HEAD").stdout.strip()
    status = _git(tree.path, "status", "--porcelain").stdout.splitlines()
    stat = _git(tree.path, "diff", "--shortstat", tree.base_commit).stdout.strip()
    return {"team": tree.team, "member": tree.member, "path": str(tree.path),
            "branch": tree.branch, "base": tree.base, "missing": False, "ahead": int(ahead),
            "dirty": sum(1 for s in status if not s.startswith("??")),
            "untracked": sum(1 for s in status if s.startswith("??")), "diffstat": stat}


def diff(tree: Worktree, *, stat: bool) -> str:
    """The member's changes against its base: commits, uncommitted edits and new untracked
    files alike."""
    args = ["diff", "--stat" if stat else "--patch", tree.base_commit]
    parts = [_git(tree.path, *args).stdout]
    untracked = _git(tree.path, "ls-files", "--others", "--exclude-standard").stdout.split()
    for name in untracked:
        done = _git(tree.path, "diff", "--no-index", "--stat" if stat else "--patch",
                    "/dev/null", name, check=False)
        parts.append(done.stdout)
    return "".join(parts)


def prune_one(tree: Worktree, *, running: bool) -> str | None:
    """Remove ``tree`` if that loses nothing; else why it is kept."""
    if running:
        return "its member is running"
    if not tree.path.exists():
        _git(tree.repo, "worktree", "prune", check=False)
        return None
    info = inspect(tree)
    if info["dirty"] or info["untracked"]:
        return f"it has {info['dirty']} changed and {info['untracked']} untracked files"
    merged = _git(tree.repo, "merge-base", "--is-ancestor", _head(tree), tree.base,
                  check=False).returncode == 0
    pushed = bool(_git(tree.path, "branch", "-r", "--contains", "HEAD").stdout.strip())
    if not merged and not pushed:
        return f"{info['ahead']} commits are neither in {tree.base} nor pushed"
    _git(tree.repo, "worktree", "remove", str(tree.path))
    return None


def _head(tree: Worktree) -> str:
    return _git(tree.path, "rev-parse", "HEAD").stdout.strip()
