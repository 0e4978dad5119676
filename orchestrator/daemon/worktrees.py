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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.daemon.journal import AsyncJournal, Migrations
from orchestrator.errors import TeamctlError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from orchestrator.daemon.journal import Journal

__all__ = ["MIGRATIONS", "Changes", "Worktree", "WorktreeError", "WorktreeJournal", "changes",
           "create", "diff", "inspect", "is_git_repo", "prune_one", "toplevel", "workdir_in"]

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


# -- the journal's table of them (``worktrees``), reused on relaunch ----------------------------

MIGRATIONS: Migrations = {
    3: """
    CREATE TABLE worktrees (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        path TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        repo TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (team, member)
    );
    """,
}


def _save(journal: Journal, tree: Worktree) -> None:
    with journal.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO worktrees (team, member, path, branch, base, "
            "base_commit, repo, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (tree.team, tree.member, str(tree.path), tree.branch, tree.base,
             tree.base_commit, str(tree.repo), time.time()))


def _recorded(journal: Journal, team: str | None) -> list[Worktree]:
    sql = "SELECT team, member, path, branch, base, base_commit, repo FROM worktrees"
    rows = journal.connection.execute(
        sql + (" WHERE team = ?" if team else "") + " ORDER BY team, created_at",
        (team,) if team else ()).fetchall()
    return [Worktree(r["team"], r["member"], Path(r["path"]), r["branch"], r["base"],
                     r["base_commit"], Path(r["repo"])) for r in rows]


def _forget(journal: Journal, team: str, member: str) -> None:
    with journal.transaction() as db:
        db.execute("DELETE FROM worktrees WHERE team = ? AND member = ?", (team, member))


class WorktreeJournal(AsyncJournal):
    """The worktrees' typed async methods (part of the daemon's ``AsyncStore``)."""

    async def save_worktree(self, tree: Worktree) -> None:
        await self.run(_save, tree)

    async def worktrees(self, team: str | None = None) -> list[Worktree]:
        """The recorded worktrees (of ``team``; all when None), by team, oldest first."""
        return await self.run(_recorded, team)

    async def forget_worktree(self, team: str, member: str) -> None:
        await self.run(_forget, team, member)


def _git(cwd: Path, *args: str, check: bool = True,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True,
                              encoding="utf-8", errors="surrogateescape",  # names round-trip
                              timeout=_GIT_TIMEOUT, check=False,
                              env={"PATH": _path(), "GIT_TERMINAL_PROMPT": "0", "LANG": "C",
                                   "HOME": str(Path.home()), **(env or {})})
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
    args = ["worktree", "add", "--", str(path), branch] if has_branch else \
        ["worktree", "add", "-b", branch, "--", str(path), base_commit]
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
    for line in include.read_text(errors="replace").splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#") or Path(pattern).is_absolute() or \
                ".." in Path(pattern).parts:
            continue  # only globs inside the repository
        for source in repo.glob(pattern):
            relative = source.relative_to(repo)
            if _NEVER_COPIED in relative.parts or source.is_symlink() or \
                    not source.is_file() or relative.parts[0] == ".git":
                continue
            target = path / relative
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)


@dataclass(frozen=True)
class Changes:
    """What a worktree holds beyond its HEAD, from one NUL-separated ``git status``: tracked
    files changed, untracked files (each file, also inside untracked directories) and ignored
    paths that are work (an unchanged copy of the operator's ignored file, such as a
    ``.worktreeinclude`` ``.env``, is not), and untracked git repositories inside it (git
    lists one as ``dir/``; ``diff`` cannot show it as a file)."""

    changed: list[str]
    untracked: list[str]
    ignored: list[str]
    repositories: list[str]


def changes(tree: Worktree) -> Changes:
    """The one listing both ``inspect``'s counts and ``diff``'s untracked files come from."""
    fields = iter(_git(tree.path, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                       "--ignored=matching", "--").stdout.split("\0"))
    changed: list[str] = []
    untracked: list[str] = []
    ignored: list[str] = []
    repositories: list[str] = []
    for entry in fields:
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        if code == "??":
            (repositories if name.endswith("/") else untracked).append(name)
        elif code == "!!":
            if not _copied_unchanged(tree, name):
                ignored.append(name)
        else:
            changed.append(name)
            if "R" in code or "C" in code:
                next(fields, None)  # a rename's or copy's source path follows
    return Changes(changed, untracked, ignored, repositories)


def _copied_unchanged(tree: Worktree, name: str) -> bool:
    """True if every file under ``name`` in the worktree is a regular file identical to the
    operator checkout's file at the same path (what ``_copy_included`` put there)."""
    import filecmp
    import os

    top = tree.path / name
    files: Iterable[Path] = [top] if top.is_symlink() or not top.is_dir() else (
        Path(d) / f for d, _, names in os.walk(top) for f in names)  # lazily: stops early
    for path in files:
        source = tree.repo / path.relative_to(tree.path)
        if path.is_symlink() or source.is_symlink() or not path.is_file() or \
                not source.is_file() or not filecmp.cmp(path, source, shallow=False):
            return False
    return True


def inspect(tree: Worktree) -> dict[str, object]:
    """Path, branch, base, commits ahead, dirty and untracked files and the diffstat against
    the base (untracked files counted as added, as ``diff`` shows them)."""
    if not tree.path.exists():
        return {"team": tree.team, "member": tree.member, "path": str(tree.path),
                "branch": tree.branch, "base": tree.base, "missing": True, "ahead": 0,
                "dirty": 0, "untracked": 0, "diffstat": ""}
    ahead = _git(tree.path, "rev-list", "--count", f"{tree.base_commit}..HEAD", "--").stdout
    held = changes(tree)
    stat = _diff_with_untracked(tree, held.untracked, "--shortstat").strip()
    return {"team": tree.team, "member": tree.member, "path": str(tree.path),
            "branch": tree.branch, "base": tree.base, "missing": False,
            "ahead": int(ahead.strip()), "dirty": len(held.changed),
            "untracked": len(held.untracked), "diffstat": stat}


def diff(tree: Worktree, *, stat: bool) -> str:
    """The member's changes against its base: commits, uncommitted edits and new untracked
    files alike, in one git diff (untracked files as added files)."""
    return _diff_with_untracked(tree, changes(tree).untracked,
                                "--stat" if stat else "--patch")


def _diff_with_untracked(tree: Worktree, untracked: list[str], mode: str) -> str:
    """``git diff MODE base`` in which ``untracked`` show as new files: they are marked
    intent-to-add in a throwaway copy of the worktree's index (the member's own index, and
    the repository's objects, are untouched)."""
    import os
    import tempfile

    index = Path(_git(tree.path, "rev-parse", "--git-path", "index").stdout.strip())
    index = index if index.is_absolute() else tree.path / index
    with tempfile.TemporaryDirectory(prefix="teamctl-diff-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index"), "GIT_LITERAL_PATHSPECS": "1"}
        if index.is_file():
            shutil.copyfile(index, env["GIT_INDEX_FILE"])
        for batch in _batches(untracked):
            _git(tree.path, "add", "--intent-to-add", "--", *batch, env=env)
        text = _git(tree.path, "diff", mode, tree.base_commit, "--", env=env).stdout
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _batches(names: list[str], limit: int = 64_000) -> list[list[str]]:
    """``names`` split so that no argv gets near the system's limit."""
    batches: list[list[str]] = []
    size = limit
    for name in names:
        if size + len(name) + 1 > limit:
            batches.append([])
            size = 0
        batches[-1].append(name)
        size += len(name) + 1
    return batches


def prune_one(tree: Worktree, *, running: bool) -> str | None:
    """Remove ``tree`` if that loses nothing; else why it is kept."""
    if running:
        return "its member is running"
    if not tree.path.exists():
        _git(tree.repo, "worktree", "prune", check=False)
        return None
    locked = _lock_reason(tree)
    if locked is not None:
        return f"locked ({locked})" if locked else "locked"
    held = changes(tree)
    if held.changed or held.untracked or held.ignored or held.repositories:
        return _held_reason(held)
    merged = _git(tree.repo, "merge-base", "--is-ancestor", _head(tree), tree.base,
                  check=False).returncode == 0  # base never starts with "-" (config.GitRef)
    pushed = bool(_git(tree.path, "branch", "-r", "--contains", "HEAD").stdout.strip())
    if not merged and not pushed:
        ahead = _git(tree.path, "rev-list", "--count", f"{tree.base_commit}..HEAD", "--")
        return f"{ahead.stdout.strip()} commits are neither in {tree.base} nor pushed"
    done = _git(tree.repo, "worktree", "remove", "--", str(tree.path), check=False)
    if done.returncode != 0:
        return f"git worktree remove refused: {_shown(done.stderr.strip())[:300]}"
    return None


def _lock_reason(tree: Worktree) -> str | None:
    """None if the worktree is not locked (``git worktree lock``), else the lock's reason."""
    admin = _git(tree.path, "rev-parse", "--absolute-git-dir", check=False).stdout.strip()
    lock = Path(admin) / "locked" if admin else None
    if lock is None or not lock.is_file():
        return None
    return _shown(lock.read_text(errors="replace").strip())[:200]


def _held_reason(held: Changes) -> str:
    """E.g. ``1 changed file (app.py); 3 ignored files (.env, build/, notes.md)``."""
    parts = []
    for kind, names in (("changed file", held.changed), ("untracked file", held.untracked),
                        ("ignored file", held.ignored),
                        ("untracked repositor", held.repositories)):
        if names:
            shown = ", ".join(_shown(n) for n in names[:5]) + (
                f", and {len(names) - 5} more" if len(names) > 5 else "")
            ending = ("y" if len(names) == 1 else "ies") if kind.endswith("repositor") else (
                "" if len(names) == 1 else "s")
            parts.append(f"{len(names)} {kind}{ending} ({shown})")
    return "; ".join(parts)


def _shown(text: str) -> str:
    """``text`` with control characters escaped (a file name may hold a newline)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _head(tree: Worktree) -> str:
    return _git(tree.path, "rev-parse", "HEAD").stdout.strip()
