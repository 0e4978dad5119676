"""Making (or finding again) a member's worktree: under ``TEAMCTL_HOME/worktrees/<team>/<member>``
(outside the repository), on branch ``teamctl/<team>/<member>/work``, from the operator
checkout's ``HEAD`` or ``base``; what it is made at — the repository's common dir and the
worktree's admin dir — recorded then, while nothing of the member's has run, and never read
back from the worktree's ``.git`` file or ``commondir`` afterwards. Git runs hardened
(orchestrator/git_run.py) in the operator's own checkout: ``worktree add`` checks files out,
so no hook, filter or fsmonitor of a configuration a member may have written runs there."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.daemon.worktrees._files import head_beneath
from orchestrator.daemon.worktrees._include import Refusal, copy_included
from orchestrator.daemon.worktrees._record import Worktree, branch_name, legacy_branch_name
from orchestrator.errors import WorktreeError
from orchestrator.git_run import Git, GitPlace, discover

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["checkout_of", "complete", "create", "ensure_ref_dirs", "workdir_in"]

_GITDIR_BYTES = 4096
_MAX_ADMIN_DIRS = 10_000  # looked through to find an old record's admin dir


def create(root: Path, team: str, member: str, workdir: Path, base: str | None,
           known: Worktree | None) -> tuple[Worktree, list[Refusal]]:
    """The member's worktree: ``known`` (from the journal) if it is still there — its record
    completed and its branch renamed if it is older than both — else made, on its branch if
    that branch exists already, else on a new branch from ``base``; and what
    ``.worktreeinclude`` could not copy into a new one."""
    checkout, top = _checkout(member, workdir)
    if known is not None and (known.path / ".git").exists():
        return _renamed(_completed(known, checkout)), []
    path = root / team / member
    branch = branch_name(team, member)
    ref = base or "HEAD"
    git = Git(checkout)
    resolved = git.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if resolved.returncode != 0:
        raise WorktreeError(member, f"base {ref!r} is not a commit of {checkout.work_tree}",
                            "set base to a branch, tag or commit that exists")
    base_commit = resolved.stdout.strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    git.run("worktree", "prune", check=False)  # forget worktrees whose dir is gone
    has_branch = git.run("show-ref", "--verify", "--quiet", f"refs/heads/{branch}",
                         check=False).returncode == 0
    args = ["worktree", "add", "--", str(path), branch] if has_branch else \
        ["worktree", "add", "-b", branch, "--", str(path), base_commit]
    _added(member, git, args, branch)
    tree = Worktree(team, member, path, branch, ref, base_commit, top, checkout.common_dir,
                    _admin_of(member, path, checkout))
    return tree, copy_included(top, path)


def workdir_in(tree: Worktree, workdir: Path) -> Path:
    """Where the member works inside its worktree: the same place relative to the repository
    root as its workdir is in the operator's checkout."""
    return tree.path / workdir.resolve().relative_to(tree.repo)


def ensure_ref_dirs(tree: Worktree) -> None:
    """The directories of the member's own branch ref and its reflog, made where missing
    (``git pack-refs`` removes them): a sandboxed member may write these two and no other of
    the repository's (worktrees/_sandbox.py). Their parents are no member's to write."""
    place = tree.repository()
    for top in ("refs/heads", "logs/refs/heads"):
        os.makedirs(place.common_dir.joinpath(top, *tree.branch.split("/")[:-1]),
                    exist_ok=True)


def complete(tree: Worktree) -> Worktree:
    """``tree`` with its common dir and admin dir (a record older than schema 17 found them
    in its repository, whose checkout is the operator's); as it is otherwise."""
    if tree.common_dir is not None and tree.admin_dir is not None:
        return tree
    return _completed(tree, _checkout(tree.member, tree.repo)[0])


def checkout_of(tree: Worktree) -> GitPlace:
    """Git in the repository ``tree`` was made from, as the operator's checkout sees it
    (``HEAD`` is that checkout's, where ``base = "HEAD"`` is resolved): its git dir, if the
    checkout still belongs to the recorded repository, else the common dir itself. No work
    tree: nothing there is read."""
    place = tree.repository()
    found = discover(tree.repo)
    if found is not None and found.common_dir == place.common_dir:
        return GitPlace(found.git_dir, place.common_dir)
    return place


def _checkout(member: str, workdir: Path) -> tuple[GitPlace, Path]:
    """The operator's checkout holding ``workdir``: where git works there, and its top."""
    found = discover(workdir)
    if found is None or found.work_tree is None:
        raise WorktreeError(member, f"{workdir} is not in a git repository",
                            "set worktree = false, or make the workdir a repository")
    return found, found.work_tree


def _added(member: str, git: Git, args: list[str], branch: str) -> None:
    done = git.run(*args, check=False)
    if done.returncode == 0:
        return
    message = done.stderr.strip()
    if "exists; cannot create" in message:  # a branch of before, made outside a record
        old = branch.rpartition("/")[0]
        raise WorktreeError(member, f"branch {old} is in the way of its branch {branch}",
                            f"rename it ('git branch -m {old} {branch}' in the repository) "
                            "or delete it")
    if "already checked out" in message or "is already used by worktree" in message:
        raise WorktreeError(member, f"branch {branch} is already checked out elsewhere "
                            f"({message.splitlines()[-1][:200]})",
                            "check out another branch there, or remove that worktree "
                            "('git worktree list' in the repository)")
    raise WorktreeError(member, f"git worktree add failed: {message[:300]}",
                        "see the message above")


def _admin_of(member: str, path: Path, checkout: GitPlace) -> Path:
    """The admin dir git has just made for the worktree at ``path`` (before anything of the
    member's ran there): under the repository's ``worktrees/``, in the same repository."""
    found = discover(path)
    if found is None or found.common_dir != checkout.common_dir or \
            found.git_dir.parent != checkout.common_dir / "worktrees":
        raise WorktreeError(member, f"git made the worktree {path} somewhere unexpected",
                            "remove it ('git worktree remove') and launch again")
    return found.git_dir


def _completed(known: Worktree, checkout: GitPlace) -> Worktree:
    """A record older than schema 17 given its common dir and admin dir: the admin dir under
    the repository's ``worktrees/`` whose ``gitdir`` names this worktree."""
    if known.common_dir is not None and known.admin_dir is not None:
        return known
    common = checkout.common_dir
    wanted = f"{known.path}/.git".encode()
    try:
        names = sorted(os.listdir(common / "worktrees"))[:_MAX_ADMIN_DIRS]
    except OSError:
        names = []
    for name in [known.path.name, *names]:
        try:
            gitdir = head_beneath(common / "worktrees" / name, "gitdir",
                                  limit_bytes=_GITDIR_BYTES)
        except OSError:
            continue
        if gitdir is not None and gitdir.strip() == wanted:
            return replace(known, common_dir=common, admin_dir=common / "worktrees" / name)
    raise WorktreeError(known.member, f"no admin dir of the worktree {known.path} in {common}",
                        "remove the worktree and launch again ('teamctl worktrees --prune')")


def _renamed(tree: Worktree) -> Worktree:
    """A worktree on the branch of before (``teamctl/<team>/<member>``) moved to its branch
    of now, whose ref has a directory of its own (the member is not running: this runs
    while its team launches)."""
    if tree.branch != legacy_branch_name(tree.team, tree.member):
        return tree
    branch = branch_name(tree.team, tree.member)
    Git(tree.repository()).run("branch", "-m", tree.branch, branch)
    return replace(tree, branch=branch)
